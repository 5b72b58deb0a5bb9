"""Tests for ``qoop_planner.online``: Pseudocode 2 in the a×b model (spec A.5, seed T:535-600).

Covered: the pruning examples, Ex 2.1 (both cases, with and without backtracking), Ex 2.2
(starvation), property-test recipe 1 (random allocations, discrete and fluid), and the Theorem 2.1
adversary (recipe 2).
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qoop_planner.online import (
    OnlineState,
    Qep,
    advance,
    choose,
    competitive_ratio,
    greedy_step,
    greedy_steps,
    lower_bound_adversary,
    offline_copies,
    offline_finish,
    offline_finish_times,
    prune,
    remaining_time,
    retained_indices,
    run_adaptive,
    run_online,
    start,
)

SMALL = Qep(2, 2)  # 2×2, w = 4
BIG = Qep(1, 100)  # 1×100, w = 100
EX = (SMALL, BIG)  # the seed's running example; index 0 = 2×2, index 1 = 1×100


def aw(a: int, w: int) -> Qep:
    return Qep.from_work(a, w)


def any_policy_completes(state: OnlineState, allocations: list[int]) -> bool:
    """Whether *some* online algorithm completes from ``state`` (exhaustive over all choices)."""
    frontier = {state}
    for r in allocations:
        nxt: set[OnlineState] = set()
        for s in frontier:
            options = [None, *(i for i, q in enumerate(s.qeps) if q.a <= r)]
            for c in options:
                s2 = advance(s, r, c)
                if s2.finished:
                    return True
                nxt.add(s2)
        frontier = nxt
    return False


# ---------------------------------------------------------------------------------------------
# Model basics and pruning


def test_qep_validation_and_work():
    assert Qep(3, 7).work == 21
    assert aw(4, 40) == Qep(4, 10)
    for bad in ((0, 1), (1, 0), (1.5, 2), (True, 2)):
        with pytest.raises(ValueError):
            Qep(*bad)
    with pytest.raises(ValueError):
        aw(4, 42)


def test_prune_spec_examples():
    # Spec recipe 3 writes QEPs as (a, w).
    assert prune([aw(1, 100), aw(2, 4)]) == (aw(1, 100), aw(2, 4))
    # (2,60) dropped (60 > 50); (4,40) kept because it is compared with the LAST RETAINED
    # (1,100): 40 <= 50 (against its predecessor (2,60) it would be dropped: 40 > 30).
    three = [aw(1, 100), aw(2, 60), aw(4, 40)]
    assert prune(three) == (aw(1, 100), aw(4, 40))
    assert retained_indices(three) == (0, 2)


def test_prune_sorts_by_a_and_handles_duplicates():
    qs = [aw(4, 40), aw(1, 100), aw(2, 60)]
    assert prune(qs) == (aw(1, 100), aw(4, 40))
    assert retained_indices(qs) == (1, 0)
    # Exactly half is kept; equal a with more work is pruned, equal a with less work wins.
    assert prune([aw(1, 100), aw(2, 50)]) == (aw(1, 100), aw(2, 50))
    assert prune([aw(2, 10), aw(2, 8)]) == (aw(2, 8),)
    assert prune([aw(1, 100), aw(2, 52)]) == (aw(1, 100),)


def test_remaining_time_example_2_1():
    assert remaining_time(SMALL, 0, 2) == 2
    assert remaining_time(BIG, 0, 2) == 50
    assert remaining_time(SMALL, 0, 1) is None
    assert remaining_time(BIG, 1, 2, "discrete") == 50  # ceil(99 / 2)
    assert remaining_time(BIG, 1, 2, "fluid") == Fraction(99, 2)
    assert remaining_time(Qep(2, 5), 0, 5, "discrete") == 3  # floor(5/2) = 2 tasks per step


def test_ties_go_to_smallest_a():
    # Both need 1 step with 4 units: 1×4 and 2×2 (pruning off so both are candidates).
    s = start([Qep(2, 2), Qep(1, 4)], prune=False)
    assert choose(s, 4) == 1
    s = start([Qep(2, 2), Qep(1, 4)], prune=False, model="fluid")
    assert choose(s, 4) == 1


def test_fluid_and_discrete_remaining_time_differ():
    # 3×1 and 1×4 with 5 units: discrete needs 1 step each (tie -> 1×4, smaller a); fluid compares
    # 3/5 with 4/5 and picks 3×1.
    qeps = [Qep(3, 1), Qep(1, 4)]
    assert choose(start(qeps, prune=False), 5) == 1
    assert choose(start(qeps, prune=False, model="fluid"), 5) == 0


def test_pruned_qeps_are_never_run():
    qeps = [aw(1, 100), aw(2, 60)]  # 2×30 is pruned (60 > 50)
    assert start(qeps).candidates == (0,)
    assert start(qeps, prune=False).candidates == (0, 1)
    assert run_online(qeps, [2] * 100).choices == (0,) * 50
    unpruned = run_online(qeps, [2] * 100, prune=False)
    assert unpruned.choices == (1,) * 30 and unpruned.completed_qep == aw(2, 60)


def test_discrete_runs_one_qep_and_floor_tasks():
    # 2×5 with 5 units: 2 tasks per step (1 unit idle), done in 3 steps; fluid takes 2 steps.
    run = run_online([Qep(2, 5)], [5] * 10)
    assert run.finish == 3 and run.total_work == 10 and run.wasted_work == 0
    assert run_online([Qep(2, 5)], [5] * 10, model="fluid").finish == 2


# ---------------------------------------------------------------------------------------------
# Example 2.1: switching is necessary


def test_ex21_case1_running_1x100_loses_to_2x2():
    s = advance(start(EX), 2, 1)  # an algorithm that starts on 1×100
    s_stay = advance(s, 2, 1, steps=1000)  # ... and stays on it while the adversary gives 2
    assert s_stay.finished and s_stay.steps == 50 and s_stay.total_work == 100
    # The optimum runs 2×2: 2 steps, 4 units of work.
    assert offline_finish_times(EX, [2, 2]) == (2, None)
    assert offline_finish(EX, [2] * 50) == 2
    # The greedy never falls into this case: with 2 units it picks 2×2 (2 steps vs 50).
    run = run_online(EX, [2, 2])
    assert run.choices == (0, 0) and run.finish == 2 and run.wasted_work == 0


def test_ex21_case2_2x2_stalls_unless_switching():
    allocations = [2] + [1] * 200
    # A policy that never switches away from 2×2 stalls: 2×2 is infeasible with 1 unit.
    s = advance(start(EX), 2, 0)
    for r in allocations[1:]:
        s = advance(s, r, 0 if r >= 2 else None)
    assert not s.finished and s.done == (2, 0)
    # The greedy switches to 1×100 (the only feasible QEP) and finishes it.
    run = run_online(EX, allocations)
    assert run.choices[:2] == (0, 1)
    assert run.finish == 101 and run.completed_qep == BIG and run.wasted_work == 2


# ---------------------------------------------------------------------------------------------
# Backtracking is necessary


def alternating_adversary(state: OnlineState, choices: tuple[int | None, ...]) -> int:
    """Gives 2 units first, then 1 after a 2×2 step and 2 after a 1×100 step (seed T:555)."""
    if not choices:
        return 2
    return 1 if state.qeps[choices[-1]] == SMALL else 2


def test_backtracking_example_with_allocations_2_1_2():
    run = run_online(EX, [2, 1, 2])
    assert run.choices == (0, 1, 0)
    assert run.finish == 3 and run.completed_qep == SMALL
    assert run.total_work == 5 and run.wasted_work == 1


def test_without_backtracking_2_1_2_does_not_finish():
    run = run_online(EX, [2, 1, 2], backtracking=False)
    assert run.choices == (0, 1, 0)  # restarts 2×2 at step 3, losing 1×100's task
    assert run.finish is None
    assert run.final.done == (2, 0)


def test_alternating_adversary_backtracking_finishes_at_step_3():
    run = run_adaptive(EX, alternating_adversary, 1000)
    assert run.allocations == (2, 1, 2)
    assert run.finish == 3 and run.wasted_work == 1


def test_alternating_adversary_without_backtracking_never_finishes():
    run = run_adaptive(EX, alternating_adversary, 1000, backtracking=False)
    assert run.finish is None and len(run.choices) == 1000
    assert run.choices == (0, 1) * 500  # flips between CASE-2 and CASE-1 forever
    assert run.wasted_work == run.total_work == 500 * 2 + 500 * 1  # unbounded wasted work
    assert max(run.final.done) <= 2


# ---------------------------------------------------------------------------------------------
# Example 2.2: starvation


def test_ex22a_starting_on_1x100_no_algorithm_completes():
    allocations = [2, 2] + [0] * 50
    s = advance(start(EX), 2, 1)  # started on 1×100
    assert not any_policy_completes(s, allocations[1:])
    assert not any_policy_completes(advance(start(EX, backtracking=False), 2, 1), allocations[1:])
    # The offline optimum finishes 2×2 at step 2.
    assert offline_finish_times(EX, allocations) == (2, None)
    # The greedy does not start on 1×100, so these allocations do not starve it.
    assert run_online(EX, allocations).finish == 2


def test_ex22b_starting_on_2x2_no_algorithm_completes():
    allocations = [2] + [1] * 99 + [0] * 50
    run = run_online(EX, allocations)
    assert run.choices[0] == 0 and run.finish is None
    assert run.final.done == (2, 99)  # one task of each QEP left, and no resources come
    assert not any_policy_completes(advance(start(EX), 2, 0), allocations[1:])
    # Offline: 1×100 at step 99 (2 + 98·1 = 100); 2×2 never.
    assert offline_finish_times(EX, allocations) == (None, 99)
    assert offline_finish(EX, allocations) == 99
    assert run.alpha_star == float("inf")


def test_ex22_adaptive_adversary_starves_the_greedy():
    def adversary(state: OnlineState, choices: tuple[int | None, ...]) -> int:
        t = len(choices)  # 0-based step about to run
        if t == 0:
            return 2
        if choices[0] == 1:  # started on 1×100: case (a)
            return 2 if t == 1 else 0
        return 1 if t < 100 else 0  # started on 2×2: case (b)

    run = run_adaptive(EX, adversary, 1000)
    assert run.finish is None
    assert offline_finish(EX, run.allocations) == 99


# ---------------------------------------------------------------------------------------------
# Offline optimum and the competitive ratio


def test_offline_fractional_copies_and_alpha_star_definition():
    allocs = [2, 0, 4, 1, 8]
    # 2×2 progresses on steps with r >= 2: cum = 2, 2, 6, 6, 14.
    assert offline_finish_times([SMALL], allocs, 0.5) == (1,)
    assert offline_finish_times([SMALL], allocs, 1) == (3,)
    assert offline_finish_times([SMALL], allocs, 1.5) == (3,)
    assert offline_finish_times([SMALL], allocs, Fraction(7, 4)) == (5,)
    assert offline_finish_times([SMALL], allocs, 4) == (None,)
    assert offline_copies([SMALL], allocs, 4) == Fraction(6, 4)
    # α* = cum(T_on − 1)/w: with T_on = 5, 6/4. T_off(α*) < T_on <= T_off(α*+ε).
    alpha = competitive_ratio([SMALL], allocs, 5)
    assert alpha == Fraction(3, 2)
    assert offline_finish([SMALL], allocs, alpha) < 5
    assert offline_finish([SMALL], allocs, alpha + Fraction(1, 10**9)) == 5
    assert competitive_ratio([SMALL], allocs, None) == float("inf")


@pytest.mark.parametrize("model", ["discrete", "fluid"])
def test_alpha_star_matches_offline_finish(model):
    rng = random.Random(7)
    for _ in range(300):
        qeps = [Qep(rng.choice([1, 2, 4, 8]), rng.randint(1, 30)) for _ in range(rng.randint(1, 4))]
        allocs = [rng.choice([0, 1, 2, 3, 4, 8, 16]) for _ in range(60)]
        t_on = rng.randint(1, 60)
        alpha = competitive_ratio(qeps, allocs, t_on, model=model)
        t_below = offline_finish(qeps, allocs, alpha, model=model)
        assert (t_below is not None and t_below < t_on) or alpha == 0
        t_above = offline_finish(qeps, allocs, alpha + Fraction(1, 10**6), model=model)
        assert t_above is None or t_above >= t_on


# ---------------------------------------------------------------------------------------------
# Laziness: greedy_steps (one jump) equals repeated greedy_step


@pytest.mark.parametrize("model", ["discrete", "fluid"])
@pytest.mark.parametrize("backtracking", [True, False])
def test_greedy_steps_equals_repeated_greedy_step(model, backtracking):
    rng = random.Random(11)
    for _ in range(200):
        qeps = [Qep(a, rng.randint(1, 40)) for a in rng.sample([1, 2, 3, 4, 8], rng.randint(1, 4))]
        s = start(qeps, model=model, backtracking=backtracking, prune=rng.random() < 0.5)
        for _ in range(rng.randint(0, 10)):
            if s.finished:
                break
            s, _ = greedy_step(s, rng.choice([0, 1, 2, 3, 5, 8]))
        if s.finished:
            continue
        r, k = rng.choice([0, 1, 2, 3, 5, 8]), rng.randint(1, 30)
        jumped, choice, n = greedy_steps(s, r, k)
        stepped = s
        for _ in range(k):
            stepped, c = greedy_step(stepped, r)
            assert c == choice  # lazy: constant allocation, constant choice
            if stepped.finished:
                break
        assert jumped == stepped and n == stepped.steps - s.steps


# ---------------------------------------------------------------------------------------------
# Property-test recipe 1: T_on <= T_off(4) always, <= T_off(2) when works are separated

A_VALUES = [1, 2, 4, 8, 16, 32]
R_VALUES = [0, 1, 2, 4, 8, 16, 32]
HORIZON = 400
TRIALS = 1200  # per (model, separated) pair: 4800 seeded trials in all


def random_qeps(rng: random.Random, separated: bool) -> list[Qep]:
    a_s = sorted(rng.sample(A_VALUES, rng.randint(2, 5)))
    if not separated:
        return [Qep(a, rng.randint(1, 300)) for a in a_s]
    # Build from the largest a down so that w_i <= ½ w_{i-1} after sorting by a.
    qeps = [Qep(a_s[-1], rng.randint(1, 40))]
    for a in reversed(a_s[:-1]):
        min_b = -(-2 * qeps[0].work // a)
        qeps.insert(0, Qep(a, min_b + rng.randint(0, min_b)))
    rng.shuffle(qeps)
    return qeps


def check_bound(qeps: list[Qep], allocs: list[int], model: str, alpha: int) -> Fraction | float:
    run = run_online(qeps, allocs, model=model)
    t_off = offline_finish(qeps, allocs, alpha, model=model)
    if t_off is not None:
        assert run.finish is not None and run.finish <= t_off, (qeps, allocs, model)
    return run.alpha_star


@pytest.mark.parametrize("model", ["discrete", "fluid"])
@pytest.mark.parametrize("separated", [False, True])
def test_recipe1_random_allocations(model, separated):
    rng = random.Random(f"{model}-{separated}")
    worst: Fraction | float = 0
    checked = 0
    for _ in range(TRIALS):
        qeps = random_qeps(rng, separated)
        if separated:
            assert prune(qeps) == tuple(sorted(qeps))  # already separated: nothing pruned
        allocs = [rng.choice(R_VALUES) for _ in range(HORIZON)]
        alpha_star = check_bound(qeps, allocs, model, 2 if separated else 4)
        if alpha_star != float("inf"):
            worst = max(worst, alpha_star)
            checked += 1
    assert checked > 0.9 * TRIALS  # most trials complete within the horizon
    assert worst < (2 if separated else 4)


@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    n=st.integers(2, 5),
    model=st.sampled_from(["discrete", "fluid"]),
    separated=st.booleans(),
)
def test_recipe1_hypothesis(data, n, model, separated):
    a_s = sorted(
        data.draw(st.lists(st.sampled_from(A_VALUES), min_size=n, max_size=n, unique=True))
    )
    bs = data.draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    qeps = [Qep(a, b) for a, b in zip(a_s, bs, strict=True)]
    if separated:
        qeps = list(prune(qeps))
    allocs = data.draw(st.lists(st.sampled_from(R_VALUES), min_size=HORIZON, max_size=HORIZON))
    check_bound(qeps, allocs, model, 2 if separated else 4)


# ---------------------------------------------------------------------------------------------
# Theorem 2.1 adversary (recipe 2)


def test_thm21_adversary_m3_exact():
    res = lower_bound_adversary(3, 4096)
    assert res.qeps == (aw(2, 4 * 4096), aw(4, 2 * 4096), aw(8, 4096))
    assert res.order == (2, 1, 0)  # greedy picks QEP m, then m−1, …, then 1
    assert res.online_work == sum(q.work - q.a for q in res.qeps) + res.qeps[0].a == 28660
    assert res.ratio == Fraction(28660, 16384)
    assert float(res.ratio) == 1.749267578125
    assert res.alpha_star == Fraction(28658, 16384)  # one step less: the strict definition
    assert res.bound == Fraction(7, 4)
    # Cross-check with the public functions on the expanded allocation sequence.
    allocs = res.allocations
    assert len(allocs) == res.finish
    assert offline_copies(res.qeps, allocs, res.finish) == res.ratio
    assert competitive_ratio(res.qeps, allocs, res.finish) == res.alpha_star
    replay = run_online(res.qeps, allocs)
    assert replay.finish == res.finish and replay.completed == 0


@pytest.mark.parametrize(("m", "expected"), [(3, 1.749267578125), (6, 1.96780), (10, 1.99707)])
def test_thm21_adversary_ratios(m, expected):
    res = lower_bound_adversary(m, 4096)
    bound = 2 - 2 ** -(m - 1)
    assert res.bound == bound
    assert res.order == tuple(reversed(range(m)))
    assert float(res.ratio) == pytest.approx(expected, abs=5e-6)
    for alpha in (res.ratio, res.alpha_star):
        assert bound - 1e-2 <= alpha <= 2
        assert alpha < bound  # finite W keeps it just under the bound


@pytest.mark.parametrize("model", ["discrete", "fluid"])
@pytest.mark.parametrize(("m", "W"), [(1, 8), (2, 16), (3, 4096), (4, 64), (5, 96), (6, 64)])
def test_thm21_stepwise_equals_batched(model, m, W):
    stepwise = lower_bound_adversary(m, W, model=model, stepwise=True)
    assert stepwise == lower_bound_adversary(m, W, model=model)
    assert stepwise == lower_bound_adversary(m, W, model="discrete")


def test_thm21_adversary_validates_w():
    with pytest.raises(ValueError):
        lower_bound_adversary(3, 100)  # not a multiple of 2^3
