"""The YARN bridge's and the replanner's settings as keys of the one validated configuration:
a file's key reaches them, flags and the older variables win over the file, bad values and
unknown keys fail naming the key and its source."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from arbiter.config import SCHEMA, ConfigError, Property, Schema, load_config, parse_bool
from arbiter.tables import format_table
from hive_hooks.registry import default_registry_path
from hive_hooks.settings import REPLANNER_SCHEMA, replanner_home
from yarn_arbiter.cli import config_schemas, main
from yarn_bridge.bridge_cli import add_serve_arguments, bridge_settings
from yarn_bridge.settings import BRIDGE_SCHEMA

SCHEMAS = (SCHEMA, BRIDGE_SCHEMA)


def site(path: Path, **props: str) -> Path:
    path.write_text(
        "<configuration>"
        + "".join(
            f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items()
        )
        + "</configuration>"
    )
    return path


def serve_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_key_from_an_xml_file_reaches_the_bridge_settings(tmp_path: Path) -> None:
    xml = site(
        tmp_path / "arbiter-site.xml",
        **{
            "yarn.arbiter.bridge.rm.url": "http://rm1:8088, http://rm2:8088",
            "yarn.arbiter.bridge.rm.poll.seconds": "2.5",
            "yarn.arbiter.bridge.enforce.enabled": "no",
            "yarn.arbiter.bridge.queue.gpu": "root.gpu",
            "yarn.arbiter.bridge.queue.analytics": "hive,etl",
            "arbiter.lease.seconds": "120",
        },
    )
    config = load_config(xml, environ={}, schemas=SCHEMAS)
    assert config.sources["yarn.arbiter.bridge.rm.poll.seconds"] == str(xml)
    assert config["arbiter.lease.seconds"] == 120.0
    s = bridge_settings(serve_args(), {}, config)
    assert s is not None and s.rm_urls == ("http://rm1:8088", "http://rm2:8088")
    assert s.kwargs["poll_s"] == 2.5 and s.kwargs["enforce"] is False
    assert s.kwargs["gpu_queue"] == "root.gpu"
    assert s.kwargs["analytics_queues"] == ("hive", "etl")
    assert s.wait_s == 60.0 and s.kwargs["slack_s"] == 10.0  # the flags' old defaults


def test_flags_win_over_old_variables_over_new_ones_over_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "arbiter.conf"
    conf.write_text(
        "yarn.arbiter.bridge.rm.url = http://file:8088\n"
        "yarn.arbiter.bridge.rm.poll.seconds = 7\n"
        "yarn.arbiter.bridge.rm.confirm-polls = 4\n"
    )
    env = {
        "YARN_ARBITER_BRIDGE_RM_URL": "http://new:8088",
        "YARN_ARBITER_RM_URL": "http://old:8088",
    }
    config = load_config(conf, environ=env, schemas=SCHEMAS)
    assert config.sources["yarn.arbiter.bridge.rm.url"] == "$YARN_ARBITER_RM_URL"
    s = bridge_settings(serve_args("--rm-poll-seconds", "0.5"), env, config)
    assert s is not None and s.rm_urls == ("http://old:8088",)
    assert (s.kwargs["poll_s"], s.kwargs["confirm_polls"]) == (0.5, 4)
    s = bridge_settings(serve_args("--rm-url", "http://flag:8088"), env, config)
    assert s is not None and s.rm_urls == ("http://flag:8088",)
    # without a configuration: the defaults and the environment, as before
    assert bridge_settings(serve_args(), {}) is None
    s = bridge_settings(serve_args(), {"YARN_ARBITER_BRIDGE_RM_URL": "http://n:8088"})
    assert s is not None and s.rm_urls == ("http://n:8088",)


B = "yarn.arbiter.bridge."


@pytest.mark.parametrize(
    ("where", "text", "message"),
    [
        ("file", B + "rm.poll.seconds = 0", "rm.poll.seconds = '0' is not a number > 0"),
        ("file", B + "rm.confirm-polls = many", "rm.confirm-polls = 'many'"),
        ("file", B + "enforce.enabled = maybe", "enforce.enabled = 'maybe' is not true"),
        ("env", "YARN_ARBITER_BRIDGE_ENFORCE_SLACK_SECONDS=-1", "$YARN_ARBITER_BRIDGE_ENFORCE"),
        ("flag", "--rm-confirm-polls=0", "--rm-confirm-polls: " + B + "rm.confirm-polls"),
    ],
)
def test_a_bad_value_names_the_key_and_its_source(
    tmp_path: Path, where: str, text: str, message: str
) -> None:
    conf = tmp_path / "arbiter.conf"
    conf.write_text(text + "\n" if where == "file" else "")
    env = dict([text.split("=", 1)]) if where == "env" else {}
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        config = load_config(conf, environ=env, schemas=SCHEMAS)
        bridge_settings(serve_args(*([text] if where == "flag" else [])), env, config)
    if where == "file":
        assert str(err.value).startswith(str(conf))


def test_unknown_bridge_keys_are_errors(tmp_path: Path) -> None:
    conf = tmp_path / "arbiter.conf"
    conf.write_text("yarn.arbiter.bridge.rm.pol.seconds = 5\n")
    with pytest.raises(ConfigError, match=r"unknown configuration key 'yarn\.arbiter\.bridge\.rm"):
        load_config(conf, environ={}, schemas=SCHEMAS)
    # a key under no loaded prefix is an error too; one under another loaded prefix is not
    conf.write_text("qoop.hive.registry.path = /tmp/r.db\n")
    with pytest.raises(ConfigError, match=r"known keys start with 'arbiter\.' or 'yarn\.arbiter"):
        load_config(conf, environ={}, schemas=SCHEMAS)
    config = load_config(conf, environ={}, schemas=(*SCHEMAS, REPLANNER_SCHEMA))
    assert config["qoop.hive.registry.path"] == "/tmp/r.db"


def test_auth_forms_exclude_each_other_across_sources(tmp_path: Path) -> None:
    conf = tmp_path / "arbiter.conf"
    conf.write_text("yarn.arbiter.bridge.rm.auth.hook = mod:fn\n")
    config = load_config(conf, environ={}, schemas=SCHEMAS)
    with pytest.raises(ConfigError, match="not both"):
        bridge_settings(
            serve_args("--rm-url", "u", "--rm-auth-header-command", "kinit"), {}, config
        )


def test_replanner_keys_file_old_variable_and_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("QOOP_HIVE_REGISTRY", "QOOP_HIVE_REGISTRY_PATH", "QOOP_HIVE_HOME"):
        monkeypatch.delenv(name, raising=False)
    conf = tmp_path / "qoop-hive-site.xml"
    site(conf, **{"qoop.hive.registry.path": str(tmp_path / "file.db"), "qoop.hive.home": "/q"})
    monkeypatch.setenv("QOOP_HIVE_CONF", str(conf))
    assert default_registry_path() == tmp_path / "file.db"
    assert replanner_home() == Path("/q")
    monkeypatch.setenv("QOOP_HIVE_REGISTRY_PATH", str(tmp_path / "new.db"))
    assert default_registry_path() == tmp_path / "new.db"
    monkeypatch.setenv("QOOP_HIVE_REGISTRY", str(tmp_path / "old.db"))
    assert default_registry_path() == tmp_path / "old.db"
    monkeypatch.setenv("QOOP_HIVE_HOME", str(tmp_path / "home"))
    assert replanner_home() == tmp_path / "home"
    conf.write_text("qoop.hive.registry = x\n")
    with pytest.raises(
        ConfigError, match=re.escape(f"{conf}: unknown configuration key 'qoop.hive.registry'")
    ):
        default_registry_path()


def test_config_lists_the_bridge_and_replanner_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("YARN_ARBITER_RM_URL", "http://rm:8088")
    conf = site(tmp_path / "arbiter-site.xml", **{"yarn.arbiter.bridge.rm.poll.seconds": "3"})
    assert main(["config", "--config", str(conf), "bridge", "qoop"]) == 0
    out = capsys.readouterr().out
    for key in (*BRIDGE_SCHEMA, *REPLANNER_SCHEMA):
        assert key in out
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines()[2:]}
    assert lines["yarn.arbiter.bridge.rm.url"][1:3] == ["http://rm:8088", "$YARN_ARBITER_RM_URL"]
    assert lines["yarn.arbiter.bridge.rm.poll.seconds"][1:3] == ["3.0", str(conf)]
    assert "arbiter.lease.seconds" not in out
    assert [s.prefix for s in config_schemas()] == [
        "arbiter.",
        "yarn.arbiter.bridge.",
        "qoop.hive.",
    ]


def test_schemas_stay_apart() -> None:
    with pytest.raises(ValueError, match="prefix"):
        Schema("a.", [Property("b.x", 1, int, lambda v: True, "", "")])
    with pytest.raises(ValueError, match="overlap"):
        load_config(environ={}, schemas=(SCHEMA, Schema("arbiter.x.", [])))
    with pytest.raises(KeyError):
        load_config(environ={})["yarn.arbiter.bridge.rm.url"]  # not loaded, not known


def test_one_boolean_syntax_and_one_table_printer() -> None:
    assert [parse_bool(t) for t in ("Yes", " on", "1", "TRUE", "no", "off", "0", "false")] == [
        True, True, True, True, False, False, False, False,
    ]  # fmt: skip
    with pytest.raises(ValueError):
        parse_bool("maybe")
    assert format_table(["a", "bb"], [["xyz", "1"]]) == "a    bb\n---  --\nxyz  1 "
    assert format_table(["n"], [["7"]], align=">", sep="", min_width=3) == "  n\n---\n  7"
    with pytest.raises(ValueError, match="align"):
        format_table(["a", "b"], [], align="<^")
