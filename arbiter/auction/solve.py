"""Exact solver of the PA auction's 0/1 program (Themis §3.3, Pseudocode 1; spec B.5 solver).

Each conflict component is one HiGHS model (:class:`_Market`), reused for the
proportional-fair solve and all its ``-i`` solves (bound changes, warm dual simplex). Clique
cuts are separated and kept, so the LP is integral far more often; an integral LP optimum is
the 0/1 optimum: :class:`_CliqueMarket` (``Solver.CLIQUES``; ``Solver.DUALS``, the default, adds
:mod:`arbiter.auction.certify`'s dual certificates to it) separates maximal
cliques of the rows' conflict graph, :class:`_Market` itself (``Solver.PAIRS``, the previous
solver) the cliques x[j,R] + Σ of app i's rows meeting R <= 1. Otherwise a small LP branch and
bound runs, then HiGHS's MILP, whose answer is checked before it is used
(:meth:`_Market.solve_milp`); a ``-i`` solve can hand that MILP back as a call to run on another
thread (:meth:`_Market.solve_or_defer`). Tiny components are enumerated (:func:`_enumerate`).

Time is never read here: a solve's deadline is compared with the ``clock`` its caller passes
in (:class:`_Market`), so a budgeted auction can be replayed with a fake clock.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping

import highspy
import numpy as np

from arbiter.auction.formulation import _App, _cost

__all__ = ["quiet_highs"]

# Enumerate instead of calling HiGHS when a sub-problem has at most this many row combinations.
_ENUMERATION_LIMIT = 256
# LP branch-and-bound nodes before handing a sub-problem to HiGHS's own MILP solver.
_NODE_LIMIT = 8
# Optimality gap (absolute, in Σ log ρ) of the proportional-fair allocation: solved exactly.
_EXACT_GAP = 1e-9
# Rounds of clique-cut separation per branch-and-bound node.
_CUT_ROUNDS = 3
# HiGHS's primal_solution_status for "a feasible solution is known".
_FEASIBLE = 2


def _past(deadline: float, clock: Callable[[], float]) -> bool:
    return clock() >= deadline


def _enumerate(apps: list[_App], members: list[int]) -> dict[int, int]:
    """Exact optimum by depth-first branch and bound (small problems)."""
    best_cost = math.inf
    best: dict[int, int] = {}
    order = sorted(members, key=lambda a: len(apps[a].rows))
    suffix = [0.0] * (len(order) + 1)
    for k in range(len(order) - 1, -1, -1):
        suffix[k] = suffix[k + 1] + apps[order[k]].best
    ranked = {a: sorted(enumerate(apps[a].rows), key=lambda rc: rc[1][1]) for a in order}
    choice: dict[int, int] = {}

    def dfs(k: int, used: frozenset[int], cost: float) -> None:
        nonlocal best_cost, best
        if cost + suffix[k] >= best_cost - 1e-12:
            return
        if k == len(order):
            best_cost, best = cost, dict(choice)
            return
        a = order[k]
        for r, (gpus, c) in ranked[a]:
            if gpus.isdisjoint(used):
                choice[a] = r
                dfs(k + 1, used | gpus, cost + c)

    dfs(0, frozenset(), 0.0)
    return best


# HiGHS's own options that keep a solve silent (no log lines, no console output), and one
# thread per solve (see quiet_highs).
_QUIET_OPTIONS = {"output_flag": False, "log_to_console": False, "threads": 1}
_banner_lock = threading.Lock()
_banner_done = False


def quiet_highs() -> highspy.Highs:
    """A HiGHS instance that prints nothing.

    Solves are silenced through HiGHS's own options (``output_flag``, ``log_to_console``). That
    cannot cover the copyright banner: HiGHS prints it to standard output while a process
    constructs its first instance, and ``highspy.Highs()`` takes no options, so none can be set
    before it (measured with highspy 1.16, which reads no environment variable for it either).
    A daemon's log or a command's table should not carry it, so that one construction, and
    nothing else, runs with file descriptor 1 pointed at /dev/null (C's buffer flushed before it
    is restored); later ones need nothing.

    It also runs single-threaded (``threads`` = 1), like every HiGHS of the project: HiGHS's
    task scheduler is one per process and keeps the thread count of the first solve that
    starts it, and a later solve asking for another count fails ("Not Set", highspy 1.16).
    One LP on an instance left at the default count, solved before an auction, made every
    MILP fallback of the process fail that way. (Parallel solves run on threads of ours.)
    """
    global _banner_done
    h: highspy.Highs | None = None
    if not _banner_done:
        with _banner_lock:
            if not _banner_done:
                # The only redirect of fd 1 in the auction (see the docstring for why).
                sys.stdout.flush()
                saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(devnull, 1)
                    h = highspy.Highs()
                    ctypes.CDLL(None).fflush(None)
                finally:
                    os.dup2(saved, 1)
                    os.close(saved)
                    os.close(devnull)
                _banner_done = True
    if h is None:
        h = highspy.Highs()
    for option, value in _QUIET_OPTIONS.items():
        h.setOptionValue(option, value)
    return h


def _append_cuts(h: highspy.Highs, cuts: list[tuple[int, ...]]) -> None:
    """Append ``Σ_{k in cut} x[k] <= 1`` for each cut (a tuple of columns) to ``h``."""
    if cuts:
        starts = np.cumsum([0] + [len(c) for c in cuts[:-1]]).astype(np.int32)
        index = np.fromiter((c for cut in cuts for c in cut), dtype=np.int32)
        n = len(cuts)
        ones = np.ones(index.size)
        h.addRows(n, np.full(n, -highspy.kHighsInf), np.ones(n), index.size, starts, index, ones)


class _Market:
    """One conflict component as a reusable HiGHS model.

    Variables x[a,r] in [0, 1], one per bid row; Σ_r x[a,r] = 1 per app; Σ_{rows ∋ g} x <= 1 per
    GPU; minimise Σ x log ρ. Removing apps fixes their non-empty rows to 0, requiring an app to
    be served fixes its empty row to 0 (model reuse, warm dual simplex). When the LP optimum is
    integral it is the 0/1 optimum; otherwise a small depth-first branch and bound runs on the
    same warm LP, and past a node limit the model is handed to HiGHS's MILP solver (presolve,
    cuts) seeded with the incumbent.

    This is the previous solver (``Solver.PAIRS``): its cuts are the two-app cliques of
    :meth:`_separate`. :class:`_CliqueMarket` separates maximal cliques of the conflict graph.
    """

    cut_rounds = _CUT_ROUNDS
    node_limit = _NODE_LIMIT
    milp_presolve = True  # HiGHS presolve in the MILP fallback
    milp_cuts = False  # hand the cuts found so far to the MILP fallback
    milp_compact = False  # leave the zeroed columns out of the MILP fallback

    def __init__(self, apps: list[_App], members: list[int], clock: Callable[[], float]) -> None:
        self.apps = apps
        self.members = members
        self.col_app: list[int] = []
        self.col_row: list[int] = []
        self.cols_of: dict[int, list[int]] = {}  # non-empty rows
        self.empty_col: dict[int, int] = {}
        costs: list[float] = []
        index: list[int] = []
        start = [0]
        gpu_rows: dict[int, int] = {}
        self.cols_by_gpu: dict[int, list[int]] = {}
        m = len(members)
        for i, a in enumerate(members):
            cols = self.cols_of.setdefault(a, [])
            for r, (gpus, cost) in enumerate(apps[a].rows):
                k = len(costs)
                if r:
                    cols.append(k)
                else:
                    self.empty_col[a] = k
                self.col_app.append(a)
                self.col_row.append(r)
                costs.append(cost)
                index.append(i)
                for g in gpus:
                    row = gpu_rows.get(g)
                    if row is None:
                        row = gpu_rows[g] = len(gpu_rows)
                        self.cols_by_gpu[g] = [k]
                    else:
                        self.cols_by_gpu[g].append(k)
                    index.append(m + row)
                start.append(len(index))
            if not cols:
                del self.cols_of[a]
        self.cuts: set[tuple[int, ...]] = set()
        self.gap = _EXACT_GAP  # absolute optimality gap in Σ log ρ for the current solve
        self.root: tuple[float, np.ndarray] | None = None  # (bound, reduced costs) at the root
        self.at_root = False  # the branch and bound is at its root node (no branching fixes)
        self.zeroed: set[int] = set()  # columns whose upper bound is currently 0
        n_cols, n_rows = len(costs), len(members) + len(gpu_rows)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n_cols, n_rows
        lp.col_cost_ = np.asarray(costs, dtype=np.float64)
        lp.col_lower_ = np.zeros(n_cols)
        lp.col_upper_ = np.ones(n_cols)
        lp.row_lower_ = np.concatenate(
            [np.ones(len(members)), np.full(len(gpu_rows), -highspy.kHighsInf)]
        )
        lp.row_upper_ = np.ones(n_rows)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.asarray(start, dtype=np.int32)
        lp.a_matrix_.index_ = np.asarray(index, dtype=np.int32)
        lp.a_matrix_.value_ = np.ones(len(index))
        self.lp = lp
        self.h = self._highs(lp)
        self.milp_solves = 0
        # Time budget: the deadline of the current solve on ``clock`` (None = solve to the gap).
        self.clock = clock
        self.deadline: float | None = None
        self.budget_stops = 0  # solves that ended at their deadline with their incumbent

    @staticmethod
    def _highs(lp: highspy.HighsLp) -> highspy.Highs:
        h = quiet_highs()  # single-threaded
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", _EXACT_GAP)
        h.passModel(lp)
        return h

    def _zeroed(self, excluded: frozenset[int], required: frozenset[int]) -> set[int]:
        cols = {c for a in excluded for c in self.cols_of.get(a, ())}
        cols.update(self.empty_col[a] for a in required if a in self.empty_col)
        return cols

    @staticmethod
    def _bounds(h: highspy.Highs, cols: Iterable[int], lower: float, upper: float) -> None:
        cols = np.fromiter(cols, dtype=np.int32)
        if cols.size:
            n = cols.size
            h.changeColsBounds(n, cols, np.full(n, lower), np.full(n, upper))

    def solve(
        self,
        excluded: frozenset[int] = frozenset(),
        hint: Mapping[int, int] | None = None,
        required: frozenset[int] = frozenset(),
        gap: float = _EXACT_GAP,
    ) -> dict[int, int]:
        """Optimal row per included app (excluded apps take the empty row), within ``gap``.

        ``required`` apps must get a non-empty row: a valid tightening when every optimum
        serves them (the ``-i`` solves of Gap 2's market).
        """
        found = self.solve_or_defer(excluded, hint, required, gap)
        return found if isinstance(found, dict) else found()

    def solve_or_defer(
        self,
        excluded: frozenset[int] = frozenset(),
        hint: Mapping[int, int] | None = None,
        required: frozenset[int] = frozenset(),
        gap: float = _EXACT_GAP,
        improve: Callable[[Mapping[int, int]], dict[int, int]] | None = None,
    ) -> dict[int, int] | Callable[[], dict[int, int]]:
        """:meth:`solve`, except that a solve the warm LP cannot finish is returned as a call
        of HiGHS's MILP on a model of its own, which may run on another thread (it shares
        nothing mutable with this market's warm LP or with other such calls). ``improve``
        (a local search from ``hint``) runs only then, for the MILP's seed and for
        reduced-cost fixing."""
        zeroed = self._zeroed(excluded, required)
        # Only the difference to the previous solve's bounds is sent: consecutive ``-i``
        # solves differ in two apps, so the warm dual simplex has little to repair.
        self._bounds(self.h, zeroed - self.zeroed, 0.0, 0.0)
        self._bounds(self.h, self.zeroed - zeroed, 0.0, 1.0)
        self.zeroed = zeroed
        self.gap = gap
        self.root = None
        found = self._branch_and_bound(zeroed, excluded, hint)
        if found is not None:
            return found
        if hint is not None and improve is not None:
            better = improve(hint)
            if _cost(self.apps, better) < _cost(self.apps, dict(hint)):
                hint = better
        fixed: set[int] = set()
        if hint is not None and self.root is not None:
            # Reduced-cost fixing: with root bound LB and incumbent cost UB, a column whose
            # reduced cost exceeds UB - LB is in no solution better than the incumbent.
            lb, reduced = self.root
            ub = _cost(self.apps, {a: hint.get(a, 0) for a in self.members if a not in excluded})
            fixed = set(np.flatnonzero(reduced > ub - lb + 1e-7).tolist()) - zeroed
        self.milp_solves += 1
        cuts = sorted(self.cuts) if self.milp_cuts else []
        hint = dict(hint) if hint is not None else None
        return lambda: self._solve_milp(excluded, hint, required, gap, fixed, cuts)

    def _branch_and_bound(
        self, zeroed: set[int], excluded: frozenset[int], hint: Mapping[int, int] | None
    ) -> dict[int, int] | None:
        """Depth-first LP branch and bound on the warm model; None past ``_NODE_LIMIT`` nodes.

        The incumbent starts at ``hint`` (for a ``-i`` solve: the PF rows of the others), so
        most nodes are pruned by bound at once. Branching fixes one fractional row to 1, then
        to 0.
        """
        apps, h = self.apps, self.h
        best: dict[int, int] | None = None
        best_cost = math.inf
        if hint is not None:
            best = {a: hint.get(a, 0) for a in self.members if a not in excluded}
            best_cost = _cost(apps, best)
        # Excluded apps sit on their empty row; their cost is a constant of the LP objective.
        offset = sum(apps[a].rows[0][1] for a in self.members if a in excluded)
        stack: list[tuple[tuple[int, float], ...]] = [()]
        nodes = 0
        while stack:
            fixes = stack.pop()
            self.at_root = not fixes  # cuts read off this node's bounds hold below it only
            nodes += 1
            if self.deadline is not None and best is not None and _past(self.deadline, self.clock):
                self.budget_stops += 1
                return best
            if nodes > self.node_limit:
                return None
            for k, v in fixes:
                self._bounds(h, (k,), v, v)
            try:
                for rnd in range(self.cut_rounds + 1):
                    self._before_run()
                    h.run()
                    status = h.getModelStatus()
                    values = np.asarray(h.getSolution().col_value)
                    bound = h.getInfo().objective_function_value - offset
                    if rnd == 0 and not fixes and status == highspy.HighsModelStatus.kOptimal:
                        self._after_first_root_lp(values)
                    # Values and bound always come from the last LP run: new cuts only
                    # tighten the model for the next run.
                    if (
                        status != highspy.HighsModelStatus.kOptimal
                        or rnd == self.cut_rounds
                        or not self._separate(values)
                    ):
                        break
            finally:
                for k, _ in fixes:
                    self._bounds(h, (k,), 0.0, 0.0 if k in zeroed else 1.0)
            if status == highspy.HighsModelStatus.kInfeasible:
                continue
            if status != highspy.HighsModelStatus.kOptimal:
                return None
            if not fixes:
                self.root = (bound, np.asarray(h.getSolution().col_dual))
            if bound >= best_cost - self.gap:
                continue
            frac = np.flatnonzero((values > 1e-9) & (values < 1 - 1e-9))
            if frac.size == 0:
                choice = self._choice(values, excluded)
                cost = _cost(apps, choice)
                if cost < best_cost:
                    best, best_cost = choice, cost
                continue
            rounded = self._rounded(values, zeroed, excluded)
            if rounded is not None and _cost(apps, rounded) < best_cost:
                best, best_cost = rounded, _cost(apps, rounded)
                if bound >= best_cost - self.gap:
                    continue
            k = int(frac[np.argmax(values[frac])])
            stack.append((*fixes, (k, 0.0)))
            stack.append((*fixes, (k, 1.0)))
        return best

    def _rounded(
        self, values: np.ndarray, zeroed: set[int], excluded: frozenset[int]
    ) -> dict[int, int] | None:
        """A feasible allocation rounded from a fractional LP point, or None (a primal
        heuristic for the branch and bound; this solver has none)."""
        return None

    def _after_first_root_lp(self, values: np.ndarray) -> None:
        """Called after the root node's first LP run (optimal, at ``values``), before its cuts;
        this solver does nothing there. HiGHS's solution must not be changed here (a bound
        change discards it): what is to change waits for :meth:`_before_run`."""

    def _before_run(self) -> None:
        """Called before every LP run of the branch and bound; this solver does nothing."""

    def _separate(self, values: np.ndarray) -> int:
        """Add violated clique cuts; return how many.

        For a row R of app j and another app i, the rows of i that share a GPU with R are
        mutually exclusive (one row per app) and each conflicts with R, so
        ``x[j,R] + Σ_{r of i, r ∩ R ≠ ∅} x[i,r] <= 1``. The GPU constraints alone allow
        x[j,R] = 2/3 with i spread 1/3 over three of R's GPUs; these cuts forbid it.
        """
        added: list[tuple[int, ...]] = []
        for k in np.flatnonzero((values > 1e-6) & (values < 1 - 1e-6)):
            j = self.col_app[k]
            touching: dict[int, set[int]] = {}
            for g in self.apps[j].rows[self.col_row[k]][0]:
                for col in self.cols_by_gpu[g]:
                    if self.col_app[col] != j:
                        touching.setdefault(self.col_app[col], set()).add(col)
            for cols in touching.values():
                if values[k] + sum(values[c] for c in cols) > 1 + 1e-6:
                    cut = tuple(sorted({int(k), *cols}))
                    if cut not in self.cuts:
                        self.cuts.add(cut)
                        added.append(cut)
        self._add_cuts(added)
        return len(added)

    def _add_cuts(self, added: list[tuple[int, ...]]) -> None:
        """Append ``Σ_{k in cut} x[k] <= 1`` for each cut to the warm LP."""
        _append_cuts(self.h, added)

    def solve_milp(
        self,
        excluded: frozenset[int],
        hint: Mapping[int, int] | None = None,
        required: frozenset[int] = frozenset(),
        gap: float = _EXACT_GAP,
        fixed: Iterable[int] = (),
    ) -> dict[int, int]:
        """The same model as a MILP for HiGHS (built afresh; optionally seeded).

        ``fixed`` columns are fixed to 0 as well (reduced-cost fixing by the caller).

        HiGHS's answer is checked before it is used: the rows it picks must be disjoint and
        cost what HiGHS says its optimum costs. highspy 1.16 with presolve and a seeded
        solution (``setSolution``) was seen to report as optimal a point below the LP bound,
        which read back as the seed itself (a c_i of 1 where the exact one is 0.99; the
        benchmark's 64 x 256 x 32 instance 26000 under some hash seeds). Such an answer is
        discarded and the model solved again without the seed and without presolve.
        """
        self.milp_solves += 1
        cuts = sorted(self.cuts) if self.milp_cuts else []
        return self._solve_milp(excluded, hint, required, gap, fixed, cuts)

    def _solve_milp(
        self,
        excluded: frozenset[int],
        hint: Mapping[int, int] | None,
        required: frozenset[int],
        gap: float,
        fixed: Iterable[int],
        cuts: list[tuple[int, ...]],
    ) -> dict[int, int]:
        zeroed = self._zeroed(excluded, required) | set(fixed)
        for attempt in range(2):
            seed = hint if attempt == 0 else None
            presolve = self.milp_presolve and not attempt
            h, cols = self._milp(zeroed, excluded, seed, gap, presolve, cuts)
            h.run()
            status = h.getModelStatus()

            if status == highspy.HighsModelStatus.kOptimal:
                choice = self._choice(self._values(h, cols), excluded)
                if self._agrees(choice, h.getInfo().objective_function_value, excluded):
                    return choice
                continue
            if self.deadline is not None and status == highspy.HighsModelStatus.kTimeLimit:
                self.budget_stops += 1
                if h.getInfo().primal_solution_status == _FEASIBLE:
                    choice = self._choice(self._values(h, cols), excluded)
                    if self._agrees(choice, h.getInfo().objective_function_value, excluded):
                        return choice
                if hint is not None:
                    return {a: hint.get(a, 0) for a in self.members if a not in excluded}
            # all-empty is always feasible, so anything else is a solver failure
            raise RuntimeError(f"HiGHS did not prove optimality: {h.modelStatusToString(status)}")
        raise RuntimeError("HiGHS reported an optimum that its solution does not attain, twice")

    def _milp(
        self,
        zeroed: set[int],
        excluded: frozenset[int],
        hint: Mapping[int, int] | None,
        gap: float,
        presolve: bool,
        cuts: list[tuple[int, ...]],
    ) -> tuple[highspy.Highs, np.ndarray]:
        """A fresh HiGHS MILP of this market with ``zeroed`` columns at 0, ``cuts`` added,
        seeded with ``hint``; also the market column of each of its columns.

        With ``milp_compact`` the zeroed columns are left out of the model instead of fixed
        (after reduced-cost fixing most are: HiGHS then builds its clique table and probes
        over the few hundred columns that can still change). It only reads the market (the
        base LP is never modified), so several can be built and run at once.
        """
        n = self.lp.num_col_
        if self.milp_compact:
            cols = np.setdiff1d(
                np.arange(n), np.fromiter(zeroed, dtype=np.int64, count=len(zeroed))
            )
            lp = self._sub_lp(cols)
        else:
            cols, lp = np.arange(n), self.lp
        h = self._highs(lp)
        m = cols.size
        h.changeColsIntegrality(
            m, np.arange(m, dtype=np.int32), np.full(m, highspy.HighsVarType.kInteger)
        )
        h.setOptionValue("mip_abs_gap", gap)
        if not presolve:
            h.setOptionValue("presolve", "off")
        if self.milp_compact:
            position = np.full(n, -1)
            position[cols] = np.arange(m)
            kept = (tuple(int(position[k]) for k in cut if position[k] >= 0) for cut in cuts)
            _append_cuts(h, [cut for cut in kept if len(cut) > 1])
        else:
            self._bounds(h, zeroed, 0.0, 0.0)
            _append_cuts(h, cuts)
        if hint:
            sol = highspy.HighsSolution()
            sol.col_value = [
                1.0 if (0 if a in excluded else hint.get(a, 0)) == r else 0.0
                for a, r in ((self.col_app[k], self.col_row[k]) for k in cols.tolist())
            ]
            h.setSolution(sol)
        if self.deadline is not None:
            h.setOptionValue("time_limit", max(1e-3, self.deadline - self.clock()))
        return h, cols

    def _values(self, h: highspy.Highs, cols: np.ndarray) -> np.ndarray:
        """The solution of a :meth:`_milp` model over all the market's columns."""
        out = np.zeros(self.lp.num_col_)
        out[cols] = np.asarray(h.getSolution().col_value)
        return out

    def _sub_lp(self, cols: np.ndarray) -> highspy.HighsLp:
        """The base LP restricted to ``cols`` (every row kept)."""
        base = self.lp
        start = np.asarray(base.a_matrix_.start_)
        index = np.asarray(base.a_matrix_.index_)
        lengths = start[cols + 1] - start[cols]
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = cols.size, base.num_row_
        lp.col_cost_ = np.asarray(base.col_cost_)[cols]
        lp.col_lower_ = np.zeros(cols.size)
        lp.col_upper_ = np.ones(cols.size)
        lp.row_lower_ = np.asarray(base.row_lower_)
        lp.row_upper_ = np.asarray(base.row_upper_)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        picked = [index[start[k] : start[k + 1]] for k in cols.tolist()]
        lp.a_matrix_.index_ = (
            np.concatenate(picked).astype(np.int32) if picked else np.zeros(0, np.int32)
        )
        lp.a_matrix_.value_ = np.ones(int(lengths.sum()))
        return lp

    def _agrees(
        self, choice: Mapping[int, int], objective: float, excluded: frozenset[int]
    ) -> bool:
        """Whether ``choice`` is a feasible allocation costing ``objective`` (HiGHS's value,
        which includes the empty rows of the excluded apps)."""
        used: set[int] = set()
        for a, r in choice.items():
            gpus = self.apps[a].rows[r][0]
            if not used.isdisjoint(gpus):
                return False
            used |= gpus
        offset = sum(self.apps[a].rows[0][1] for a in self.members if a in excluded)
        value = _cost(self.apps, choice) + offset
        return abs(value - objective) <= 1e-6 * max(1.0, abs(objective))

    def _choice(self, values: np.ndarray, excluded: frozenset[int]) -> dict[int, int]:
        chosen = {a: 0 for a in self.members if a not in excluded}
        for k in np.flatnonzero(values > 0.5):
            a = self.col_app[k]
            if a not in excluded:
                chosen[a] = self.col_row[k]
        return chosen


class _CliqueMarket(_Market):
    """:class:`_Market` with maximal-clique cuts (``Solver.CLIQUES``; the base of the default).

    Two rows conflict when they belong to one app or share a GPU; any set of pairwise
    conflicting rows (a clique of this conflict graph) holds at most one chosen row, for every
    ``-i`` market alike, so each clique cut ``Σ_{k in K} x[k] <= 1`` is valid for the whole
    model's life. The per-GPU and per-app constraints are cliques of one kind each, and
    :class:`_Market`'s cuts join one row with the rows of one other app; the LPs of the
    benchmark's tail (symmetric equal-ρ rows of several apps around the same machines) stay
    fractional with those alone: e.g. x = 1/3 on three rows of app A, each meeting a row of B
    and one of C. Here each fractional row grows, greedily by LP value, into a maximal clique
    of the LP's support, and a violated one is lifted with rows at 0 until no row conflicts
    with all of it (a stronger cut for the next LPs). The graph is held as one bitmask of
    conflicting columns per column, built at the first fractional LP.
    """

    cut_rounds = 10
    # Measured on the benchmark's MILP fallbacks (50 of them, 64 apps, same run): without
    # presolve and with these cuts HiGHS took half the time (98 against 195 ms per solve).
    milp_presolve = False
    milp_cuts = True
    milp_compact = True

    def __init__(self, apps: list[_App], members: list[int], clock: Callable[[], float]) -> None:
        super().__init__(apps, members, clock)
        self._conflicts: list[int] | None = None

    def conflicts(self) -> list[int]:
        """Per column, the bitmask of the columns it conflicts with (not itself)."""
        if self._conflicts is None:
            by_gpu: dict[int, int] = {}
            by_app: dict[int, int] = {}
            for k, (a, r) in enumerate(zip(self.col_app, self.col_row, strict=True)):
                by_app[a] = by_app.get(a, 0) | (1 << k)
                for g in self.apps[a].rows[r][0]:
                    by_gpu[g] = by_gpu.get(g, 0) | (1 << k)
            out = []
            for k, (a, r) in enumerate(zip(self.col_app, self.col_row, strict=True)):
                mask = by_app[a]
                for g in self.apps[a].rows[r][0]:
                    mask |= by_gpu[g]
                out.append(mask & ~(1 << k))
            self._conflicts = out
        return self._conflicts

    def _separate(self, values: np.ndarray) -> int:
        """Add violated maximal-clique cuts (see the class docstring); return how many."""
        conflicts = self.conflicts()
        support = sorted(np.flatnonzero(values > 1e-6).tolist(), key=lambda k: -values[k])
        added: list[tuple[int, ...]] = []
        for k in support:
            if values[k] >= 1 - 1e-6:
                continue
            clique, candidates, weight = [k], conflicts[k], values[k]
            for c in support:
                if candidates >> c & 1:
                    clique.append(c)
                    weight += values[c]
                    candidates &= conflicts[c]
            if weight <= 1 + 1e-6:
                continue
            while candidates:  # lift: rows at 0 that conflict with the whole clique
                c = (candidates & -candidates).bit_length() - 1
                clique.append(c)
                candidates &= conflicts[c]
            cut = tuple(sorted(clique))
            if cut not in self.cuts:
                self.cuts.add(cut)
                added.append(cut)
        self._add_cuts(added)
        return len(added)


def _optimum(
    apps: list[_App],
    members: list[int],
    market: _Market | None,
    excluded: frozenset[int],
    hint: Mapping[int, int] | None = None,
    required: frozenset[int] = frozenset(),
    gap: float = _EXACT_GAP,
) -> dict[int, int]:
    """The optimum of ``members`` without ``excluded``: enumerated when small, else on the
    market."""
    found = _optimum_or_defer(apps, members, market, excluded, hint, required, gap, defer=False)
    return found if isinstance(found, dict) else found()


def _optimum_or_defer(
    apps: list[_App],
    members: list[int],
    market: _Market | None,
    excluded: frozenset[int],
    hint: Mapping[int, int] | None = None,
    required: frozenset[int] = frozenset(),
    gap: float = _EXACT_GAP,
    *,
    defer: bool,
    improve: Callable[[Mapping[int, int]], dict[int, int]] | None = None,
) -> dict[int, int] | Callable[[], dict[int, int]]:
    """:func:`_optimum`; with ``defer``, a MILP fallback comes back as a call to make
    (:meth:`_Market.solve_or_defer`)."""
    included = [a for a in members if a not in excluded]
    if len(included) <= 1 or math.prod(len(apps[a].rows) for a in included) <= _ENUMERATION_LIMIT:
        return _enumerate(apps, included)
    assert market is not None
    found = market.solve_or_defer(excluded, hint, required, gap, improve)
    return found if defer or isinstance(found, dict) else found()
