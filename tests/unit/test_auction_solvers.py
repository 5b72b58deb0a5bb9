"""The auction's exact solvers against each other and the exhaustive reference (Themis §3.3).

``Solver.CLIQUES`` (maximal-clique cuts of the conflict graph, the default) and ``Solver.PAIRS``
(the previous two-app cuts) must give the same optimum of the PF market and of every market
without one app, on the adversarial instances that made the LP fractional: identical bidders
with equal-ρ rows over identical machines, and three apps around one machine whose rows meet
pairwise but share no GPU (x = 1/2 each satisfies every GPU and two-app constraint).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbiter.auction import (
    PAYMENT_GAP,
    Bid,
    PAResult,
    Solver,
    brute_force_payments,
    brute_force_pf,
    partial_allocation,
)
from arbiter.auction.formulation import _prepare
from arbiter.auction.solve import _CliqueMarket, _Market
from arbiter.cluster import load_cluster
from arbiter.synthetic import random_instance

EMPTY: frozenset[str] = frozenset()
INF = math.inf

SETTINGS = settings(
    deadline=None,
    max_examples=80,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def lex_value(r: PAResult) -> tuple[int, float]:
    finite = [rho for rho in r.pf_rho.values() if math.isfinite(rho)]
    return len(finite), -sum(math.log(rho) for rho in finite)


def triangles(n: int, best: float = 0.25, other: float = 0.9) -> tuple[list[Bid], frozenset[str]]:
    """Three apps A, B, C and ``n`` machines t of three GPUs (t0, t1, t2): A bids for
    {t0, t1}, B for {t1, t2}, C for {t0, t2} on every machine; machine 0 is the one they all
    prefer (ρ ``best``, elsewhere ``other``; ρ_old = 1). The rows of one machine meet pairwise
    but share no GPU, so the LP can put 1/2 on each of them (value 1.5 on machine 0) while
    only one of the three fits."""
    gpus = {t: [f"m{t}g{k}" for k in range(3)] for t in range(n)}
    pairs = {"A": (0, 1), "B": (1, 2), "C": (0, 2)}
    bids = []
    for app, (x, y) in pairs.items():
        rows: dict[frozenset[str], float] = {EMPTY: 1.0}
        for t in range(n):
            rows[frozenset({gpus[t][x], gpus[t][y]})] = best if t == 0 else other
        bids.append(Bid(app, rows))
    return bids, frozenset(g for gs in gpus.values() for g in gs)


def root_lp(market: _Market, rounds: int) -> np.ndarray:
    """The market's LP optimum after ``rounds`` rounds of its own cut separation."""
    for _ in range(rounds + 1):
        market.h.run()
        values = np.asarray(market.h.getSolution().col_value)
        if not market._separate(values):
            break
    return values


def fractional(values: np.ndarray) -> int:
    return int(((values > 1e-6) & (values < 1 - 1e-6)).sum())


def test_three_app_clique_makes_the_lp_integral() -> None:
    """On ``triangles`` the two-app cuts leave the LP at 1/2 on A, B and C of machine 0
    (each pair is already at most 1); the clique {A0, B0, C0} cuts it off."""
    bids, offered = triangles(6)
    apps = _prepare(bids, offered)
    members = list(range(len(apps)))
    pairs = root_lp(_Market(apps, members, time.monotonic), rounds=10)
    cliques = root_lp(_CliqueMarket(apps, members, time.monotonic), rounds=10)
    assert fractional(pairs) > 0
    assert fractional(cliques) == 0


@pytest.mark.parametrize("solver", list(Solver))
@pytest.mark.parametrize("n", [4, 6])
def test_triangles_match_brute_force(solver: Solver, n: int) -> None:
    """7^3 = 343 row combinations (n = 6): more than the enumeration limit, so HiGHS runs."""
    bids, offered = triangles(n)
    r = partial_allocation(bids, offered, solver=solver)
    (count, value), _ = brute_force_pf(bids, offered)
    assert lex_value(r) == (count, pytest.approx(value, abs=1e-9))
    # One app takes machine 0 (log 4), the other two one other machine each (log 1/0.9).
    assert value == pytest.approx(math.log(4) + 2 * math.log(1 / 0.9))
    for app, c in brute_force_payments(bids, offered, r.pf_allocation).items():
        assert r.c[app] == pytest.approx(c, abs=1e-9), app


@st.composite
def symmetric_instances(draw: st.DrawFn) -> tuple[list[Bid], frozenset[str]]:
    """Identical bidders over identical machines, as the bid generator makes them: machines
    of ``width`` GPUs, each app's rows dense blocks (the same block on every machine) of a
    few sizes, one ρ per size; some groups of apps bid identically (same rows, same ρ)."""
    machines = draw(st.integers(2, 3))
    width = draw(st.sampled_from([2, 4]))
    gpus = [[f"m{m}g{k}" for k in range(width)] for m in range(machines)]
    groups = draw(st.integers(1, 3))
    bids = []
    for group in range(groups):
        sizes = draw(st.sets(st.sampled_from([1, 2, width]), min_size=1, max_size=2))
        rho = {s: draw(st.sampled_from([0.25, 0.5, 1.0, 2.0])) for s in sizes}
        old = draw(st.sampled_from([4.0, INF]))
        rows: dict[frozenset[str], float] = {EMPTY: old}
        for s in sorted(sizes):
            block = draw(st.integers(0, width // s - 1))
            for m in range(machines):
                rows[frozenset(gpus[m][block * s : (block + 1) * s])] = rho[s]
        for copy in range(draw(st.integers(1, 3))):
            bids.append(Bid(f"a{group}{copy}", dict(rows)))
    # 2-6 apps: brute force stays small (at most 7^6 combinations, seldom reached).
    bids = bids[:6]
    return bids, frozenset(g for gs in gpus for g in gs)


@SETTINGS
@given(symmetric_instances(), st.sampled_from(list(Solver)))
def test_symmetric_instances_match_brute_force(instance, solver: Solver) -> None:
    bids, offered = instance
    r = partial_allocation(bids, offered, solver=solver)
    (count, value), _ = brute_force_pf(bids, offered)
    assert lex_value(r)[0] == count
    assert lex_value(r)[1] == pytest.approx(value, abs=1e-6)
    for app, c in brute_force_payments(bids, offered, r.pf_allocation).items():
        assert r.c[app] == pytest.approx(c, abs=1e-6), app


def agree(a: PAResult, b: PAResult) -> None:
    assert lex_value(a)[0] == lex_value(b)[0]
    assert lex_value(a)[1] == pytest.approx(lex_value(b)[1], abs=1e-6)
    assert a.value_without == pytest.approx(b.value_without, abs=2 * PAYMENT_GAP)


# The benchmark's 16 x 64 x 16 point (full-grid seeds 13000-13009), where the previous solver
# fell back to HiGHS's MILP on instance 13001.
@pytest.mark.parametrize("seed", [13000, 13001, 13002, 13003])
def test_solvers_agree_on_generated_bids(seed: int) -> None:
    cluster = load_cluster("themis-sim-256")
    bids, offered = random_instance(cluster, 16, 64, 16, seed=seed)
    new = partial_allocation(bids, offered)
    agree(new, partial_allocation(bids, offered, solver=Solver.PAIRS))
    agree(new, partial_allocation(bids, offered, naive=True))


def test_default_is_the_dual_solver() -> None:
    bids, offered = triangles(6)
    by_default = partial_allocation(bids, offered)
    explicit = partial_allocation(bids, offered, solver="duals")
    assert by_default == explicit


def test_unknown_solver_raises() -> None:
    bids, offered = triangles(2)
    with pytest.raises(ValueError, match="not a valid Solver"):
        partial_allocation(bids, offered, solver="gurobi")


def test_highs_answers_are_checked() -> None:
    """A MILP answer is used only if its rows are disjoint and cost what HiGHS reports."""
    bids, offered = triangles(2)
    apps = _prepare(bids, offered)
    market = _Market(apps, list(range(len(apps))), time.monotonic)
    # rows: 0 = empty, 1 = machine 0, 2 = machine 1 (apps A, B, C in bid order)
    good = {0: 1, 1: 2, 2: 0}  # A on machine 0, B on machine 1, C nothing
    cost = math.log(0.25) + math.log(0.9) + math.log(1.0)
    assert market._agrees(good, cost, frozenset())
    assert not market._agrees(good, cost - 0.5, frozenset())  # below what the rows cost
    assert not market._agrees({0: 1, 1: 1, 2: 0}, 2 * math.log(0.25), frozenset())  # overlap
    # an excluded app sits on its empty row, whose cost HiGHS's objective includes
    assert market._agrees({0: 1, 1: 2}, cost, frozenset({2}))
