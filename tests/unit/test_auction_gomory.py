"""Gomory mixed-integer cuts (arbiter.auction.gomory; Themis §3.3 PA auction, spec B.5 solver):
every cut read off a real HiGHS basis holds at every 0/1 point of the LP it was read from and
cuts off that LP's vertex; in the auction they live for one ``-i`` solve, and the warm LP's
rows kept beside HiGHS (arbiter.auction.rows) stay its rows."""

from __future__ import annotations

import itertools
import time

import highspy
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbiter.auction import Solver, partial_allocation
from arbiter.auction.certify import _DualMarket
from arbiter.auction.formulation import _components, _cost, _prepare
from arbiter.auction.gomory import gomory_cuts
from arbiter.auction.payments import PAYMENT_GAP
from arbiter.auction.rows import LpRows
from arbiter.auction.solve import _CliqueMarket, quiet_highs
from arbiter.cluster import load_cluster
from arbiter.synthetic import random_instance

CLUSTER = load_cluster("themis-sim-256")


def solved_lp(
    n: int,
    groups: list[list[int]],
    packing: list[tuple[int, ...]],
    costs: list[float],
    fixed: set[int],
) -> tuple[highspy.Highs, LpRows]:
    """min c x over 0 <= x <= 1 (``fixed`` columns at 0), Σ x = 1 per group, Σ x <= 1 per
    packing row; solved by HiGHS."""
    rows = LpRows(n)
    lower, upper = [], []
    for group in groups:
        rows.append(group)
        lower.append(1.0)
        upper.append(1.0)
    for row in packing:
        rows.append(row)
        lower.append(-highspy.kHighsInf)
        upper.append(1.0)
    start, cols, coefs = rows.csr()
    h = quiet_highs()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, len(rows)
    lp.col_cost_ = np.asarray(costs)
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.array([0.0 if k in fixed else 1.0 for k in range(n)])
    lp.row_lower_ = np.asarray(lower)
    lp.row_upper_ = np.asarray(upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = start.astype(np.int32)
    lp.a_matrix_.index_ = cols.astype(np.int32)
    lp.a_matrix_.value_ = coefs
    h.passModel(lp)
    h.run()
    return h, rows


def points(n: int, groups, packing, fixed):
    for bits in itertools.product((0, 1), repeat=n):
        x = np.array(bits, dtype=float)
        if any(x[k] for k in fixed):
            continue
        if all(x[g].sum() == 1 for g in groups) and all(x[list(r)].sum() <= 1 for r in packing):
            yield x


@st.composite
def lps(draw: st.DrawFn):
    """Small markets: 3-5 apps, each an empty column and 1-2 rows, rows in conflict over
    random GPUs (packing rows of 2-3 columns of different apps), near-equal costs, a column or
    two fixed to 0: the LP is often fractional (odd cycles of conflicts)."""
    sizes = draw(st.lists(st.integers(1, 2), min_size=3, max_size=5))
    groups, real, app_of = [], [], {}
    n = 0
    for a, size in enumerate(sizes):
        groups.append(list(range(n, n + size + 1)))
        for k in range(n + 1, n + size + 1):
            real.append(k)
            app_of[k] = a
        n += size + 1
    pairs = [(j, k) for j, k in itertools.combinations(real, 2) if app_of[j] != app_of[k]]
    packing = draw(st.lists(st.sampled_from(pairs), min_size=2, max_size=8, unique=True))
    costs = [0.0] * n
    for k in real:
        costs[k] = draw(st.sampled_from([-1.0, -1.0, -1.0, -1.5, -0.5]))
    fixed = draw(st.sets(st.sampled_from(real), max_size=2))
    return n, groups, packing, costs, fixed


@settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(lps())
def test_every_cut_holds_at_every_0_1_point_and_cuts_off_the_vertex(instance) -> None:
    n, groups, packing, costs, fixed = instance
    h, rows = solved_lp(n, groups, packing, costs, fixed)
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    values = np.asarray(h.getSolution().col_value)
    cuts = gomory_cuts(h, values, rows, [], limit=n)
    fractional = ((values > 1e-6) & (values < 1 - 1e-6)).any()
    assert bool(cuts) == fractional
    feasible = list(points(n, groups, packing, fixed))
    for cols, coef, rhs in cuts:
        assert float(coef @ values[cols]) < rhs - 1e-6, "the vertex is not cut off"
        for x in feasible:
            assert float(coef @ x[cols]) >= rhs - 1e-9, (cols, coef, rhs, x)


def test_triangle_cut_makes_the_lp_integral() -> None:
    """Three apps, each with one row pairwise in conflict with the others' (x = ½ each): one
    round of cuts closes the LP at the 0/1 optimum (one app served)."""
    groups = [[0, 1], [2, 3], [4, 5]]
    packing = [(1, 3), (3, 5), (1, 5)]
    costs = [0.0, -1.0, 0.0, -1.0, 0.0, -1.0]
    h, rows = solved_lp(6, groups, packing, costs, set())
    assert h.getInfo().objective_function_value == pytest.approx(-1.5)
    values = np.asarray(h.getSolution().col_value)
    cuts = gomory_cuts(h, values, rows, [], limit=6)
    assert cuts
    for cols, coef, rhs in cuts:
        h.addRow(rhs, highspy.kHighsInf, cols.size, cols.astype(np.int32), coef)
    h.run()
    assert h.getInfo().objective_function_value == pytest.approx(-1.0)


def test_rows_kept_beside_highs_are_its_rows() -> None:
    """After a PF solve and every ``-i`` solve of a benchmark tail instance (clique, zero-half
    and Gomory rows added, the Gomory ones deleted again), the rows kept beside the warm LP
    are HiGHS's own, row for row; no Gomory row outlives its solve."""
    bids, offered = random_instance(CLUSTER, 64, 256, 32, seed=26005)
    apps = _prepare(bids, offered)
    comp = max(_components(apps), key=len)
    market = _DualMarket(apps, comp, time.monotonic)
    pf = market.solve()

    def same_rows() -> bool:
        lp = market.h.getLp()
        start = np.asarray(lp.a_matrix_.start_)
        index = np.asarray(lp.a_matrix_.index_)
        value = np.asarray(lp.a_matrix_.value_)
        theirs = np.zeros((lp.num_row_, lp.num_col_))
        for k in range(lp.num_col_):
            theirs[index[start[k] : start[k + 1]], k] = value[start[k] : start[k + 1]]
        row_start, cols, coefs = market._lp_rows.csr()
        ours = np.zeros_like(theirs)
        for r in range(row_start.size - 1):
            ours[r, cols[row_start[r] : row_start[r + 1]]] = coefs[row_start[r] : row_start[r + 1]]
        return len(market._lp_rows) == lp.num_row_ and np.array_equal(ours, theirs)

    assert same_rows()
    for i in comp:
        if not pf[i]:
            continue
        kept = {a: pf[a] for a in comp if a != i}
        market.solve(frozenset({i}), hint=kept, gap=PAYMENT_GAP)
        assert not market._gomory_rows
        assert same_rows()
    assert market.gomory_cuts > 0


@pytest.mark.parametrize("seed", [26005, 26038])
def test_benchmark_tail_instances_close_without_the_milp(seed: int) -> None:
    """Instances of the benchmark's 64 x 256 x 32 point whose ``-i`` solves ended in HiGHS's
    MILP after 13-21 rounds of zero-half cuts that left their bound unchanged: the Gomory cuts
    close them at the root, and the payments agree with the clique solver's."""
    bids, offered = random_instance(CLUSTER, 64, 256, 32, seed=seed)
    ours = partial_allocation(bids, offered, solver=Solver.DUALS)
    assert ours.solves == 0
    reference = partial_allocation(bids, offered, solver=Solver.CLIQUES)
    assert set(ours.c) == set(reference.c)
    for app in ours.c:
        assert ours.value_without[app] == pytest.approx(
            reference.value_without[app], abs=2 * PAYMENT_GAP
        )


def test_a_market_without_gomory_rows_prices_like_before() -> None:
    """The Lagrangian prices (computed from the rows kept beside HiGHS) equal those computed
    from HiGHS's own matrix."""
    bids, offered = random_instance(CLUSTER, 16, 64, 16, seed=4242)
    apps = _prepare(bids, offered)
    comp = max(_components(apps), key=len)
    market = _DualMarket(apps, comp, time.monotonic)
    market.solve()
    reduced, constant, _ = market._priced(set())
    lp = market.h.getLp()
    n_apps = len(comp)
    y = np.minimum(np.asarray(market.h.getSolution().row_dual)[n_apps:], 0.0)
    price = np.concatenate([np.zeros(n_apps), y])
    start = np.asarray(lp.a_matrix_.start_)
    index = np.asarray(lp.a_matrix_.index_)
    value = np.asarray(lp.a_matrix_.value_)
    paid = np.array(
        [
            price[index[start[k] : start[k + 1]]] @ value[start[k] : start[k + 1]]
            for k in range(lp.num_col_)
        ]
    )
    assert np.allclose(reduced, np.asarray(lp.col_cost_) - paid)
    assert constant == pytest.approx(float(y @ np.asarray(lp.row_upper_)[n_apps:]))
    assert _cost(apps, market.solve()) == pytest.approx(
        _cost(apps, _CliqueMarket(apps, comp, time.monotonic).solve()), abs=1e-9
    )


def test_a_clone_answers_like_its_market() -> None:
    """A market cloned between solves (its own HiGHS model, same rows, bounds and basis)
    finds the same optimum without each app as the market it was cloned from."""
    bids, offered = random_instance(CLUSTER, 64, 256, 32, seed=26012)
    apps = _prepare(bids, offered)
    comp = max(_components(apps), key=len)
    market = _DualMarket(apps, comp, time.monotonic)
    pf = market.solve()
    twin = market.clone()
    assert twin.h is not market.h and twin.h.getNumRow() == market.h.getNumRow()
    served = [i for i in comp if pf[i]][:6]
    for i in served:
        kept = {a: pf[a] for a in comp if a != i}
        ours = market.solve(frozenset({i}), hint=kept, gap=PAYMENT_GAP)
        theirs = twin.solve(frozenset({i}), hint=kept, gap=PAYMENT_GAP)
        assert _cost(apps, ours) == pytest.approx(_cost(apps, theirs), abs=PAYMENT_GAP)
    assert len(market._lp_rows) == market.h.getNumRow()
    assert len(twin._lp_rows) == twin.h.getNumRow()


def test_the_second_thread_changes_no_payment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The solves without one app split over two threads (every other one on a clone) give
    the same optima as all of them on one market, and the same answers run after run."""
    from arbiter.auction import payments

    bids, offered = random_instance(CLUSTER, 64, 256, 32, seed=26005)
    split = partial_allocation(bids, offered)
    again = partial_allocation(bids, offered)
    assert split.c == again.c and split.value_without == again.value_without
    monkeypatch.setattr(payments, "_SPLIT_MIN", 10**9)
    alone = partial_allocation(bids, offered)
    assert split.pf_rho == alone.pf_rho
    for app in alone.c:
        assert split.value_without[app] == pytest.approx(
            alone.value_without[app], abs=2 * PAYMENT_GAP
        )
