"""QOOP packing estimates and greedy re-planning (qoop_planner.packing, qoop_planner.replan).

Plans are built by hand here (not by the SQL enumerator). Relations a, b, c, d with join
predicates a-b, c-d, a-c, b-d, so the four-way join has the three plans of Fig 2.4.
"""

from __future__ import annotations

import math
import random

import pytest

from qoop_planner.model import (
    Plan,
    Progress,
    Relation,
    Resources,
    RunningStage,
    Stage,
    StageCost,
    StageSignature,
)
from qoop_planner.packing import advance, estimate, lower_bound, remaining_tasks
from qoop_planner.replan import CHECKPOINT_PREFIX, checkpoint_table, decide, rewrite

GB = 1024.0
REL = {x: Relation(x, x.upper()) for x in "abcdefgh"}
PRED = {"ab": "a.k = b.k", "cd": "c.k = d.k", "ac": "a.j = c.j", "bd": "b.j = d.j"}


def sig(rels: str, top: str = "") -> StageSignature:
    preds = frozenset(p for k, p in PRED.items() if set(k) <= set(rels))
    return StageSignature(frozenset(REL[x] for x in rels), preds, top)


def stage(
    sid: str,
    rels: str,
    inputs: tuple[str, ...] = (),
    tasks: int = 1,
    task_s: float = 1.0,
    vcores: float = 1.0,
    mem: float = 1 * GB,
    kind: str | None = None,
    top: str = "",
) -> Stage:
    kind = kind or ("scan" if not inputs else "join")
    sql = "SELECT * FROM " + (
        rels.upper() if not inputs else ", ".join(f"{{{{{i}}}}}" for i in inputs)
    )
    return Stage(
        sid,
        kind,
        inputs,
        sig(rels, top),
        (kind,),
        sql,
        StageCost(tasks, task_s, Resources(vcores, mem)),
    )


def plan(pid: str, *stages: Stage) -> Plan:
    return Plan(pid, "q", stages, stages[-1].stage_id, sum(s.cost.work for s in stages))


def share(vcores: float, mem_gb: float = 64) -> Resources:
    return Resources(vcores, mem_gb * GB)


def scans(n: int = 1, d: float = 1.0) -> list[Stage]:
    return [stage(x.upper(), x, tasks=n, task_s=d) for x in "abcd"]


def ckpt(*stage_sigs: str) -> frozenset[StageSignature]:
    return frozenset(sig(r) for r in stage_sigs)


# ---------------------------------------------------------------------------------------------
# Packing: exact finish times


def test_chain_of_two_stages_in_waves():
    # 2 stages of 4 tasks x 10 s, 1 vcore each, share 2 vcores: 2 waves each -> 40 s
    p = plan("p", stage("S", "a", tasks=4, task_s=10), stage("F", "a", ("S",), 4, 10, top="agg"))
    e = estimate(p, Progress(), share(2), schedule=True)
    assert e.finish_s == 40.0
    assert [(w.stage_id, w.start_s, w.tasks) for w in e.schedule if w.start_s == 0] == [
        ("S", 0.0, 2)
    ]
    assert lower_bound(p, Progress(), share(2)) == 40.0


def test_join_waits_for_both_inputs():
    # A: 2 x 10 s, B: 1 x 30 s, share 3 vcores: A's slots idle from t=10 but the join waits for B
    p = plan(
        "p",
        stage("A", "a", tasks=2, task_s=10),
        stage("B", "b", tasks=1, task_s=30),
        stage("AB", "ab", ("A", "B"), tasks=3, task_s=5),
    )
    e = estimate(p, Progress(), share(3), schedule=True)
    assert e.finish_s == 35.0
    starts = {w.stage_id: w.start_s for w in e.schedule}
    assert starts == {"A": 0.0, "B": 0.0, "AB": 30.0}


def test_two_inputs_share_the_bin_then_the_join():
    # 8 scan tasks of 10 s on 2 vcores (40 s), then the join's 1 task of 5 s
    p = plan(
        "p",
        stage("A", "a", tasks=4, task_s=10),
        stage("B", "b", tasks=4, task_s=10),
        stage("AB", "ab", ("A", "B"), tasks=1, task_s=5),
    )
    assert estimate(p, Progress(), share(2)).finish_s == 45.0


def test_memory_bound_packing():
    # 8 vcores but 4 GB: only two 2 GB tasks at once -> 4 tasks x 10 s take 2 waves
    p = plan("p", stage("S", "a", tasks=4, task_s=10, vcores=1, mem=2 * GB))
    assert estimate(p, Progress(), Resources(8, 4 * GB)).finish_s == 20.0
    assert estimate(p, Progress(), Resources(8, 8 * GB)).finish_s == 10.0


def test_tetris_packs_complementary_tasks_together():
    # X is CPU-heavy (2 vcores, 0.5 GB), Y memory-heavy (0.5 vcore, 2 GB), share (4, 4 GB).
    # Tetris places one X (tie on alignment -> smaller id), after which Y aligns better than a
    # second X: one X and one Y run together, then nothing else fits.
    p = plan(
        "p",
        stage("X", "a", tasks=2, task_s=10, vcores=2, mem=0.5 * GB),
        stage("Y", "b", tasks=2, task_s=10, vcores=0.5, mem=2 * GB),
        stage("Z", "ab", ("X", "Y"), tasks=1, task_s=1, vcores=1, mem=0.5 * GB),
    )
    e = estimate(p, Progress(), Resources(4, 4 * GB), schedule=True)
    assert e.finish_s == 21.0
    at0 = sorted((w.stage_id, w.tasks, w.repeat) for w in e.schedule if w.start_s == 0.0)
    assert at0 == [("X", 1, 1), ("Y", 1, 1)]
    # each keeps its slot for its second wave
    assert sorted((w.stage_id, w.start_s) for w in e.schedule if w.start_s == 10.0) == [
        ("X", 10.0),
        ("Y", 10.0),
    ]


def test_higher_alignment_goes_first_and_ties_go_to_the_longer_task():
    big = stage("P", "a", tasks=2, task_s=10, vcores=2, mem=2 * GB)  # alignment 1.0
    small = stage("S", "b", tasks=4, task_s=10, vcores=1, mem=1 * GB)  # alignment 0.5
    p = plan("p", small, big, stage("J", "ab", ("S", "P"), task_s=1))
    e = estimate(p, Progress(), Resources(4, 4 * GB), schedule=True)
    first = [(w.stage_id, w.tasks) for w in e.schedule if w.start_s == 0.0]
    assert first == [("P", 2)]
    assert e.finish_s == 21.0
    # equal demands: the 20 s task goes before the 10 s one despite its larger id
    q = plan(
        "q",
        stage("A", "a", task_s=10),
        stage("B", "b", task_s=20),
        stage("AB", "ab", ("A", "B"), task_s=1),
    )
    e = estimate(q, Progress(), share(1), schedule=True)
    assert [(w.stage_id, w.start_s) for w in e.schedule] == [("B", 0.0), ("A", 20.0), ("AB", 30.0)]
    assert e.finish_s == 31.0


def test_task_bigger_than_the_share_never_runs():
    p = plan("p", stage("S", "a", tasks=1, task_s=1, vcores=4))
    assert estimate(p, Progress(), share(2)).finish_s == math.inf
    assert lower_bound(p, Progress(), share(2)) == math.inf
    q = plan("q", stage("S", "a", tasks=1, task_s=1, vcores=1, mem=2 * GB))
    assert estimate(q, Progress(), Resources(8, 1 * GB)).finish_s == math.inf
    assert estimate(q, Progress(), Resources(8, 0)).finish_s == math.inf
    assert estimate(q, Progress(), Resources(1, 2 * GB)).finish_s == 1.0
    # ... unless it is checkpointed: then nothing of it needs the share
    assert estimate(q, Progress(checkpointed=ckpt("a")), Resources(0, 0)).finish_s == 0.0


def test_zero_demand_stage_runs_all_tasks_at_once():
    p = plan("p", stage("S", "a", tasks=50, task_s=3, vcores=0, mem=0))
    assert estimate(p, Progress(), Resources(0, 0)).finish_s == 3.0


def test_many_tasks_are_fast_and_exact():
    # 300 tasks of 7 s on 16 vcores: ceil(300/16) = 19 waves
    p = plan("p", stage("S", "a", tasks=300, task_s=7))
    e = estimate(p, Progress(), share(16), schedule=True)
    assert e.finish_s == 19 * 7.0
    assert len(e.schedule) <= 3  # a few runs, not one entry per wave
    assert sum(w.tasks * w.repeat for w in e.schedule) == 300


# ---------------------------------------------------------------------------------------------
# Progress: checkpoints and running stages


def four_way(pid: str, left: str, right: str, costs: dict[str, tuple[int, float]] | None = None):
    """(X⋈Y)⋈(Z⋈W) over the four scans; left/right name the two inner joins, e.g. "ab", "cd"."""
    costs = costs or {}

    def c(k: str) -> dict:
        n, d = costs.get(k, (1, 1.0))
        return {"tasks": n, "task_s": d}

    li, ri = left.upper(), right.upper()
    return plan(
        pid,
        *scans(),
        stage(li, left, (left[0].upper(), left[1].upper()), **c(left)),
        stage(ri, right, (right[0].upper(), right[1].upper()), **c(right)),
        stage("ABCD", "abcd", (li, ri), **c("top")),
    )


def left_deep(pid: str, costs: dict[str, tuple[int, float]] | None = None) -> Plan:
    """((A⋈B)⋈C)⋈D."""
    costs = costs or {}

    def c(k: str) -> dict:
        n, d = costs.get(k, (1, 1.0))
        return {"tasks": n, "task_s": d}

    return plan(
        pid,
        *scans(),
        stage("AB", "ab", ("A", "B"), **c("ab")),
        stage("ABC", "abc", ("AB", "C"), **c("abc")),
        stage("ABCD", "abcd", ("ABC", "D"), **c("top")),
    )


def test_checkpoint_credit_leaves_only_the_final_stage():
    k = four_way("k", "ab", "cd", {"top": (3, 5.0)})
    done = Progress(checkpointed=ckpt("a", "b", "c", "d", "ab", "cd"))
    assert remaining_tasks(k, done) == {"ABCD": 3}
    assert estimate(k, done, share(1)).finish_s == 15.0
    # the two joins alone suffice: scans below checkpoints are not needed
    assert estimate(k, Progress(checkpointed=ckpt("ab", "cd")), share(1)).finish_s == 15.0
    # nothing done: 4 scans + 2 joins + 3 final tasks of 1, 1, 5 s on one vcore
    assert estimate(k, Progress(), share(1)).finish_s == 4 + 2 + 15.0
    # the root checkpointed: done
    assert estimate(k, Progress(checkpointed=ckpt("abcd")), share(1)).finish_s == 0.0


def test_checkpoints_of_another_plan_count_by_signature():
    k = four_way("k", "ab", "cd", {"cd": (1, 10.0)})
    v = left_deep("v")  # computes A⋈B under the same stage id; signature is what matters
    other = plan("o", *scans(), stage("X", "ab", ("A", "B"), task_s=50))  # same result, other id
    progress = Progress(current_plan="o", checkpointed=ckpt("a", "b", "c", "d", "ab"))
    assert remaining_tasks(k, progress) == {"CD": 1, "ABCD": 1}
    assert remaining_tasks(v, progress) == {"ABC": 1, "ABCD": 1}
    assert estimate(k, progress, share(4)).finish_s == 11.0
    assert estimate(other, progress, share(4)).finish_s == 0.0


def test_running_stage_credit_only_for_the_current_plan():
    p1 = plan("p1", stage("S", "a", tasks=4, task_s=10))
    p2 = plan("p2", stage("T", "a", tasks=4, task_s=10))  # same signature, another plan
    progress = Progress("p1", running={sig("a"): RunningStage(tasks_done=2, elapsed_s=13.0)})
    assert remaining_tasks(p1, progress) == {"S": 2}
    assert estimate(p1, progress, share(1)).finish_s == 20.0
    assert remaining_tasks(p2, progress) == {"T": 4}
    assert estimate(p2, progress, share(1)).finish_s == 40.0
    # the same progress seen as p2's: now p2 gets the credit and p1 does not
    assert estimate(p1, progress, share(1), current_plan_id="p2").finish_s == 40.0
    assert estimate(p2, progress, share(1), current_plan_id="p2").finish_s == 20.0
    # every task finished: the stage counts as done, its inputs are not needed
    k = four_way("k", "ab", "cd")
    done_ab = Progress("k", running={sig("ab"): RunningStage(1, 1.0)})
    assert set(remaining_tasks(k, done_ab)) == {"C", "D", "CD", "ABCD"}


def test_running_stage_of_the_same_form_is_credited_in_every_plan():
    p1 = plan("p1", stage("S", "a", tasks=4, task_s=10))
    p2 = plan("p2", stage("T", "a", tasks=4, task_s=10))  # same signature, same form
    p3 = plan("p3", stage("U", "a", tasks=8, task_s=5))  # same signature, other partitioning
    assert p1.stages[0].form == p2.stages[0].form != p3.stages[0].form
    progress = advance(p1, Progress("p1"), share(2), 10.0)  # first wave of 2 done
    assert progress.running[sig("a")] == RunningStage(2, 10.0, p1.stages[0].form)
    assert remaining_tasks(p2, progress) == {"T": 2}
    assert remaining_tasks(p3, progress) == {"U": 8}
    assert estimate(p2, progress, share(2)).finish_s == 10.0
    # switching to p2 carries the running stage over; to p3 it does not
    assert advance(p2, progress, share(2), 0.0).running == {sig("a"): progress.running[sig("a")]}
    assert advance(p3, progress, share(2), 0.0).running == {}


def test_advance_reports_progress_and_drops_tasks_in_flight():
    p = plan("p", stage("S", "a", tasks=4, task_s=10), stage("F", "a", ("S",), 1, 5, top="agg"))
    prog = advance(p, Progress("p"), share(2), 15.0)
    assert prog.current_plan == "p"
    assert prog.checkpointed == frozenset()
    # the running stage carries its form (kind, method, tasks): intended since forms exist
    assert prog.running == {sig("a"): RunningStage(tasks_done=2, elapsed_s=15.0, form="scan::4")}
    # the second wave (in flight at 15 s) restarts: 2 tasks, one wave, then F
    assert estimate(p, prog, share(2)).finish_s == 15.0
    prog = advance(p, prog, share(2), 10.0)
    assert prog.checkpointed == ckpt("a") and prog.running == {}
    assert estimate(p, prog, share(2)).finish_s == 5.0
    prog = advance(p, prog, share(2), 5.0)
    assert sig("a", "agg") in prog.checkpointed
    assert estimate(p, prog, share(2)).finish_s == 0.0
    assert advance(p, Progress("p"), share(2), 0.0) == Progress("p")
    with pytest.raises(ValueError):
        advance(p, Progress("p"), share(2), -1.0)


def test_advance_keeps_tasks_in_flight_and_a_decrease_fails_some():
    p = plan("p", stage("S", "a", tasks=4, task_s=10), stage("F", "a", ("S",), 1, 5, top="agg"))
    prog = advance(p, Progress("p"), share(2), 15.0, keep_in_flight=True)
    # the second wave started at 10 s: two tasks 5 s into their 10 s
    assert prog.running == {sig("a"): RunningStage(2, 15.0, "scan::4", (5.0, 5.0))}
    assert estimate(p, prog, share(2)).finish_s == 10.0  # 5 s left, then F
    assert estimate(p, prog, share(8)).finish_s == 10.0  # more vcores do not speed them up
    # one vcore: one task keeps its slot (5 s left), the other fails and starts again
    assert estimate(p, prog, share(1)).finish_s == 20.0
    assert lower_bound(p, prog, share(1)) <= 20.0
    # another plan with the stage in the same form lets the tasks finish too; another form not
    same = plan(
        "q", stage("S2", "a", tasks=4, task_s=10), stage("F", "a", ("S2",), 1, 5, top="agg")
    )
    other = plan(
        "r", stage("S3", "a", tasks=2, task_s=20), stage("F", "a", ("S3",), 1, 5, top="agg")
    )
    assert estimate(same, prog, share(2)).finish_s == 10.0
    assert estimate(other, prog, share(2)).finish_s == 25.0
    # the tasks finish during the next advance: the stage is checkpointed
    nxt = advance(p, prog, share(2), 6.0, keep_in_flight=True)
    assert sig("a") in nxt.checkpointed


@pytest.mark.parametrize("seed", range(25))
def test_advancing_in_steps_under_a_constant_share_loses_nothing(seed):
    # with tasks in flight kept, cutting a constant share into steps changes nothing
    rng = random.Random(900 + seed)
    p = random_plan(rng, "p")
    sh = Resources(rng.choice([3, 4, 10, 25]), rng.choice([4, 8, 40]) * GB)
    total = estimate(p, Progress("p"), sh).finish_s
    prog, t = Progress("p"), 0.0
    while True:
        step = rng.uniform(0.5, 20)
        left = estimate(p, prog, sh).finish_s
        assert lower_bound(p, prog, sh) <= left + 1e-9
        if left <= step:
            break
        prog = advance(p, prog, sh, step, keep_in_flight=True)
        t += step
    assert t + left == pytest.approx(total, rel=1e-9, abs=1e-9)


def test_advance_stops_at_the_horizon_before_launching():
    # tasks ending exactly at the horizon count; nothing starts at the horizon itself
    p = plan("p", stage("S", "a", tasks=2, task_s=10), stage("F", "a", ("S",), 1, 5, top="agg"))
    prog = advance(p, Progress("p"), share(2), 10.0)
    assert prog.checkpointed == ckpt("a")
    assert prog.running == {}


# ---------------------------------------------------------------------------------------------
# Random plans: the schedule is feasible and the bound holds


def random_plan(rng: random.Random, pid: str, n_rel: int = 6) -> Plan:
    names = list("abcdefgh"[:n_rel])
    built = {}
    stages = []
    for x in names:
        built[x] = x.upper()
        stages.append(
            stage(
                x.upper(),
                x,
                tasks=rng.randint(1, 60),
                task_s=rng.choice([1.0, 2.5, 3.0, 7.0]),
                vcores=rng.choice([0.5, 1, 2]),
                mem=rng.choice([0.5, 1, 3]) * GB,
            )
        )
    pool = list(names)
    while len(pool) > 1:
        x = pool.pop(rng.randrange(len(pool)))
        y = pool.pop(rng.randrange(len(pool)))
        u = "".join(sorted(x + y))
        built[u] = "J" + u.upper()
        stages.append(
            stage(
                built[u],
                u,
                (built[x], built[y]),
                tasks=rng.randint(1, 80),
                task_s=rng.choice([1.0, 2.0, 4.5, 10.0]),
                vcores=rng.choice([1, 2, 3]),
                mem=rng.choice([1, 2, 4]) * GB,
            )
        )
        pool.append(u)
    return plan(pid, *stages)


def check_schedule(p: Plan, progress: Progress, sh: Resources) -> float:
    e = estimate(p, progress, sh, schedule=True)
    rem = remaining_tasks(p, progress)
    lb = lower_bound(p, progress, sh)
    assert lb <= e.finish_s + 1e-9
    if math.isinf(e.finish_s):
        return e.finish_s
    intervals = []  # (start, end, stage)
    per_stage: dict[str, int] = {}
    for w in e.schedule:
        per_stage[w.stage_id] = per_stage.get(w.stage_id, 0) + w.tasks * w.repeat
        for r in range(w.repeat):
            intervals.append((w.start_s + r * w.period_s, w.end_s + r * w.period_s, w, w.tasks))
    assert per_stage == {s: n for s, n in rem.items() if n > 0}
    # capacity at every start
    for t0, _, _, _ in intervals:
        used_c = used_m = 0.0
        for s, en, w, k in intervals:
            if s <= t0 + 1e-9 and en > t0 + 1e-9:
                d = p.stage(w.stage_id).cost.demand
                used_c += k * d.vcores
                used_m += k * d.memory_mb
        assert used_c <= sh.vcores + 1e-6 and used_m <= sh.memory_mb + 1e-6
    # precedence: a stage starts after every input still to run has ended
    ends: dict[str, float] = {}
    starts: dict[str, float] = {}
    for s, en, w, _ in intervals:
        ends[w.stage_id] = max(ends.get(w.stage_id, 0.0), en)
        starts[w.stage_id] = min(starts.get(w.stage_id, math.inf), s)
    for sid in starts:
        for i in p.stage(sid).inputs:
            if i in ends:
                assert starts[sid] >= ends[i] - 1e-9
    assert e.finish_s == pytest.approx(max(ends.values(), default=0.0))
    return e.finish_s


@pytest.mark.parametrize("seed", range(25))
def test_random_schedules_are_feasible(seed):
    rng = random.Random(seed)
    p = random_plan(rng, "p")
    sh = Resources(rng.choice([3, 4, 10, 25]), rng.choice([4, 8, 40]) * GB)
    check_schedule(p, Progress("p"), sh)
    # with progress: some checkpoints and a running stage
    prog = advance(p, Progress("p"), sh, rng.uniform(1, 60))
    check_schedule(p, prog, sh)


@pytest.mark.parametrize("seed", range(25))
def test_cutoff_stops_only_plans_that_finish_later(seed):
    # the re-planner's early stop: a simulation given a cutoff >= its finish must finish, one
    # given a cutoff below it must stop (and never report a wrong time)
    from qoop_planner.packing import _finish_within

    rng = random.Random(500 + seed)
    p = random_plan(rng, "p")
    sh = Resources(rng.choice([3, 4, 10, 25]), rng.choice([4, 8, 40]) * GB)
    prog = advance(p, Progress("p"), sh, rng.uniform(0, 30))
    t = estimate(p, prog, sh).finish_s
    assert _finish_within(p, prog, sh, True, math.inf) == t
    assert _finish_within(p, prog, sh, True, t) == t
    assert _finish_within(p, prog, sh, True, t * 1.01 + 1) == t
    if t > 0:
        assert _finish_within(p, prog, sh, True, t * 0.999) is None


# ---------------------------------------------------------------------------------------------
# Decisions: hysteresis


def one_stage(pid: str, seconds: float, vcores: float = 1) -> Plan:
    return plan(pid, stage("S" + pid, "a", tasks=1, task_s=seconds, vcores=vcores))


@pytest.mark.parametrize(
    ("alt_s", "h", "switch"),
    [(90, 0.15, False), (80, 0.15, True), (99, 0.0, True), (100, 0.0, False), (50, 0.6, False)],
)
def test_hysteresis(alt_s, h, switch):
    plans = [one_stage("cur", 100), one_stage("alt", alt_s)]
    d = decide(plans, Progress("cur"), share(1), hysteresis=h, current_plan_id="cur")
    assert d.switch is switch
    assert d.plan.plan_id == ("alt" if switch else "cur")
    assert dict(d.estimates) == {"cur": 100.0, "alt": float(alt_s)}
    assert d.improvement == (pytest.approx((100 - alt_s) / 100) if switch else 0.0)


def test_hysteresis_default_is_015():
    plans = [one_stage("cur", 100), one_stage("alt", 86)]
    assert not decide(plans, Progress("cur"), share(1), current_plan_id="cur").switch
    plans = [one_stage("cur", 100), one_stage("alt", 84)]
    assert decide(plans, Progress("cur"), share(1), current_plan_id="cur").switch


def test_current_plan_that_cannot_finish_loses_to_any_finite_plan():
    plans = [one_stage("cur", 1, vcores=8), one_stage("slow", 1000)]
    d = decide(plans, Progress("cur"), share(2), hysteresis=0.9, current_plan_id="cur")
    assert d.switch and d.plan.plan_id == "slow"
    assert d.estimates["cur"] == math.inf
    assert d.improvement == 1.0
    # nothing can run: stay
    plans = [one_stage("cur", 1, vcores=8), one_stage("alt", 1, vcores=9)]
    d = decide(plans, Progress("cur"), share(2), current_plan_id="cur")
    assert not d.switch and d.plan.plan_id == "cur"


def test_first_decision_starts_the_earliest_plan():
    plans = [one_stage("a", 30), one_stage("b", 20), one_stage("c", 20)]
    d = decide(plans, Progress(), share(1), current_plan_id=None)
    assert d.switch and d.plan.plan_id == "b"  # tie with c: lower total_cost, then id
    assert d.cancel == frozenset() and d.keep_running == frozenset() and d.backtrack_depth == 0


def test_decide_validates_its_inputs():
    plans = [one_stage("a", 1), one_stage("b", 2)]
    with pytest.raises(ValueError):
        decide([], Progress(), share(1), current_plan_id=None)
    with pytest.raises(ValueError):
        decide(plans, Progress(), share(1), current_plan_id="zzz")
    with pytest.raises(ValueError):
        decide(plans, Progress("a"), share(1), current_plan_id="b")
    with pytest.raises(ValueError):
        decide([*plans, one_stage("a", 3)], Progress(), share(1), current_plan_id=None)
    with pytest.raises(ValueError):
        decide(plans, Progress(), share(1), hysteresis=-0.1, current_plan_id=None)


@pytest.mark.parametrize("seed", range(12))
def test_pruned_decision_equals_full_evaluation(seed):
    rng = random.Random(100 + seed)
    plans = [random_plan(random.Random(rng.random()), f"p{i}", n_rel=5) for i in range(12)]
    sh = Resources(rng.choice([4, 10, 30]), rng.choice([8, 40]) * GB)
    cur = rng.choice(plans)
    keep = seed % 2 == 1  # half the cases with tasks in flight reported
    prog = advance(cur, Progress(cur.plan_id), sh, rng.uniform(0, 40), keep_in_flight=keep)
    sh2 = Resources(rng.choice([4, 10, 30]), rng.choice([8, 40]) * GB)
    for h in (0.0, 0.15):
        fast = decide(plans, prog, sh2, hysteresis=h, current_plan_id=cur.plan_id)
        full = decide(plans, prog, sh2, hysteresis=h, current_plan_id=cur.plan_id, prune=False)
        assert (fast.switch, fast.plan.plan_id) == (full.switch, full.plan.plan_id)
        assert dict(fast.estimates) == dict(full.estimates)  # lazily completed, identical
        assert full.evaluated == frozenset(p.plan_id for p in plans)
        est = dict(full.estimates)
        best = min(est.values())
        if full.switch:
            assert est[full.plan.plan_id] == best
            assert (est[cur.plan_id] - best) / est[cur.plan_id] > h
        else:
            assert best >= est[cur.plan_id] * (1 - h) or math.isinf(best)
        for pid, lb in full.lower_bounds.items():
            assert lb <= est[pid] + 1e-9


# ---------------------------------------------------------------------------------------------
# Decisions: reuse, cancel, keep_running, backtrack depth, rewrite


def test_switch_sets_and_backtrack_depth_from_bushy_to_bushy():
    # current (A⋈B)⋈(C⋈D): scans and A⋈B done, C⋈D running with 16 vcore tasks that no longer
    # fit the share -> any finite plan wins
    k = plan(
        "k",
        *scans(),
        stage("AB", "ab", ("A", "B")),
        stage("CD", "cd", ("C", "D"), tasks=2, vcores=16),
        stage("ABCD", "abcd", ("AB", "CD")),
    )
    q = four_way("q", "ac", "bd")
    progress = Progress("k", ckpt("a", "b", "c", "d", "ab"), {sig("cd"): RunningStage(1, 1.0)})
    d = decide([k, q], progress, share(4), current_plan_id="k")
    assert d.switch and d.plan.plan_id == "q"
    assert d.reuse == {"A", "B", "C", "D"}
    assert d.cancel == {"CD"}
    assert d.keep_running == frozenset()
    assert d.backtrack_depth == 1  # A⋈B (done) and C⋈D (running) are dropped, one level
    # to the left-deep plan instead: A⋈B is reused, only C⋈D is dropped
    v = left_deep("v")
    d = decide([k, v], progress, share(4), current_plan_id="k")
    assert d.switch and d.plan.plan_id == "v"
    assert d.reuse == {"AB", "C", "D"}
    assert d.cancel == {"CD"} and d.keep_running == frozenset()
    assert d.backtrack_depth == 1


def test_keep_running_a_shared_stage():
    # current left-deep plan with A⋈B running; its (A⋈B)⋈C cannot run any more
    v = plan(
        "v",
        *scans(),
        stage("AB", "ab", ("A", "B"), tasks=4),
        stage("ABC", "abc", ("AB", "C"), vcores=16),
        stage("ABCD", "abcd", ("ABC", "D")),
    )
    k = four_way("k", "ab", "cd", {"ab": (4, 1.0)})
    progress = Progress("v", ckpt("a", "b", "c", "d"), {sig("ab"): RunningStage(2, 1.0)})
    d = decide([v, k], progress, share(4), current_plan_id="v")
    assert d.switch and d.plan.plan_id == "k"
    assert d.keep_running == {"AB"}
    assert d.cancel == frozenset()
    assert d.reuse == {"A", "B", "C", "D"}
    assert d.backtrack_depth == 0  # everything done or running is kept
    # without a switch nothing is cancelled and the running stage is kept
    d = decide([v, k], progress, share(16), current_plan_id="v", hysteresis=1.0)
    assert not d.switch and d.plan.plan_id == "v"
    assert d.keep_running == {"AB"} and d.cancel == frozenset() and d.backtrack_depth == 0


def test_backtrack_two_levels():
    # ((A⋈B)⋈C)⋈D with A⋈B done and (A⋈B)⋈C running -> (A⋈C)⋈(B⋈D) redoes two levels
    v = plan(
        "v",
        *scans(),
        stage("AB", "ab", ("A", "B")),
        stage("ABC", "abc", ("AB", "C")),
        stage("ABCD", "abcd", ("ABC", "D"), vcores=16),
    )
    q = four_way("q", "ac", "bd")
    progress = Progress("v", ckpt("a", "b", "c", "d", "ab"), {sig("abc"): RunningStage(0, 0.5)})
    d = decide([v, q], progress, share(4), current_plan_id="v")
    assert d.switch and d.plan.plan_id == "q"
    assert d.cancel == {"ABC"} and d.reuse == {"A", "B", "C", "D"}
    assert d.backtrack_depth == 2


def test_backtracking_to_a_checkpoint_of_an_earlier_plan():
    # K = (A⋈B)⋈(C⋈D) ran first and checkpointed A⋈B; then the query switched to
    # Q = (A⋈C)⋈(B⋈D), which finished A⋈C and is running a huge B⋈D. Going back to K resumes
    # from K's own old checkpoint: only C⋈D (2 s) and the top (1 s) are left.
    k = four_way("k", "ab", "cd", {"ab": (50, 10.0), "cd": (1, 2.0)})
    q = four_way("q", "ac", "bd", {"bd": (100, 10.0)})
    progress = Progress(
        "q", ckpt("a", "b", "c", "d", "ab", "ac"), {sig("bd"): RunningStage(10, 30.0)}
    )
    d = decide([k, q], progress, share(4), current_plan_id="q")
    assert d.switch and d.plan.plan_id == "k"
    assert d.estimates["k"] == 3.0
    assert d.estimates["q"] == math.ceil(90 / 4) * 10 + 1
    assert d.reuse == {"AB", "C", "D"}
    assert d.cancel == {"BD"}
    assert d.backtrack_depth == 1  # A⋈C (done) and B⋈D (running) are dropped
    r = d.rewritten
    assert [s.stage_id for s in r.stages] == ["C", "D", "AB", "CD", "ABCD"]
    ab = r.stage("AB")
    assert ab.kind == "checkpoint" and ab.inputs == () and ab.cost.work == 0
    assert ab.sql == f"SELECT * FROM {checkpoint_table(sig('ab'))}"
    assert checkpoint_table(sig("ab")).startswith(CHECKPOINT_PREFIX)
    assert r.total_cost == 2.0 + 1.0
    assert estimate(r, Progress(checkpointed=progress.checkpointed), share(4)).finish_s == 3.0
    # without the old checkpoint K would redo A⋈B (50 tasks of 10 s on 4 vcores)
    no_ab = Progress("q", ckpt("a", "b", "c", "d", "ac"), progress.running)
    assert estimate(k, no_ab, share(4)).finish_s == 13 * 10 + 1


def test_rewrite():
    k = four_way("k", "ab", "cd", {"top": (2, 3.0)})
    r = rewrite(k, Progress(checkpointed=ckpt("a", "b", "ab", "c")))
    assert [(s.stage_id, s.kind) for s in r.stages] == [
        ("C", "checkpoint"),
        ("D", "scan"),
        ("AB", "checkpoint"),
        ("CD", "join"),
        ("ABCD", "join"),
    ]
    assert r.root == "ABCD" and r.plan_id == "k"
    assert r.total_cost == 1 + 1 + 6.0
    sql = r.to_sql()
    assert checkpoint_table(sig("ab")) in sql and checkpoint_table(sig("c")) in sql
    assert checkpoint_table(sig("a")) not in sql
    # nothing done: the plan itself; everything done: one checkpoint stage
    assert rewrite(k, Progress()).stages == k.stages
    done = rewrite(k, Progress(checkpointed=ckpt("abcd", "ab")))
    assert [(s.stage_id, s.kind) for s in done.stages] == [("ABCD", "checkpoint")]
    assert done.total_cost == 0
    d = decide([k], Progress("k", ckpt("abcd")), share(1), current_plan_id="k")
    assert not d.switch and d.reuse == {"ABCD"} and d.estimates["k"] == 0.0


# ---------------------------------------------------------------------------------------------
# Fig 2.4: Volcano 9, Clarinet 7, QOOP 6


def fig24_plans() -> tuple[Plan, Plan, Plan]:
    """The three plans of Fig 2.4 with invented costs (the figure gives none).

    Every task needs 1 vcore; times in seconds ("t"). Scans A-D: 1 task x 1 s each.
    Volcano, ((A⋈B)⋈C)⋈D: A⋈B 1 x 4 s, (A⋈B)⋈C 1 x 1 s, top 1 x 3 s: work 12, the least.
    Clarinet's pick, (A⋈B)⋈(C⋈D): A⋈B 1 x 4 s, C⋈D 1 x 1 s, top 2 x 2 s: work 13.
    QOOP's switch target, (A⋈C)⋈(B⋈D): A⋈C 1 x 1 s, B⋈D 1 x 2 s, top 3 x 2 s: work 13.
    The top join has the same result in all three plans but its cost depends on its inputs.
    Share profile: 2 vcores in [0, 1), 4 vcores from t=1 on (the increase of the figure).

    Under 2 vcores forever (t=0) the estimates are Volcano 9, Clarinet 7, QOOP 8: Clarinet's
    plan is best. At t=1 (A, B done) under 4 vcores the remaining times are 8, 6 and 5: the
    bushy (A⋈C)⋈(B⋈D) plan gains from the extra slots (its top has 3 parallel tasks) while
    (A⋈B)⋈(C⋈D) waits on its 4 s A⋈B; 1/6 = 16.7% > h = 15%, so QOOP switches.
    """
    v = left_deep("volcano", {"ab": (1, 4.0), "abc": (1, 1.0), "top": (1, 3.0)})
    k = four_way("clarinet", "ab", "cd", {"ab": (1, 4.0), "cd": (1, 1.0), "top": (2, 2.0)})
    q = four_way("qoop", "ac", "bd", {"ac": (1, 1.0), "bd": (1, 2.0), "top": (3, 2.0)})
    return v, k, q


S0, S1 = share(2), share(4)  # the share profile: S0 until t=1, then S1


def run_static(p: Plan) -> float:
    """Finish time of a fixed plan under the profile."""
    prog = advance(p, Progress(p.plan_id), S0, 1.0)
    return 1.0 + estimate(p, prog, S1).finish_s


def test_fig_2_4_toy_example():
    v, k, q = fig24_plans()
    plans = [v, k, q]
    # Volcano: the least work, resource-agnostic -> t=9
    volcano = min(plans, key=lambda p: p.total_cost)
    assert volcano is v and v.total_cost < k.total_cost == q.total_cost
    assert run_static(v) == 9.0
    # Clarinet: the best plan for the resources at t=0, then fixed -> t=7
    d0 = decide(plans, Progress(), S0, current_plan_id=None)
    assert dict(d0.estimates) == {"volcano": 9.0, "clarinet": 7.0, "qoop": 8.0}
    assert d0.plan is k
    assert run_static(k) == 7.0
    # ... which is QOOP with an infinite hysteresis
    prog1 = advance(k, Progress(k.plan_id), S0, 1.0)
    assert prog1.checkpointed == ckpt("a", "b") and prog1.running == {}
    stay = decide(plans, prog1, S1, hysteresis=math.inf, current_plan_id="clarinet")
    assert not stay.switch and 1.0 + stay.estimates["clarinet"] == 7.0
    # QOOP: same start, re-plans when the share changes at t=1 and switches -> t=6
    d1 = decide(plans, prog1, S1, current_plan_id="clarinet")
    assert d1.switch and d1.plan is q
    assert dict(d1.estimates) == {"volcano": 8.0, "clarinet": 6.0, "qoop": 5.0}
    assert d1.improvement == pytest.approx(1 / 6)
    assert d1.reuse == {"A", "B"} and d1.cancel == frozenset() and d1.keep_running == frozenset()
    assert d1.backtrack_depth == 0
    prog = advance(q, Progress(q.plan_id, prog1.checkpointed), S1, 5.0)
    assert sig("abcd") in prog.checkpointed  # done at t = 1 + 5 = 6
    t_qoop = 1.0 + estimate(q, Progress(q.plan_id, prog1.checkpointed), S1).finish_s
    assert t_qoop == 6.0
    assert (run_static(v), run_static(k), t_qoop) == (9.0, 7.0, 6.0)
