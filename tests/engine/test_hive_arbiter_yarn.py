"""QOOP's 1-over-n share from a real arbiter, enforced as YARN executors (QOOP §2.3, §2.5).

A real ``yarn-arbiter serve`` (:class:`yarn_bridge.served.ServedArbiter`) serves the session's
local YARN; the Spark Thrift Server runs its executors in YARN containers of the ``analytics``
queue (:mod:`hive_hooks.yarn_engine`). TPC-H Q5 registers with the arbiter through
:class:`~hive_hooks.share.ArbiterShare` and runs through the replanner with the engine's
control as its share enforcer. While it runs, another job registers with the arbiter (|J|
goes from 1 to 2: the query's share halves) and later leaves (the share recovers). The test
waits on what YARN itself reports for the engine's application (``runningContainers``,
``allocatedVCores``, ``allocatedMB``) to follow each share the arbiter pushed, and the answer
must equal the direct SQL's.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import support.yarn_executors as yarn_executors
from support.hive import canon, run_direct

from hive_hooks.executor import QueryRunner, StageEvent
from hive_hooks.registry import CheckpointRegistry
from hive_hooks.share import ArbiterShare
from hive_hooks.tpcload import load_tpc
from hive_hooks.yarn_engine import ExecutorSpec, YarnHiveServer, engine_target
from qoop_planner.tpc import load_tpc as tpc_queries
from yarn_bridge.served import ServedArbiter

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

# executors of 2 vcores: the local YARN's analytics share (8 vcores for one job) buys 4, half
# of it 2, so YARN's count moves with the share
SPEC = ExecutorSpec(cores=2, heap_mb=512, overhead_mb=512, max_total=4)


def wait_yarn(rm_url: str, app_id: str, executors: int) -> float:
    return yarn_executors.wait_yarn(rm_url, app_id, executors, SPEC)


@pytest.fixture(scope="module")
def arbiter(yarn_cluster, tmp_path_factory: pytest.TempPathFactory):
    arb = ServedArbiter(tmp_path_factory.mktemp("arb"), yarn_cluster.rm_url, poll_s=0.5)
    try:
        arb.wait_ready()
        yield arb
    finally:
        arb.stop()


@pytest.fixture(scope="module")
def engine(yarn_cluster, tmp_path_factory: pytest.TempPathFactory):
    srv = YarnHiveServer(work_dir=tmp_path_factory.mktemp("hs2-yarn"),
                         hadoop_conf_dir=yarn_cluster.conf_dir,
                         java_home=yarn_cluster.state.java_home, spec=SPEC)  # fmt: skip
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_share_pushed_by_the_arbiter_reaches_yarn(arbiter, engine, yarn_cluster, tmp_path):
    rm = yarn_cluster.rm_url
    app_id = engine.app_id
    load_tpc(lambda: engine.connect(database="default"), "tpch", 0.01, "tpch",
             data_dir=tmp_path / "data")  # fmt: skip

    def connect() -> Any:
        return engine.connect(database="tpch")

    sql = tpc_queries("tpch", 0.01).queries[5]
    expected = canon(run_direct(connect, sql))
    addr = f"127.0.0.1:{arbiter.port}"
    share = ArbiterShare(addr, queue_name="analytics", user="alice")
    rival = ArbiterShare(addr, queue_name="analytics", user="bob")
    seen: dict[str, Any] = {"phase": 0, "shares": [], "yarn": [], "up_to": None}

    def settle(epoch: int, timeout: float = 30.0) -> Any:
        """The query's share after the arbiter pushed a change past ``epoch``."""
        snap = share.wait_change(epoch, timeout)
        assert snap.epoch > epoch, "the arbiter pushed no share change"
        return snap

    def on_event(ev: StageEvent) -> None:
        # 1st stage done: another job registers (|J| = 2); at the next start the runner has
        # pushed the halved share to the engine: YARN must follow. Then it leaves (|J| = 1).
        if ev.kind == "done" and seen["phase"] == 0:
            full = share.current()
            rival.begin("rival")
            half = settle(full.epoch)
            assert half.active_jobs == full.active_jobs + 1  # |J| counts the other job
            seen["shares"] += [full, half]
            seen["job"] = share.job_id
            seen["phase"] = 1
        elif ev.kind == "start" and seen["phase"] == 1:
            n = engine_target({"q": seen["shares"][1].share}, SPEC)
            seen["yarn"].append((n, wait_yarn(rm, app_id, n)))
            before = share.current()
            rival.end("rival")
            seen["shares"].append(settle(before.epoch))
            seen["phase"] = 2
        elif ev.kind == "start" and seen["phase"] == 2:
            n = engine_target({"q": seen["shares"][2].share}, SPEC)
            seen["yarn"].append((n, wait_yarn(rm, app_id, n)))
            seen["phase"] = 3

    registry = CheckpointRegistry(tmp_path / "registry.db")
    runner = QueryRunner(connect, registry=registry, checkpoint_db="ck_arb_yarn", share=share,
                         share_enforcer=engine.control, on_event=on_event,
                         materialize_scans=True)  # fmt: skip
    try:
        res = runner.run(sql, query_id="arb-yarn-q5")
    finally:
        runner.close()
        registry.close()
        with contextlib.suppress(Exception):
            rival.end("rival")
    assert canon(res.rows) == expected
    assert seen["phase"] == 3, f"the query ended before the share went down and up: {seen}"
    full, half, back = seen["shares"]
    n = full.active_jobs  # 1, unless another test left an analytics app running
    assert half.share.vcores == pytest.approx(full.share.vcores * n / (n + 1))  # R/|J|
    assert back.active_jobs == n
    assert back.share.vcores == full.share.vcores
    (n_half, _), (n_back, _) = seen["yarn"]
    assert n_half < n_back == engine_target({"q": full.share}, SPEC)
    assert res.share_changes >= 2
    # the engine's own record of the targets it was given for this query: begin, down, up
    st = engine.control.status()
    pushed = [c["target"] for c in st["changes"] if c["what"].endswith(seen["job"])]
    assert pushed[:3] == [n_back, n_half, n_back], pushed
    print(f"\nshares {[s.share.vcores for s in seen['shares']]} vcores; YARN executors "
          f"{seen['yarn']}; engine targets {pushed}")  # fmt: skip
