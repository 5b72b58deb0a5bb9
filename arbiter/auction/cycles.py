"""Odd-cycle cuts and dual certificates for the PA auction (Themis §3.3, Pseudocode 1; spec B.5).

``Solver.CYCLES`` is :class:`~arbiter.auction.solve._CliqueMarket` plus two things, both exact:

**Odd-cycle cuts.** The benchmark's tail (64 apps x 256 GPUs x 32 rows) is instances whose LP
stays *half-integral* after every clique cut: each of a few dozen apps sits at 1/2 on two rows
of equal ρ (the same shape on two machines), and the rows form odd cycles of the conflict graph
(two rows conflict when they belong to one app or share a GPU). No clique is violated (each
edge is at exactly 1), so clique separation stops while the LP bound stays below the 0/1
optimum, and every solve without one app fell back to HiGHS's MILP (25-150 ms each, 40 per
auction). An odd cycle C of the conflict graph holds at most (|C| - 1) / 2 chosen rows, for
every ``-i`` market alike (fixing columns to 0 keeps it valid), so ``Σ_{k in C} x[k] <=
(|C| - 1) / 2`` is a valid cut for the model's whole life. It is separated exactly (Grötschel,
Lovász, Schrijver): with edge weights ``1 - x[u] - x[v]`` >= 0, a violated odd cycle is a
closed odd walk of weight < 1, found as a shortest path from (v, even) to (v, odd) in the
bipartite double cover of the LP's fractional support.

**Dual certificates for c_i = 1.** Any prices ``y <= 0`` on the packing rows (GPUs, cuts)
give the Lagrangian bound of the market without app i::

    L_i = Σ_{a in market, a != i} min_{k of a} (c_k - Σ_{rows r ∋ k} y_r)  +  Σ_r y_r b_r

(valid for every feasible choice, whatever y). Taking y from the PF LP (solved once more with
the starving apps the PF served required, as every ``-i`` solve requires them), ``L_i`` is
computed for all i in one pass. When ``L_i`` reaches the PF rows of the others (``kept``) less
the payment gap, the market without i cannot do better than ``kept`` by more than that gap, so
c_i = 1 (within the gap, never below its true value) without a solve. On the benchmark's 64 x
256 x 32 instances this settles most of the 64 ``-i`` solves (53 of 64 on full-grid seed 26001).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import highspy
import numpy as np

from arbiter.auction.formulation import _App, _cost
from arbiter.auction.solve import _CliqueMarket

# A cut is violated when the LP exceeds its right-hand side by more than this.
_VIOLATION = 1e-6
# At most this many odd-cycle cuts per separation round, over at most this many LP columns.
_MAX_CYCLES = 64
_MAX_NODES = 160
# Odd-cycle separation rounds per solve (the root LP comes first and takes most of them).
_CYCLE_ROUNDS = 6


def _odd_cycles(
    values: np.ndarray, conflicts: list[int], limit: int = _MAX_CYCLES
) -> list[tuple[int, ...]]:
    """Violated odd cycles of the conflict graph at the LP point ``values`` (columns).

    Nodes are the fractional columns (the ``_MAX_NODES`` largest); an edge joins two
    conflicting ones, weighing ``1 - x[u] - x[v]`` (>= 0 when the edge's clique holds). In the
    bipartite double cover (a step flips parity) the lightest path from (v, 0) to (v, 1) is the
    lightest closed odd walk through v (all pairs at once: Floyd-Warshall in numpy); if it
    weighs < 1, the odd cycle it contains (no heavier: weights are >= 0) is violated:
    ``Σ x = (|C| - weight) / 2 > (|C| - 1) / 2``.
    """
    frac = np.flatnonzero((values > 1e-6) & (values < 1 - 1e-6))
    if frac.size < 3:
        return []
    if frac.size > _MAX_NODES:
        frac = frac[np.argsort(-values[frac], kind="stable")[:_MAX_NODES]]
    nodes = [int(k) for k in frac]
    n = len(nodes)
    x = values[frac]
    adjacent = np.zeros((n, n), dtype=bool)
    for u, k in enumerate(nodes):
        bits = conflicts[k]
        adjacent[u] = [bits >> c & 1 for c in nodes]
    weight = np.where(adjacent, np.maximum(0.0, 1.0 - x[:, None] - x[None, :]), np.inf)
    dist = np.full((2 * n, 2 * n), np.inf)
    dist[:n, n:] = weight
    dist[n:, :n] = weight
    hop = np.tile(np.arange(2 * n), (2 * n, 1))  # next node on the lightest path i -> j
    for k in range(2 * n):
        through = dist[:, k : k + 1] + dist[k : k + 1, :]
        better = through < dist
        if better.any():
            dist = np.where(better, through, dist)
            hop = np.where(better, hop[:, k : k + 1], hop)
    found: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()
    for v in np.argsort(np.diagonal(dist[:n, n:])).tolist():
        if len(found) >= limit or dist[v, v + n] >= 1.0 - _VIOLATION:
            break
        walk, u = [v], v
        while u != v + n and len(walk) <= 2 * n:
            u = int(hop[u, v + n])
            walk.append(u % n)
        cycle = _simple_odd_cycle(walk[:-1])
        if float(x[cycle].sum()) > (len(cycle) - 1) / 2 + _VIOLATION:
            cut = tuple(sorted(nodes[u] for u in cycle))
            if cut not in seen:
                seen.add(cut)
                found.append(cut)
    return found


def _simple_odd_cycle(walk: list[int]) -> list[int]:
    """A simple odd cycle inside the closed odd walk ``walk`` (its last node meets its first).

    A repeated node splits the walk into two closed walks, one of them odd; recurse into it.
    """
    first: dict[int, int] = {}
    for pos, n in enumerate(walk):
        if n in first:
            inner = walk[first[n] : pos]
            outer = walk[: first[n]] + walk[pos:]
            return _simple_odd_cycle(inner if len(inner) % 2 else outer)
        first[n] = pos
    return walk


class _CycleMarket(_CliqueMarket):
    """:class:`_CliqueMarket` with odd-cycle cuts and dual certificates (``Solver.CYCLES``).

    Clique cuts are separated first; when none is violated, odd cycles of the fractional
    support are. The odd-cycle cuts live in the warm LP only (the MILP fallback, rare now,
    gets the clique cuts as before and HiGHS's own separation).
    """

    cut_rounds = 20

    def __init__(self, apps: list[_App], members: list[int], clock: Callable[[], float]) -> None:
        super().__init__(apps, members, clock)
        self.cycle_cuts: set[tuple[int, ...]] = set()
        self.cut_rhs: list[float] = []  # right-hand side of each appended cut, in order
        self.cycle_rounds_left = _CYCLE_ROUNDS

    def solve_or_defer(self, *args: Any, **kwargs: Any) -> Any:
        self.cycle_rounds_left = _CYCLE_ROUNDS
        return super().solve_or_defer(*args, **kwargs)

    def _add_cuts(self, added: list[tuple[int, ...]]) -> None:
        super()._add_cuts(added)
        self.cut_rhs.extend(1.0 for _ in added)

    def _separate(self, values: np.ndarray) -> int:
        found = super()._separate(values)
        if found or self.cycle_rounds_left <= 0:
            return found
        self.cycle_rounds_left -= 1
        cycles = [c for c in _odd_cycles(values, self.conflicts()) if c not in self.cycle_cuts]
        if cycles:
            self.cycle_cuts.update(cycles)
            starts = np.cumsum([0] + [len(c) for c in cycles[:-1]]).astype(np.int32)
            index = np.fromiter((k for c in cycles for k in c), dtype=np.int32)
            rhs = np.array([(len(c) - 1) / 2 for c in cycles])
            n = len(cycles)
            lower = np.full(n, -highspy.kHighsInf)
            self.h.addRows(n, lower, rhs, index.size, starts, index, np.ones(index.size))
            self.cut_rhs.extend(rhs.tolist())
        return len(cycles)

    def lagrangian_bounds(self, market: list[int], required: frozenset[int]) -> dict[int, float]:
        """``L_i`` (module docstring) for each i of ``market`` (the apps of this component
        with finite ρ at the PF; the others sit on their empty row and count in neither side).

        Solves the LP once more (cuts separated, no branching) with the empty rows of
        ``required`` fixed to 0 and every app outside ``market`` on its empty row, and prices
        the packing rows with its duals (clamped to <= 0: the bound holds for any such y).
        """
        outside = frozenset(self.members) - frozenset(market)
        zeroed = self._zeroed(outside, required)
        self._bounds(self.h, zeroed - self.zeroed, 0.0, 0.0)
        self._bounds(self.h, self.zeroed - zeroed, 0.0, 1.0)
        self.zeroed = zeroed
        h = self.h
        self.cycle_rounds_left = _CYCLE_ROUNDS
        for _ in range(self.cut_rounds + 1):
            h.run()
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                return {}
            if not self._separate(np.asarray(h.getSolution().col_value)):
                break
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return {}
        n_apps = len(self.members)
        row_dual = np.asarray(h.getSolution().row_dual)
        y = np.minimum(row_dual[n_apps:], 0.0)
        lp = h.getLp()
        start = np.asarray(lp.a_matrix_.start_)
        index = np.asarray(lp.a_matrix_.index_)
        value = np.asarray(lp.a_matrix_.value_)
        # Prices of rows: 0 on the app rows (they are not relaxed).
        price = np.concatenate([np.zeros(n_apps), y])
        per_entry = price[index] * value
        col_of = np.repeat(np.arange(lp.num_col_), np.diff(start))
        paid = np.bincount(col_of, weights=per_entry, minlength=lp.num_col_)
        reduced = np.asarray(lp.col_cost_) - paid
        rhs = np.concatenate([np.ones(lp.num_row_ - n_apps - len(self.cut_rhs)), self.cut_rhs])
        constant = float(y @ rhs)
        mins: dict[int, float] = {}
        for col, (a, _) in enumerate(zip(self.col_app, self.col_row, strict=True)):
            if col not in zeroed:
                r = float(reduced[col])
                if r < mins.get(a, math.inf):
                    mins[a] = r
        total = sum(mins[a] for a in market)
        return {i: total - mins[i] + constant for i in market}


def _certified(
    apps: list[_App],
    bounds: Mapping[int, float],
    i: int,
    kept: Mapping[int, int],
    gap: float,
) -> bool:
    """Whether the market without i provably cannot beat ``kept`` by more than ``gap``."""
    bound = bounds.get(i)
    return bound is not None and bound >= _cost(apps, kept) - gap
