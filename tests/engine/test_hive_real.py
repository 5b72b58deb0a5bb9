"""The replanner on Apache Hive itself: HiveServer2 4.0.1 with Tez in local mode, TPC-H sf 0.01.

One server for the module (``hive_hooks.hive_engine.HiveOnTez``, started from Hive's jars in
about 7 s). Every TPC-H query's rows, run stage by stage with each stage a checkpoint table
and its share changed while it runs (a forced plan switch for every query with more than one
plan), equal the same SQL run directly on Hive. The last test
SIGKILLs the server mid-query and starts it again. Tez on the real local YARN:
``test_hive_yarn.py``; the hooks: ``test_hive_hooks.py``.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.hive import (
    Events,
    assert_each_stage_ran_once,
    assert_no_recompute,
    canon,
    connector,
    rotate,
    run_direct,
    tables_of,
)

from hive_hooks.engine import metastore_in_use
from hive_hooks.errors import QueryError
from hive_hooks.executor import QueryRunner, StageEvent
from hive_hooks.hive_engine import HiveOnTez, beeline_command
from hive_hooks.registry import CheckpointRegistry
from hive_hooks.share import ManualShare, StaticShare
from hive_hooks.tpcload import load_tpc
from qoop_planner.tpc import load_tpc as tpc_queries

pytestmark = pytest.mark.slow

QUERIES = list(range(1, 23))


# Tez in local mode runs every DAG inside HiveServer2's one JVM, and two at once can mix up
# their inputs ("IllegalStateException: Invalid input path", measured: 2 of 4 staged Q7 runs
# at sf 1 with 4 stages at once, none in some 40 runs one at a time), so stages run one by one.
def hive_runner(connect: Callable[[], Any], registry: CheckpointRegistry, db: str,
                **kw: Any) -> QueryRunner:  # fmt: skip
    """A runner on the module's Hive, checkpoints in ``db``, one stage at a time."""
    return QueryRunner(connect, registry=registry, checkpoint_db=db, max_concurrency=1, **kw)


_DIRECT: dict[int, list[tuple[Any, ...]]] = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = HiveOnTez(work_dir=tmp_path_factory.mktemp("hive"))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def connect(server: HiveOnTez, tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("data")
    report = load_tpc(connector(server.port, "default"), "tpch", 0.01, "tpch", data_dir=data)
    assert report.rows["lineitem"] == 60175 and len(report.rows) == 8
    return connector(server.port)


@pytest.fixture(scope="module")
def queries() -> dict[int, str]:
    return tpc_queries("tpch", 0.01).queries


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory):
    reg = CheckpointRegistry(tmp_path_factory.mktemp("reg") / "registry.db")
    yield reg
    reg.close()


def direct(connect: Callable[[], Any], queries: dict[int, str], n: int) -> list[tuple[Any, ...]]:
    if n not in _DIRECT:
        _DIRECT[n] = run_direct(connect, queries[n])
    return _DIRECT[n]


@pytest.fixture(scope="module")
def plain(connect: Callable[[], Any], registry: CheckpointRegistry):
    runner = hive_runner(connect, registry, "ck_plain",
                         share=StaticShare(4), metadata_ttl_s=3600)  # fmt: skip
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def switching(connect: Callable[[], Any], registry: CheckpointRegistry):
    # the share flips when a query's first stage starts, so it changes while that stage runs
    share = ManualShare(4)
    changed: set[str] = set()

    def hook(e: StageEvent) -> None:
        if e.kind == "start" and e.query_id not in changed:
            changed.add(e.query_id)
            share.set(1 if share.current().share.vcores > 1 else 4, cause=f"{e.query_id} started")

    runner = hive_runner(connect, registry, "ck_switch", share=share,
                         policy=rotate, on_event=Events(hook), metadata_ttl_s=3600)  # fmt: skip
    yield runner
    runner.close()


@pytest.mark.parametrize("n", QUERIES)
def test_tpch_stage_by_stage_with_forced_switches_equals_direct(
    n: int, switching: QueryRunner, connect: Callable[[], Any], queries: dict[int, str]
) -> None:
    """Each TPC-H query once, stage by stage, its share changed while its first stage runs: a
    query with more than one cached plan switches; one with a single plan runs it plainly (a
    separate pass under a static share would repeat that run; the static share's checks are in
    ``test_checkpoints_are_hive_parquet_tables``). Rows equal the direct SQL's; every stage
    runs once."""
    expected = direct(connect, queries, n)
    res = switching.run(queries[n], query_id=f"switch-q{n}")
    assert canon(res.rows) == canon(expected)
    assert not res.passthrough and res.reconnects == 0
    if len(res.plans) > 1:
        assert res.switches, f"Q{n}: no switch"
        assert res.switches[0].from_plan == res.initial_plan_id
        assert res.plan_id == res.switches[-1].to_plan
    else:
        assert res.switches == () and {s.outcome for s in res.stages} == {"done"}
    assert_each_stage_ran_once(res, switching)


def test_checkpoints_are_hive_parquet_tables(
    plain: QueryRunner, connect: Callable[[], Any], queries: dict[int, str]
) -> None:
    """Q3 stage by stage under a static share: no switch, every stage done once; its
    checkpoints are Parquet tables of Hive's, with the row counts the registry recorded."""
    res = plain.run(queries[3], query_id="ckpt-q3")
    assert canon(res.rows) == canon(direct(connect, queries, 3))
    assert not res.passthrough and res.switches == ()
    assert {s.outcome for s in res.stages} == {"done"}
    assert_each_stage_ran_once(res, plain)
    recs = plain.registry.checkpoints("ck_plain")
    assert recs and {r.table for r in recs} <= tables_of(connect, "ck_plain")
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute(f"DESCRIBE FORMATTED {recs[0].qualified}")
        text = " ".join(str(v) for row in cur.fetchall() for v in row)
        cur.execute(f"SELECT COUNT(*) FROM {recs[0].qualified}")
        assert cur.fetchall()[0][0] == recs[0].rows
    finally:
        conn.close()
    assert "MapredParquetInputFormat" in text  # STORED AS PARQUET, by Hive's own serde


JOIN4 = (
    "EXPLAIN CBO SELECT COUNT(*) FROM tpch.lineitem l JOIN tpch.orders o ON l.l_orderkey = "
    "o.o_orderkey JOIN tpch.customer c ON o.o_custkey = c.c_custkey JOIN tpch.nation n ON "
    "c.c_nationkey = n.n_nationkey"
)


def join_shape(plan: list[str]) -> tuple[list[int], list[str]]:
    """The line numbers of the HiveJoins and the scanned aliases, in plan order (a join whose
    left input is a join is on the line right above it)."""
    joins = [i for i, x in enumerate(plan) if x.lstrip().startswith("HiveJoin")]
    scans = [x.split("table:alias=[")[1].split("]")[0] for x in plan if "table:alias=[" in x]
    return joins, scans


def test_join_order_is_pinned_by_hive_settings(connect: Callable[[], Any]) -> None:
    """deploy/conf/hive-site.xml excludes CBO's join-reordering rules, so Hive runs a stage's
    joins in the order the chosen plan wrote them (left-deep, SQL order); with the exclusion
    cleared Hive reorders the same SQL."""
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute(JOIN4)
        pinned = [r[0] for r in cur.fetchall()]
        cur.execute("SET hive.cbo.rule.exclusion.regex=")
        cur.execute(JOIN4)
        free = [r[0] for r in cur.fetchall()]
    finally:
        conn.close()
    joins, scans = join_shape(pinned)
    assert scans == ["l", "o", "c", "n"]
    assert len(joins) == 3 and joins == list(range(joins[0], joins[0] + 3))  # left-deep
    assert join_shape(free) != (joins, scans)


def test_bad_sql_is_a_clear_error_and_checkpoints_survive(
    plain: QueryRunner, connect: Callable[[], Any], queries: dict[int, str]
) -> None:
    plain.run(queries[3], query_id="before-errors")  # checkpoints exist
    before = {r.table for r in plain.registry.checkpoints("ck_plain")}
    assert before
    with pytest.raises(QueryError, match="ParseException"):
        plain.run("SELEC oops FROM nation")
    with pytest.raises(QueryError, match=r"(?i)table not found|no_such_table"):
        plain.run("SELECT COUNT(*) FROM no_such_table t JOIN nation n ON t.x = n.n_nationkey")
    failing = (
        "SELECT COUNT(*) FROM customer c JOIN orders o ON c.c_custkey = o.o_custkey "
        "WHERE assert_true(c.c_acctbal > 100000) IS NULL"
    )
    with pytest.raises(QueryError) as err:
        plain.run(failing, query_id="failing")
    assert err.value.stage_id is not None
    assert plain.registry.runs()[-1].state == "failed"
    after = {r.table for r in plain.registry.checkpoints("ck_plain")}
    assert after == before and after <= tables_of(connect, "ck_plain")
    assert canon(plain.run(queries[6]).rows) == canon(direct(connect, queries, 6))


def test_beeline_runs_against_hive(server: HiveOnTez, connect: Callable[[], Any]) -> None:
    """BeeLine from Hive's jars (module docstring of hive_engine) against the server."""
    url = f"{server.jdbc_url};auth=noSasl"
    sql = "SELECT n_name FROM tpch.nation WHERE n_nationkey < 3 ORDER BY n_name"
    cmd = beeline_command(url, "--silent=true", "--outputformat=csv2", "-e", sql)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [x for x in out.stdout.splitlines() if x.strip()]
    assert lines == ["n_name", "ALGERIA", "ARGENTINA", "BRAZIL"]
    bad = subprocess.run(beeline_command(url, "--silent=true", "-e", "SELEC 1"),
                         capture_output=True, text=True, timeout=180)  # fmt: skip
    assert bad.returncode != 0 and "ParseException" in bad.stdout + bad.stderr


def test_qoop_hive_engine_start_hive(tmp_path: Path) -> None:
    """``qoop-hive engine start --engine hive`` leaves a HiveServer2 running that qoop-hive
    (and anything speaking HiveServer2's protocol) reaches by the URL it prints; status and
    stop find it by its pid file."""
    import io

    from hive_hooks.cli import main

    def run(*argv: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), out=out, err=err)
        return code, out.getvalue() + err.getvalue()

    w = str(tmp_path / "engine")
    code, text = run("engine", "start", "--engine", "hive", "--workdir", w, "--silent")
    try:
        assert code == 0, text
        url = text.strip().splitlines()[-1]
        assert url.startswith("jdbc:hive2://127.0.0.1:") and url.endswith(";auth=noSasl")
        code, text = run("engine", "status", "--workdir", w)
        assert code == 0 and text.startswith("running:"), text
        code, text = run("-u", url, "--outputformat", "csv2", "-e", "SELECT version()")
        assert code == 0 and "4.0.1" in text, text
        code, text = run("beeline", "-u", url, "--outputformat=csv2", "-e", "SELECT 20 + 22")
        assert code == 0 and "42" in text.split(), text
    finally:
        code, text = run("engine", "stop", "--workdir", w)
    assert code == 0 and "stopped" in text, text
    assert run("engine", "status", "--workdir", w)[0] == 3
    code, text = run("beeline", "-u", url, "-e", "SELECT 1")  # the server is gone
    assert code != 0 and "Could not open" in text, text


def test_server_killed_mid_query_resumes_from_checkpoints(
    server: HiveOnTez,
    connect: Callable[[], Any],
    registry: CheckpointRegistry,
    queries: dict[int, str],
) -> None:
    """HiveServer2 is SIGKILLed while a stage's CTAS runs (after two stages finished) and
    started again on the same work dir: the run reconnects, finishes from the checkpoints made
    before the kill without recomputing a finished stage, and equals the direct SQL. Last: it
    kills the module's server."""
    expected = direct(connect, queries, 5)
    crash: dict[str, Any] = {}
    started = threading.Event()

    def kill_and_restart() -> None:
        started.wait(60)
        time.sleep(0.3)  # the stage's CTAS is compiling or running on the server
        crash["done_before"] = {e.stage_id for e in events.of("done", "kill-q5") if e.table}
        crash["in_use_before"] = metastore_in_use(server.work_dir)
        server.kill()
        crash["in_use_after"] = metastore_in_use(server.work_dir)
        server.start()

    def hook(e: StageEvent) -> None:
        done = [x for x in events.all if x.kind == "done" and x.table]
        if e.kind == "start" and len(done) >= 2 and "thread" not in crash:
            crash["thread"] = threading.Thread(target=kill_and_restart, daemon=True)
            crash["thread"].start()
            started.set()

    events = Events(hook)
    runner = hive_runner(connect, registry, "ck_kill", on_event=events,
                         reconnect_timeout_s=180)  # fmt: skip
    with runner:
        res = runner.run(queries[5], query_id="kill-q5")
    crash["thread"].join(timeout=180)
    assert server.running
    assert crash["in_use_before"] and not crash["in_use_after"]
    assert canon(res.rows) == canon(expected)
    assert res.reconnects >= 1
    done_at = assert_no_recompute(registry.stage_log("kill-q5"))
    assert len(crash["done_before"]) >= 2 and crash["done_before"] <= set(done_at)
    assert {r.table for r in registry.checkpoints("ck_kill")} <= tables_of(connect, "ck_kill")
    again = Events()
    with hive_runner(connect, registry, "ck_kill", on_event=again) as r2:
        res2 = r2.run(queries[5], query_id="kill-q5-again")
    assert canon(res2.rows) == canon(expected)
    assert [e.stage_id for e in again.of("start")] == [res2.stages[-1].stage_id]  # final only
