"""``Solver.DUALS`` (arbiter.auction.certify) against the exhaustive reference and the other
solvers (Themis §3.3, Pseudocode 1; spec B.5).

The solver skips a solve without app i when the PF LP's duals bound that market from below by
the PF rows of the others, and requires every starving app in the PF when a greedy allocation
serves them all. Both shortcuts must leave the answer exact: the PF value, and each c_i within
the documented factor e^PAYMENT_GAP above its exact value (never below).
"""

from __future__ import annotations

import math
import time

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
from arbiter.auction.certify import _TAIL_NODES, _certified, _DualMarket, _serve_first
from arbiter.auction.formulation import _components, _cost, _prepare
from arbiter.auction.solve import _CliqueMarket
from arbiter.cluster import load_cluster
from arbiter.synthetic import random_instance

INF = math.inf
EMPTY: frozenset[str] = frozenset()

SETTINGS = settings(
    deadline=None,
    max_examples=120,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

RHO = st.one_of(st.floats(0.1, 10.0), st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0]))


@st.composite
def markets(
    draw: st.DrawFn, max_apps: int = 5, max_gpus: int = 8, max_rows: int = 7, max_set: int = 3
) -> tuple[list[Bid], frozenset[str]]:
    """3-5 apps over 4-8 GPUs, 3-7 rows of at most 3 GPUs each: more row combinations than
    the enumeration limit, so HiGHS (and the dual certificates) run; ρ_old finite or ∞."""
    k = draw(st.integers(4, max_gpus))
    gpus = [f"g{i}" for i in range(k)]
    bids = []
    for a in range(draw(st.integers(3, max_apps))):
        rows: dict[frozenset[str], float] = {EMPTY: draw(st.one_of(st.just(INF), RHO))}
        for _ in range(draw(st.integers(3, max_rows))):
            subset = draw(st.sets(st.sampled_from(gpus), min_size=1, max_size=max_set))
            rows[frozenset(subset)] = draw(RHO)
        bids.append(Bid(f"a{a}", rows))
    return bids, frozenset(gpus)


@st.composite
def symmetric_markets(draw: st.DrawFn) -> tuple[list[Bid], frozenset[str]]:
    """Identical bidders over identical machines (the benchmark's tail in miniature): dense
    blocks of a few sizes on every machine, one ρ per size, groups of identical apps."""
    machines = draw(st.integers(2, 3))
    width = draw(st.sampled_from([2, 4]))
    gpus = [[f"m{m}g{k}" for k in range(width)] for m in range(machines)]
    bids = []
    for group in range(draw(st.integers(1, 3))):
        sizes = draw(st.sets(st.sampled_from([1, 2, width]), min_size=1, max_size=2))
        rho = {s: draw(st.sampled_from([0.25, 0.5, 1.0, 2.0])) for s in sizes}
        rows: dict[frozenset[str], float] = {EMPTY: draw(st.sampled_from([4.0, INF]))}
        for s in sorted(sizes):
            block = draw(st.integers(0, width // s - 1))
            for m in range(machines):
                rows[frozenset(gpus[m][block * s : (block + 1) * s])] = rho[s]
        for copy in range(draw(st.integers(1, 3))):
            bids.append(Bid(f"a{group}{copy}", dict(rows)))
    return bids[:6], frozenset(g for gs in gpus for g in gs)


def lex_value(r: PAResult) -> tuple[int, float]:
    finite = [rho for rho in r.pf_rho.values() if math.isfinite(rho)]
    return len(finite), -sum(math.log(rho) for rho in finite)


def check_exact(bids: list[Bid], offered: frozenset[str], r: PAResult) -> None:
    """PF value as the reference's; each c_i in [exact, exact * e^PAYMENT_GAP]."""
    (count, value), _ = brute_force_pf(bids, offered)
    assert lex_value(r)[0] == count
    assert lex_value(r)[1] == pytest.approx(value, abs=1e-6)
    for b in bids:
        assert r.pf_rho[b.app_id] == b.rows[r.pf_allocation[b.app_id]]
    for app, c in brute_force_payments(bids, offered, r.pf_allocation).items():
        assert c - 1e-9 <= r.c[app] <= c * math.exp(PAYMENT_GAP) + 1e-9, (app, r.c[app], c)


@SETTINGS
@given(markets())
def test_duals_match_brute_force(instance) -> None:
    bids, offered = instance
    check_exact(bids, offered, partial_allocation(bids, offered, solver=Solver.DUALS))


@SETTINGS
@given(symmetric_markets())
def test_duals_match_brute_force_on_symmetric_markets(instance) -> None:
    bids, offered = instance
    check_exact(bids, offered, partial_allocation(bids, offered, solver=Solver.DUALS))


@settings(SETTINGS, max_examples=60)
@given(markets())
def test_duals_agree_with_naive(instance) -> None:
    """Same PF value and the same optimum of every market without one app as the naive
    formulation (tie-independent), whenever the two PFs leave the same apps in the market."""
    bids, offered = instance
    ours = partial_allocation(bids, offered, solver=Solver.DUALS)
    naive = partial_allocation(bids, offered, naive=True)
    assert lex_value(ours)[0] == lex_value(naive)[0]
    assert lex_value(ours)[1] == pytest.approx(lex_value(naive)[1], abs=1e-6)
    if {a for a, p in ours.pf_rho.items() if p < INF} == {
        a for a, p in naive.pf_rho.items() if p < INF
    }:
        assert ours.value_without == pytest.approx(naive.value_without, abs=2 * PAYMENT_GAP)


def pf_and_bounds(bids, offered):
    """One market of every app: its apps, the market, the PF choice, the apps the PF serves,
    the starving ones among them and the Lagrangian bound of the market without each."""
    apps = _prepare(bids, offered)
    members = list(range(len(apps)))
    market = _DualMarket(apps, members, time.monotonic)
    pf = market.solve()
    served = [a for a in members if not (apps[a].starving and pf[a] == 0)]
    starving = frozenset(a for a in served if apps[a].starving)
    return apps, market, pf, served, starving, market.lagrangian_bounds(served, starving)


@SETTINGS
@given(markets(max_apps=4, max_gpus=6))
def test_lagrangian_bounds_are_lower_bounds(instance) -> None:
    """L_i never exceeds the optimum of the market without i (brute force), for every i."""
    bids, offered = instance
    _, _, _, served, _, bounds = pf_and_bounds(bids, offered)
    for i in served:
        others = [bids[a] for a in served if a != i]
        (count, value), _ = brute_force_pf(others, offered)
        assert count == len(others)  # the PF serves them all, so the market without i can
        assert bounds[i] <= -value + 1e-7


def test_serve_first_is_feasible_and_serves_where_greedy_might_not() -> None:
    """Two apps: a wants {g0} or {g0, g1} (the pair is cheaper), b only {g1}."""
    bids = [
        Bid("a", {EMPTY: INF, frozenset({"g0", "g1"}): 0.5, frozenset({"g0"}): 0.9}),
        Bid("b", {EMPTY: INF, frozenset({"g1"}): 0.8}),
    ]
    apps = _prepare(bids, frozenset({"g0", "g1"}))
    choice = _serve_first(apps, [0, 1])
    assert all(choice[a] for a in (0, 1))
    used = [apps[a].rows[r][0] for a, r in choice.items()]
    assert not used[0] & used[1]


CLUSTER = load_cluster("themis-sim-256")


def agree(a: PAResult, b: PAResult) -> None:
    assert lex_value(a)[0] == lex_value(b)[0]
    assert lex_value(a)[1] == pytest.approx(lex_value(b)[1], abs=1e-6)
    assert a.value_without == pytest.approx(b.value_without, abs=2 * PAYMENT_GAP)


@pytest.mark.parametrize("seed", [13000, 13001, 13002, 13003])
def test_duals_agree_on_generated_bids(seed: int) -> None:
    """The benchmark's 16 x 64 x 16 point: against the clique solver and the naive one."""
    bids, offered = random_instance(CLUSTER, 16, 64, 16, seed=seed)
    ours = partial_allocation(bids, offered, solver=Solver.DUALS)
    agree(ours, partial_allocation(bids, offered, solver=Solver.CLIQUES))
    agree(ours, partial_allocation(bids, offered, naive=True))


def test_certificates_settle_most_payments_at_64_x_256() -> None:
    """Full-grid instance 26001 (64 apps x 256 GPUs x 32 rows): the duals of one LP settle
    most c_i = 1 without a solve, and every settled one is c_i = 1 for the clique solver too."""
    bids, offered = random_instance(CLUSTER, 64, 256, 32, seed=26001)
    apps = _prepare(bids, offered)
    members = list(range(len(apps)))
    market = _DualMarket(apps, members, time.monotonic)
    pf = market.solve()
    served = [a for a in members if pf[a]]
    bounds = market.lagrangian_bounds(served, frozenset(a for a in served if apps[a].starving))
    reference = partial_allocation(bids, offered, solver=Solver.CLIQUES)
    settled = 0
    for i in served:
        kept = {a: pf[a] for a in served if a != i}
        if _certified(apps, bounds, i, kept, PAYMENT_GAP):
            settled += 1
            assert reference.value_without[apps[i].app_id] == pytest.approx(
                -_cost(apps, kept), abs=2 * PAYMENT_GAP
            )
    assert settled >= len(served) // 2
    agree(partial_allocation(bids, offered, solver=Solver.DUALS), reference)


@pytest.mark.parametrize("seed", [9000, 9004, 9016])
def test_tail_markets_need_no_milp_and_stay_exact(seed: int) -> None:
    """Full-grid 16 x 16 x 8 instances whose PF LP stays fractional under every clique cut
    (the clique solver needs HiGHS's MILP): the zero-half cuts make it integral, and the
    answers agree with the clique solver and the naive formulation."""
    bids, offered = random_instance(CLUSTER, 16, 16, 8, seed=seed)
    apps = _prepare(bids, offered)
    comp = max(_components(apps), key=len)
    cliques = _CliqueMarket(apps, comp, time.monotonic)
    cliques.solve()
    assert cliques.milp_solves == 1
    market = _DualMarket(apps, comp, time.monotonic)
    pf = market.solve()
    assert market.milp_solves == 0 and market.zero_half
    assert _cost(apps, pf) == pytest.approx(_cost(apps, cliques.solve()), abs=1e-9)
    ours = partial_allocation(bids, offered, solver=Solver.DUALS)
    agree(ours, partial_allocation(bids, offered, solver=Solver.CLIQUES))
    agree(ours, partial_allocation(bids, offered, naive=True))


@pytest.mark.parametrize("seed", [9000, 9004])
def test_without_zero_half_cuts_a_tail_market_switches_to_the_milp(seed: int) -> None:
    """With the zero-half cuts off (no stalled round allowed), the PF of the same instances
    needs HiGHS's MILP, and the ``-i`` solves then go from the root LP to the MILP."""
    bids, offered = random_instance(CLUSTER, 16, 16, 8, seed=seed)
    apps = _prepare(bids, offered)
    comp = max(_components(apps), key=len)
    market = _DualMarket(apps, comp, time.monotonic)
    market.stall_rounds = 0
    market.solve()
    assert market.milp_solves == 1 and not market.zero_half
    assert market.node_limit == _TAIL_NODES < _DualMarket.node_limit


def test_benchmark_tail_instance_without_milp_fallbacks() -> None:
    """Instance 26031 of the benchmark's 64 x 256 x 32 point (half-integral PF LP, 58 MILP
    fallbacks before the zero-half cuts): at most a few now, same answers as the clique
    solver."""
    bids, offered = random_instance(CLUSTER, 64, 256, 32, seed=26031)
    ours = partial_allocation(bids, offered, solver=Solver.DUALS)
    assert ours.solves <= 5
    agree(ours, partial_allocation(bids, offered, solver=Solver.CLIQUES))


def test_giving_up_the_zero_half_cuts_removes_their_rows_and_stays_exact() -> None:
    """A market that gives up the zero-half cuts (its ``-i`` solves mostly ended in the MILP)
    deletes their rows from the warm LP; every later solve still finds the clique solver's
    optimum."""
    bids, offered = random_instance(CLUSTER, 16, 16, 8, seed=9000)
    apps = _prepare(bids, offered)
    comp = max(_components(apps), key=len)
    market = _DualMarket(apps, comp, time.monotonic)
    cliques = _CliqueMarket(apps, comp, time.monotonic)
    assert _cost(apps, market.solve()) == pytest.approx(_cost(apps, cliques.solve()), abs=1e-9)
    rows, added = market.h.getNumRow(), len(market._zero_half_rows)
    assert added > 0
    market._give_up()
    assert market.h.getNumRow() == rows - added and market.stall_rounds == 0
    for i in comp:
        without = frozenset({i})
        assert _cost(apps, market.solve(without)) == pytest.approx(
            _cost(apps, cliques.solve(without)), abs=1e-9
        )
    assert not market._zero_half_rows
