"""Helpers shared by the tests that run the replanner on a real HiveServer2 (the Spark Thrift
Server in test_hive_exec.py, Hive on Tez in test_hive_real.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pyhive import hive

from hive_hooks.demo import canonical_rows
from hive_hooks.engine import HOST
from hive_hooks.executor import QueryResult, QueryRunner, StageEvent
from hive_hooks.registry import show_tables
from qoop_planner.model import Plan, Progress, Share
from qoop_planner.replan import rewrite


def connector(port: int, database: str = "tpch") -> Callable[[], Any]:
    return lambda: hive.connect(host=HOST, port=port, auth="NOSASL", database=database)


def run_direct(connect: Callable[[], Any], sql: str) -> list[tuple[Any, ...]]:
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


canon = canonical_rows  # one comparison for tests, demo and benchmarks


def tables_of(connect: Callable[[], Any], db: str) -> set[str]:
    conn = connect()
    try:
        return set(show_tables(conn.cursor(), db))
    finally:
        conn.close()


class Events:
    """Collects StageEvents; optional hook called with each."""

    def __init__(self, hook: Callable[[StageEvent], None] | None = None) -> None:
        self.all: list[StageEvent] = []
        self.hook = hook

    def __call__(self, e: StageEvent) -> None:
        self.all.append(e)
        if self.hook is not None:
            self.hook(e)

    def of(self, kind: str, query_id: str | None = None) -> list[StageEvent]:
        return [e for e in self.all if e.kind == kind and query_id in (None, e.query_id)]


def rotate(plans: Sequence[Plan], progress: Progress, share: Share, current: str | None) -> Plan:
    """Forced switches: every share change moves to the next cached plan (cyclically)."""
    if current is None:
        return plans[0]
    ids = [p.plan_id for p in plans]
    return plans[(ids.index(current) + 1) % len(plans)]


def jump(plans: Sequence[Plan], progress: Progress, share: Share, current: str | None) -> Plan:
    """Away from p0 to a plan that needs none of the running stages; back to p0 after that."""
    if current is None or current != plans[0].plan_id:
        return plans[0]
    for p in plans[1:]:
        rem = rewrite(p, progress)
        needed = {s.signature for s in rem.stages if s.kind != "checkpoint"}
        if not needed & set(progress.running):
            return p
    return plans[1]


def assert_no_recompute(log: Sequence[Any]) -> dict[str, int]:
    """No stage of a run's stage log starts again after it finished; stage id -> its ``done``."""
    done_at = {e.stage_id: i for i, e in enumerate(log) if e.kind == "done" and e.table}
    for i, e in enumerate(log):
        if e.kind == "start" and e.stage_id in done_at:
            assert i < done_at[e.stage_id], f"{e.stage_id} recomputed after it finished"
    return done_at


def assert_each_stage_ran_once(res: QueryResult, runner: QueryRunner) -> set[str]:
    """Every stage of the run (``res.events``) started once and ended done, or cancelled by
    one of the run's plan switches; the done ones are checkpoints registered in the runner's
    registry with their measured row counts. Returns the cancelled stage ids."""
    qid = res.query_id
    starts = Counter(e.stage_id for e in res.events if e.kind == "start")
    assert set(starts.values()) <= {1}, f"{qid}: a stage started twice: {starts}"
    done = {e.stage_id for e in res.events if e.kind == "done"}
    cancelled = {e.stage_id for e in res.events if e.kind == "cancelled"}
    assert not done & cancelled and done | cancelled == set(starts), (qid, starts, done, cancelled)
    assert cancelled <= {sid for sw in res.switches for sid in sw.cancelled}
    ran = [s for s in res.stages if s.outcome == "done"]
    assert sorted(s.stage_id for s in ran) == sorted(done)
    recs = {r.qualified: r for r in runner.registry.checkpoints(runner.checkpoint_db)}
    for st in ran:
        if st.table is not None:  # registered, with its measured row count
            assert st.rows is not None and recs[st.table].rows == st.rows, (qid, st)
    return cancelled
