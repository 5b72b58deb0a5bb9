"""Exchange chains (arbiter.auction.exchange; Themis §3.3, Pseudocode 1; spec B.5).

A market without app i that the chains settle must get an allocation that is feasible, serves
every other app, costs at most ``L_i`` plus the gap and never less than the true optimum
(checked by exhaustive search), and the auction must agree with itself without the chains.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from unit.test_auction_duals import SETTINGS, markets, pf_and_bounds, symmetric_markets

from arbiter.auction import PAYMENT_GAP, Solver, partial_allocation
from arbiter.auction.certify import _DualMarket
from arbiter.auction.formulation import _App, _cost
from arbiter.cluster import load_cluster
from arbiter.synthetic import random_instance

CLUSTER = load_cluster("themis-sim-256")


def optimum(apps: list[_App], members: list[int], served: frozenset[int]) -> float:
    """Least cost of disjoint rows, one per member, the ``served`` ones non-empty (exhaustive
    search; shares no code with the solver)."""
    best = math.inf
    for combo in itertools.product(*(range(len(apps[a].rows)) for a in members)):
        used: set[int] = set()
        ok = True
        for a, r in zip(members, combo, strict=True):
            gpus = apps[a].rows[r][0]
            if (a in served and r == 0) or not used.isdisjoint(gpus):
                ok = False
                break
            used |= gpus
        if ok:
            best = min(best, sum(apps[a].rows[r][1] for a, r in zip(members, combo, strict=True)))
    return best


def check_settled(bids, offered) -> int:
    apps, market, pf, served, starving, bounds = pf_and_bounds(bids, offered)
    settled = 0
    for i in served:
        kept = {a: pf[a] for a in served if a != i}
        if i not in bounds or bounds[i] >= _cost(apps, kept) - PAYMENT_GAP:
            continue  # no bound, or c_i = 1 certified already
        target = bounds[i] + PAYMENT_GAP
        found = market.settle(kept, target)
        if found is None:
            continue
        settled += 1
        assert found.keys() == kept.keys()
        used: set[int] = set()
        for a, r in found.items():
            assert not used & apps[a].rows[r][0]
            used |= apps[a].rows[r][0]
            assert r != 0 or a not in starving
        cost = _cost(apps, found)
        assert cost <= target
        best = optimum(apps, [a for a in served if a != i], starving - {i})
        assert best - 1e-9 <= cost <= best + PAYMENT_GAP + 1e-9
    return settled


@SETTINGS
@given(markets())
def test_settled_markets_are_optimal_within_the_gap(instance) -> None:
    check_settled(*instance)


@SETTINGS
@given(symmetric_markets())
def test_settled_symmetric_markets_are_optimal_within_the_gap(instance) -> None:
    check_settled(*instance)


def test_chains_settle_tail_markets_and_agree_with_the_solves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Benchmark instance 26012 (64 x 256 x 32, a tail instance where 50 apps pay c_i < 1):
    the chains settle many markets without one app, and the auction gives the same optimum
    of every such market with the chains turned off (every one solved)."""
    bids, offered = random_instance(CLUSTER, 64, 256, 32, seed=26012)
    settled: list[bool] = []
    real = _DualMarket.settle

    def counted(self, kept, target):
        found = real(self, kept, target)
        settled.append(found is not None)
        return found

    monkeypatch.setattr(_DualMarket, "settle", counted)
    ours = partial_allocation(bids, offered, solver=Solver.DUALS)
    assert sum(settled) >= 10
    monkeypatch.setattr(_DualMarket, "settle", lambda self, kept, target: None)
    solved = partial_allocation(bids, offered, solver=Solver.DUALS)
    assert ours.pf_rho == solved.pf_rho
    assert ours.value_without == pytest.approx(solved.value_without, abs=2 * PAYMENT_GAP)
