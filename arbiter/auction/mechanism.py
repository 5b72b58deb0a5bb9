"""The partial-allocation mechanism, one shot (Themis §3.3, Pseudocode 1; spec B.5).

:func:`partial_allocation` validates the bids, solves the proportional-fair allocation and the
hidden payments (:mod:`arbiter.auction.payments`) and turns them into whole-GPU allocations and
the leftover (:mod:`arbiter.auction.leftover`). It is a pure function of its arguments; the one
clock it needs, for a ``time_budget``, is the ``clock`` argument.
"""

from __future__ import annotations

import contextlib
import gc
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from arbiter.auction.formulation import _prepare
from arbiter.auction.leftover import _settle
from arbiter.auction.model import Bid, PAResult, Rounding, Solver
from arbiter.auction.payments import PAYMENT_GAP, _pf_and_payments

__all__ = ["partial_allocation"]


class _Pause:
    """Auctions running now (any thread), and whether the collector was on before the first."""

    lock = threading.Lock()
    depth = 0
    was_on = False


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while an auction runs, as it was after.

    The auction allocates some 10^5 short-lived objects (bid rows, tuples, dicts) that
    reference counting frees; every 700 of them made the collector walk the young objects and
    every few such walks older ones, up to the caller's whole heap: about a tenth of the
    auction's CPU at 64 apps x 256 GPUs (benchmarks/auction_latency.py). Nothing the auction
    decides depends on it. Nested and concurrent auctions share one pause: the collector comes
    back on after the last of them, and only if it was on before the first.
    """
    with _Pause.lock:
        if _Pause.depth == 0:
            _Pause.was_on = gc.isenabled()
            gc.disable()
        _Pause.depth += 1
    try:
        yield
    finally:
        with _Pause.lock:
            _Pause.depth -= 1
            if _Pause.depth == 0 and _Pause.was_on:
                gc.enable()


def partial_allocation(
    bids: Iterable[Bid],
    offered: frozenset[str],
    *,
    rounding: Rounding | str = Rounding.LEASE_TIME,
    naive: bool = False,
    payment_gap: float = PAYMENT_GAP,
    time_budget: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    solver: Solver | str = Solver.DUALS,
) -> PAResult:
    """Run one PA auction of ``offered`` GPUs among ``bids`` (one bid per app).

    ``naive=True`` uses the straightforward formulation (one MILP per solve, rebuilt each time,
    n + 1 solves, no decomposition); it exists as the benchmark's baseline and a cross-check.
    Both give the same allocation value and the same c_i (up to ties between optima).

    ``payment_gap`` bounds the optimality gap (in Σ log ρ) of the solves without one app:
    each c_i is within a factor e^payment_gap above its exact value. The default 1e-4 is
    exact for any practical lease; a live arbiter under a round deadline may trade precision
    for latency (1e-2: c_i within 1 %, 6 s of a 10-minute lease).

    ``time_budget`` (seconds, None = none) bounds the solving time of a live round: the solves
    run as without a budget until its deadline (a budget the exact auction fits in changes
    nothing), a solve at its deadline keeps the best allocation it found, and
    ``PAResult.budget_stops`` counts them (0 = the result is exact). Then the PF allocation may
    fall short of the optimum and a c_i may exceed its exact value (an app is never charged
    more than the exact payment).

    ``clock`` (seconds, monotonic) is what the time budget is measured on: the auction reads
    no other clock (HiGHS's own ``time_limit`` is set from it).

    ``solver`` picks the exact solver (:class:`Solver`; the benchmark compares them). Every
    solver is exact: the allocation value and each market without one app agree.
    """
    solver = Solver(solver)
    if not 0.0 <= payment_gap <= 0.1:
        raise ValueError(f"payment_gap must be in [0, 0.1], got {payment_gap}")
    if time_budget is not None and not (time_budget > 0 and math.isfinite(time_budget)):
        raise ValueError(f"time_budget must be a positive number of seconds, got {time_budget}")
    if time_budget is not None and naive:
        raise ValueError("time_budget applies to the structured solver, not naive=True")
    rounding = Rounding(rounding)
    if not isinstance(offered, frozenset | set):
        raise ValueError(f"offered must be a frozenset of GPU ids, got {type(offered).__name__}")
    offered = frozenset(offered)
    with _collector_paused():
        bids = list(bids)
        apps = _prepare(bids, offered)
        choice, c_idx, without, solves, stops = _pf_and_payments(
            apps,
            naive=naive,
            payment_gap=payment_gap,
            time_budget=time_budget,
            clock=clock,
            solver=solver,
        )

        pf = {a.app_id: a.keys[choice[i]] for i, a in enumerate(apps)}
        pf_rho = {a.app_id: a.rows_rho[choice[i]] for i, a in enumerate(apps)}
        c = {apps[i].app_id: ci for i, ci in sorted(c_idx.items())}
        allocation, lease_fraction, leftover = _settle(bids, offered, pf, c, rounding)
        return PAResult(
            pf_allocation=pf,
            c=c,
            allocation=allocation,
            lease_fraction=lease_fraction,
            leftover=leftover,
            rounding=rounding,
            pf_rho=pf_rho,
            solves=solves,
            value_without={apps[i].app_id: v for i, v in sorted(without.items())},
            budget_stops=stops,
        )
