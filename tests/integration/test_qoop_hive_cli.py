"""``qoop-hive``: JDBC URLs, script splitting, variables, beeline output formats, exit codes;
then, on one real local HiveServer2 (started and stopped by ``qoop-hive engine``), -e / -f /
--hiveconf / output formats / errors / replanned SELECTs / load-tpch.

The engine-backed tests share one engine for the module (start ~20 s). ``engine stop`` runs in
the fixture's teardown, which asserts that the engine is gone.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from hive_hooks.beeline.args import parse_share_profile
from hive_hooks.beeline.errors import CliError, describe_error
from hive_hooks.beeline.script import is_query, split_statements, substitute_variables
from hive_hooks.cli import main
from hive_hooks.jdbc import JdbcUrlError, parse_jdbc_url
from hive_hooks.output import java_double, render


def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------ JDBC URLs


def test_jdbc_url_full_form() -> None:
    u = parse_jdbc_url(
        "jdbc:hive2://hs2.example.com:10001/tpch;auth=noSasl;user=ana"
        "?spark.sql.shuffle.partitions=2;hive.exec.parallel=true#day=2024-01-01;n=3"
    )
    assert (u.host, u.port, u.database, u.hostport) == (
        "hs2.example.com", 10001, "tpch", "hs2.example.com:10001",
    )  # fmt: skip
    assert u.session == {"auth": "noSasl", "user": "ana"}
    assert u.hiveconf == {"spark.sql.shuffle.partitions": "2", "hive.exec.parallel": "true"}
    assert u.hivevar == {"day": "2024-01-01", "n": "3"}
    kw = u.pyhive_kwargs()
    assert kw == {
        "username": "ana", "database": "tpch", "host": "hs2.example.com", "port": 10001,
        "auth": "NOSASL",
    }  # fmt: skip
    assert u.pyhive_kwargs(user="bob")["username"] == "bob"  # -n wins over ;user=
    assert parse_jdbc_url(str(u)) == u


@pytest.mark.parametrize(
    ("url", "host", "port", "db"),
    [
        ("jdbc:hive2://h", "h", 10000, "default"),
        ("jdbc:hive2://h:1234", "h", 1234, "default"),
        ("jdbc:hive2://h:1234/", "h", 1234, "default"),
        ("JDBC:HIVE2://h:1/x;auth=noSasl", "h", 1, "x"),
        ("jdbc:hive2://h:1;auth=noSasl", "h", 1, "default"),
        ("jdbc:hive2://[::1]:99/d", "::1", 99, "d"),
        ("jdbc:hive2://h/d;transportMode=http", "h", 10001, "d"),
    ],
)
def test_jdbc_url_defaults(url: str, host: str, port: int, db: str) -> None:
    u = parse_jdbc_url(url)
    assert (u.host, u.port, u.database) == (host, port, db)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("hive2://h:1/d", "not a HiveServer2 JDBC URL"),
        ("jdbc:mysql://h:1/d", "not a HiveServer2 JDBC URL"),
        ("jdbc:hive2://", "embedded mode is not supported"),
        ("jdbc:hive2:///default", "embedded mode is not supported"),
        ("jdbc:hive2://h:port/d", "bad port 'port'"),
        ("jdbc:hive2://h:0/d", "bad port '0'"),
        ("jdbc:hive2://h:99999/d", "bad port"),
        ("jdbc:hive2://a:1,b:2/d", "ZooKeeper service discovery"),
        ("jdbc:hive2://zk:2181/;serviceDiscoveryMode=zooKeeper", "ZooKeeper"),
        ("jdbc:hive2://h:1/d;auth", "bad session variable entry 'auth'"),
        ("jdbc:hive2://h:1/my-db", "bad database name"),
        ("jdbc:hive2://u@h:1/d", "put the user in -n"),
        ("jdbc:hive2://:1/d", "no host"),
    ],
)
def test_jdbc_url_errors(url: str, message: str) -> None:
    with pytest.raises(JdbcUrlError, match=message):
        parse_jdbc_url(url)


def test_jdbc_auth_modes() -> None:
    plain = parse_jdbc_url("jdbc:hive2://h:1/d").pyhive_kwargs(user="u")
    assert plain["auth"] == "NONE" and "password" not in plain
    ldap = parse_jdbc_url("jdbc:hive2://h:1/d").pyhive_kwargs(user="u", password="pw")
    assert (ldap["auth"], ldap["password"]) == ("LDAP", "pw")
    nosasl = parse_jdbc_url("jdbc:hive2://h:1/d;auth=noSasl").pyhive_kwargs(password="pw")
    assert nosasl["auth"] == "NOSASL" and "password" not in nosasl
    krb = parse_jdbc_url("jdbc:hive2://h:1/d;principal=hive/_HOST@EXAMPLE.COM").pyhive_kwargs()
    assert (krb["auth"], krb["kerberos_service_name"]) == ("KERBEROS", "hive")
    http = parse_jdbc_url("jdbc:hive2://h/d;transportMode=http;ssl=true").pyhive_kwargs()
    assert (http["scheme"], http["port"]) == ("https", 10001)
    with pytest.raises(JdbcUrlError, match="ssl=true over the binary transport"):
        parse_jdbc_url("jdbc:hive2://h:1/d;ssl=true").pyhive_kwargs()
    with pytest.raises(JdbcUrlError, match="httpPath"):
        parse_jdbc_url("jdbc:hive2://h/d;transportMode=http;httpPath=gw").pyhive_kwargs()


# ------------------------------------------------------------------ scripts


def test_split_statements_respects_quotes_and_comments() -> None:
    script = """\
-- a header comment; with a semicolon
SELECT 'a;b' AS s, "c;d" AS t, `odd;name` FROM x;   -- trailing; comment
/* block ; comment /* nested ; */ still comment */
SELECT 'it\\'s; fine', 2;

;;
SELECT 3   -- no final semicolon"""
    stmts = split_statements(script)
    assert [s.text for s in stmts] == [
        "-- a header comment; with a semicolon\nSELECT 'a;b' AS s, \"c;d\" AS t, `odd;name` FROM x",
        "-- trailing; comment\n/* block ; comment /* nested ; */ still comment */\n"
        "SELECT 'it\\'s; fine', 2",
        "SELECT 3   -- no final semicolon",
    ]
    assert [s.line for s in stmts] == [1, 2, 7]


def test_split_statements_drops_comment_only_pieces_and_counts_lines() -> None:
    assert split_statements("  \n-- only a comment\n/* and ; this */\n") == []
    assert split_statements("") == []
    stmts = split_statements("SELECT 1;\n\n\nSELECT\n'multi\nline';\nSELECT 3")
    assert [s.line for s in stmts] == [1, 4, 7]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("SELECT 1;\nSELECT 'oops", "line 2: unterminated '-quoted string"),
        ('SELECT "x', 'line 1: unterminated "-quoted string'),
        ("SELECT `x", "line 1: unterminated `-quoted identifier"),
        ("SELECT 1 /* /* */", "line 1: unterminated /\\* comment"),
    ],
)
def test_split_statements_unterminated(script: str, message: str) -> None:
    with pytest.raises(CliError, match=message):
        split_statements(script)


def test_substitute_variables() -> None:
    hv, hc = {"day": "2024-01-01", "t": "lineitem", "nest": "${t}"}, {"k": "conf", "t": "x"}
    sql = "SELECT '${day}', ${hivevar:t}, ${hiveconf:k}, ${env:HOME_X}, ${nest}, ${missing}"
    assert substitute_variables(sql, hv, hc, env={"HOME_X": "/h"}) == (
        "SELECT '2024-01-01', lineitem, conf, /h, lineitem, ${missing}"
    )
    assert substitute_variables("${k}", {}, {"k": "from-conf"}, env={}) == "from-conf"


@pytest.mark.parametrize(
    ("sql", "query"),
    [
        ("SELECT 1", True),
        ("  -- c\n/* d */ select a from t", True),
        ("WITH x AS (SELECT 1 AS a) SELECT a FROM x", True),
        ("(SELECT 1) UNION ALL (SELECT 2)", True),
        ("SELECT a FROM t UNION SELECT b FROM u", True),
        ("INSERT INTO t SELECT 1", False),
        ("CREATE TABLE t AS SELECT 1", False),
        ("EXPLAIN SELECT 1", False),
        ("SET a=b", False),
        ("USE tpch", False),
        ("SHOW TABLES", False),
        ("SELECT FROM WHERE (", False),  # sqlglot cannot parse it: sent as it is
    ],
)
def test_is_query(sql: str, query: bool) -> None:
    assert is_query(sql) is query


def test_share_profile() -> None:
    assert parse_share_profile("0:1.0,5:0.25, 12.5:0.5") == [(0, 1.0), (5, 0.25), (12.5, 0.5)]
    for bad, message in [
        ("0-1", "expected SECONDS:FRACTION"),
        ("0:1,x:2", "expected SECONDS:FRACTION"),
        ("0:1.5", "fraction in \\(0, 1\\]"),
        ("0:0", "fraction"),
        ("5:1,2:0.5", "must increase"),
        (" , ", "empty"),
        ("2:1,5:0.5", "must start at 0 seconds"),
    ]:
        with pytest.raises(CliError, match=message):
            parse_share_profile(bad)


def test_describe_error_takes_the_first_line_of_the_server_message() -> None:
    from pyhive.exc import OperationalError
    from TCLIService.ttypes import TExecuteStatementResp, TStatus

    msg = (
        "Error running query: [PARSE_SYNTAX_ERROR] org.apache.spark.sql.catalyst.parser."
        "ParseException: \n[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: "
        "42601 (line 1, pos 0)\n\n== SQL ==\nSELEC 1\n^^^\n"
    )
    exc = OperationalError(TExecuteStatementResp(status=TStatus(errorMessage=msg)))
    assert describe_error(exc) == (
        "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601 (line 1, pos 0)"
    )
    try:  # wrapped by another layer: found through __cause__
        try:
            raise exc
        except OperationalError as inner:
            raise RuntimeError("stage failed") from inner
    except RuntimeError as outer:
        assert describe_error(outer).startswith("[PARSE_SYNTAX_ERROR] Syntax error")


# ------------------------------------------------------------------ output formats

COLS = ["a", "b", "c", "d", "e", "f"]
ROWS = [
    (1, "x,y", 'he said "hi"', None, 2.5, True),
    (22, "plain", "tab\there", "z", 1e10, False),
]


def test_table_format_matches_beeline() -> None:
    # beeline 2.3.10 on the same values (see hive_hooks/output.py)
    assert render(COLS, ROWS, "table") == (
        "+-----+--------+---------------+-------+---------+--------+\n"
        "|  a  |   b    |       c       |   d   |    e    |   f    |\n"
        "+-----+--------+---------------+-------+---------+--------+\n"
        '| 1   | x,y    | he said "hi"  | NULL  | 2.5     | true   |\n'
        "| 22  | plain  | tab\there      | z     | 1.0E10  | false  |\n"
        "+-----+--------+---------------+-------+---------+--------+\n"
    )
    assert render(["a"], [], "table") == "+----+\n| a  |\n+----+\n+----+\n"
    assert render(["a"], [(1,)], "table", header=False) == "+----+\n| 1  |\n+----+\n"


def test_separated_value_formats_match_beeline() -> None:
    assert render(COLS, ROWS, "csv2") == (
        'a,b,c,d,e,f\n1,x,y,he said "hi",NULL,2.5,true\n22,plain,tab\there,z,1.0E10,false\n'
    )
    assert render(COLS, ROWS, "tsv2").splitlines()[1] == '1\tx,y\the said "hi"\tNULL\t2.5\ttrue'
    assert render(COLS, ROWS, "dsv", header=False).splitlines()[0] == (
        '1|x,y|he said "hi"|NULL|2.5|true'
    )
    assert render(["a", "b"], [(1, 2)], "dsv", delimiter="::") == "a::b\n1::2\n"
    assert render(COLS, ROWS, "csv").splitlines()[1] == (
        "'1','x,y','he said \"hi\"','NULL','2.5','true'"
    )
    assert render(COLS[:2], [r[:2] for r in ROWS], "tsv").splitlines()[0] == "'a'\t'b'"
    quoted = render(COLS, ROWS, "csv2", quoting=True).splitlines()[1]
    assert quoted == '1,"x,y","he said ""hi""",NULL,2.5,true'
    assert render(COLS, ROWS, "csv2", null_empty=True).splitlines()[1].split(",")[4] == ""


def test_vertical_and_json_formats() -> None:
    assert render(["a", "bb"], [(1, None), (2, "x")], "vertical") == (
        "a   1\nbb  NULL\n\na   2\nbb  x\n\n"
    )
    doc = json.loads(render(["a", "b", "c"], [(1, None, Decimal("1.50"))], "json"))
    assert doc == {"resultset": [{"a": 1, "b": None, "c": "1.50"}]}
    lines = render(["a"], [(1,), (2,)], "jsonfile").splitlines()
    assert [json.loads(x) for x in lines] == [{"a": 1}, {"a": 2}]


def test_values_render_like_the_jdbc_driver() -> None:
    import datetime as dt

    assert [java_double(x) for x in (0.0001, 1234567.0, 1e7, -2.5e-7, float("nan"))] == [
        "1.0E-4", "1234567.0", "1.0E7", "-2.5E-7", "NaN",
    ]  # fmt: skip
    row = (Decimal("12.50"), dt.datetime(2024, 1, 2, 3, 4, 5), dt.date(2024, 1, 2), b"ab")
    assert render(["d", "t", "day", "bin"], [row], "csv2", header=False) == (
        "12.50,2024-01-02 03:04:05.0,2024-01-02,ab\n"
    )
    with pytest.raises(ValueError, match="unknown output format"):
        render(["a"], [], "xml")


# ------------------------------------------------------------------ CLI without an engine


def test_help_explains_with_examples() -> None:
    code, out, _ = run(["--help"])
    assert code == 0
    for text in ("--share-profile", "--arbiter", "--outputformat", "--explain-plans",
                 "--no-replan", "--gc", "engine start", "load-tpch", "examples:",
                 "exit status"):  # fmt: skip
        assert text in out, text
    code, out, _ = run(["engine", "--help"])
    assert code == 0 and "--workdir" in out and "engine stop" in out
    code, out, _ = run(["load-tpch", "--help"])
    assert code == 0 and "--scale" in out


def test_arbiter_takes_the_addresses_of_an_ha_pair() -> None:
    import io

    from hive_hooks.beeline.args import build_parser, parse_args

    ns = parse_args(build_parser(), ["--arbiter", "a:1,b:2", "-e", "SELECT 1"], io.StringIO())
    assert ns.arbiter == "a:1,b:2"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["-u", "jdbc:hive2:/h:1", "-e", "SELECT 1"], "not a HiveServer2 JDBC URL"),
        (["-u", "jdbc:hive2://h:x/d", "-e", "SELECT 1"], "bad port 'x'"),
        (["-e", "SELECT 1"], "no HiveServer2 to connect to"),
        (["-u", "jdbc:hive2://h:1/d", "--share-profile", "0:2", "-e", "SELECT 1"], "fraction"),
        (["-u", "jdbc:hive2://h:1/d", "--dry-run", "-e", "SELECT 1"], "--dry-run goes with --gc"),
        (["--outputformat", "xml", "-e", "SELECT 1"], "invalid choice: 'xml'"),
        (["--silent=maybe"], "expected true or false"),
        (["--hiveconf", "novalue"], "expected KEY=VALUE"),
        (["--arbiter", "nohostport"], "expected HOST:PORT"),
        (["--arbiter", "a:1,nohostport"], "expected HOST:PORT[,HOST:PORT...]"),
        (["--arbiter", ","], "expected HOST:PORT[,HOST:PORT...]"),
        (["-u", "jdbc:hive2://h:1/d", "--arbiter", "a:1", "--share-profile", "0:1"], "not both"),
        (["engine", "restart"], "invalid choice: 'restart'"),
    ],
)
def test_usage_errors_exit_2_with_one_line(argv: list[str], message: str) -> None:
    code, out, err = run(argv)
    assert code == 2
    assert err.startswith("qoop-hive: error: ") and message in err
    assert err.count("\n") == 1 and out == ""


def test_unreachable_server_names_host_and_port() -> None:
    from arbiter.localhost import free_port

    port = free_port()
    code, out, err = run(["-u", f"jdbc:hive2://127.0.0.1:{port}/default;auth=noSasl",
                          "-e", "SELECT 1"])  # fmt: skip
    assert code == 1 and out == ""
    assert f"cannot reach HiveServer2 at 127.0.0.1:{port}: connection refused" in err
    assert err.count("\n") == 1


def test_missing_script_file() -> None:
    code, _, err = run(["-u", "jdbc:hive2://127.0.0.1:1/d", "-f", "/no/such/file.sql"])
    assert code == 1 and "cannot read /no/such/file.sql" in err


def test_unterminated_string_in_a_script_names_file_and_line(tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text("SELECT 1;\n\nSELECT 'oops\n")
    code, _, err = run(["-u", "jdbc:hive2://127.0.0.1:1/d", "-f", str(script)])
    assert code == 1 and f"{script}: line 3: unterminated '-quoted string" in err


def test_engine_stop_and_status_with_nothing_running(tmp_path: Path) -> None:
    code, out, _ = run(["engine", "stop", "--workdir", str(tmp_path)])
    assert code == 0 and "no engine running" in out
    code, out, _ = run(["engine", "status", "--workdir", str(tmp_path)])
    assert code == 3 and out.startswith("not running")
    # a stale pid file (a process that has exited) is reported and removed, never signalled
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "qoop-hive-engine.json").write_text(json.dumps({"pid": dead.pid, "port": 1}))
    code, out, _ = run(["engine", "status", "--workdir", str(tmp_path)])
    assert code == 3 and "stale pid file" in out
    code, out, _ = run(["engine", "stop", "--workdir", str(tmp_path)])
    assert code == 0 and "stale" in out
    assert not (tmp_path / "qoop-hive-engine.json").exists()


def test_engine_start_on_a_busy_port(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = run(["engine", "start", "--port", str(port), "--workdir", str(tmp_path)])
    assert code == 1 and out == "" and f"port 127.0.0.1:{port} is already in use" in err
    assert not (tmp_path / "qoop-hive-engine.json").exists()


def test_engine_stop_never_signals_a_foreign_process(tmp_path: Path) -> None:
    """A pid file naming a live process that is not the engine (pid reuse) is left alone."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "qoop-hive-engine.json").write_text(json.dumps({"pid": other.pid}))
        code, out, _ = run(["engine", "stop", "--workdir", str(tmp_path)])
        assert code == 0 and "stale" in out
        assert other.poll() is None  # still running
    finally:
        other.kill()
        other.wait()


# ------------------------------------------------------------------ on a real engine


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("pyspark")
    pytest.importorskip("pyhive")
    workdir = tmp_path_factory.mktemp("qoop-hive-engine")
    t0 = time.monotonic()
    code, out, err = run(["engine", "start", "--workdir", str(workdir)])
    assert code == 0, err
    url = out.strip()
    info = json.loads((workdir / "qoop-hive-engine.json").read_text())
    print(f"\nengine ready in {time.monotonic() - t0:.1f} s at {url}")
    yield {"url": url, "workdir": workdir, "info": info, "port": info["port"]}
    from hive_hooks.engine import port_is_open

    code, out, _ = run(["engine", "stop", "--workdir", str(workdir)])
    assert code == 0 and "stopped" in out
    for pid in (info["pid"], info["jvm_pid"]):
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert not port_is_open(info["port"])
    assert run(["engine", "stop", "--workdir", str(workdir)])[0] == 0  # idempotent
    assert run(["engine", "status", "--workdir", str(workdir)])[0] == 3


def sql(engine, *args: str, url: str | None = None) -> tuple[int, str, str]:
    registry = str(engine["workdir"] / "registry.db")  # never the user's ~/.qoop-hive
    return run(["-u", url or engine["url"], "--registry", registry, *args])


@pytest.mark.slow
def test_engine_status_and_second_start(engine) -> None:
    info = engine["info"]
    assert engine["url"] == f"jdbc:hive2://127.0.0.1:{info['port']}/default;auth=noSasl"
    assert info["jvm_pid"] and info["pid"] != info["jvm_pid"]
    code, out, _ = run(["engine", "status", "--workdir", str(engine["workdir"])])
    assert code == 0 and out.startswith(f"running: {engine['url']}")
    code, out, _ = run(["engine", "start", "--workdir", str(engine["workdir"])])
    assert code == 0 and "already running" in out


@pytest.mark.slow
def test_e_runs_several_statements_directly(engine) -> None:
    code, out, err = sql(
        engine, "--no-replan", "--outputformat=csv2",
        "-e", "DROP TABLE IF EXISTS cli_t; CREATE TABLE cli_t (k INT, v STRING) USING parquet;"
              "INSERT INTO cli_t VALUES (1, 'a;b'), (2, NULL);"
              "SELECT k, v FROM cli_t ORDER BY k",
    )  # fmt: skip
    assert code == 0, err
    assert out.endswith("k,v\n1,a;b\n2,NULL\n")
    assert "2 rows selected" in err and "No rows selected" in err


@pytest.mark.slow
def test_output_formats_on_real_results(engine) -> None:
    q = "SELECT 1 AS a, 'x,y' AS b, CAST(NULL AS STRING) AS c, 2.5D AS d, true AS e"
    expected = {
        "table": "+----+------+-------+------+-------+\n"
                 "| a  |  b   |   c   |  d   |   e   |\n"
                 "+----+------+-------+------+-------+\n"
                 "| 1  | x,y  | NULL  | 2.5  | true  |\n"
                 "+----+------+-------+------+-------+\n",
        "csv2": "a,b,c,d,e\n1,x,y,NULL,2.5,true\n",
        "tsv2": "a\tb\tc\td\te\n1\tx,y\tNULL\t2.5\ttrue\n",
        "dsv": "a|b|c|d|e\n1|x,y|NULL|2.5|true\n",
        "csv": "'a','b','c','d','e'\n'1','x,y','NULL','2.5','true'\n",
    }  # fmt: skip
    for fmt, text in expected.items():
        code, out, err = sql(engine, "--no-replan", f"--outputformat={fmt}", "-e", q)
        assert code == 0, err
        assert out == text, fmt
    code, out, err = sql(engine, "--no-replan", "--outputformat=tsv2", "--showHeader=false",
                         "--silent", "-e", q)  # fmt: skip
    assert (code, out, err) == (0, "1\tx,y\tNULL\t2.5\ttrue\n", "")


@pytest.mark.slow
def test_f_script_with_comments_variables_and_hiveconf(engine, tmp_path: Path) -> None:
    script = tmp_path / "s.sql"
    script.write_text(
        "-- settings; then a query\n"
        "SET spark.sql.shuffle.partitions;\n"
        "SET hivevar:greeting=hello;\n"
        "/* a ; comment */ SELECT '${greeting}; ${who}' AS g, ${n} + 1 AS n;\n"
    )
    code, out, err = sql(
        engine, "--no-replan", "--outputformat=csv2", "--showHeader=false", "--silent=true",
        "--hiveconf", "spark.sql.shuffle.partitions=3", "--hivevar", "who=world",
        "-f", str(script), url=engine["url"] + "#n=41",
    )  # fmt: skip
    assert code == 0, err
    assert out == "spark.sql.shuffle.partitions,3\nhivevar:greeting,hello\nhello; world,42\n"
    # the URL's ?hiveconf list works like --hiveconf
    code, out, _ = sql(engine, "--no-replan", "--outputformat=csv2", "--silent", "-e",
                       "SET spark.sql.shuffle.partitions",
                       url=engine["url"] + "?spark.sql.shuffle.partitions=5")  # fmt: skip
    assert out.splitlines()[-1] == "spark.sql.shuffle.partitions,5"


@pytest.mark.slow
def test_script_from_stdin_through_the_console_script(engine) -> None:
    script = Path(sys.executable).parent / "qoop-hive"
    res = subprocess.run(
        [str(script), "-u", engine["url"], "--no-replan", "--outputformat=csv2", "--silent"],
        input="SELECT 7 AS x; -- done\n", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (res.returncode, res.stdout, res.stderr) == (0, "x\n7\n", "")


@pytest.mark.slow
def test_errors_exit_with_one_line(engine, tmp_path: Path) -> None:
    code, out, err = sql(engine, "-e", "SELECT * FROM no_such_table_cli")
    assert code == 1 and out == ""
    assert err.splitlines()[-1].startswith("qoop-hive: error: [TABLE_OR_VIEW_NOT_FOUND]")
    assert "no_such_table_cli" in err
    code, out, err = sql(engine, "-e", "SELEC 1")
    assert code == 1 and "qoop-hive: error: [PARSE_SYNTAX_ERROR] Syntax error" in err
    # a failing statement stops the script (its file:line named) unless --force; a failed -f
    # script exits 2, as beeline's does
    script = tmp_path / "f.sql"
    script.write_text("SELECT 1 AS one;\n\nSELECT * FROM nope_cli;\nSELECT 3 AS three;\n")
    code, out, err = sql(engine, "--no-replan", "--outputformat=csv2", "-f", str(script))
    assert code == 2 and "three" not in out and f"{script}:3: [TABLE_OR_VIEW_NOT_FOUND]" in err
    code, out, err = sql(engine, "--no-replan", "--outputformat=csv2", "--force",
                         "-f", str(script))  # fmt: skip
    assert code == 2 and "one\n1\n" in out and "three\n3\n" in out
    # the client's auth must match the server's: a clear message, no hang
    code, _, err = sql(engine, "-e", "SELECT 1", url=engine["url"].split(";")[0])
    assert code == 1 and "auth" in err and f"127.0.0.1:{engine['port']}" in err


@pytest.mark.slow
def test_use_and_set_reach_the_replanner(engine) -> None:
    pytest.importorskip("hive_hooks.executor")
    code, out, err = sql(
        engine, "--outputformat=csv2", "--share-profile", "0:1.0,1:0.25",
        "-e", "CREATE DATABASE IF NOT EXISTS cli_db; USE cli_db;"
              "DROP TABLE IF EXISTS r; DROP TABLE IF EXISTS s;"
              "CREATE TABLE r USING parquet AS SELECT id AS k, id * 2 AS v FROM range(50);"
              "CREATE TABLE s USING parquet AS SELECT id AS k, id % 3 AS g FROM range(50);"
              "SELECT s.g, sum(r.v) AS total FROM r JOIN s ON r.k = s.k GROUP BY s.g ORDER BY s.g",
    )  # fmt: skip
    assert code == 0, err
    assert out.endswith("g,total\n0,816\n1,850\n2,784\n")
    assert "plan" in err and "switch" in err  # progress lines and the summary


@pytest.mark.slow
def test_replanned_results_stream_in_row_formats(engine) -> None:
    """Row-by-row formats print the final stage's batches as they arrive (the header once;
    an empty result still prints it); the output equals the one-statement run's."""
    setup = (
        "CREATE DATABASE IF NOT EXISTS cli_stream; USE cli_stream;"
        "DROP TABLE IF EXISTS r; DROP TABLE IF EXISTS s;"
        "CREATE TABLE r USING parquet AS SELECT id AS k, id * 2 AS v FROM range(3000);"
        "CREATE TABLE s USING parquet AS SELECT id AS k, id % 7 AS g FROM range(3000);"
    )
    q = "SELECT r.k, s.g, r.v FROM r JOIN s ON r.k = s.k WHERE s.g < 5 ORDER BY r.k"
    code, once, err = sql(engine, "--no-replan", "--outputformat=csv2", "--silent",
                          "-e", setup + q)  # fmt: skip
    assert code == 0, err
    for fmt in ("csv2", "vertical", "jsonfile"):
        code, a, err = sql(engine, f"--outputformat={fmt}", "--silent", "-e", f"USE cli_stream;{q}")
        code2, b, _ = sql(engine, f"--outputformat={fmt}", "--silent", "--no-replan",
                          "-e", f"USE cli_stream;{q}")  # fmt: skip
        assert code == code2 == 0, err
        assert a == b, fmt
    once = once[once.index("k,g,v\n") :]  # after the setup statements' output
    assert a.count("\n") == once.count("\n") - 1 == 2144  # jsonfile: a line per row
    assert once.count("k,g,v") == 1
    code, out, err = sql(engine, "--outputformat=csv2", "--share-profile", "0:1.0",
                         "-e", "USE cli_stream;" + q.replace("s.g < 5", "s.g > 9"))  # fmt: skip
    assert code == 0, err
    assert out.endswith("k,g,v\n") and "No rows selected" in err


@pytest.mark.slow
def test_share_from_the_arbiter(engine, tmp_path: Path) -> None:
    pytest.importorskip("hive_hooks.executor")
    from arbiter.cluster import load_cluster
    from arbiter.config import load_config
    from arbiter.server import RunningArbiter

    env = {"ARBITER_GRPC_PORT": "0", "ARBITER_JOURNAL_PATH": str(tmp_path / "journal.db")}
    arb = RunningArbiter(
        load_cluster("themis-testbed"), load_config(environ=env), admin_token="t"
    ).start()
    try:
        code, out, err = sql(
            engine, "--outputformat=csv2", "--arbiter", f"127.0.0.1:{arb.port}",
            "-e", "SELECT s.g, sum(r.v) AS total FROM cli_db.r JOIN cli_db.s ON r.k = s.k "
                  "GROUP BY s.g ORDER BY s.g",
        )  # fmt: skip
    finally:
        arb.stop(0)
    assert code == 0, err
    assert out.endswith("g,total\n0,816\n1,850\n2,784\n")
    assert "vcores" in err and "(subscribed)" in err  # the arbiter's first share update
    # an unreachable arbiter: one clear line
    code, _, err = sql(engine, "--arbiter", "127.0.0.1:1", "-e", "SELECT 1 AS one")
    assert code == 1 and "127.0.0.1:1" in err and err.count("\n") == 1


@pytest.mark.slow
def test_explain_plans_prints_a_table(engine) -> None:
    pytest.importorskip("hive_hooks.executor")
    code, out, err = sql(
        engine, "-e",
        "USE cli_db; SELECT s.g, count(*) FROM r JOIN s ON r.k = s.k GROUP BY s.g",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = sql(
        engine, "--explain-plans", "-e",
        "SELECT s.g, count(*) FROM cli_db.r JOIN cli_db.s ON r.k = s.k GROUP BY s.g",
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["plan", "join", "tree"]
    assert len(lines) == 3  # one plan: r ⋈ s is one join whichever side is written first
    assert lines[2].split()[-4] == "1"  # its join is checkpointed by the run above
    assert sum(1 for line in lines[2:] if line.rstrip().endswith("*")) == 1


@pytest.mark.slow
def test_gc_lists_then_drops_checkpoints(engine) -> None:
    pytest.importorskip("hive_hooks.executor")
    code, out, err = sql(engine, "--gc", "--dry-run", "--retention-days", "0")
    assert code == 0, err
    listed = [line.split()[0] for line in out.splitlines()[2:]]
    assert listed and all(t.startswith("qoop_ckpt.qoop_ckpt_") for t in listed)
    assert f"gc: would drop {len(listed)} checkpoint table" in err
    code, out, err = sql(engine, "--gc", "--retention-days", "0", "--silent")
    assert code == 0 and sorted(line.split()[0] for line in out.splitlines()[2:]) == sorted(listed)
    code, out, err = sql(engine, "--no-replan", "--outputformat=csv2", "--showHeader=false",
                         "--silent", "-e", "SHOW TABLES IN qoop_ckpt")  # fmt: skip
    assert not any(t.split(".")[1] in out for t in listed)
    code, out, err = sql(engine, "--gc", "--dry-run")
    assert code == 0 and out == "" and "gc: would drop 0 checkpoint tables" in err


@pytest.mark.slow
def test_load_tpch(engine) -> None:
    data = str(engine["workdir"] / "tpc-data")
    code, out, err = run(
        ["load-tpch", "--scale", "0.01", "-u", engine["url"], "--silent", "--data-dir", data]
    )
    assert code == 0, err
    assert out.startswith("loaded tpch sf 0.01 into tpch: 8 tables, 86,805 rows")
    code, out, err = sql(engine, "--outputformat=csv2", "--silent",
                         "-e", "SELECT count(*) AS n FROM tpch.nation")  # fmt: skip
    assert out == "n\n25\n"
    # an unreachable server: one clear line, before generating anything
    code, out, err = run(["load-tpch", "-u", "jdbc:hive2://127.0.0.1:1/d;auth=noSasl"])
    assert code == 1 and "cannot reach HiveServer2 at 127.0.0.1:1" in err


@pytest.mark.slow
def test_load_tpcds(engine) -> None:
    """``load-tpcds`` at sf 0.01 (DuckDB's dsdgen, from the ``hive`` extra): 24 tables; a few
    are read back through the engine with their DuckDB row counts and a column sum."""
    data = str(engine["workdir"] / "tpc-data")
    t0 = time.monotonic()
    code, out, err = run(
        ["load-tpcds", "--scale", "0.01", "-u", engine["url"], "--silent", "--data-dir", data,
         "--database", "tpcds_small"]
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("loaded tpcds sf 0.01 into tpcds_small: 24 tables, 277,976 rows")
    code, out, err = sql(engine, "--no-replan", "--outputformat=csv2", "--showHeader=false",
                         "--silent", "-e", "SHOW TABLES IN tpcds_small")  # fmt: skip
    assert code == 0, err
    assert len([line for line in out.splitlines() if line.strip()]) == 24
    code, out, err = sql(
        engine, "--outputformat=csv2", "--silent", "-e",
        "SELECT (SELECT count(*) FROM tpcds_small.store_sales) AS ss,"
        " (SELECT count(*) FROM tpcds_small.date_dim) AS dd,"
        " (SELECT count(*) FROM tpcds_small.customer) AS c,"
        " (SELECT count(*) FROM tpcds_small.item) AS i,"
        " (SELECT sum(ss_quantity) FROM tpcds_small.store_sales) AS q",
    )  # fmt: skip
    assert code == 0, err
    assert out == "ss,dd,c,i,q\n28810,73049,1000,180,1397502\n"
    print(f"load-tpcds sf 0.01 + checks: {time.monotonic() - t0:.1f} s")


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "qoop-hive"
    assert script.exists()
    res = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "100"})  # fmt: skip
    assert res.returncode == 0 and "usage: qoop-hive" in res.stdout


def qoop_hive(engine, *argv: str, stdin: str = "", env: dict[str, str] | None = None):
    """The console script as a beeline user runs it (stdin a pipe)."""
    registry = str(engine["workdir"] / "registry.db")
    return subprocess.run(
        [sys.executable, "-m", "hive_hooks.cli", "--registry", registry, *argv],
        input=stdin, capture_output=True, text=True, timeout=180,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.mark.slow
def test_shell_reads_beeline_commands_and_sql(engine) -> None:
    script = (
        "!set outputformat csv2\n"
        "!set showHeader false\n"
        "SELECT 1 AS a,\n  'x;y' AS b; -- two lines, a ';' in quotes\n"
        "!set\n"
        "!quit\n"
        "SELECT 2 AS never;\n"
    )
    res = qoop_hive(engine, "-u", engine["url"], "--no-replan", "--silent", stdin=script)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("1,x;y\n") and "outputformat     csv2" in res.stdout
    assert "never" not in res.stdout and res.stderr == ""
    # unconnected at first: !connect, then a query through the replanner
    res = qoop_hive(engine, "--outputformat=tsv2",
                    stdin=f"!connect {engine['url']}\nSELECT 3 AS c;\n!close\n")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout == "c\n3\n" and "Connected to: HiveServer2 at 127.0.0.1" in res.stderr


@pytest.mark.slow
def test_beeline_exit_statuses_and_flags(engine, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT 1;\nSELECT * FROM no_such_table_here;\n")
    res = qoop_hive(engine, "-u", engine["url"], "--no-replan", "-f", str(bad))
    assert res.returncode == 2 and "no_such_table_here" in res.stderr  # beeline's -f status
    res = qoop_hive(engine, "-u", engine["url"], "--no-replan", "-e", "SELECT * FROM nope_t")
    assert res.returncode == 1  # beeline's -e status
    res = qoop_hive(engine, "-u", engine["url"], "--no-replan", stdin="SELECT * FROM nope_t;\n")
    assert res.returncode == 1
    # -c from beeline-site.xml, -d (the driver class) accepted, -w a password file, -a auth
    port = engine["port"]
    (tmp_path / "beeline-site.xml").write_text(
        "<configuration><property><name>beeline.hs2.jdbc.url.local</name>"
        f"<value>jdbc:hive2://127.0.0.1:{port}/default</value></property></configuration>"
    )
    (tmp_path / "pw").write_text("unused-with-nosasl\n")
    res = qoop_hive(engine, "-c", "local", "-a", "noSasl", "-d", "org.apache.hive.jdbc.HiveDriver",
                    "-w", str(tmp_path / "pw"), "--outputformat=csv2", "--silent",
                    "-e", "SELECT 4 AS d", env={"HIVE_CONF_DIR": str(tmp_path)})  # fmt: skip
    assert (res.returncode, res.stdout) == (0, "d\n4\n"), res.stderr
