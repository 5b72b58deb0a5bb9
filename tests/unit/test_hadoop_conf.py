"""Hadoop's *-site.xml as Hadoop reads it: ${var} expansion, <final>, duration and size units,
and the ResourceManager's address(es) from yarn-site.xml, RM HA ids included."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from arbiter.config import SCHEMA, ConfigError, load_config
from arbiter.hadoop_xml import expand, parse_duration, parse_size
from arbiter.logs import NOISY, JsonFormatter, setup_logging
from yarn_bridge.hadoop_conf import rm_urls_from_conf_dir


def site(path: Path, props: dict[str, str], finals: tuple[str, ...] = ()) -> Path:
    body = "".join(
        f"<property><name>{k}</name><value>{v}</value>"
        + ("<final>true</final>" if k in finals else "")
        + "</property>"
        for k, v in props.items()
    )
    path.write_text(f'<?xml version="1.0"?><configuration>{body}</configuration>')
    return path


def test_units_and_expansion() -> None:
    assert parse_duration("90s") == 90 and parse_duration("1.5m") == 90 and parse_duration("2") == 2
    assert parse_size("4m") == 4 << 20 and parse_size("2 GiB") == 2 << 30
    for bad in ("ten", "5 fortnights", ""):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)
    with pytest.raises(ValueError, match="size"):
        parse_size("4 parsecs")
    assert expand("${a}/${b}", {"a": "${b}-x", "b": "y"}, {}) == "y-x/y"
    with pytest.raises(ValueError, match="deeper"):
        expand("${a}", {"a": "${a}+"}, {})


def test_arbiter_site_xml_reads_like_hadoop(tmp_path: Path) -> None:
    f = site(
        tmp_path / "arbiter-site.xml",
        {
            "arbiter.lease.seconds": "2m",
            "arbiter.bid.deadline.seconds": "1500ms",
            "arbiter.grpc.max-message-bytes": "8m",
            "arbiter.admin.token-file": "${env.STATE:-/var/lib/ya}/admin",
            "arbiter.journal.path": "${env.STATE}/j.db",
            "arbiter.policy": "themis",
        },
        finals=("arbiter.policy",),
    )
    env = {"STATE": "/srv/ya", "ARBITER_POLICY": "fifo", "ARBITER_LEASE_SECONDS": "1h"}
    config = load_config(f, environ=env, schemas=(SCHEMA,))
    assert config["arbiter.lease.seconds"] == 3600  # the environment, with a unit
    assert config["arbiter.bid.deadline.seconds"] == 1.5
    assert config["arbiter.grpc.max-message-bytes"] == 8 << 20
    assert config["arbiter.admin.token-file"] == "/srv/ya/admin"
    assert config["arbiter.journal.path"] == "/srv/ya/j.db"
    assert config["arbiter.policy"] == "themis"  # final: $ARBITER_POLICY does not override it
    with pytest.raises(ConfigError, match=r"arbiter\.lease\.seconds"):
        load_config(site(tmp_path / "bad.xml", {"arbiter.lease.seconds": "5 weeks"}), environ={})


def test_rm_addresses_from_yarn_site(tmp_path: Path) -> None:
    site(tmp_path / "core-site.xml", {"cluster.domain": "corp.example"})
    site(
        tmp_path / "yarn-site.xml",
        {
            "yarn.resourcemanager.ha.enabled": "true",
            "yarn.resourcemanager.ha.rm-ids": "rm1,rm2",
            "yarn.resourcemanager.hostname.rm1": "master1.${cluster.domain}",
            "yarn.resourcemanager.webapp.address.rm2": "master2.${cluster.domain}:18088",
        },
    )
    assert rm_urls_from_conf_dir(tmp_path, {}) == [
        "http://master1.corp.example:8088",
        "http://master2.corp.example:18088",
    ]
    site(
        tmp_path / "yarn-site.xml",
        {"yarn.http.policy": "HTTPS_ONLY", "yarn.resourcemanager.hostname": "${env.RM_HOST}"},
    )
    assert rm_urls_from_conf_dir(tmp_path, {"RM_HOST": "rm"}) == ["https://rm:8090"]
    site(tmp_path / "yarn-site.xml", {"yarn.resourcemanager.ha.enabled": "true"})
    with pytest.raises(ValueError, match="rm-ids is empty"):
        rm_urls_from_conf_dir(tmp_path, {})
    with pytest.raises(ValueError, match=r"no yarn-site\.xml"):
        rm_urls_from_conf_dir(tmp_path / "nowhere", {})


def test_logging_levels_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import json

    out = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_logging("info", "json", stream=out)
        logging.getLogger("httpx").info("HTTP Request: GET /ws/v1/cluster/nodes 200")
        logging.getLogger("yarn_arbiter.bridge").info("node added: %s", "n1")
        lines = [json.loads(x) for x in out.getvalue().splitlines()]
        assert [x["message"] for x in lines] == ["node added: n1"]
        assert lines[0]["level"] == "INFO" and lines[0]["logger"] == "yarn_arbiter.bridge"
        setup_logging("DEBUG", "text", stream=out)
        assert logging.getLogger("httpx").isEnabledFor(logging.DEBUG)
        assert isinstance(JsonFormatter().format(logging.makeLogRecord({"msg": "x"})), str)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name in NOISY:
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_bridge_events_read_as_sentences() -> None:
    from arbiter.shares import Resources
    from yarn_bridge.rm_events import CapacityChanged, NodeAdded, NodeRemoved, NodeView

    n = NodeView("node-01:8041", "node-01", "/rack", "RUNNING", 4, 8, 8192)
    assert str(NodeAdded(n)) == "node added: node-01:8041 (RUNNING, 4 GPUs, 8 vcores, 8192 MB)"
    removed = NodeRemoved(n, "node node-01:8041 LOST")
    assert str(removed) == "node node-01:8041 LOST: node removed, its 4 GPUs with it"
    changed = CapacityChanged(None, Resources(8, 1024))
    assert str(changed) == "analytics capacity changed: none -> 8 vcores, 1024 MB"
    assert "NodeView(" not in f"{removed} {changed}"
