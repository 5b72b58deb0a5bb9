"""Syndicate's optSched and MCMC optimizer (seed 000 §4.4.2, Pseudocode 4; spec §3, fixtures
X1-X3, checkable facts F7-F14)."""

from __future__ import annotations

import itertools
import math

import pytest

from syndicate.dag import (
    catalogue,
    dlrm,
    fixture_x1,
    fixture_x2,
    fixture_x3,
    plan_from,
    single_plan,
    unroll,
)
from syndicate.motifs import CommOp
from syndicate.optimizer import MODES, accept_probability, evaluate, greedy_plan, plan
from syndicate.sched import Graph, Node, list_schedule


def _x1_costs(policy_min_fifo: bool = False) -> list[tuple[float, tuple[int, ...]]]:
    dag, cost = fixture_x1()
    out = []
    for choice in itertools.product(range(2), repeat=4):
        g = unroll(dag, plan_from(dag, choice), cost, iterations=1)
        c = list_schedule(g, "crit").makespan
        if policy_min_fifo:
            c = min(c, list_schedule(g, "fifo").makespan)
        out.append((c, choice))
    return out


def _check_schedule(graph: Graph, sched, streams: str = "channel") -> None:
    """F7: every edge respected, program order on the compute stream, no two motifs sharing a
    token overlap, the makespan is the last finish."""
    by_id = {n.id: n for n in graph.nodes}
    for n in graph.nodes:
        for p in n.parents:
            assert sched.start[n.id] >= sched.finish[p] - 1e-12, (p, n.id)
        assert sched.finish[n.id] == pytest.approx(sched.start[n.id] + n.dur)
    comps = graph.computes
    for a, b in itertools.pairwise(comps):
        assert sched.start[b.id] >= sched.finish[a.id] - 1e-12
    motifs = [by_id[m] for m in sched.order]
    for a, b in itertools.combinations(motifs, 2):
        if streams == "single" or a.channel == b.channel:
            assert (
                sched.finish[a.id] <= sched.start[b.id] + 1e-12
                or sched.finish[b.id] <= sched.start[a.id] + 1e-12
            ), (a.id, b.id)
    assert sched.makespan == max(sched.finish.values())


def test_x1_greedy_is_7_and_optimum_6_with_a_on_cpu() -> None:
    dag, cost = fixture_x1()
    greedy = greedy_plan(dag, cost)
    assert [greedy[o].label for o in "abcd"] == [
        "1-way/seg1/gpu",
        "ring/seg1/gpu",
        "tree/seg1/gpu",
        "ring/seg1/gpu",
    ]
    g = unroll(dag, greedy, cost, iterations=1)
    for policy in ("crit", "fifo"):
        for streams in ("channel", "single"):
            assert list_schedule(g, policy, streams=streams).makespan == pytest.approx(7.0)
    costs = _x1_costs()
    assert len(costs) == 16
    best, choice = min(costs)
    assert best == pytest.approx(6.0) and choice == (1, 0, 1, 0)  # (cpu, ring, tree, ring)
    expected = [6.0, 6.5, 7.0, 7.0, 7.2, 7.2, 7.2, 7.5, 7.5, 7.5, 7.7, 7.7, 7.7, 8.0, 8.2, 8.2]
    assert sorted(c for c, _ in costs) == pytest.approx(expected)


def test_x1_optimum_schedule() -> None:
    dag, cost = fixture_x1()
    g = unroll(dag, plan_from(dag, (1, 0, 1, 0)), cost, iterations=1)
    s = list_schedule(g, "crit")
    spans = {k.split("/")[0].split("#")[0]: (s.start[k], s.finish[k]) for k in s.start}
    assert spans["a"] == (1.0, 4.0) and spans["b"] == (2.0, 3.0)
    assert spans["c"] == (3.0, 4.0) and spans["d"] == (4.0, 5.0)
    assert spans["nxt"] == (5.0, 6.0)
    _check_schedule(g, s)


def test_x2_fifo_8_against_critical_path_7() -> None:
    dag, cost = fixture_x2()
    g = unroll(dag, single_plan(dag), cost, iterations=1)
    fifo, crit = list_schedule(g, "fifo"), list_schedule(g, "crit")
    assert fifo.makespan == pytest.approx(8.0) and crit.makespan == pytest.approx(7.0)
    assert [m.split("/")[0] for m in fifo.order] == ["x", "y"]
    assert [m.split("/")[0] for m in crit.order] == ["y", "x"]
    for s in (fifo, crit):
        _check_schedule(g, s)


def test_x3_prefetch_shortens_makespan_and_period() -> None:
    dag, cost = fixture_x3()
    plain = list_schedule(unroll(dag, single_plan(dag), cost), "crit")
    pre = list_schedule(unroll(dag, single_plan(dag), cost, prefetch=True), "crit")
    assert (plain.makespan, plain.period) == pytest.approx((12.0, 6.0))
    assert (pre.makespan, pre.period) == pytest.approx((10.0, 4.0))


def test_f7_schedules_of_the_dlrm_dag_respect_edges_and_tokens() -> None:
    dag = dlrm("A2", 8)
    cost_table = {}
    for c in dag.comms:
        for o in dag.options[c.op.name]:
            cost_table[(c.op.name, o.label)] = 1e-3 * (1 + o.seg + o.ways)
    from syndicate.cost import TableCost

    cost = TableCost(cost_table)
    for mode, streams in [("fifo", "single"), ("crit", "channel"), ("lifo", "single")]:
        g = unroll(dag, greedy_plan(dag, cost), cost, prefetch=True)
        s = list_schedule(g, mode, streams=streams, priority={"a2a-emb-bwd": 0})
        _check_schedule(g, s, streams)


def test_f8_f12_mcmc_finds_the_exhaustive_optimum_deterministically() -> None:
    dag, cost = fixture_x1()
    seen: list[float] = []
    r1 = plan(
        dag,
        cost,
        mode="syndicate",
        budget=10_000,
        seed=1,
        clock="proposals",
        warmup=20,
        b=50.0,
        on_proposal=lambda k, c: seen.append(c),
    )
    r2 = plan(
        dag, cost, mode="syndicate", budget=10_000, seed=1, clock="proposals", warmup=20, b=50.0
    )
    # The optimizer prices the two-iteration unrolling (X1 has no cross-iteration edge, so
    # every plan costs twice its one-iteration makespan).
    exhaustive = min(
        evaluate(dag, cost, plan_from(dag, ch), "syndicate").makespan
        for ch in itertools.product(range(2), repeat=4)
    )
    assert r1.cost == pytest.approx(exhaustive) == pytest.approx(12.0)
    assert min(c for c, _ in _x1_costs(policy_min_fifo=True)) == pytest.approx(6.0)
    assert r1.plan["a"].channel == "cpu"
    assert (r1.plan, r1.order, r1.proposals) == (r2.plan, r2.order, r2.proposals)
    assert seen == sorted(seen, reverse=True)  # the best seen never gets worse (Gap 3.3)


def test_f10_acceptance() -> None:
    assert accept_probability(0.0, 7.0) == 1.0
    assert accept_probability(-1.0, 7.0) == 1.0
    assert accept_probability(0.07, 7.0) == pytest.approx(0.5, abs=1e-3)
    assert accept_probability(0.35, 7.0) == pytest.approx(0.03125, abs=1e-3)


def test_f11_stop_rule_and_best_not_worse_than_greedy() -> None:
    dag, cost = fixture_x1()
    r = plan(dag, cost, mode="syndicate", budget=10_000, seed=3, clock="proposals", warmup=20)
    # Stopped by the half-elapsed rule, long before the budget, after the warm-up.
    assert 20 <= r.proposals < 10_000
    assert r.cost <= r.greedy_cost
    over = plan(dag, cost, mode="syndicate", budget=5, seed=3, clock="proposals", warmup=20)
    assert over.proposals == 5  # over budget


def test_f13_syndicate_no_worse_than_s_exec_and_fifo_greedy_on_x1() -> None:
    dag, cost = fixture_x1()
    syn = plan(dag, cost, mode="syndicate", budget=10_000, seed=0, clock="proposals", warmup=50)
    s_exec = plan(dag, cost, mode="s_exec", budget=10_000, seed=0, clock="proposals", warmup=50)
    fifo = evaluate(dag, cost, greedy_plan(dag, cost), "s_exec")
    assert syn.cost <= s_exec.cost + 1e-12
    assert syn.cost <= fifo.makespan + 1e-12


def test_f14_catalogue_size() -> None:
    ar = CommOp("ar", "AR", 10, 128)
    aa = CommOp("aa", "AA", 10, 128)
    assert len(catalogue(ar)) == 6 and len(catalogue(aa)) == 16
    assert len(catalogue(ar)) ** 2 * len(catalogue(aa)) ** 3 == 147_456


def test_modes_are_the_papers_baselines() -> None:
    assert set(MODES) == {"fifo", "lifo", "ho", "s_sched", "s_exec", "syndicate"}
    assert MODES["lifo"].streams == MODES["ho"].streams == "single"
    assert MODES["syndicate"].mcmc and MODES["s_exec"].mcmc and not MODES["s_sched"].mcmc


def test_bad_inputs_are_refused() -> None:
    dag, cost = fixture_x1()
    with pytest.raises(ValueError, match="unknown mode"):
        plan(dag, cost, mode="magic")
    with pytest.raises(ValueError, match="budget"):
        plan(dag, cost, budget=0)
    with pytest.raises(ValueError, match="unknown policy"):
        list_schedule(unroll(dag, greedy_plan(dag, cost), cost), "random")
    with pytest.raises(ValueError, match="unknown parents"):
        Graph((Node("a", 1.0, ("ghost",), 0, 1),))
    with pytest.raises(ValueError, match="plan lacks"):
        unroll(dag, {}, cost)
    assert math.isfinite(plan(dag, cost, budget=3, clock="proposals").cost)


def test_the_periodic_order_relabels_the_prefetched_data_op() -> None:
    from syndicate.experiment import periodic_order

    dag, cost = fixture_x3()
    r = plan(dag, cost, mode="syndicate", budget=5, clock="proposals", objective="period")
    assert r.prefetch  # X3's gain is the prefetch
    assert r.iter_time == pytest.approx(4.0)  # (10 - 2) / 2: the prologue [0, 2] excluded
    assert periodic_order(dag, r, 3) == ["dp/m#1", "dp/m#2", "dp/m#3"]


def test_replaying_an_order_reproduces_the_schedule_it_came_from() -> None:
    """The enforcer's view (issue strictly by sequence, FIFO per stream) of optSched's and
    FIFO's orders on X2 gives their makespans back, and a sequence naming a motif twice or
    leaving one out is refused."""
    from syndicate.sched import replay_order

    dag, cost = fixture_x2()
    g = unroll(dag, single_plan(dag), cost, iterations=1)
    for policy, makespan in (("crit", 7.0), ("fifo", 8.0)):
        s = list_schedule(g, policy)
        assert replay_order(g, s.order).makespan == pytest.approx(makespan)
    with pytest.raises(ValueError, match="exactly once"):
        replay_order(g, [g.motifs[0].id] * 2)


def test_periodic_replay_of_x3_gives_the_prefetched_period() -> None:
    from syndicate.sched import periodic_sequence, replay_order

    dag, cost = fixture_x3()
    two = list_schedule(unroll(dag, single_plan(dag), cost, prefetch=True), "crit")
    g = unroll(dag, single_plan(dag), cost, prefetch=True, iterations=5)
    seq = periodic_sequence(two.order, True, frozenset({"dp"}), 5)
    assert seq == [f"dp/m#{k}" for k in range(1, 6)]
    assert replay_order(g, seq).period == pytest.approx(4.0)  # emb + mlp, dp hidden
    plain = unroll(dag, single_plan(dag), cost, iterations=5)
    seq = periodic_sequence(
        list_schedule(unroll(dag, single_plan(dag), cost), "crit").order,
        False,
        frozenset({"dp"}),
        5,
    )
    assert replay_order(plain, seq).period == pytest.approx(6.0)
