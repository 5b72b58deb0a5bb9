"""The proportional-fair allocation and the hidden payments (Themis §3.3, Pseudocode 1; spec B.5).

    G_pf     = argmax over disjoint rows (one per app) of  Π_i 1/ρ_i(G_i)
    G_pf^-i  = the same market without app i
    c_i      = Π_{j≠i} 1/ρ_j(G_j,pf) / Π_{j≠i} 1/ρ_j(G^-i_j,pf)   in (0, 1]

Removing app i only changes its own conflict component, and c_i = 1 with no solve when G_i,pf
is empty, when no other app has a row touching G_i,pf, or when every other app already holds
its best row. Each ``-i`` solve starts from the PF rows of the others as incumbent and requires
the starving apps the PF served (spec B.5 Gap 2). Without a time budget, the ``-i`` solves
that the warm LP cannot finish go to HiGHS's MILP on two worker threads (``Solver.CLIQUES``
and ``Solver.DUALS``, which first settles c_i = 1 from the PF LP's duals where it can, and
c_i < 1 by exchange chains that meet their bound: :mod:`arbiter.auction.certify`,
:mod:`arbiter.auction.exchange`). With ``Solver.DUALS`` and ``_SPLIT_MIN`` or more ``-i``
solves left, every other one runs on a second thread, on a clone of its market: a fixed split,
so the answers do not depend on the threads' timing.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from arbiter.auction.certify import _certified, _DualMarket, _serve_first
from arbiter.auction.formulation import _App, _components, _cost
from arbiter.auction.model import Solver
from arbiter.auction.solve import (
    _ENUMERATION_LIMIT,
    _CliqueMarket,
    _Market,
    _optimum,
    _optimum_or_defer,
    _past,
)

__all__ = ["PAYMENT_GAP"]

# Optimality gap (absolute, in Σ log ρ) of the solves without one app, which only set c_i: each
# c_i is exact up to a factor exp(1e-4) (at most 0.06 s of a 10-minute lease), never below its
# true value. The PF allocation itself is solved exactly (solve._EXACT_GAP).
PAYMENT_GAP = 1e-4
# c_i is a product of ratios that could underflow to 0 with extreme bids; it stays in (0, 1].
_C_FLOOR = math.ulp(0.0)
# Threads for the MILP fallbacks of the ``-i`` solves (HiGHS runs without the GIL); on this
# 2-core machine two ran six fallbacks of the benchmark's 64 x 256 x 32 tail 2.3x faster.
_WORKERS = min(2, os.cpu_count() or 1)
# Under a time budget, the share of it the proportional-fair solves may use; the rest is for
# the solves that set the hidden payments.
_PF_SHARE = 0.5
# Solves without one app left after the certificates from which a second thread takes every
# other one, on a clone of the market (cloning costs about a solve).
_SPLIT_MIN = 4


def _greedy(apps: list[_App], members: list[int]) -> dict[int, int]:
    """A feasible allocation to start a budgeted solve from: apps in order of what their best
    row gains over nothing (starving apps first), each taking its best row still free."""
    used: set[int] = set()
    choice: dict[int, int] = {}
    for a in sorted(members, key=lambda a: (apps[a].best - apps[a].rows[0][1], a)):
        ranked = sorted(range(1, len(apps[a].rows)), key=lambda r: apps[a].rows[r][1])
        choice[a] = next((r for r in ranked if used.isdisjoint(apps[a].rows[r][0])), 0)
        used |= apps[a].rows[choice[a]][0]
    return choice


def _reassign(apps: list[_App], kept: Mapping[int, int]) -> dict[int, int]:
    """``kept`` improved by local moves: each app in turn (largest gain first) switches to its
    best row that fits in its own GPUs plus the free ones. A feasible market without the app
    that left ``kept``, found in microseconds: the budgeted ``-i`` solve starts from it."""
    choice = dict(kept)
    used = set().union(*(apps[a].rows[r][0] for a, r in choice.items()))
    improved = True
    while improved:
        improved = False
        order = sorted(choice, key=lambda a: (apps[a].best - apps[a].rows[choice[a]][1], a))
        for a in order:
            own = apps[a].rows[choice[a]][0]
            best_r, best_c = choice[a], apps[a].rows[choice[a]][1]
            for r, (gpus, cost) in enumerate(apps[a].rows):
                if cost < best_c - 1e-12 and all(g in own or g not in used for g in gpus):
                    best_r, best_c = r, cost
            if best_r != choice[a]:
                used -= own
                used |= apps[a].rows[best_r][0]
                choice[a] = best_r
                improved = True
    return choice


# A ``-i`` solve's answer: an allocation, or a MILP fallback running on the pool.
Answer = dict[int, int] | Future[dict[int, int]]


def _pf_and_payments(
    apps: list[_App],
    naive: bool = False,
    payment_gap: float = PAYMENT_GAP,
    time_budget: float | None = None,
    *,
    clock: Callable[[], float],
    solver: Solver = Solver.DUALS,
) -> tuple[dict[int, int], dict[int, float], dict[int, float], int, int]:
    """PF choice (app -> row) and c_i for every app; also the number of MILP solves and of
    solves stopped by ``time_budget`` (seconds on ``clock``; None = every solve to its gap).

    The market for c_i is the apps with finite ρ in the PF allocation (Gap 2): an app the PF
    leaves at ρ = ∞ lost this round and is not counted in anyone's hidden payment.

    Under a budget the solves run exactly as without one until its deadline: the PF solves
    until ``_PF_SHARE`` of it, the ``-i`` solves until its end, in order (no solve is given a
    slice of its own: the first hard ``-i`` solve finds the cuts that make the later ones
    easy, and cut short it left every later one hard, so a round the exact auction finishes
    in a fifth of the budget ended with most of its c_i approximate). So a budget the exact
    auction fits in changes nothing. A solve at its deadline returns its incumbent (the PF starts
    from :func:`_greedy`, a ``-i`` solve from the PF rows of the others), or, for a ``-i``
    solve, :func:`_reassign`'s market (local moves of the others into the GPUs i leaves) when
    that is better; either is a feasible market without i, so its c_i can only come out above
    its exact value: the app is never overcharged. A ``-i`` solve reached after the budget is
    spent takes :func:`_reassign`'s market.
    """
    choice: dict[int, int] = {}
    c: dict[int, float] = {}
    without: dict[int, float] = {}
    comp_value: dict[tuple[int, ...], float] = {}
    start = clock()
    pf_end = None if time_budget is None else start + _PF_SHARE * time_budget
    end = None if time_budget is None else start + time_budget
    comps = [list(range(len(apps)))] if naive else _components(apps)
    big = {
        k: math.prod(len(apps[a].rows) for a in comp) > _ENUMERATION_LIMIT and len(comp) > 1
        for k, comp in enumerate(comps)
    }
    # naive=True is the straightforward formulation whatever the solver: plain MILPs.
    market_type = {Solver.CLIQUES: _CliqueMarket, Solver.DUALS: _DualMarket}.get(solver, _Market)
    market_type = _Market if naive else market_type
    newer = solver in (Solver.CLIQUES, Solver.DUALS)
    markets = {k: market_type(apps, comp, clock) for k, comp in enumerate(comps) if big[k]}
    # Phase 1: the proportional-fair allocation of every component.
    lost: dict[int, frozenset[int]] = {}
    for k, comp in enumerate(comps):
        market = markets.get(k)
        if naive and market:
            pf = market.solve_milp(frozenset())
        else:
            if market:
                market.deadline = pf_end
            hint = _greedy(apps, comp) if market and time_budget is not None else None
            served: frozenset[int] = frozenset()
            if isinstance(market, _DualMarket):
                # Solver.DUALS: when local moves from the greedy allocation serve every
                # starving app, every optimum does (Gap 2), so the PF may require it.
                hint = min(
                    _reassign(apps, hint or _greedy(apps, comp)),
                    _reassign(apps, _serve_first(apps, comp)),
                    key=lambda choice: _cost(apps, choice),
                )
                starving = frozenset(a for a in comp if apps[a].starving)
                served = starving if all(hint[a] for a in starving) else frozenset()
            pf = _optimum(apps, comp, market, frozenset(), hint=hint, required=served)
        choice.update(pf)
        lost[k] = frozenset(a for a in comp if apps[a].starving and pf[a] == 0)
        comp_value[tuple(comp)] = -_cost(apps, {a: pf[a] for a in comp if a not in lost[k]})
    # Phase 2: c_i, solving the market without i only where it can differ; under a budget
    # every such solve may run until its end.
    for market in markets.values():
        market.deadline = end
    todo: list[tuple[int, int, dict[int, int]]] = []
    stopped = 0
    for k, comp in enumerate(comps):
        # Solver.DUALS: Lagrangian bounds of every market without one app, from one LP's
        # duals (arbiter.auction.certify), computed when a cheap test below does not settle c_i.
        bounds: dict[int, float] | None = None
        users: dict[int, set[int]] = {}
        for a in comp:
            if a not in lost[k]:
                for gpus, _ in apps[a].rows[1:]:
                    for g in gpus:
                        users.setdefault(g, set()).add(a)
        for i in comp:
            freed = apps[i].rows[choice[i]][0]
            others = [a for a in comp if a != i and a not in lost[k]]
            kept = {a: choice[a] for a in others}
            if not naive and (
                not freed
                or not any(users.get(g, set()) - {i} for g in freed)
                or all(apps[a].rows[choice[a]][1] <= apps[a].best for a in others)
            ):
                c[i] = 1.0
                without[i] = -_cost(apps, kept)
                continue
            market = markets.get(k)
            if not naive and isinstance(market, _DualMarket):
                if bounds is None:
                    in_market = [a for a in comp if a not in lost[k]]
                    starving = frozenset(a for a in in_market if apps[a].starving)
                    bounds = market.lagrangian_bounds(in_market, starving)
                if _certified(apps, bounds, i, kept, payment_gap):
                    c[i] = 1.0
                    without[i] = -_cost(apps, kept)
                    continue
                # Exchange chains that meet the bound: the optimum within the gap, no solve.
                found = market.settle(kept, bounds[i] + payment_gap) if i in bounds else None
                if found is not None:
                    value = _cost(apps, found)
                    c[i] = min(1.0, max(_C_FLOOR, math.exp(value - _cost(apps, kept))))
                    without[i] = -min(value, _cost(apps, kept))
                    continue
            todo.append((k, i, kept))
    # Without a time budget the ``-i`` solves the warm LP cannot finish go to HiGHS's MILP on
    # worker threads (HiGHS releases the GIL), while this thread goes on with the next solves.
    # (Solver.PAIRS, the previous solver, stays sequential.)
    concurrent = newer and time_budget is None and not naive and _WORKERS > 1
    # Solver.DUALS with enough solves left: every other one runs on a second thread, on a clone
    # of its market (_DualMarket.clone), so the two threads' LP runs overlap. Each market sees
    # a fixed list of solves in a fixed order, so the answers do not depend on the timing.
    twins: dict[int, _Market] = {}
    if solver is Solver.DUALS and not naive and _WORKERS > 1 and len(todo) >= _SPLIT_MIN:
        for k in sorted({todo[n][0] for n in range(1, len(todo), 2)}):
            market = markets.get(k)
            if isinstance(market, _DualMarket):
                twins[k] = market.clone()
    pools: list[ThreadPoolExecutor] = []  # started at the first MILP fallback or the split
    pool_lock = threading.Lock()

    def pool() -> ThreadPoolExecutor:
        with pool_lock:
            if not pools:
                pools.append(ThreadPoolExecutor(_WORKERS + (1 if twins else 0)))
            return pools[0]

    def solve_at(n: int, defer: bool, on: Mapping[int, _Market]) -> tuple[Answer, int]:
        """The optimum of the ``n``-th market without one app, on the markets ``on`` (a MILP
        fallback on the pool when ``defer``), and 1 if the budget was spent before it."""
        k, i, kept = todo[n]
        comp, market = comps[k], on.get(k)
        excluded = lost[k] | {i}
        if naive and market:
            return market.solve_milp(excluded), 0
        if end is not None and _past(end, clock):
            return _reassign(apps, kept), 1  # budget spent: local moves
        stops = market.budget_stops if market else 0
        # Every optimum without i keeps all of the market served (Gap 2), so starving
        # members may be required to get GPUs: this removes ρ = ∞ from the LP.
        required = frozenset(a for a in kept if apps[a].starving)
        found = _optimum_or_defer(
            apps,
            comp,
            market,
            excluded,
            hint=kept,
            required=required,
            gap=payment_gap,
            defer=defer,
            # A MILP fallback starts from the others' local moves into i's GPUs.
            improve=(lambda h: _reassign(apps, h)) if newer else None,
        )
        if isinstance(found, dict):
            if market and market.budget_stops > stops:  # stopped at the deadline
                moved = _reassign(apps, kept)
                return (moved if _cost(apps, moved) < _cost(apps, found) else found), 0
            return found, 0
        return pool().submit(found), 0

    def solve_all(positions: range, on: Mapping[int, _Market]) -> list[tuple[Answer, int]]:
        return [solve_at(n, concurrent, on) for n in positions]

    try:
        answers: list[tuple[Answer, int]] = []
        if twins:
            side = pool().submit(solve_all, range(1, len(todo), 2), {**markets, **twins})
            mine = solve_all(range(0, len(todo), 2), markets)
            theirs = side.result()
            for n in range(len(todo)):
                answers.append(mine[n // 2] if n % 2 == 0 else theirs[n // 2])
        else:
            answers = solve_all(range(len(todo)), markets)
        for (_, i, kept), (opt, spent) in zip(todo, answers, strict=True):
            value = _cost(apps, opt if isinstance(opt, dict) else opt.result())
            c[i] = min(1.0, max(_C_FLOOR, math.exp(value - _cost(apps, kept))))
            without[i] = -min(value, _cost(apps, kept))
            stopped += spent
    finally:
        for executor in pools:
            executor.shutdown(wait=True, cancel_futures=True)
    every = [*markets.values(), *twins.values()]
    milp = sum(m.milp_solves for m in every)
    stopped += sum(m.budget_stops for m in every)
    # Other components keep their PF rows when i leaves: add their value to the optimum.
    total = sum(comp_value.values())
    for members, value in comp_value.items():
        for i in members:
            without[i] += total - value
    return choice, c, without, milp, stopped
