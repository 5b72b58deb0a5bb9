"""The diverse plan cache and the physical alternatives of join stages (QOOP §2.2, §2.4).

Physical costs (:mod:`qoop_planner.physical`): broadcast joins do less work but need the whole
build side's hash table per task; shuffle joins scale their memory with the partitions; a
partition that does not fit becomes a sort-merge join that spills. The diverse cache
(:mod:`qoop_planner.diverse`) keeps plans best at some share of a grid plus Pseudocode 2's
>2x work rule, and on the Example 2.1 plans (2x2 vs 1x100) keeps both.
"""

from __future__ import annotations

import math

import pytest

from qoop_planner.cost import MB, CostConfig, TableStats
from qoop_planner.diverse import (
    best_at,
    demand_floor,
    diverse_cache,
    retain_by_work,
    share_grid,
    switch_gain,
)
from qoop_planner.model import Plan, Progress, Relation, Resources, Stage, StageCost, StageSignature
from qoop_planner.online import Qep, retained_indices
from qoop_planner.packing import estimate
from qoop_planner.physical import (
    BROADCAST,
    MERGE,
    PROFILES,
    SHUFFLE_HASH,
    PhysicalProfile,
    join_method,
    join_stage_cost,
    partitions_for,
)
from qoop_planner.sqlplan import enumerate_plan_space, enumerate_plans

CFG = CostConfig()


def one_stage_plan(pid: str, tasks: int, task_s: float, vcores: float, memory_mb: float) -> Plan:
    sig = StageSignature(frozenset({Relation("a", "t")}))
    st = Stage("s", "scan", (), sig, (), "", StageCost(tasks, task_s, Resources(vcores, memory_mb)))
    return Plan(pid, "q", (st,), "s", tasks * task_s * vcores)


# ---- physical ------------------------------------------------------------------------------


def test_broadcast_trades_memory_for_work():
    probe, build, out = 16384 * MB, 256 * MB, 1024 * MB
    bc = join_stage_cost(BROADCAST, probe, build, 1e7, out, 64, CFG)
    sh = join_stage_cost(SHUFFLE_HASH, probe, build, 1e7, out, 65, CFG, input_tasks=65)
    assert bc.work < sh.work
    # the whole build side's table per task: base + 2 x 256 MB; a shuffle task holds 1/65
    assert bc.demand.memory_mb == CFG.base_memory_mb + 2 * 256
    assert sh.demand.memory_mb < bc.demand.memory_mb
    plans = [
        Plan("bc", "q", (_as_stage(bc),), "s", bc.work),
        Plan("sh", "q", (_as_stage(sh),), "s", sh.work),
    ]
    # with 3 GB for 2 vcores the broadcast join runs one task at a time, the shuffle join two
    small = Resources(2, 3000)
    assert best_at(plans, small).plan_id == "sh"
    assert best_at(plans, Resources(64, 64 * 4096)).plan_id == "bc"
    # with less memory than one broadcast task needs, only the shuffle join can run
    assert math.isinf(estimate(plans[0], Progress(), Resources(2, 1400)).finish_s)
    large = join_stage_cost(BROADCAST, probe, 2048 * MB, 1e7, out, 64, CFG)
    assert large.work > sh.work  # a large build side replicated into every task costs more


def _as_stage(cost: StageCost) -> Stage:
    return Stage("s", "join", (), StageSignature(frozenset({Relation("a", "t")})), (), "", cost)


def test_shuffle_memory_shrinks_with_partitions_and_spills_when_too_big():
    build = 64_000 * MB
    assert join_method(build, 4, True, CFG) == MERGE  # neither broadcast nor 16 GB partitions
    assert join_method(build, 64, False, CFG) == SHUFFLE_HASH
    few = join_stage_cost(SHUFFLE_HASH, build, build, 1e6, 0, 8, CFG)
    many = join_stage_cost(SHUFFLE_HASH, build, build, 1e6, 0, 64, CFG)
    assert many.demand.memory_mb < few.demand.memory_mb
    merge = join_stage_cost(MERGE, build, build, 1e6, 0, 8, CFG)
    no_spill = join_stage_cost(MERGE, 100 * MB, 100 * MB, 1e6, 0, 8, CFG)
    assert merge.demand.memory_mb <= CFG.base_memory_mb + CFG.sort_buffer_mb
    assert merge.task_s > few.task_s  # the spill costs time
    assert no_spill.demand.memory_mb < CFG.base_memory_mb + CFG.sort_buffer_mb


def test_more_partitions_more_work_more_parallelism():
    b = 4096 * MB
    wide = join_stage_cost(SHUFFLE_HASH, b, b / 4, 1e6, b / 8, 64, CFG, input_tasks=20)
    narrow = join_stage_cost(SHUFFLE_HASH, b, b / 4, 1e6, b / 8, 8, CFG, input_tasks=20)
    assert wide.work > narrow.work and wide.tasks > narrow.tasks
    plans = [
        Plan("wide", "q", (_as_stage(wide),), "s", wide.work),
        Plan("narrow", "q", (_as_stage(narrow),), "s", narrow.work),
    ]
    lo, hi = Resources(8, 8 * 4096), Resources(64, 64 * 4096)
    assert best_at(plans, lo).plan_id == "narrow"
    assert best_at(plans, hi).plan_id == "wide"
    assert switch_gain(plans, lo, hi) > 2.0  # narrow's one long wave vs wide's short one
    assert switch_gain(plans, lo, lo) == 1.0


def test_partitions_and_validation():
    assert partitions_for(10 * 256 * MB, PhysicalProfile("p", False, 256 * MB)) == 10
    assert partitions_for(10 * 256 * MB, PhysicalProfile("p", False, 256 * MB, 4)) == 4
    with pytest.raises(ValueError):
        PhysicalProfile("p", False, 0)
    with pytest.raises(ValueError):
        PhysicalProfile("p", False, MB, -1)
    with pytest.raises(ValueError):
        join_stage_cost("nested_loop", 1, 1, 1, 1, 1, CFG)
    with pytest.raises(ValueError):
        join_stage_cost(SHUFFLE_HASH, 1, 1, 1, 1, 0, CFG)
    assert len({p.name for p in PROFILES}) == len(PROFILES)


# ---- the diverse cache ---------------------------------------------------------------------


def test_retain_by_work_is_pseudocode_2():
    cases = [[(1, 100), (2, 60), (4, 40)], [(1, 100), (2, 4)], [(1, 8), (2, 8), (4, 2), (8, 1)]]
    for case in cases:
        plans = [one_stage_plan(f"p{i}", w, 1.0, a, 0) for i, (a, w) in enumerate(case)]
        # one_stage_plan's work is tasks x task_s x vcores = w x a: give w / a tasks instead
        plans = [
            one_stage_plan(f"p{i}", max(1, w // a), 1.0, a, 0) for i, (a, w) in enumerate(case)
        ]
        qeps = [Qep(a, max(1, w // a)) for a, w in case]
        expect = [f"p{i}" for i in retained_indices(qeps)]
        assert [p.plan_id for p in retain_by_work(plans, 4096.0)] == expect
    with pytest.raises(ValueError):
        retain_by_work([], 4096.0, ratio=1.0)


def test_example_2_1_plans_are_both_kept():
    # 2x2 (two tasks of 2 units) vs 1x100: the first is best whenever it fits, the second is
    # the only plan at a share of 1 (seed 000 L551)
    p22 = one_stage_plan("2x2", 2, 1.0, 2, 0)
    p1100 = one_stage_plan("1x100", 100, 1.0, 1, 0)
    near = one_stage_plan("1x99", 99, 1.0, 1, 0)  # a near-duplicate of 1x100
    grid = share_grid([1, 2, 4], 4096.0)
    kept = diverse_cache([p22, p1100, near], grid)
    assert {p.plan_id for p in kept} == {"2x2", "1x99"}
    assert demand_floor(p22, 4096.0) == 2
    assert best_at([p22, p1100], Resources(1, 4096)).plan_id == "1x100"
    assert math.isinf(switch_gain([p22, p1100], Resources(2, 8192), Resources(1, 4096)))


def test_diverse_cache_caps_and_orders():
    plans = [one_stage_plan(f"p{t}", t, 64.0 / t, 1, 0) for t in (1, 2, 4, 8, 16, 32)]
    # p_t: t tasks of 64/t s: equal work, wider is better at every share above 1
    grid = share_grid([1, 2, 4, 8, 16, 32], 4096.0)
    kept = diverse_cache(plans, grid, max_plans=3)
    assert len(kept) == 3
    assert [p.total_cost for p in kept] == sorted(p.total_cost for p in kept)
    with pytest.raises(ValueError):
        diverse_cache(plans, grid, max_plans=0)
    with pytest.raises(ValueError):
        diverse_cache(plans, [])
    assert diverse_cache([], grid) == []


# ---- the plan space of real queries --------------------------------------------------------

SCHEMA = {
    "fact": {"k1": "INT", "k2": "INT", "v": "DOUBLE", "pad": "VARCHAR(200)"},
    "fact2": {"k1": "INT", "w": "DOUBLE", "pad": "VARCHAR(200)"},
    "d1": {"k1": "INT", "name": "VARCHAR(40)"},
    "d2": {"k2": "INT", "name": "VARCHAR(40)"},
}
STATS = {
    "fact": TableStats(rows=2e9, ndv={"k1": 1e6, "k2": 1e5}),
    "fact2": TableStats(rows=5e8, ndv={"k1": 1e6}),
    "d1": TableStats(rows=1e6, ndv={"k1": 1e6}),
    "d2": TableStats(rows=1e5, ndv={"k2": 1e5}),
}
SQL = """
SELECT d1.name, d2.name, SUM(f.v), SUM(g.w)
FROM fact f JOIN fact2 g ON f.k1 = g.k1 JOIN d1 ON f.k1 = d1.k1 JOIN d2 ON f.k2 = d2.k2
WHERE d2.name LIKE 'a%'
GROUP BY d1.name, d2.name
"""


def test_plan_space_differs_where_the_top_k_does_not():
    grid = share_grid([2, 8, 32, 128, 512], 4096.0)
    space = enumerate_plan_space(SQL, SCHEMA, STATS, query_id="q", grid=grid)
    topk = enumerate_plans(SQL, SCHEMA, STATS, k=8, query_id="q")
    assert 2 <= len(space) <= 8
    assert len({p.physical for p in space}) >= 2  # physical profiles differ
    assert all(p.physical for p in space) and not any(p.physical for p in topk)
    assert [p.plan_id for p in space] == [f"q/p{i}" for i in range(len(space))]
    assert [p.total_cost for p in space] == sorted(p.total_cost for p in space)
    # every plan's joins carry a method and a partition count; results are unchanged
    for p in space:
        for st in p.stages:
            if st.kind == "join":
                assert st.method in (BROADCAST, SHUFFLE_HASH, MERGE) and st.partitions >= 1
                assert st.cost.tasks == st.partitions
    sigs = {frozenset(s.signature for s in p.stages if s.kind == "final") for p in space}
    assert len(sigs) == 1
    # the cache offers a switch the top-k does not: the plan best at 2 vcores loses at 512
    lo, hi = grid[0], grid[-1]
    assert switch_gain(space, lo, hi) > switch_gain(topk, lo, hi)
    assert switch_gain(space, lo, hi) > 1.15
    # each kept plan is best somewhere on the grid, or retained by the >2x rule
    winners = {best_at(space, s).plan_id for s in grid}
    retained = {p.plan_id for p in retain_by_work(space, 4096.0)}
    assert {p.plan_id for p in space} <= winners | retained


def test_plan_space_validates():
    with pytest.raises(ValueError):
        enumerate_plan_space(SQL, SCHEMA, STATS, trees=0)
    with pytest.raises(ValueError):
        enumerate_plan_space(SQL, SCHEMA, STATS, profiles=())
    # a query without joins has one plan
    one = enumerate_plan_space("SELECT COUNT(*) FROM d1", SCHEMA, STATS)
    assert len(one) == 1


def test_measured_form_applies_to_that_form_only():
    from qoop_planner.cost import History

    grid = share_grid([2, 8, 32, 128, 512], 4096.0)
    space = enumerate_plan_space(SQL, SCHEMA, STATS, query_id="q", grid=grid)
    joins = [s for p in space for s in p.stages if s.kind == "join"]
    j0 = joins[0]
    # the same join exists in other forms in the space (else the test shows nothing)
    assert any(s.signature == j0.signature and s.method != j0.method for s in joins)
    h = History()
    # measured much cheaper than estimated (so the diverse cache keeps a plan with it)
    h.record(j0.signature, 0.01, 1, j0.cost.rows_out, form=j0.form, memory_mb=2048.0)
    again = enumerate_plan_space(SQL, SCHEMA, STATS, query_id="q", grid=grid, history=h)
    measured = [
        s for p in again for s in p.stages if s.signature == j0.signature and s.cost.task_s == 0.01
    ]
    assert measured and all(s.cost.tasks == 1 for s in measured)
    assert all(s.cost.demand.memory_mb == 2048.0 for s in measured)
    # other forms of the same join keep their estimates
    for p in again:
        for s in p.stages:
            if s.signature == j0.signature and s.method != j0.method:
                assert s.cost.task_s != 0.01
