"""A query's share as real resources: the Spark Thrift Server's executors in YARN containers.

:mod:`hive_hooks.yarn_engine` on the session's local YARN (``yarn_cluster``): one engine for the
module (its start is the slow part). What YARN itself reports for the engine's app
(``runningContainers``, ``allocatedVCores``, ``allocatedMB`` of ``/ws/v1/cluster/apps/<id>``)
is compared with what the share buys; every wait is a poll with a deadline. The pure part
(share -> executors) is tested without a cluster.
"""

from __future__ import annotations

import contextlib
import doctest
import statistics
import time
from collections import Counter
from typing import Any

import pytest
import support.yarn_executors as executors_
from support.yarn_executors import app_info, rm_get

from hive_hooks import yarn_engine
from hive_hooks.executor import QueryRunner, StageEvent
from hive_hooks.registry import CheckpointRegistry
from hive_hooks.share import ManualShare, ShareEnforcer
from hive_hooks.yarn_engine import (
    ENGINE_TAG,
    POOL_KEY,
    ExecutorSpec,
    YarnHiveServer,
    engine_target,
    executors_for_share,
)
from qoop_planner.model import Share
from yarn_bridge.rm_events import QUERY_TAG_PREFIX

SPEC = ExecutorSpec(max_total=4)
LATENCY: dict[str, list[float]] = {"up": [], "down": []}


# ------------------------------------------------------------------------- pure part


def test_doctests() -> None:
    assert doctest.testmod(yarn_engine).failed == 0


def test_share_to_executors() -> None:
    spec = ExecutorSpec(cores=1, heap_mb=512, overhead_mb=512)
    assert executors_for_share(Share(3, 3072), spec) == 3
    assert executors_for_share(Share(3.999999999, 4096), spec) == 4  # float noise, not 3
    assert executors_for_share(Share(5, 2500), spec) == 2  # memory caps
    assert executors_for_share(Share(0.5, 100), spec) == 1  # at least one per query
    assert executors_for_share(Share(4, 8192), ExecutorSpec(cores=2)) == 2
    assert executors_for_share(Share(0, 0), ExecutorSpec(min_per_query=0)) == 0


def test_engine_target_sums_queries() -> None:
    spec = ExecutorSpec(max_total=6, idle=1)
    assert engine_target({}, spec) == 1
    # QOOP's 1-over-n: 8 vcores among 3 queries = 2.67 each -> 2 executors each
    third = Share(8 / 3, 16384 / 3)
    assert engine_target({"a": third, "b": third, "c": third}, spec) == 6
    assert engine_target({"a": Share(4, 8192), "b": Share(4, 8192)}, spec) == 6  # capped
    assert engine_target({"a": Share(0, 0)}, ExecutorSpec(idle=0)) == 1
    with pytest.raises(ValueError):
        ExecutorSpec(idle=5, max_total=4)


def test_control_is_a_share_enforcer() -> None:
    ctl = yarn_engine.EngineControl(1)
    assert isinstance(ctl, ShareEnforcer)
    assert ctl.session_settings("query-1") == {POOL_KEY: "query-1"}
    assert ctl.session_defaults() == {POOL_KEY: "default"}


# ------------------------------------------------------------------------- on YARN


def wait_yarn(rm_url: str, app_id: str, executors: int, timeout: float = 90.0) -> float:
    return executors_.wait_yarn(rm_url, app_id, executors, SPEC, timeout)


def wait_registered(engine: YarnHiveServer, n: int, timeout: float = 120.0) -> None:
    """Until Spark has ``n`` live executors registered (so a scale-down must kill some)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = [e for e in engine.control.status()["executors"] if not e["killed"]]
        if len(live) == n:
            return
        time.sleep(0.25)
    raise AssertionError(f"Spark did not register {n} executors in {timeout:.0f} s")


@pytest.fixture(scope="module")
def engine(yarn_cluster, tmp_path_factory: pytest.TempPathFactory):
    srv = YarnHiveServer(
        work_dir=tmp_path_factory.mktemp("hs2-yarn"),
        hadoop_conf_dir=yarn_cluster.conf_dir,
        java_home=yarn_cluster.state.java_home,
        spec=SPEC,
    )
    srv.start()
    print(f"\nengine on YARN ready in {srv.start_seconds:.1f} s")
    try:
        yield srv
    finally:
        app_id = None
        with contextlib.suppress(Exception):
            app_id = srv.app_id
        srv.stop()
        if app_id is not None:  # the driver stopped its SparkContext: the app ends cleanly
            deadline = time.monotonic() + 30
            while app_info(yarn_cluster.rm_url, app_id)["state"] not in (
                "FINISHED",
                "FAILED",
                "KILLED",
            ):
                assert time.monotonic() < deadline, "the engine's YARN app did not end"
                time.sleep(0.2)
        up, down = LATENCY["up"], LATENCY["down"]
        if up or down:
            print(
                f"\nshare change -> YARN executors: up p50 "
                f"{statistics.median(up) if up else float('nan'):.2f} s (n={len(up)}), down p50 "
                f"{statistics.median(down) if down else float('nan'):.2f} s (n={len(down)})"
            )


@pytest.mark.yarn
@pytest.mark.slow
def test_engine_runs_on_yarn(engine: YarnHiveServer, yarn_cluster) -> None:
    app_id = engine.app_id
    app = app_info(yarn_cluster.rm_url, app_id)
    assert app["queue"] in ("analytics", "root.analytics")
    assert app["state"] == "RUNNING"
    tags = set(app["applicationTags"].split(","))
    assert ENGINE_TAG in tags
    # the arbiter's watcher does not count the engine as a job of its own: its queries are
    assert any(t.startswith(QUERY_TAG_PREFIX) for t in tags)
    found = rm_get(yarn_cluster.rm_url, f"/apps?applicationTags={ENGINE_TAG}&states=RUNNING")
    assert app_id in [a["id"] for a in (found["apps"] or {}).get("app", [])]
    wait_yarn(yarn_cluster.rm_url, app_id, SPEC.idle)
    cur = engine.connect().cursor()
    cur.execute("SELECT COUNT(*) FROM range(100000)")
    assert cur.fetchall() == [(100000,)]


@pytest.mark.yarn
@pytest.mark.slow
def test_share_up_then_down(engine: YarnHiveServer, yarn_cluster) -> None:
    rm, app_id, ctl = yarn_cluster.rm_url, engine.app_id, engine.control
    wait_yarn(rm, app_id, SPEC.idle)
    ctl.apply_share("q-a", Share(3, 3072))
    LATENCY["up"].append(wait_yarn(rm, app_id, 3))
    wait_registered(engine, 3)  # running executors: going down has to kill two
    ctl.apply_share("q-a", Share(1, 2048))
    LATENCY["down"].append(wait_yarn(rm, app_id, 1))
    # two live queries: the engine holds the sum of their shares
    ctl.apply_share("q-b", Share(2, 4096))
    LATENCY["up"].append(wait_yarn(rm, app_id, 3))
    assert ctl.status()["target"] == 3
    wait_registered(engine, 3)
    ctl.release_share("q-b")
    LATENCY["down"].append(wait_yarn(rm, app_id, 1))
    ctl.release_share("q-a")
    assert ctl.status()["shares"] == {}
    wait_yarn(rm, app_id, SPEC.idle)


def canon(rows: list[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in rows)


@pytest.mark.yarn
@pytest.mark.slow
def test_query_follows_its_share_on_yarn(engine: YarnHiveServer, yarn_cluster, tmp_path) -> None:
    rm, app_id = yarn_cluster.rm_url, engine.app_id
    conn = engine.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS ys")
    for name, n, mod in (("fact", 20000, 50), ("dim", 50, 10), ("grp", 10, 10)):
        cur.execute(f"DROP TABLE IF EXISTS ys.{name}")
        cur.execute(
            f"CREATE TABLE ys.{name} USING parquet AS "
            f"SELECT id, id % {mod} AS k, CAST(id * 3 AS BIGINT) AS v FROM range({n})"
        )
    sql = (
        "SELECT g.id AS gid, COUNT(*) AS n, SUM(f.v) AS total FROM fact f "
        "JOIN dim d ON f.k = d.id JOIN grp g ON d.k = g.id GROUP BY g.id"
    )
    cur.execute(sql.replace("fact", "ys.fact").replace("dim", "ys.dim").replace("grp", "ys.grp"))
    expected = canon(cur.fetchall())
    assert len(expected) == 10
    conn.close()

    share = ManualShare(Share(1, 2048))
    phase = {"n": 0, "up_s": None}

    def on_event(ev: StageEvent) -> None:
        # first stage done -> share up; at the next stage start the runner has pushed it (it
        # checks the share before scheduling), so YARN must follow; then the share goes down
        if ev.kind == "done" and phase["n"] == 0:
            share.set(Share(3, 6144), "test: up")
            phase["n"] = 1
        elif ev.kind == "start" and phase["n"] == 1:
            phase["up_s"] = wait_yarn(rm, app_id, 3)
            share.set(Share(1, 2048), "test: down")
            phase["n"] = 2

    registry = CheckpointRegistry(tmp_path / "registry.db")
    runner = QueryRunner(
        lambda: engine.connect(database="ys"),
        registry=registry,
        checkpoint_db="ck_yarn",
        share=share,
        share_enforcer=engine.control,
        on_event=on_event,
        materialize_scans=True,
    )
    try:
        result = runner.run(sql, query_id="q-yarn-1")
    finally:
        runner.close()
        registry.close()
    assert canon(list(result.rows)) == expected
    assert phase["n"] == 2, "the query ended before its share went up and down"
    assert result.share_changes >= 2
    st = engine.control.status()
    assert "q-yarn-1" in [p["name"] for p in st["pools"]]  # the run's own FAIR pool
    pushed = [c["target"] for c in st["changes"] if c["what"].endswith("q-yarn-1")]
    assert pushed[:3] == [1, 3, 1] and st["shares"] == {}  # begin, up, down; released at end
    wait_yarn(rm, app_id, SPEC.idle)
