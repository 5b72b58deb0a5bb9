"""Stage costs calibrated from the real engine's own history (QOOP §2.5, seed 000 L610).

The Spark Thrift Server runs with its UI, so its REST API reports every stage it ran. A query
(TPC-H Q5 and Q10, pinned to one physical plan) runs once; its stages are fetched from the
engine, every statement of the run is found among them, and they are calibrated
(:func:`hive_hooks.spark_history.calibrate_from_runs`); the planner's estimate of a second run
of the same plan, from scratch in another checkpoint database, then changes from the
bytes-linear model's, and every answer equals the direct SQL's. How close the calibrated
estimate comes is printed, not asserted: the engine's time for one query moved from 2 to 9 s
between runs here at sf 0.1, and the model was sometimes as close (a timed assertion failed
in a clean-clone run); ``benchmarks/hive_swing.py --calibrated`` measures it at sf 1. The
plumbing needs no more than sf 0.01.
"""

from __future__ import annotations

import pytest
from support import free_port
from support.hive import canon, connector, run_direct

from hive_hooks.engine import LocalHiveServer
from hive_hooks.executor import QueryRunner
from hive_hooks.registry import CheckpointRegistry
from hive_hooks.share import StaticShare
from hive_hooks.spark_history import SparkHistory, calibrate_from_runs, measured_statements, ui_conf
from hive_hooks.tpcload import load_tpc
from qoop_planner.cost import CostConfig
from qoop_planner.model import Share
from qoop_planner.physical import PROFILES
from qoop_planner.tpc import load_tpc as tpc_queries

pytestmark = pytest.mark.slow

SCALE = 0.01
SHARE = Share(vcores=2, memory_mb=4096.0)  # local[2], no quota: a vcore is one core
BROADCAST = next(p for p in PROFILES if p.name == "broadcast")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    ui = free_port()
    srv = LocalHiveServer(work_dir=tmp_path_factory.mktemp("hs2"), extra_conf=ui_conf(ui))
    srv.start()
    srv.ui_url = f"http://127.0.0.1:{ui}"  # type: ignore[attr-defined]
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def connect(engine: LocalHiveServer, tmp_path_factory: pytest.TempPathFactory):
    load_tpc(connector(engine.port, "default"), "tpch", SCALE, "tpch",
             data_dir=tmp_path_factory.mktemp("data"))  # fmt: skip
    return connector(engine.port)


def _runner(connect, db: str, **kw) -> QueryRunner:
    return QueryRunner(
        connect, registry=CheckpointRegistry(":memory:"), checkpoint_db=db,
        share=StaticShare(SHARE), physical=(BROADCAST,), k=1, **kw,
    )  # fmt: skip


@pytest.mark.parametrize("qnum", [5, 10])
def test_the_engines_stages_calibrate_the_plans_estimate(engine, connect, qnum):
    tpc = tpc_queries("tpch", SCALE)
    sql = tpc.queries[qnum]
    stats = {f"tpch.{t}": s for t, s in tpc.stats.items()}
    expected = canon(run_direct(connect, sql))

    first = _runner(connect, f"cal_a{qnum}", stats=stats)
    try:
        r1 = first.run(sql)
    finally:
        first.close()
    assert canon(r1.rows) == expected
    stages = SparkHistory(engine.ui_url).stages()
    done = [t for t in r1.stages if t.outcome == "done"]
    measured = measured_statements(r1, stages)
    # every statement the run executed was found in the engine's history, with its stages
    assert len(measured) == len(done) >= 2
    assert all(m.stages for m in measured)
    history = calibrate_from_runs([r1], stages, base_memory_mb=CostConfig().base_memory_mb)

    raw = _runner(connect, f"cal_b{qnum}", stats=stats)
    cal = _runner(connect, f"cal_b{qnum}", stats=stats, history=history)
    try:
        (est_raw,) = raw.explain(sql, share=SHARE)
        (est_cal,) = cal.explain(sql, share=SHARE)
        assert est_raw.plan.physical == est_cal.plan.physical == "broadcast"
        assert est_cal.estimate_s != est_raw.estimate_s
        r2 = cal.run(sql)
    finally:
        raw.close()
        cal.close()
    assert canon(r2.rows) == expected
    assert not r2.reused  # from scratch: every stage ran again
    t2 = r2.elapsed_s - r2.planning_s
    t1 = r1.elapsed_s - r1.planning_s
    print(f"Q{qnum}: second run {t2:.2f} s (calibration run {t1:.2f} s), estimates: calibrated "
          f"{est_cal.estimate_s:.2f} s, model {est_raw.estimate_s:.2f} s")  # fmt: skip
