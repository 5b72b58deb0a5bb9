"""Dual certificates for the PA auction's hidden payments (Themis §3.3, Pseudocode 1; spec B.5).

``Solver.DUALS`` is :class:`~arbiter.auction.solve._CliqueMarket` (same clique cuts, same
branch and bound, same checked MILP fallback) plus two exact shortcuts, four ways to close
the LP's gap on the benchmark's tail without HiGHS's MILP, a start basis for the PF and a clone
of the market for a second thread (all listed below):

**c_i = 1 from one LP's duals.** Most of the n solves without one app (53 of 64 on the
benchmark's 64 x 256 x 32 instance 26001) end where they start: the others keep their PF
rows and c_i = 1, yet each costs a warm LP solve of the 2,048-column model. Any prices
``y <= 0`` on the packing rows (GPUs, clique cuts, each ``<= b_r``) bound the market without
app i from below (Lagrangian relaxation of those rows)::

    L_i = Σ_{a in market, a != i} min_{k of a} (c_k - Σ_{rows r ∋ k} y_r)  +  Σ_r y_r b_r

valid for every feasible choice, whatever y. Taking y from the PF LP (solved once more with the
starving apps the PF served required, as every ``-i`` solve requires them), ``L_i`` comes for
all i from one pass over the columns. When ``L_i`` reaches the cost of the PF rows of the others
(``kept``, feasible without i) less the payment gap, the market without i cannot beat ``kept``
by more than that gap: c_i = 1 (within the gap, never below its true value), no solve. The
bound is computed from the clamped duals, not read from HiGHS, so it holds whatever the LP's
accuracy.

**Serve every starving app in the PF when a greedy allocation can.** Gap 2's objective first
maximises the number of apps with finite ρ; if a greedy allocation (improved by local moves)
already serves every starving app, every optimum does, so their empty rows are fixed to 0 in
the PF solve (``required``, as in the ``-i`` solves) and that allocation is its incumbent. This
keeps the lexicographic weight of ρ = ∞ out of the PF's LP, and its MILP fallback (if any)
starts from that incumbent. A greedy allocation that misses a starving app changes nothing
(no requirement; the exact lexicographic solve runs as before).

**Zero-half cuts** (:mod:`arbiter.auction.zerohalf`): when no clique cut is violated, {0, ½}
Chvátal-Gomory cuts of the app, GPU and clique rows, found by elimination over GF(2). The
tail's LPs (half-integral after every clique cut: apps at ½ on equal-ρ rows over
interchangeable machines, in odd cycles) become integral in a few rounds; before, each of their
``-i`` solves was a HiGHS MILP of 20-30 ms. Like the clique cuts, each holds for every market
without some apps and stays in the warm LP. The LP of these markets is very degenerate (the
cuts can move it between equally good fractional points for dozens of rounds), so a node stops
separating after ``stall_rounds`` rounds in a row that leave its value unchanged. A market
whose ``-i`` solves mostly end in HiGHS's MILP anyway (at least ``_GIVE_UP`` of them, and more
than the LP closed: crowded markets such as 64 apps on 64 GPUs, where the gap is not the
tail's symmetric one) gives the zero-half cuts up for the rest of the auction and deletes
their rows, which there made every warm LP run several times slower.

**Gomory cuts at the root of a ``-i`` solve** (:mod:`arbiter.auction.gomory`). There the
zero-half cuts could run 13-38 rounds without moving the bound (each cut off one half-integral
point, and the simplex moved to its twin on the same face), then the MILP ran anyway. At a
``-i`` root, when no clique cut is violated, ``gomory_per_round`` Gomory mixed-integer cuts
are read off the optimal basis instead. They hold for that solve's bounds only, so they leave
the LP when it ends (:meth:`_DualMarket._drop_gomory`); the zero-half cuts stay in the PF
solve, the certificates' LP and the nodes below a root, where they hold for every later solve.
On the benchmark's 40 instances at 64 x 256 x 32, the MILP fallbacks went from 13 to 2-3.

**Reduced-cost fixing at each solve's root.** When a solve's first LP is fractional, its duals
(clamped, as for the certificates) bound every allocation that takes a given column; a column
whose bound exceeds the incumbent's cost is fixed to 0 for that solve and its MILP fallback.
The prices are the root's first LP's, and the fixing reaches HiGHS with the next LP run
(:meth:`_DualMarket._before_run`; the fixed columns are at 0 in that basis, which stays
optimal). Only in markets whose PF needed zero-half cuts: elsewhere most ``-i`` LPs are
integral at once (measured when the fixing still cost an LP run of its own: 16 x 64 x 16,
25 % more CPU).

**LP rounding.** At each fractional node, rows taken greedily by LP value and the apps left
over on their cheapest row that still fits: a feasible allocation, checked exactly. On the
degenerate LPs the bound is often already the optimum while the LP point stays fractional;
the rounding finds an allocation that meets it and the solve ends there. The cut loop tries
it (and the incumbent) after every round without a clique cut (``_met``): a node whose bound
already meets one needs no more zero-half rounds (on the 40 instances at 64 x 256 x 32, in
one process: 2.45 s of CPU against 2.74 s).

**Exchange chains** (:mod:`arbiter.auction.exchange`). The prices of the certificates also
say when ``L_i`` is the optimum without i: an allocation with every app on a zero-slack
column and every priced row full. Chains of moves from the others' PF rows look for one;
when found, c_i comes from it without a solve (26012: 19-28 of its 50 ``-i`` solves).

**Keeping the cuts.** A market whose PF LP the zero-half cuts closed (the tail's symmetric
gap) never gives them up (``_give_up``): three early MILP fallbacks (which fall differently
with the order of the solves) sent every later solve of 26000 to the MILP (1-1.7 s instead
of 0.3).

**A start basis for the PF** (:meth:`_DualMarket._start_at`): its first LP starts at the basis
of its incumbent (each app's row and every GPU slack basic) instead of HiGHS's slack basis,
from which it took 300-700 simplex iterations, a third of the PF solve.

**A clone for a second thread** (:meth:`_DualMarket.clone`): the same warm LP in a HiGHS model
of its own, on which :mod:`arbiter.auction.payments` runs every other ``-i`` solve.

All of it is kept beside HiGHS in :mod:`arbiter.auction.rows` where it needs the LP's rows.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping

import highspy
import numpy as np

from arbiter.auction.exchange import Exchange
from arbiter.auction.formulation import _App, _cost
from arbiter.auction.gomory import gomory_cuts
from arbiter.auction.rows import LpRows
from arbiter.auction.solve import _EXACT_GAP, _CliqueMarket
from arbiter.auction.zerohalf import ZeroHalfCut, zero_half_cuts

# LP branch-and-bound nodes of a ``-i`` solve once the PF needed the MILP (the root only).
_TAIL_NODES = 1
# Reduced-cost fixing keeps a column unless its bound exceeds the incumbent by this much
# (absolute, in Σ log ρ; far below the PF's exact gap's effect on any c_i).
_FIX_MARGIN = 1e-9
# Branch-and-bound failures (MILP fallbacks) that, when more than the solves the LP closed,
# turn the zero-half cuts and the fixing off for the rest of the auction (_DualMarket._give_up).
_GIVE_UP = 3


class _DualMarket(_CliqueMarket):
    """:class:`_CliqueMarket` that also bounds every market without one app
    (``Solver.DUALS``, see the module docstring).

    Also zero-half cuts, reduced-cost fixing and LP rounding (module docstring). When the PF
    solve still needs HiGHS's MILP, the ``-i`` solves skip the LP branch and bound after their
    root (``_TAIL_NODES``): before the zero-half cuts, on the benchmark's tail, it almost never
    finished within its node limit there and cost a third of the time before the MILP ran
    anyway. With the zero-half cuts none of the benchmark's 80 instances at its two target
    points needs the MILP for its PF.
    """

    # Rounds of cut separation per node: the zero-half cuts close the tail's half-integral LPs
    # in 5-15 rounds of a few milliseconds each (arbiter.auction.zerohalf).
    cut_rounds = 40
    # Zero-half rounds in a row that may leave the LP's value unchanged before the node
    # branches instead: on the tail's degenerate LPs the cuts can move the LP between equally
    # good fractional points for dozens of rounds.
    stall_rounds = 10
    # Gomory cuts per round at a ``-i`` solve's root, read off its most fractional basic
    # columns (0: zero-half cuts there too, as before them).
    gomory_per_round = 8
    # The PF's first LP starts at the basis of its incumbent (_start_at).
    start_at_hint = True

    def __init__(self, apps: list[_App], members: list[int], clock: Callable[[], float]) -> None:
        super().__init__(apps, members, clock)
        self.solves = 0
        self.zero_half: set[ZeroHalfCut] = set()
        # The unit rows (<= 1) the zero-half cuts combine, and their columns as one flat array
        # (CSR) for the rows' activity at an LP point: app rows, GPU rows, then clique cuts.
        self._rows: list[tuple[int, ...]] = []
        self._row_cols: list[int] = []
        self._row_start: list[int] = [0]
        # the two as arrays, made again only after rows were added (a market's separation
        # rounds read them hundreds of times, its cuts come in a few dozen rounds)
        self._row_arrays: tuple[np.ndarray, np.ndarray] | None = None
        # every row of the warm LP, in its order (the unit rows above are a part of them)
        self._lp_rows = LpRows(self.lp.num_col_)
        self._add_unit_rows((*self.cols_of.get(a, ()), self.empty_col[a]) for a in members)
        self._add_unit_rows(tuple(cols) for cols in self.cols_by_gpu.values())
        self._costs = np.asarray(self.lp.col_cost_)
        self._objective = math.nan
        self._stalled = 0
        self._zero_half_rows: list[int] = []  # their rows in the warm LP
        self._gomory_rows: list[int] = []  # the current ``-i`` solve's Gomory cuts in the warm LP
        # settle: the prices of the last lagrangian_bounds, indexed for exchange chains
        self._exchange: Exchange | None = None
        # (columns at 0, excluded apps, objective offset, incumbent cost) of the current
        # branch and bound, for :meth:`_met`
        self._context: tuple[set[int], frozenset[int], float, float] | None = None
        # Solves the LP branch and bound closed with new zero-half cuts, and solves it gave
        # up on (MILP fallbacks).
        self._closed = self._failed = 0
        self._fixing = True  # reduced-cost fixing at the root (off with the zero-half cuts)
        # the current solve's incumbent for that fixing, the columns it fixed, and those of
        # them not yet sent to HiGHS
        self._root_fixing: dict[int, int] | None = None
        self._fixed: set[int] = set()
        self._pending: set[int] = set()
        self.gomory_cuts = 0  # Gomory cuts added so far (all solves)
        self._keep_cuts = False  # never _give_up (the PF's LP was closed by zero-half cuts)
        position = {a: n for n, a in enumerate(members)}
        # per column, the position of its app in ``members``
        self._col_pos = np.asarray([position[a] for a in self.col_app], dtype=np.int64)
        pairs = zip(self.col_app, self.col_row, strict=True)
        self._col = {(a, r): k for k, (a, r) in enumerate(pairs)}

    def solve_or_defer(
        self,
        excluded: frozenset[int] = frozenset(),
        hint: Mapping[int, int] | None = None,
        required: frozenset[int] = frozenset(),
        gap: float = _EXACT_GAP,
        improve: Callable[[Mapping[int, int]], dict[int, int]] | None = None,
    ) -> dict[int, int] | Callable[[], dict[int, int]]:
        if self.solves == 0 and hint is not None and self.start_at_hint:
            self._start_at(hint)
        found = super().solve_or_defer(excluded, hint, required, gap, improve)
        self.solves += 1
        if self.solves == 1 and not self.zero_half:
            # The PF's LP needed no zero-half cut: the fixing's extra LP run per solve would
            # cost more than it saves (most ``-i`` LPs of such markets are integral at once).
            self._fixing = False
        if self.solves == 1 and self.zero_half and not self.milp_solves:
            # The PF's LP was closed by zero-half cuts: the tail's symmetric gap, which the
            # cuts close; a few ``-i`` solves that still end in the MILP are no reason to
            # give them up (_give_up), which sent every later solve there.
            self._keep_cuts = True
        if self.solves == 1 and self.milp_solves:
            self.node_limit = _TAIL_NODES
        return found

    def _start_at(self, hint: Mapping[int, int]) -> None:
        """Give the fresh model a starting basis at the allocation ``hint``: each app's row
        basic, every other column at 0, every GPU (and cut) row's slack basic. It is a basis
        (one basic column per app row, a slack per other row, so B is triangular) and
        feasible when ``hint`` is; the dual simplex then starts from the allocation instead
        of from all slacks (on the benchmark's 64 x 256 x 32 instances the first LP of the PF
        took a third of the PF solve's time from the slack basis)."""
        status = highspy.HighsBasisStatus
        basis = highspy.HighsBasis()
        cols = [status.kLower] * self.h.getNumCol()
        for a in self.members:
            cols[self._col[a, hint.get(a, 0)]] = status.kBasic
        n_apps = len(self.members)
        basis.col_status = cols
        basis.row_status = [status.kLower] * n_apps + [status.kBasic] * (
            self.h.getNumRow() - n_apps
        )
        basis.valid = True
        self.h.setBasis(basis)

    def clone(self) -> _DualMarket:
        """A second warm market in the same state (its own HiGHS model: the LP with every cut
        row and bound as they are now, and the same basis), for a second thread to run some of
        the solves without one app on; counters of solves start at 0. Cuts found on one
        market later do not reach the other, so each market's answers depend only on the
        solves it was given, in their order: the split, not the threads' timing, decides."""
        if self._gomory_rows or self._context is not None:
            raise RuntimeError("a market is cloned between solves only")
        twin = copy.copy(self)
        twin.h = self._highs(self.h.getLp())
        twin.h.setBasis(self.h.getBasis())
        twin.cuts = set(self.cuts)
        twin.zero_half = set(self.zero_half)
        twin.zeroed = set(self.zeroed)
        twin._rows = list(self._rows)
        twin._row_cols = list(self._row_cols)
        twin._row_start = list(self._row_start)
        twin._lp_rows = self._lp_rows.copy()
        twin._zero_half_rows = list(self._zero_half_rows)
        twin._gomory_rows = []
        twin._fixed, twin._pending = set(), set()
        twin.milp_solves = twin.budget_stops = twin.gomory_cuts = 0
        return twin

    def settle(self, kept: Mapping[int, int], target: float) -> dict[int, int] | None:
        """An allocation of the apps of ``kept`` (a market without one app) costing at most
        ``target``, found by exchange chains under the prices of the last
        :meth:`lagrangian_bounds` (:mod:`arbiter.auction.exchange`), or None."""
        return None if self._exchange is None else self._exchange.settle(kept, target)

    def _add_unit_rows(self, rows: Iterable[tuple[int, ...]]) -> None:
        """Rows ``Σ x <= 1`` just added to the warm LP (or built with it)."""
        for row in rows:
            self._rows.append(row)
            self._row_cols.extend(row)
            self._row_start.append(len(self._row_cols))
            self._lp_rows.append(row)
        self._row_arrays = None

    def _add_cuts(self, added: list[tuple[int, ...]]) -> None:
        super()._add_cuts(added)
        self._add_unit_rows(added)

    def _branch_and_bound(
        self, zeroed: set[int], excluded: frozenset[int], hint: Mapping[int, int] | None
    ) -> dict[int, int] | None:
        """:meth:`_CliqueMarket._branch_and_bound` after reduced-cost fixing at the root.

        With the LP's duals as Lagrangian prices (:meth:`_priced`), a column k whose bound
        ``constant + Σ_{a ≠ app of k} min_a + reduced_k`` exceeds the incumbent's cost is in no
        allocation better than the incumbent, so it is fixed to 0 for this solve (and for its
        MILP fallback, if any). The bound is recomputed from the clamped duals, like the
        certificates', so the fixing holds whatever HiGHS's accuracy. Fixed columns leave the
        warm LP's fractional points too, so the cuts have fewer to cut off. The prices are the
        root's first LP's (:meth:`_after_first_root_lp`); the fixing reaches HiGHS with the
        next LP run (:meth:`_before_run`): the fixed columns sit at 0 in that LP's basis, which
        stays optimal, so no run is spent on the fixing itself.
        """
        cuts_before = len(self.zero_half)
        # For the early stop of the cut loop (_met): what the rounding may use, the offset of
        # the LP's objective (the excluded apps' empty rows) and the incumbent's cost.
        incumbent = math.inf
        kept: dict[int, int] | None = None
        if hint is not None:
            kept = {a: hint.get(a, 0) for a in self.members if a not in excluded}
            incumbent = _cost(self.apps, kept)
        offset = sum(self.apps[a].rows[0][1] for a in excluded)
        self._context = (set(zeroed), excluded, offset, incumbent)
        self._root_fixing = kept if self._fixing else None
        self._fixed = set()
        gomory_before = self.gomory_cuts
        try:
            found = super()._branch_and_bound(zeroed, excluded, hint)
        finally:
            self._context = self._root_fixing = None
            self._drop_gomory()  # they hold for this solve's bounds only
            applied = self._fixed - self._pending
            self._bounds(self.h, applied, 0.0, 1.0)
            fixed, self._fixed, self._pending = self._fixed, set(), set()
        if fixed and self.root is not None:
            # the MILP fallback's own reduced-cost fixing keeps these columns out too
            bound, reduced_root = self.root
            reduced_root = reduced_root.copy()
            reduced_root[list(fixed)] = math.inf
            self.root = (bound, reduced_root)
        if found is None:
            self._failed += 1
        elif len(self.zero_half) > cuts_before or self.gomory_cuts > gomory_before:
            self._closed += 1
        if (
            self.stall_rounds
            and not self._keep_cuts
            and self._failed >= _GIVE_UP
            and self._failed > self._closed
        ):
            self._give_up()
        return found

    def _after_first_root_lp(self, values: np.ndarray) -> None:
        """After the root's first LP run (optimal, at ``values``): reduced-cost fixing
        (:meth:`_branch_and_bound`) when the solve has an incumbent and the point is
        fractional (an integral one ends the solve)."""
        kept, context = self._root_fixing, self._context
        if kept is None or context is None:
            return
        if not ((values > 1e-9) & (values < 1 - 1e-9)).any():
            return
        zeroed, excluded, offset, incumbent = context
        # the LP's objective counts the excluded apps on their empty rows
        ub = incumbent + offset
        reduced, constant, mins = self._priced(zeroed)
        if not np.isfinite(mins).all():  # (an app has every row at 0)
            return
        # a bound on every allocation that takes column k: the others at their best
        with_k = constant + mins.sum() - mins[self._col_pos] + reduced
        used = {self._col[a, r] for a, r in kept.items()}
        over = np.flatnonzero(with_k > ub + _FIX_MARGIN).tolist()
        fixed = set(over) - zeroed - used
        self._fixed |= fixed
        self._pending |= fixed
        self._context = (zeroed | fixed, excluded, offset, incumbent)

    def _before_run(self) -> None:
        """Send the fixing found at the root to HiGHS (its columns are at 0 in the basis)."""
        if self._pending:
            self._bounds(self.h, self._pending, 0.0, 0.0)
            self._pending = set()

    def _give_up(self) -> None:
        """Back to :class:`_CliqueMarket`'s search for the rest of the auction: a market whose
        ``-i`` solves mostly end in the MILP even with the zero-half cuts (crowded markets,
        e.g. 64 apps on 64 GPUs, where the LP gap is not the tail's symmetric one) only pays
        for them: over a thousand cut rows made every warm LP run up to 18 ms there. The
        zero-half rows leave the LP; the clique cuts stay."""
        self._fixing = False
        self.stall_rounds = 0
        self.cut_rounds = _CliqueMarket.cut_rounds
        if self._zero_half_rows:
            rows = np.asarray(self._zero_half_rows, dtype=np.int32)
            self.h.deleteRows(rows.size, rows)
            self._lp_rows.delete(self._zero_half_rows)
            self._zero_half_rows = []

    def _rounded(
        self, values: np.ndarray, zeroed: set[int], excluded: frozenset[int]
    ) -> dict[int, int] | None:
        """Rows taken greedily by LP value (largest first, each app once, GPUs disjoint, no
        column in ``zeroed``); every app left over then takes its cheapest row that still
        fits (its empty row if that is allowed and nothing fits). None when an app that must
        be served finds no row. On the tail's degenerate LPs the bound is often already the
        optimum while the LP point stays fractional: this finds an allocation that meets it.
        """
        apps = self.apps
        used: set[int] = set()
        choice: dict[int, int] = {}
        allowed = np.ones(values.size, dtype=bool)
        allowed[list(zeroed)] = False
        support = np.flatnonzero((values > 1e-9) & allowed)
        for k in support[np.argsort(-values[support], kind="stable")].tolist():
            a = self.col_app[k]
            if a in choice:
                continue
            gpus = apps[a].rows[self.col_row[k]][0]
            if used.isdisjoint(gpus):
                choice[a] = self.col_row[k]
                used |= gpus
        for a in self.members:
            if a in choice or a in excluded:
                continue
            best_r, best_c = -1, math.inf
            for k in (*self.cols_of.get(a, ()), self.empty_col[a]):
                r = self.col_row[k]
                gpus, cost = apps[a].rows[r]
                if allowed[k] and cost < best_c and used.isdisjoint(gpus):
                    best_r, best_c = r, cost
            if best_r < 0:
                return None
            choice[a] = best_r
            used |= apps[a].rows[best_r][0]
        return {a: r for a, r in choice.items() if a not in excluded}

    def _met(self, values: np.ndarray) -> bool:
        """Whether the LP just run (at ``values``) already bounds its node within the solve's
        gap of a known allocation (the incumbent, or ``values`` rounded): then more cuts
        cannot change the node's answer, and the branch and bound prunes it (its own rounding
        finds the same allocation). On the tail's degenerate LPs the bound is often the
        optimum for many rounds before the point becomes integral."""
        if self._context is None:
            return False
        zeroed, excluded, offset, incumbent = self._context
        bound = self.h.getInfo().objective_function_value - offset
        if bound >= incumbent - self.gap:
            return True
        rounded = self._rounded(values, zeroed, excluded)
        return rounded is not None and bound >= _cost(self.apps, rounded) - self.gap

    def _separate(self, values: np.ndarray) -> int:
        """Maximal-clique cuts (:class:`_CliqueMarket`); when none is violated, zero-half cuts
        of the app, GPU and clique rows (:mod:`arbiter.auction.zerohalf`)."""
        added = super()._separate(values)
        if added or not ((values > 1e-6) & (values < 1 - 1e-6)).any():
            return added
        if self._met(values):
            return 0
        objective = float(values @ self._costs)
        self._stalled = self._stalled + 1 if abs(objective - self._objective) <= 1e-9 else 0
        self._objective = objective
        if self._stalled >= self.stall_rounds:
            return 0
        if self.gomory_per_round and self.at_root and self._context and self._context[1]:
            # the root of a solve without some apps: cuts read off its optimal basis
            # (arbiter.auction.gomory), valid for this solve only
            return self._gomory(values)
        if self._row_arrays is None:
            self._row_arrays = (np.asarray(self._row_start), np.asarray(self._row_cols))
        start, row_cols = self._row_arrays
        activity = np.add.reduceat(values[row_cols], start[:-1])
        found = zero_half_cuts(self._rows, values, activity=activity)
        cuts = [cut for cut in found if cut not in self.zero_half]
        if cuts:
            self.zero_half.update(cuts)
            starts = np.cumsum([0] + [len(c[0]) for c in cuts[:-1]]).astype(np.int32)
            index = np.fromiter((k for c in cuts for k in c[0]), dtype=np.int32)
            value = np.fromiter((v for c in cuts for v in c[1]), dtype=np.float64)
            n = len(cuts)
            upper = np.array([float(c[2]) for c in cuts])
            first = self.h.getNumRow()
            self._zero_half_rows.extend(range(first, first + n))
            self.h.addRows(
                n, np.full(n, -highspy.kHighsInf), upper, index.size, starts, index, value
            )
            for columns, coefs, _ in cuts:
                self._lp_rows.append(columns, coefs)
        return len(cuts)

    def _gomory(self, values: np.ndarray) -> int:
        """Add Gomory mixed-integer cuts read off the warm LP's optimal basis (at ``values``,
        :func:`~arbiter.auction.gomory.gomory_cuts`); return how many. They hold for the
        current bounds only: :meth:`_drop_gomory` removes them when the solve ends."""
        h = self.h
        # (the root's fixing, even before it reaches HiGHS, holds in this solve)
        cuts = gomory_cuts(
            h, values, self._lp_rows, self._gomory_rows, self.gomory_per_round, fixed=self._pending
        )
        if not cuts:
            return 0
        n = len(cuts)
        starts = np.cumsum([0] + [cut[0].size for cut in cuts[:-1]]).astype(np.int32)
        index = np.concatenate([cut[0] for cut in cuts]).astype(np.int32)
        value = np.concatenate([cut[1] for cut in cuts])
        first = h.getNumRow()
        self._gomory_rows.extend(range(first, first + n))
        lower = np.array([cut[2] for cut in cuts])
        h.addRows(n, lower, np.full(n, highspy.kHighsInf), index.size, starts, index, value)
        for columns, coefs, _ in cuts:
            self._lp_rows.append(columns, coefs)
        self.gomory_cuts += n
        return n

    def _drop_gomory(self) -> None:
        """Remove the current solve's Gomory rows from the warm LP (rows added after them,
        zero-half cuts at deeper nodes, move up)."""
        if not self._gomory_rows:
            return
        rows = np.asarray(sorted(self._gomory_rows), dtype=np.int32)
        self.h.deleteRows(rows.size, rows)
        self._lp_rows.delete(self._gomory_rows)
        self._zero_half_rows = [r - int(np.searchsorted(rows, r)) for r in self._zero_half_rows]
        self._gomory_rows = []

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
        for _ in range(self.cut_rounds + 1):
            h.run()
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                return {}
            if not self._separate(np.asarray(h.getSolution().col_value)):
                break
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return {}
        reduced, constant, mins = self._priced(zeroed)
        # the same prices for exchange chains (settle)
        lp = h.getLp()
        n_apps = len(self.members)
        price = np.asarray(h.getSolution().row_dual)
        price = np.concatenate([np.zeros(n_apps), np.minimum(price[n_apps:], 0.0)])
        self._exchange = Exchange(
            self.apps,
            price,
            np.asarray(lp.row_upper_),
            np.asarray(lp.a_matrix_.start_),
            np.asarray(lp.a_matrix_.index_),
            np.asarray(lp.a_matrix_.value_),
            reduced - mins[self._col_pos],
            self.col_app,
            self.col_row,
        )
        position = {a: n for n, a in enumerate(self.members)}
        total = sum(float(mins[position[a]]) for a in market)
        return {i: total - float(mins[position[i]]) + constant for i in market}

    def _priced(self, zeroed: set[int]) -> tuple[np.ndarray, float, np.ndarray]:
        """Lagrangian prices of the packing rows (GPUs and cuts, each ``<= b_r``) from the
        current LP's duals clamped to ``y <= 0``: every column's reduced cost
        ``c_k - Σ_{r ∋ k} y_r a_rk``, the constant ``Σ_r y_r b_r`` and, per app (in
        ``members`` order), its smallest reduced cost over the columns not in ``zeroed``.
        For any such y and any allocation x (one row per app) that the packing rows allow,
        ``cost(x) >= constant + Σ_k reduced_k x_k``."""
        h = self.h
        if self._gomory_rows:  # (they are >= rows: y <= 0 would not price them)
            raise RuntimeError("Lagrangian prices asked for while Gomory cuts are in the LP")
        n_apps = len(self.members)
        row_dual = np.asarray(h.getSolution().row_dual)
        y = np.minimum(row_dual[n_apps:], 0.0)
        lp = h.getLp()
        # Prices of rows: 0 on the app rows (they are not relaxed).
        price = np.concatenate([np.zeros(n_apps), y])
        reduced = self._costs - self._lp_rows.transpose_times(price)
        constant = float(y @ np.asarray(lp.row_upper_)[n_apps:])
        free = np.ones(lp.num_col_, dtype=bool)
        free[list(zeroed)] = False
        mins = np.full(n_apps, np.inf)
        np.minimum.at(mins, self._col_pos[free], reduced[free])
        return reduced, constant, mins


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


def _serve_first(apps: list[_App], members: list[int]) -> dict[int, int]:
    """A feasible allocation that tries to serve every app: apps with the largest smallest row
    first, each taking its smallest row still free (the cheapest among equals). The PF starts
    from it, after local moves (module docstring)."""
    used: set[int] = set()
    choice: dict[int, int] = {}

    def smallest(a: int) -> int:
        return min((len(gpus) for gpus, _ in apps[a].rows[1:]), default=0)

    for a in sorted(members, key=lambda a: (-smallest(a), len(apps[a].rows), a)):
        rows = apps[a].rows
        ranked = sorted(range(1, len(rows)), key=lambda r: (len(rows[r][0]), rows[r][1], r))
        choice[a] = next((r for r in ranked if used.isdisjoint(rows[r][0])), 0)
        used |= rows[choice[a]][0]
    return choice
