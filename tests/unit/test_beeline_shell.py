"""qoop-hive's beeline habits without a server: the shell's ! commands and statement reading,
beeline's -c/-a/-w/-d flags, and what a statement needs before it can run."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from hive_hooks.beeline.args import build_parser
from hive_hooks.beeline.errors import CliError
from hive_hooks.beeline.run import _run_statement, connection_args, named_url
from hive_hooks.beeline.shell import Shell, complete_statements


def args_of(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def shell(*argv: str, interactive: bool = False) -> tuple[Shell, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    sh = Shell(args_of(*argv), out, err, interactive=interactive, run_statement=_run_statement)
    return sh, out, err


def test_statements_end_at_a_semicolon_outside_quotes() -> None:
    assert complete_statements("SELECT 1") is None
    assert complete_statements("SELECT 'a;\n") is None  # an open quote
    assert complete_statements("SELECT 'a;b' AS x,\n 2;") == ["SELECT 'a;b' AS x,\n 2"]
    assert complete_statements("USE db; SELECT 1; -- done\n") == ["USE db", "SELECT 1"]
    assert complete_statements("/* ; */ SELECT 1;") == ["/* ; */ SELECT 1"]


def test_set_help_history_and_quit() -> None:
    sh, out, err = shell()
    code = sh.run(["!set outputformat csv2", "!SET showheader false", "!set", "!help",
                   "!history", "!quit", "!set silent true"])  # fmt: skip
    assert code == 0 and err.getvalue() == ""
    text = out.getvalue()
    assert "outputformat     csv2" in text and "showHeader       false" in text
    assert "!connect URL [USER [PASSWORD]]" in text
    assert "    1  !set outputformat csv2" in text
    assert sh.args.outputformat == "csv2" and sh.args.showHeader is False
    assert sh.args.silent is False  # after !quit nothing runs


def test_refusals_are_one_line_each() -> None:
    sh, out, err = shell("--force")
    code = sh.run(["SELECT 1;", "!set outputformat xml", "!set showHeader maybe", "!bogus",
                   "!connect jdbc:mysql://h:1/d", "!connect"])  # fmt: skip
    lines = err.getvalue().splitlines()
    assert out.getvalue() == ""
    assert code == 1 and len(lines) == 6 and all(x.startswith("qoop-hive: error: ") for x in lines)
    assert "no current connection" in lines[0] and "one of" in lines[1]
    assert "expected true or false" in lines[2] and "unknown command !bogus" in lines[3]
    assert "not a HiveServer2 JDBC URL" in lines[4] and "usage: !connect" in lines[5]
    # without --force a pipe stops at the first failure; a terminal never does
    sh, _, err = shell()
    assert sh.run(["SELECT 1;", "!set outputformat csv2"]) == 1 and sh.args.outputformat != "csv2"
    sh, _, err = shell(interactive=True)
    assert sh.run(["SELECT 1;", "!set outputformat csv2"]) == 0 and sh.args.outputformat == "csv2"
    assert sh.prompt() == "beeline> "


def test_beeline_connection_flags(tmp_path: Path) -> None:
    (tmp_path / "beeline-site.xml").write_text(
        "<configuration>"
        "<property><name>beeline.hs2.jdbc.url.default</name><value>prod</value></property>"
        "<property><name>beeline.hs2.jdbc.url.prod</name>"
        "<value>jdbc:hive2://hs2.example:10000/sales</value></property>"
        "<property><name>beeline.hs2.jdbc.url.dev</name>"
        "<value>jdbc:hive2://dev:10000/default</value></property>"
        "</configuration>"
    )
    (tmp_path / "pw").write_text("s3cret\nignored\n")
    env = {"HIVE_CONF_DIR": str(tmp_path)}
    assert named_url("dev", env) == "jdbc:hive2://dev:10000/default"
    a = args_of("-a", "noSasl", "-w", str(tmp_path / "pw"), "-d", "org.apache.hive.jdbc.HiveDriver")
    connection_args(a, env)  # no -u, no -c: beeline-site.xml's default URL
    assert a.u == "jdbc:hive2://hs2.example:10000/sales;auth=noSasl" and a.p == "s3cret"
    assert a.driver == "org.apache.hive.jdbc.HiveDriver" and a.hivevar is None
    a = args_of("-c", "dev", "--define", "x=1")
    connection_args(a, env)
    assert a.u == "jdbc:hive2://dev:10000/default" and a.hivevar == [("x", "1")]
    with pytest.raises(CliError, match=r"no beeline\.hs2\.jdbc\.url\.nope"):
        connection_args(args_of("-c", "nope"), env)
    with pytest.raises(CliError, match="cannot read a password"):
        connection_args(args_of("-u", "jdbc:hive2://h:1/d", "-w", str(tmp_path / "x")), env)
    assert named_url(None, {"HIVE_CONF_DIR": str(tmp_path / "none")}) in (None, named_url(None, {}))
