"""Where a Syndicate iteration goes and what bounds any plan (syndicate.analysis), and the
optimizer dominating the baselines it can express (seed 000 §4.5, T:1727-1779; spec §3.5,
Gap 3.10, §6.4)."""

from __future__ import annotations

import itertools

import pytest

from syndicate.analysis import bounds, breakdown, dag_period, link_kind, link_loads, order_oracle
from syndicate.cost import MicrobenchCost
from syndicate.dag import dlrm, fixture_x3
from syndicate.experiment import run_mode
from syndicate.optimizer import MODES, _Evaluator, greedy_plan, plan
from syndicate.topology import Topology, hgx2

BASELINES = ("s_sched", "s_exec", "ho", "lifo", "fifo")


@pytest.fixture(scope="module")
def small() -> tuple[Topology, MicrobenchCost]:
    topo = hgx2(nodes=2, gpus_per_node=4)
    return topo, MicrobenchCost(topo)


@pytest.fixture(scope="module")
def runs(small):
    """Every mode on the small cluster's A1 (comm-bound) with compute scaled up 3x."""
    topo, cost = small
    dag = dlrm("A1", topo.n_ranks).scaled(3.0)
    out = {
        mode: run_mode(dag, topo, mode, cost=cost, budget=60, clock="proposals", warmup=30)
        for mode in ("syndicate", *BASELINES)
    }
    return dag, out


def test_dag_period_of_x3_is_the_compute_when_the_data_op_is_prefetched() -> None:
    dag, _ = fixture_x3()
    # dp (2.0) before emb (1.0) -> mlp (3.0): prefetched without limit, only compute remains;
    # a dp slower than an iteration still hides (the bound lets it run ahead unboundedly).
    assert dag_period(dag, {"dp": 2.0}) == pytest.approx(4.0)
    assert dag_period(dag, {"dp": 10.0}) == pytest.approx(4.0)


def test_bounds_hold_for_every_mode_and_are_consistent(small, runs) -> None:
    _, cost = small
    dag, out = runs
    b = bounds(dag, cost)
    assert b.compute == pytest.approx(sum(t.time for t in dag.tasks))
    # combined is a max over the three per channel assignment, minimised over assignments
    assert b.combined >= max(b.compute, b.stream, b.dag) - 1e-12
    for c in dag.comms:  # the floors are the fastest options of the catalogue
        assert set(b.floors[c.op.name]) == {o.channel for o in dag.options[c.op.name]}
    for mode, m in out.items():
        assert m.sim.period >= b.combined * (1 - 1e-9), mode
        assert m.result.iter_time >= b.combined * (1 - 1e-9), mode


def test_breakdown_accounts_for_the_whole_iteration(small, runs) -> None:
    topo, cost = small
    dag, out = runs
    for mode, m in out.items():
        bd = breakdown(dag, topo, cost, m.result, m.sim, streams=MODES[mode].streams)
        assert bd.compute + sum(bd.gaps.values()) == pytest.approx(bd.period, rel=1e-9), mode
        assert "other" not in bd.gaps, mode  # every gap waits on a comm-op
        assert all(0.0 <= v <= 1.0 + 1e-9 for v in bd.stream_busy.values()), mode
        assert max(bd.link_util.values()) <= 1.0 + 1e-9, mode


def test_link_loads_are_bytes_over_capacity(small) -> None:
    topo, cost = small
    dag = dlrm("A2", topo.n_ranks)
    opts = {c.op.name: dag.options[c.op.name][0] for c in dag.comms}
    loads = link_loads(topo, dag, cost, opts)
    kinds = {link_kind(topo, k) for k in loads}
    assert {"nvl-up", "nvl-down", "roce-up", "roce-down"} <= kinds  # all on gpu
    assert not kinds & {"host-up", "host-down", "sw-up", "sw-down"}
    cpu = dict(opts)
    aa = next(c.op.name for c in dag.comms if c.op.kind == "AA")
    cpu[aa] = next(o for o in dag.options[aa] if o.channel == "cpu")
    assert {"host-up", "host-down"} <= {
        link_kind(topo, k) for k in link_loads(topo, dag, cost, cpu)
    }


def test_syndicate_dominates_every_baseline_in_its_model(runs) -> None:
    """Syndicate's plan space holds every baseline's plan and its order search every
    baseline's policy, so on its own cost model it never loses to one."""
    _, out = runs
    syn = out["syndicate"].result.iter_time
    for mode in BASELINES:
        assert syn <= out[mode].result.iter_time * (1 + 1e-9), mode


def test_the_order_search_matches_the_exhaustive_op_order_oracle(small) -> None:
    topo, cost = small
    dag = dlrm("A2", topo.n_ranks).scaled(3.0)
    best = order_oracle(dag, cost)
    assert best == sorted(best, key=lambda o: o.period) and len(best) == 8  # 2^3 AA channels
    ev = _Evaluator(dag, cost, MODES["syndicate"], "period")
    assert ev.cost_of(best[0].plan) <= best[0].period * (1 + 1e-9)
    # Without the order search (optSched and FIFO only) the same plan prices no better.
    plain = _Evaluator(dag, cost, MODES["s_exec"], "period")
    assert plain.cost_of(best[0].plan) >= ev.cost_of(best[0].plan) - 1e-12
    # The chain starts no worse than the greedy plan and the baselines' default-AA plan.
    r = plan(dag, cost, mode="syndicate", budget=40, clock="proposals", objective="period")
    for start in (greedy_plan(dag, cost), greedy_plan(dag, cost, default_aa=True)):
        assert r.iter_time <= ev.cost_of(start) * (1 + 1e-9)


def test_skew_aware_pricing_predicts_the_skewed_iteration_better(small) -> None:
    """With per-rank compute skew in the simulator, the optimizer pricing every task at its
    expected slowest rank predicts the simulated iteration closer than pricing it blind
    (deterministic: the proposal clock and the skew draws are seeded)."""
    topo, cost = small
    dag = dlrm("A2", topo.n_ranks).scaled(3.0)
    assert dag.skewed(0.0, 8).tasks == dag.tasks
    f = dag.skewed(0.5, 8).tasks[0].time / dag.tasks[0].time
    assert f == pytest.approx(1 + 0.5 * 8 / 9)
    with pytest.raises(ValueError):
        dag.skewed(-0.1, 8)
    kw = {"cost": cost, "budget": 40, "clock": "proposals", "warmup": 20, "skew": 0.5}
    blind = run_mode(dag, topo, "syndicate", skew_aware=False, skew_seed=3, **kw)
    aware = run_mode(dag, topo, "syndicate", skew_seed=3, **kw)
    err_blind = abs(blind.result.iter_time - blind.sim.period) / blind.sim.period
    err_aware = abs(aware.result.iter_time - aware.sim.period) / aware.sim.period
    assert err_aware < 0.5 * err_blind  # measured: 4 % against 26 %
    # and here the plan priced with the straggler runs faster under the skew (36.9 vs 40.8 ms)
    assert aware.sim.period < blind.sim.period


def test_op_precedence_is_exactly_the_orders_that_deadlock(small) -> None:
    """A whole-op enforcer sequence deadlocks iff it issues a comm-op before one whose
    completion its submission needs (op_precedence; a prefetched data op exempt)."""
    from syndicate.dag import unroll
    from syndicate.optimizer import op_order_sequence, op_precedence
    from syndicate.sched import periodic_sequence, replay_order

    _, cost = small
    dag = dlrm("A2", 8).scaled(3.0)
    opts = {c.op.name: dag.options[c.op.name][0] for c in dag.comms}
    data_ops = frozenset(c.op.name for c in dag.comms if c.after is None)
    precede = op_precedence(dag)
    assert ("a2a-emb-fwd", "ar-top-mlp") in precede and ("ar-top-mlp", "a2a-emb-fwd") not in precede
    names = [c.op.name for c in dag.comms]
    kept = 0
    for pf in (False, True):
        g = unroll(dag, opts, cost, prefetch=pf, iterations=3)
        for perm in itertools.permutations(names):
            pos = {n: i for i, n in enumerate(perm)}
            ok = all(pos[b] < pos[a] for b, a in precede if not (pf and b in data_ops))
            seq = periodic_sequence(op_order_sequence(dag, cost, opts, perm, pf), pf, data_ops, 3)
            try:
                replay_order(g, seq)
                ran = True
            except ValueError:
                ran = False
            assert ran == ok, (perm, pf)
            kept += ok
    assert 0 < kept < 240
