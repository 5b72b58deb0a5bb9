"""Stage costs calibrated from the engine's history of prior runs (QOOP §2.5, seed 000 L610).

The pure part (:mod:`qoop_planner.calibrate`): Spark's stage records parsed, a statement's
engine stages folded into the planner's tasks x seconds so that the estimate at a large share
is the measured wall time and at a small one the work over the share; keys by signature and
form, so a stage identical across plans gets one calibrated cost everywhere; the model's rates
scaled for the stages nobody measured. The shell's mapping from a run to its statements
(:func:`hive_hooks.spark_history.measured_statements`) and its REST client over a real socket.
"""

from __future__ import annotations

import http.server
import json
import math
import threading
from collections.abc import Iterator

import pytest

from hive_hooks.executor.results import QueryResult, StageTiming
from hive_hooks.spark_history import (
    SparkHistory,
    SparkHistoryError,
    calibrate_from_runs,
    calibration,
    measured_statements,
    ui_conf,
)
from qoop_planner.calibrate import (
    EngineStage,
    MeasuredStatement,
    calibrate_stage,
    calibrated_config,
    calibrated_history,
    lookup_form,
    statement_stages,
)
from qoop_planner.cost import CostConfig, History, StageMeasurement, TableStats
from qoop_planner.model import Progress, Share
from qoop_planner.packing import estimate
from qoop_planner.sqlplan import enumerate_plan_space

SCHEMA = {
    "fact": {"k1": "INT", "k2": "INT", "v": "DOUBLE", "pad": "VARCHAR(200)"},
    "d1": {"k1": "INT", "name": "VARCHAR(40)"},
    "d2": {"k2": "INT", "name": "VARCHAR(40)"},
}
STATS = {
    "fact": TableStats(rows=2e8, ndv={"k1": 1e6, "k2": 1e5}),
    "d1": TableStats(rows=1e6, ndv={"k1": 1e6}),
    "d2": TableStats(rows=1e5, ndv={"k2": 1e5}),
}
SQL = """
SELECT d1.name, d2.name, SUM(f.v)
FROM fact f JOIN d1 ON f.k1 = d1.k1 JOIN d2 ON f.k2 = d2.k2
WHERE d2.name LIKE 'a%'
GROUP BY d1.name, d2.name
"""


def spark_stage(sid: int, desc: str, tasks: int, run_ms: int, t0: str, t1: str, **kw) -> dict:
    return {
        "stageId": sid,
        "attemptId": 0,
        "status": kw.get("status", "COMPLETE"),
        "description": desc,
        "numTasks": tasks,
        "executorRunTime": run_ms,
        "executorCpuTime": run_ms * 1_000_000,
        "submissionTime": f"2026-11-27T18:00:{t0}GMT",
        "firstTaskLaunchedTime": f"2026-11-27T18:00:{t0}GMT",
        "completionTime": f"2026-11-27T18:00:{t1}GMT",
        "peakExecutionMemory": kw.get("peak", 0),
    }


def wave_estimate(m: StageMeasurement, vcores: int) -> float:
    return math.ceil(m.tasks / vcores) * m.task_s


# ---- parsing ---------------------------------------------------------------------------------


def test_spark_stage_record_is_parsed_and_bad_records_are_rejected():
    s = EngineStage.from_spark(spark_stage(7, "x", 4, 2500, "01.000", "03.500", peak=4 << 20))
    assert (s.stage_id, s.tasks, s.run_s, s.peak_memory_mb) == (7, 4, 2.5, 4.0)
    assert s.end - s.start == pytest.approx(2.5)
    with pytest.raises(ValueError, match="not a Spark stage record"):
        EngineStage.from_spark({"status": "COMPLETE"})
    with pytest.raises(ValueError, match="not a Spark timestamp"):
        EngineStage.from_spark({**spark_stage(1, "x", 1, 1, "01.000", "02.000"),
                                "completionTime": "yesterday"})  # fmt: skip
    with pytest.raises(ValueError, match="before it starts"):
        EngineStage(1, 0, "COMPLETE", "x", 1, 1.0, 1.0, 5.0, 4.0)
    with pytest.raises(ValueError, match="run_s"):
        EngineStage(1, 0, "COMPLETE", "x", 1, float("nan"), 1.0, 0.0, 1.0)


def test_statement_stages_match_whole_names_of_completed_stages():
    recs = [
        EngineStage(1, 0, "COMPLETE", "CREATE TABLE c.t USING parquet AS SELECT", 1, 1, 1, 0, 1),
        EngineStage(2, 0, "COMPLETE", "CREATE TABLE c.t_r1 USING parquet AS SELECT", 1, 1, 1, 0, 1),
        EngineStage(3, 0, "SKIPPED", "CREATE TABLE c.t USING parquet AS SELECT", 1, 1, 1, 0, 1),
    ]
    assert [s.stage_id for s in statement_stages(recs, "create table c.t")] == [1]
    with pytest.raises(ValueError):
        statement_stages(recs, "  ")


# ---- one statement -------------------------------------------------------------------------


@pytest.mark.parametrize("cores_per_vcore", [1.0, 0.2])
def test_calibrated_stage_is_the_wall_time_at_a_large_share_and_the_work_at_a_small_one(
    cores_per_vcore: float,
):
    # a scan stage of 8 tasks (6 s of executor time in 3 s: parallelism 2) and a 1-task stage
    # (1 s), inside a 5 s statement: 1 s outside the engine stages
    recs = [
        EngineStage.from_spark(spark_stage(1, "q", 8, 6000, "10.000", "13.000")),
        EngineStage.from_spark(spark_stage(2, "q", 1, 1000, "13.000", "14.000")),
    ]
    m = calibrate_stage(recs, 5.0, 42.0, cores_per_vcore=cores_per_vcore, form="join:x:4")
    assert m.rows_out == 42.0 and m.form == "join:x:4"
    work = (6.0 + 1.0 + 1.0) / cores_per_vcore  # vcore-seconds
    assert m.tasks * m.task_s == pytest.approx(work)
    # enough vcores for the parallelism the engine reached: the measured wall time (tasks are
    # whole vcores: off by the rounding of 1.6 cores to whole vcores, 25 % at 1 core a vcore)
    big = math.ceil(2 / cores_per_vcore) + 1
    assert wave_estimate(m, big) == pytest.approx(5.0, rel=0.25 if cores_per_vcore == 1 else 0.02)
    # one vcore: everything runs on that one vcore's CPU
    assert wave_estimate(m, 1) == pytest.approx(work)


def test_calibrated_stage_without_engine_stages_is_serial_and_keeps_its_wall_time():
    m = calibrate_stage([], 0.8, 1.0, cores_per_vcore=0.5)
    # 0.8 s on the driver at 0.5 cores a vcore: 1.6 vcore-seconds, 0.8 s at 2 vcores (1 core)
    assert (m.tasks, m.task_s, m.memory_mb) == (2, 0.8, None)
    with pytest.raises(ValueError):
        calibrate_stage([], -1.0, 1.0)
    with pytest.raises(ValueError):
        calibrate_stage([], 1.0, 1.0, cores_per_vcore=0.0)


def test_peak_memory_per_task_is_the_largest_stage_average_on_top_of_the_base():
    recs = [
        EngineStage(1, 0, "COMPLETE", "q", 4, 4.0, 4.0, 0.0, 2.0, peak_memory_mb=400.0),
        EngineStage(2, 0, "COMPLETE", "q", 1, 1.0, 1.0, 2.0, 3.0, peak_memory_mb=300.0),
    ]
    assert calibrate_stage(recs, 3.0, 1.0, base_memory_mb=1024).memory_mb == 1024 + 300


# ---- a history for the planner ---------------------------------------------------------------


def test_calibrated_history_averages_runs_and_keys_by_form():
    a = (EngineStage(1, 0, "COMPLETE", "q", 2, 2.0, 2.0, 0.0, 1.0),)
    b = (EngineStage(2, 0, "COMPLETE", "q", 2, 4.0, 4.0, 0.0, 2.0),)
    h = calibrated_history(
        [
            MeasuredStatement("d", "join:broadcast:1", a, 1.0, 10.0),
            MeasuredStatement("d", "join:broadcast:1", b, 2.0, 20.0),
            MeasuredStatement("f", "", a, 1.0, 3.0),
        ],
        base={"old": StageMeasurement(1.0, 1, 1.0)},
    )
    assert set(h) == {"d@join:broadcast:1", "f", "old"}
    m = History.lookup(h, "d", "join:broadcast:1")
    assert m is not None and m.tasks * m.task_s == pytest.approx(3.0)  # mean of 2 and 4
    assert m.rows_out == 15.0
    assert History.lookup(h, "d", "join:shuffle_hash:8") is None  # another form: not measured
    with pytest.raises(ValueError):
        calibrated_history([MeasuredStatement("", "", a, 1.0, 1.0)])


def test_a_calibrated_stage_has_one_cost_in_every_plan_and_moves_the_estimates():
    space = enumerate_plan_space(SQL, SCHEMA, STATS, query_id="q")
    assert len(space) >= 2
    # the final stage (the aggregate over the joins) is the same stage in every plan
    finals = {p.stage(p.root).signature for p in space}
    assert len(finals) == 1
    (sig,) = finals
    recs = (EngineStage(1, 0, "COMPLETE", "q", 3, 30.0, 30.0, 0.0, 15.0),)
    h = calibrated_history([MeasuredStatement(sig.digest, "", recs, 15.0, 5.0)])
    again = enumerate_plan_space(SQL, SCHEMA, STATS, query_id="q", history=h)
    costs = {p.stage(p.root).cost for p in again}
    assert len(costs) == 1  # one calibrated cost in every plan
    (cost,) = costs
    assert cost.tasks * cost.task_s == pytest.approx(30.0) and cost.rows_out == 5.0
    assert all(p.stage(p.root).cost != cost for p in space)  # the model's was another
    # every plan is estimated from the measurement: at 1 vcore the final stage alone is 30 s
    before = {p.plan_id: p for p in space}
    one = Share(vcores=1, memory_mb=4096.0)
    moved = [
        estimate(p, Progress(), one).finish_s
        - estimate(before[p.plan_id], Progress(), one).finish_s
        for p in again
        if p.plan_id in before and p.physical == before[p.plan_id].physical
    ]
    assert moved and all(d != 0 for d in moved)
    # checkpointed in one plan, it is credited in every other: no plan pays it again
    done = Progress(None, frozenset({sig}))
    for p in again:
        assert estimate(p, done, one).finish_s < estimate(p, Progress(), one).finish_s


def test_calibrated_config_scales_durations_of_unmeasured_stages():
    cfg = CostConfig()
    space = enumerate_plan_space(SQL, SCHEMA, STATS, query_id="q")
    st = next(s for s in space[0].stages if s.kind == "join")
    measured = StageMeasurement(st.cost.task_s * 3, st.cost.tasks, st.cost.rows_out)
    scaled = calibrated_config(cfg, [(st.cost, measured)])
    again = enumerate_plan_space(SQL, SCHEMA, STATS, query_id="q", config=scaled)
    w0 = sum(s.cost.work for s in space[0].stages)
    same = next(p for p in again if p.physical == space[0].physical)
    # every duration three times as long (task start-up overhead included)
    assert sum(s.cost.work for s in same.stages) == pytest.approx(3 * w0, rel=0.05)
    assert calibrated_config(cfg, []) is cfg


# ---- the shell: a run's statements, the REST client ----------------------------------------


def _result(plans, timings) -> QueryResult:
    return QueryResult("r", (), [], plans[0].plan_id, plans[0].plan_id, (), tuple(timings), (),
                       1.0, 0.0, 0, plans=tuple(plans))  # fmt: skip


def test_measured_statements_find_each_ctas_and_the_final_select():
    plan = enumerate_plan_space(SQL, SCHEMA, STATS, query_id="q")[0]
    ran = [s for s in plan.stages if s.kind == "join"]
    final = plan.stage(plan.root)
    timings = [
        StageTiming(plan.plan_id, s.stage_id, s.kind, "done", 2.0, 100 + i, f"ck.t{i}")
        for i, s in enumerate(ran)
    ]
    timings.append(StageTiming(plan.plan_id, final.stage_id, "final", "done", 1.5, 7))
    root_table = f"ck.t{ran.index(plan.stage(final.inputs[0]))}"
    recs = [
        EngineStage(i, 0, "COMPLETE", f"CREATE TABLE ck.t{i} USING parquet AS SELECT", 2,
                    2.0, 2.0, 0.0, 1.0)
        for i in range(len(ran))
    ] + [
        EngineStage(50, 0, "COMPLETE", f"SELECT 0 AS i, COUNT(*) AS n FROM {root_table}", 1,
                    1.0, 1.0, 0.0, 1.0),
        EngineStage(51, 0, "COMPLETE", f"SELECT a, SUM(b) FROM {root_table} GROUP BY a", 1,
                    0.5, 0.5, 0.0, 0.5),
    ]  # fmt: skip
    out = measured_statements(_result([plan], timings), recs)
    assert len(out) == len(ran) + 1
    by_digest = {m.digest: m for m in out}
    for i, s in enumerate(ran):
        m = by_digest[s.signature.digest]
        assert m.form == lookup_form(s) == s.form and [r.stage_id for r in m.stages] == [i]
        assert m.rows_out == 100 + i
    fm = by_digest[final.signature.digest]
    assert fm.form == "" and [r.stage_id for r in fm.stages] == [51]  # not the COUNT(*)
    h = calibrate_from_runs([_result([plan], timings)], recs)
    assert History.lookup(h, ran[0].signature.digest, ran[0].form) is not None
    assert History.lookup(h, final.signature.digest) is not None
    # with the model's config scaled by measured over estimated work of those stages
    h2, cfg = calibration([_result([plan], timings)], recs, CostConfig())
    assert set(h2) == set(h) and all(m.memory_mb == 1024.0 for m in h2.values())  # base
    est = sum(s.cost.work for s in [*ran, final])
    got = sum(m.tasks * m.task_s for m in h.values())
    assert cfg.task_overhead_s == pytest.approx(CostConfig().task_overhead_s * got / est)


@pytest.fixture
def rest() -> Iterator[tuple[str, list]]:
    stages = [spark_stage(1, "CREATE TABLE c.t AS SELECT 1", 2, 800, "01.000", "01.500")]
    seen: list = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = {
                "/api/v1/applications": [{"id": "local-1"}],
                "/api/v1/applications/local-1/stages?status=complete": stages,
            }.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode() if body is not None else b"nope")

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", seen
    finally:
        srv.shutdown()
        srv.server_close()


def test_rest_client_reads_the_stages_over_a_socket(rest):
    url, seen = rest
    h = SparkHistory(url)
    (s,) = h.stages()
    assert (s.stage_id, s.tasks, s.run_s) == (1, 2, 0.8)
    assert seen == ["/api/v1/applications", "/api/v1/applications/local-1/stages?status=complete"]
    with pytest.raises(SparkHistoryError, match="404"):
        h.executors()
    with pytest.raises(SparkHistoryError):
        SparkHistory("http://127.0.0.1:1", timeout=1).stages()
    assert ui_conf(4040)["spark.ui.port"] == "4040"
    with pytest.raises(ValueError):
        ui_conf(0)
