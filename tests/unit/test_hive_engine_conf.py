"""What the local HiveServer2 runs with (no server started): deploy/conf's files with one
host's overrides, the hook settings, and the docstring examples of the modules that make Hive's
SQL."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from hive_hooks import hive_engine
from hive_hooks.hive_engine import (
    JAVA_OPENS,
    PLAN_HOOK,
    QUERY_HOOK,
    HiveOnTez,
    site_overrides,
    write_conf,
)
from qoop_planner import joingraph, tpc
from yarn_bridge.local_hadoop import read_site


@pytest.mark.parametrize("module", [hive_engine, tpc, joingraph])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


def test_conf_is_deploy_conf_with_local_overrides(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path / "conf", site_overrides(tmp_path, 10555, tez="local", jars=tmp_path)
    )
    hive = read_site(conf / "hive-site.xml")
    deploy = read_site(hive_engine.DEPLOY_CONF / "hive-site.xml")
    # what the compose cluster decides stays: Tez, the join-order pin, the restricted settings
    for key in ("hive.execution.engine", "hive.cbo.rule.exclusion.regex",
                "hive.conf.restricted.list", "hive.conf.hidden.list"):  # fmt: skip
        assert hive[key] == deploy[key], key
    assert hive["hive.server2.thrift.port"] == "10555"
    assert hive["hive.server2.thrift.bind.host"] == "127.0.0.1"
    assert hive["javax.jdo.option.ConnectionURL"].startswith(f"jdbc:derby:;databaseName={tmp_path}")
    # no arbiter: the hooks deploy/conf names are cleared (their jar is not on the classpath)
    assert deploy["hive.query.lifetime.hooks"] == QUERY_HOOK
    assert hive["hive.query.lifetime.hooks"] == hive["hive.exec.pre.hooks"] == ""
    assert read_site(conf / "tez-site.xml")["tez.local.mode"] == "true"


def test_hooks_and_tez_on_yarn_settings(tmp_path: Path) -> None:
    o = site_overrides(tmp_path, 1, tez="yarn", jars=Path("/jars"), arbiter="127.0.0.1:5",
                       service_token_file=Path("/t"), plan_log=Path("/p.jsonl"))  # fmt: skip
    hive, tez = o["hive-site.xml"], o["tez-site.xml"]
    assert hive["hive.query.lifetime.hooks"] == QUERY_HOOK
    assert hive["hive.exec.pre.hooks"] == PLAN_HOOK
    assert (hive["yarn.arbiter.address"], hive["yarn.arbiter.service.token.file"]) == (
        "127.0.0.1:5", "/t")  # fmt: skip
    assert tez["tez.lib.uris"] == "file:///jars" and tez["tez.use.cluster.hadoop-libs"] == "false"
    for key in ("tez.am.launch.cmd-opts", "tez.task.launch.cmd-opts"):
        assert all(flag in tez[key] for flag in JAVA_OPENS)  # Java 17 in the containers too
    assert all(flag in hive["hive.tez.java.opts"] for flag in JAVA_OPENS)
    with pytest.raises(ValueError, match=r"local.*yarn"):
        site_overrides(tmp_path, 1, tez="mr", jars=tmp_path)
    with pytest.raises(ValueError, match="yarn_conf_dir"):
        HiveOnTez(work_dir=tmp_path, tez="yarn")
