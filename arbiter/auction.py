"""Partial-allocation (PA) auction over GPU bids (Themis §3.3, Pseudocode 1; thesis Pseudocode 3).

Cole-Gkatzelis-Goel partial allocation with hidden payments, on whole GPUs::

    G_pf     = argmax over disjoint rows (one per app) of  Π_i 1/ρ_i(G_i)      (proportional fair)
    G_pf^-i  = the same market without app i
    c_i      = Π_{j≠i} 1/ρ_j(G_j,pf) / Π_{j≠i} 1/ρ_j(G^-i_j,pf)   in (0, 1]
    L        = what the hidden payments 1 - c_i leave over

Each app's bid is a table of rows ``{GPU set: ρ with that set}``; the empty set carries ρ_old
(Table 1, T:906-919). The solver is exact: a 0/1 program (one binary per bid row, one row per
app, each GPU used at most once) minimising ``Σ log ρ`` (= maximising Π 1/ρ), solved with HiGHS
(``highspy``), or by enumeration when a conflict component is tiny. ``brute_force_pf`` is the
independent reference the tests cross-check against.

Speed comes from the problem's structure, not from approximations:

* rows with ρ >= ρ_old can never be chosen over the empty row in an optimum that frees GPUs, so
  they are dropped (the optimum value is unchanged);
* apps whose rows share no GPU form independent *conflict components*, solved separately, and
  removing app i only changes its own component;
* c_i = 1 with no solve when G_i,pf is empty, when no other app has a row touching G_i,pf (a
  better market without i would then be compatible with G_i,pf and improve G_pf, a
  contradiction), or when every other app already holds its best row;
* each component is one HiGHS model reused for the PF solve and all its ``-i`` solves (bound
  changes, warm dual simplex). Clique cuts (x[j,R] + Σ of app i's rows meeting R <= 1) are
  separated and kept, so the LP is integral far more often; an integral LP optimum is the
  0/1 optimum. Otherwise a small LP branch and bound runs, then HiGHS's MILP (presolve,
  symmetry, cuts). Each ``-i`` solve starts from the PF rows of the others as incumbent and
  requires the starving apps the PF served (Gap 2 below), which keeps ρ = ∞ out of its LP;
* tiny components are enumerated.

The PF allocation is solved to optimality (gap 1e-9 in Σ log ρ). The ``-i`` solves, which only
set c_i, stop within ``PAYMENT_GAP`` = 1e-4, so each c_i is exact up to a factor e^(1e-4), never
below its true value (at most 0.06 s of a 10-minute lease).

Decisions where the papers are silent (spec B.5):

* **Gap 1, fractional c_i on indivisible GPUs.** Default ``Rounding.LEASE_TIME``: app i holds its
  whole PF set G_i,pf for the fraction c_i of the lease (the placement it valued is kept); for
  the remaining 1 - c_i those GPUs are leftover. ``Rounding.COUNT`` is the alternative: i keeps
  its best bid row inside G_i,pf of at most floor(c_i |G_i,pf|) GPUs for the whole lease, the rest
  is leftover. Either way ``PAResult.leftover`` maps each leftover GPU to the fraction of the lease
  it is free for (1.0 = the whole lease; GPUs no PF row used are always 1.0).
* **Gap 2, ρ = ∞** (an app that holds nothing makes no progress; T:1013). ``inf`` is accepted
  (for any row) and the PF objective is lexicographic: first maximise the number of apps with
  finite ρ, then Π 1/ρ over them. (Encoded exactly: an infinite row costs more than the sum of
  all finite |log ρ| in the auction.) A plain cap such as ρ_max = 1e6 was tried and rejected: as
  soon as one starving app cannot be served, every app whose GPUs it could use gets c_i ≈ 1e-6
  and nearly all GPUs become leftover. So the market for the hidden payments is the apps the PF
  leaves with finite ρ: an app still at ρ = ∞ lost this round (its ρ keeps growing and filtering
  brings it back, T:1013) and is not counted in c_i. With finite ρ_old everywhere this is exactly
  Cole-Gkatzelis-Goel PA.

Bad input raises ``ValueError`` naming the app, the row and the field; nothing is allocated.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import numbers
import os
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

import highspy
import numpy as np

__all__ = [
    "PAYMENT_GAP",
    "RHO_MAX",
    "RHO_MIN",
    "Bid",
    "PAResult",
    "Rounding",
    "brute_force_payments",
    "brute_force_pf",
    "partial_allocation",
    "quiet_highs",
]

# Accepted range of finite ρ: wide enough for any real app, narrow enough that products of
# ratios stay meaningful in floating point.
RHO_MIN, RHO_MAX = 1e-9, 1e9
# c_i is a product of ratios that could underflow to 0 with extreme bids; it stays in (0, 1].
_C_FLOOR = math.ulp(0.0)
# Enumerate instead of calling HiGHS when a sub-problem has at most this many row combinations.
_ENUMERATION_LIMIT = 256
# LP branch-and-bound nodes before handing a sub-problem to HiGHS's own MILP solver.
_NODE_LIMIT = 8
# Optimality gaps (absolute, in Σ log ρ): the PF allocation is solved exactly; the solves
# without one app, which only set c_i, stop within PAYMENT_GAP, so each c_i is exact up to a
# factor exp(1e-4) (at most 0.06 s of a 10-minute lease), never below its true value.
_EXACT_GAP = 1e-9
PAYMENT_GAP = 1e-4
# Rounds of clique-cut separation per branch-and-bound node.
_CUT_ROUNDS = 3
# HiGHS's primal_solution_status for "a feasible solution is known".
_FEASIBLE = 2
# Under a time budget, the share of it the proportional-fair solves may use; the rest is for
# the solves that set the hidden payments.
_PF_SHARE = 0.5


def _past(deadline: float) -> bool:
    return time.monotonic() >= deadline


class Rounding(StrEnum):
    """How a fractional c_i becomes whole GPUs (spec B.5 Gap 1)."""

    LEASE_TIME = "lease-time"
    COUNT = "count"


@dataclass(frozen=True)
class Bid:
    """One app's bid: ``rows[G] = ρ if the app receives the GPU set G``; ``rows[∅] = ρ_old``."""

    app_id: str
    rows: Mapping[frozenset[str], float]

    def __post_init__(self) -> None:
        if not isinstance(self.app_id, str) or not self.app_id:
            raise ValueError(f"Bid.app_id must be a non-empty string, got {self.app_id!r}")
        if not isinstance(self.rows, Mapping) or not self.rows:
            raise ValueError(f"bid of app {self.app_id!r}: rows must be a non-empty mapping")
        clean: dict[frozenset[str], float] = {}
        for key, value in self.rows.items():
            if not isinstance(key, frozenset) or not all(isinstance(g, str) for g in key):
                raise ValueError(
                    f"bid of app {self.app_id!r}: row key {key!r} must be a frozenset of GPU ids"
                )
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise ValueError(
                    f"bid of app {self.app_id!r}: row {sorted(key)} has rho={value!r}, not a number"
                )
            rho = float(value)
            if not (RHO_MIN <= rho <= RHO_MAX or rho == math.inf):
                raise ValueError(
                    f"bid of app {self.app_id!r}: row {sorted(key)} has rho={rho}; rho must be "
                    f"a number in [{RHO_MIN:g}, {RHO_MAX:g}] or inf (NaN, zero and negatives "
                    "are rejected)"
                )
            clean[key] = rho
        if frozenset() not in clean:
            raise ValueError(
                f"bid of app {self.app_id!r}: the empty row (rho_old) is missing; "
                "add rows[frozenset()] = the app's rho if it gets nothing"
            )
        object.__setattr__(self, "rows", MappingProxyType(clean))

    def __reduce__(self):  # picklable for the auction worker process (arbiter.decider)
        return (Bid, (self.app_id, dict(self.rows)))

    @property
    def rho_old(self) -> float:
        return self.rows[frozenset()]


@dataclass(frozen=True)
class PAResult:
    """Outcome of one PA auction (see the module docstring for the Gap-1 semantics)."""

    pf_allocation: dict[str, frozenset[str]]
    c: dict[str, float]
    allocation: dict[str, frozenset[str]]
    lease_fraction: dict[str, float]
    leftover: dict[str, float]
    rounding: Rounding
    pf_rho: dict[str, float]
    solves: int = field(default=0, compare=False)
    # Σ_j log(1/ρ_j) of the optimal market without app i (the apps with finite ρ at the PF,
    # minus i): the denominator of c_i. Unlike c_i it does not depend on how ties between
    # equally good PF allocations were broken, so it is what two solvers must agree on.
    value_without: dict[str, float] = field(default_factory=dict, compare=False)
    # Solves stopped by a time budget with their incumbent (0: PF and every c_i are exact).
    budget_stops: int = field(default=0, compare=False)

    @property
    def hidden_payment(self) -> dict[str, float]:
        """1 - c_i: the share of its PF allocation app i gives up."""
        return {a: 1.0 - c for a, c in self.c.items()}


# --------------------------------------------------------------------------------------------
# Internal problem representation: per app a list of (gpu-index tuple, cost = log ρ) rows,
# row 0 being the empty row.


@dataclass(frozen=True, slots=True)
class _App:
    app_id: str
    rows: tuple[tuple[frozenset[int], float], ...]  # row 0 = (∅, cost of ρ_old)
    keys: tuple[frozenset[str], ...]
    rows_rho: tuple[float, ...]
    starving: bool  # ρ_old = ∞

    @property
    def best(self) -> float:
        return min(cost for _, cost in self.rows)


def _prepare(bids: Iterable[Bid], offered: frozenset[str]) -> list[_App]:
    """Validate and index the bids; cost = log ρ, ρ = ∞ priced lexicographically (Gap 2)."""
    gpu_index = {g: k for k, g in enumerate(sorted(offered))}
    raw: list[tuple[str, float, list[tuple[frozenset[str], float]], float]] = []
    seen: set[str] = set()
    for bid in bids:
        if not isinstance(bid, Bid):
            raise ValueError(f"bids must be Bid objects, got {type(bid).__name__}")
        if bid.app_id in seen:
            raise ValueError(f"duplicate app_id {bid.app_id!r}: each app bids exactly once")
        seen.add(bid.app_id)
        useful = []
        for key, rho in bid.rows.items():
            if not key:
                continue
            stray = key - offered
            if stray:
                raise ValueError(
                    f"bid of app {bid.app_id!r}: row names GPUs not offered: {sorted(stray)}"
                )
            if rho < bid.rho_old:  # a row no better than nothing is never worth GPUs
                useful.append((key, rho))
        old = math.log(bid.rho_old) if math.isfinite(bid.rho_old) else math.inf
        raw.append((bid.app_id, old, useful, bid.rho_old))
    # ρ = ∞ costs more than any difference of finite costs can make up, so the PF allocation
    # first maximises the number of apps with finite ρ, then the product (Gap 2).
    # Two allocations differ by at most 2 Σ_i max_r |log ρ_i,r| in finite cost.
    inf_cost = 1.0 + 2.0 * sum(
        max((abs(c) for c in [old, *(math.log(r) for _, r in rows)] if c < math.inf), default=0.0)
        for _, old, rows, _ in raw
    )
    apps = []
    for app_id, old, rows, rho_old in raw:
        starving = old == math.inf
        apps.append(
            _App(
                app_id,
                (
                    (frozenset(), inf_cost if starving else old),
                    *tuple((frozenset(gpu_index[g] for g in k), math.log(r)) for k, r in rows),
                ),
                (frozenset(), *(k for k, _ in rows)),
                (rho_old, *(r for _, r in rows)),
                starving,
            )
        )
    return apps


def _components(apps: list[_App]) -> list[list[int]]:
    """Connected components of the conflict graph (apps whose rows share a GPU)."""
    parent = list(range(len(apps)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    owner: dict[int, int] = {}
    for a, app in enumerate(apps):
        for gpus, _ in app.rows:
            for g in gpus:
                if g in owner:
                    parent[find(a)] = find(owner[g])
                else:
                    owner[g] = a
    groups: dict[int, list[int]] = {}
    for a in range(len(apps)):
        groups.setdefault(find(a), []).append(a)
    return list(groups.values())


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


_banner_lock = threading.Lock()
_banner_done = False


def quiet_highs() -> highspy.Highs:
    """A HiGHS instance that prints nothing.

    HiGHS prints its copyright banner to standard output when a process constructs its first
    instance, before any option can be set (measured with highspy 1.16); a daemon's log or a
    command's table should not carry it. So the first construction runs with file descriptor 1
    pointed at /dev/null (C's buffer flushed before it is restored); later ones need nothing.
    """
    global _banner_done
    if not _banner_done:
        with _banner_lock:
            if not _banner_done:
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
                h.setOptionValue("output_flag", False)
                return h
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


class _Market:
    """One conflict component as a reusable HiGHS model.

    Variables x[a,r] in [0, 1], one per bid row; Σ_r x[a,r] = 1 per app; Σ_{rows ∋ g} x <= 1 per
    GPU; minimise Σ x log ρ. Removing apps fixes their non-empty rows to 0, requiring an app to
    be served fixes its empty row to 0 (model reuse, warm dual simplex). When the LP optimum is
    integral it is the 0/1 optimum; otherwise a small depth-first branch and bound runs on the
    same warm LP, and past a node limit the model is handed to HiGHS's MILP solver (presolve,
    cuts) seeded with the incumbent.
    """

    def __init__(self, apps: list[_App], members: list[int]) -> None:
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
        for i, a in enumerate(members):
            for r, (gpus, cost) in enumerate(apps[a].rows):
                if r:
                    self.cols_of.setdefault(a, []).append(len(costs))
                else:
                    self.empty_col[a] = len(costs)
                self.col_app.append(a)
                self.col_row.append(r)
                costs.append(cost)
                index.append(i)
                index.extend(len(members) + gpu_rows.setdefault(g, len(gpu_rows)) for g in gpus)
                start.append(len(index))
        self.cols_by_gpu: dict[int, list[int]] = {}
        for k, (a, r) in enumerate(zip(self.col_app, self.col_row, strict=True)):
            for g in apps[a].rows[r][0]:
                self.cols_by_gpu.setdefault(g, []).append(k)
        self.cuts: set[tuple[int, ...]] = set()
        self.gap = _EXACT_GAP  # absolute optimality gap in Σ log ρ for the current solve
        self.root: tuple[float, np.ndarray] | None = None  # (bound, reduced costs) at the root
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
        # Time budget (monotonic deadline of the current solve; None = solve to the gap).
        self.deadline: float | None = None
        self.budget_stops = 0  # solves that ended at their deadline with their incumbent

    @staticmethod
    def _highs(lp: highspy.HighsLp) -> highspy.Highs:
        h = quiet_highs()
        h.setOptionValue("threads", 1)
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
        fixed: set[int] = set()
        if hint is not None and self.root is not None:
            # Reduced-cost fixing: with root bound LB and incumbent cost UB, a column whose
            # reduced cost exceeds UB - LB is in no solution better than the incumbent.
            lb, reduced = self.root
            ub = _cost(self.apps, {a: hint.get(a, 0) for a in self.members if a not in excluded})
            fixed = set(np.flatnonzero(reduced > ub - lb + 1e-7).tolist()) - zeroed
        return self.solve_milp(excluded, hint, required, gap, fixed)

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
            nodes += 1
            if self.deadline is not None and best is not None and _past(self.deadline):
                self.budget_stops += 1
                return best
            if nodes > _NODE_LIMIT:
                return None
            for k, v in fixes:
                self._bounds(h, (k,), v, v)
            try:
                for rnd in range(_CUT_ROUNDS + 1):
                    h.run()
                    status = h.getModelStatus()
                    values = np.asarray(h.getSolution().col_value)
                    bound = h.getInfo().objective_function_value - offset
                    # Values and bound always come from the last LP run: new cuts only
                    # tighten the model for the next run.
                    if (
                        status != highspy.HighsModelStatus.kOptimal
                        or rnd == _CUT_ROUNDS
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
            k = int(frac[np.argmax(values[frac])])
            stack.append((*fixes, (k, 0.0)))
            stack.append((*fixes, (k, 1.0)))
        return best

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
        if added:
            starts = np.cumsum([0] + [len(c) for c in added[:-1]]).astype(np.int32)
            index = np.fromiter((c for cut in added for c in cut), dtype=np.int32)
            n = len(added)
            self.h.addRows(
                n,
                np.full(n, -highspy.kHighsInf),
                np.ones(n),
                index.size,
                starts,
                index,
                np.ones(index.size),
            )
        return len(added)

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
        """
        self.milp_solves += 1
        lp = self.lp
        lp.integrality_ = [highspy.HighsVarType.kInteger] * lp.num_col_
        h = self._highs(lp)
        h.setOptionValue("mip_abs_gap", gap)
        lp.integrality_ = []
        self._bounds(h, self._zeroed(excluded, required) | set(fixed), 0.0, 0.0)
        if hint:
            sol = highspy.HighsSolution()
            sol.col_value = [
                1.0 if (0 if a in excluded else hint.get(a, 0)) == r else 0.0
                for a, r in zip(self.col_app, self.col_row, strict=True)
            ]
            h.setSolution(sol)
        if self.deadline is not None:
            h.setOptionValue("time_limit", max(1e-3, self.deadline - time.monotonic()))
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kOptimal:
            return self._choice(np.asarray(h.getSolution().col_value), excluded)
        if self.deadline is not None and status == highspy.HighsModelStatus.kTimeLimit:
            self.budget_stops += 1
            if h.getInfo().primal_solution_status == _FEASIBLE:
                return self._choice(np.asarray(h.getSolution().col_value), excluded)
            if hint is not None:
                return {a: hint.get(a, 0) for a in self.members if a not in excluded}
        # all-empty is always feasible, so anything else is a solver failure
        raise RuntimeError(f"HiGHS did not prove optimality: {h.modelStatusToString(status)}")

    def _choice(self, values: np.ndarray, excluded: frozenset[int]) -> dict[int, int]:
        chosen = {a: 0 for a in self.members if a not in excluded}
        for k in np.flatnonzero(values > 0.5):
            a = self.col_app[k]
            if a not in excluded:
                chosen[a] = self.col_row[k]
        return chosen


def _optimum(
    apps: list[_App],
    members: list[int],
    market: _Market | None,
    excluded: frozenset[int],
    hint: Mapping[int, int] | None = None,
    required: frozenset[int] = frozenset(),
    gap: float = _EXACT_GAP,
) -> dict[int, int]:
    included = [a for a in members if a not in excluded]
    if len(included) <= 1 or math.prod(len(apps[a].rows) for a in included) <= _ENUMERATION_LIMIT:
        return _enumerate(apps, included)
    assert market is not None
    return market.solve(excluded, hint, required, gap)


def _cost(apps: list[_App], choice: Mapping[int, int]) -> float:
    return sum(apps[a].rows[r][1] for a, r in choice.items())


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


def _slice(end: float | None, left: int) -> float | None:
    """The deadline of the next of ``left`` solves sharing what remains until ``end``."""
    if end is None:
        return None
    now = time.monotonic()
    return now + max(0.0, end - now) / max(1, left)


def _pf_and_payments(
    apps: list[_App],
    naive: bool = False,
    payment_gap: float = PAYMENT_GAP,
    time_budget: float | None = None,
) -> tuple[dict[int, int], dict[int, float], dict[int, float], int, int]:
    """PF choice (app -> row) and c_i for every app; also the number of MILP solves and of
    solves stopped by ``time_budget`` (seconds; None = every solve to its gap).

    The market for c_i is the apps with finite ρ in the PF allocation (Gap 2): an app the PF
    leaves at ρ = ∞ lost this round and is not counted in anyone's hidden payment.

    Under a budget the PF solves share half of it and the ``-i`` solves the rest, each taking
    an equal slice of what remains; a solve at its deadline returns its incumbent (the PF
    starts from :func:`_greedy`, a ``-i`` solve from the PF rows of the others, so its c_i
    can only come out above its exact value: the app is never overcharged). A ``-i`` solve
    reached after the budget is spent takes :func:`_reassign`'s market (local moves of the
    others into the GPUs i leaves).
    """
    choice: dict[int, int] = {}
    c: dict[int, float] = {}
    without: dict[int, float] = {}
    comp_value: dict[tuple[int, ...], float] = {}
    start = time.monotonic()
    pf_end = None if time_budget is None else start + _PF_SHARE * time_budget
    end = None if time_budget is None else start + time_budget
    comps = [list(range(len(apps)))] if naive else _components(apps)
    big = {
        k: math.prod(len(apps[a].rows) for a in comp) > _ENUMERATION_LIMIT and len(comp) > 1
        for k, comp in enumerate(comps)
    }
    markets = {k: _Market(apps, comp) for k, comp in enumerate(comps) if big[k]}
    # Phase 1: the proportional-fair allocation of every component.
    lost: dict[int, frozenset[int]] = {}
    left = sum(big.values())
    for k, comp in enumerate(comps):
        market = markets.get(k)
        if naive and market:
            pf = market.solve_milp(frozenset())
        else:
            if market:
                market.deadline = _slice(pf_end, left)
                left -= 1
            hint = _greedy(apps, comp) if market and time_budget is not None else None
            pf = _optimum(apps, comp, market, frozenset(), hint=hint)
        choice.update(pf)
        lost[k] = frozenset(a for a in comp if apps[a].starving and pf[a] == 0)
        comp_value[tuple(comp)] = -_cost(apps, {a: pf[a] for a in comp if a not in lost[k]})
    # Phase 2: c_i, solving the market without i only where it can differ.
    todo: list[tuple[int, int, dict[int, int]]] = []
    for k, comp in enumerate(comps):
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
            else:
                todo.append((k, i, kept))
    stopped = 0
    for n, (k, i, kept) in enumerate(todo):
        comp, market = comps[k], markets.get(k)
        excluded = lost[k] | {i}
        if naive and market:
            opt = market.solve_milp(excluded)
        elif end is not None and _past(end):
            opt, stopped = _reassign(apps, kept), stopped + 1  # budget spent: the local moves
        else:
            hint = kept
            if market and end is not None:
                market.deadline = _slice(end, len(todo) - n)
                hint = _reassign(apps, kept)
            # Every optimum without i keeps all of the market served (Gap 2), so starving
            # members may be required to get GPUs: this removes ρ = ∞ from the LP.
            required = frozenset(a for a in kept if apps[a].starving)
            opt = _optimum(
                apps, comp, market, excluded, hint=hint, required=required, gap=payment_gap
            )
        c[i] = min(1.0, max(_C_FLOOR, math.exp(_cost(apps, opt) - _cost(apps, kept))))
        without[i] = -min(_cost(apps, opt), _cost(apps, kept))
    milp = sum(m.milp_solves for m in markets.values())
    stopped += sum(m.budget_stops for m in markets.values())
    # Other components keep their PF rows when i leaves: add their value to the optimum.
    total = sum(comp_value.values())
    for comp, value in comp_value.items():
        for i in comp:
            without[i] += total - value
    return choice, c, without, milp, stopped


def partial_allocation(
    bids: Iterable[Bid],
    offered: frozenset[str],
    *,
    rounding: Rounding | str = Rounding.LEASE_TIME,
    naive: bool = False,
    payment_gap: float = PAYMENT_GAP,
    time_budget: float | None = None,
) -> PAResult:
    """Run one PA auction of ``offered`` GPUs among ``bids`` (one bid per app).

    ``naive=True`` uses the straightforward formulation (one MILP per solve, rebuilt each time,
    n + 1 solves, no decomposition); it exists as the benchmark's baseline and a cross-check.
    Both give the same allocation value and the same c_i (up to ties between optima).

    ``payment_gap`` bounds the optimality gap (in Σ log ρ) of the solves without one app:
    each c_i is within a factor e^payment_gap above its exact value. The default 1e-4 is
    exact for any practical lease; a live arbiter under a round deadline may trade precision
    for latency (1e-2: c_i within 1 %, 6 s of a 10-minute lease).

    ``time_budget`` (seconds, None = none) bounds the solving time of a live round: a solve at
    its deadline keeps the best allocation it found, and ``PAResult.budget_stops`` counts them
    (0 = the result is exact). Then the PF allocation may fall short of the optimum and a c_i
    may exceed its exact value (an app is never charged more than the exact payment).
    """
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
    bids = list(bids)
    apps = _prepare(bids, offered)
    choice, c_idx, without, solves, stops = _pf_and_payments(
        apps, naive=naive, payment_gap=payment_gap, time_budget=time_budget
    )

    pf = {a.app_id: a.keys[choice[i]] for i, a in enumerate(apps)}
    pf_rho = {a.app_id: a.rows_rho[choice[i]] for i, a in enumerate(apps)}
    c = {apps[i].app_id: ci for i, ci in sorted(c_idx.items())}
    used = frozenset().union(*pf.values())
    leftover: dict[str, float] = dict.fromkeys(offered - used, 1.0)
    if rounding is Rounding.LEASE_TIME:
        allocation = dict(pf)
        lease_fraction = dict(c)
        for app_id, gpus in pf.items():
            if c[app_id] < 1.0:
                leftover.update(dict.fromkeys(gpus, 1.0 - c[app_id]))
    else:
        allocation, lease_fraction = {}, {}
        by_app = {b.app_id: b for b in bids}
        for app_id, gpus in pf.items():
            keep = math.floor(c[app_id] * len(gpus) + 1e-9)
            inside = [
                (rho, len(k), sorted(k), k)
                for k, rho in by_app[app_id].rows.items()
                if k <= gpus and len(k) <= keep
            ]
            kept = min(inside)[3]  # the empty row always qualifies
            allocation[app_id] = kept
            lease_fraction[app_id] = 1.0
            leftover.update(dict.fromkeys(gpus - kept, 1.0))
    return PAResult(
        pf_allocation=pf,
        c=c,
        allocation=allocation,
        lease_fraction=lease_fraction,
        leftover=dict(sorted(leftover.items())),
        rounding=rounding,
        pf_rho=pf_rho,
        solves=solves,
        value_without={apps[i].app_id: v for i, v in sorted(without.items())},
        budget_stops=stops,
    )


def _lex_value(rhos: Iterable[float]) -> tuple[int, float]:
    """(number of apps with finite ρ, Σ log(1/ρ) over them): the Gap-2 PF objective."""
    finite = [r for r in rhos if math.isfinite(r)]
    return len(finite), -sum(math.log(r) for r in finite)


def brute_force_pf(
    bids: Iterable[Bid], offered: frozenset[str]
) -> tuple[tuple[int, float], dict[str, frozenset[str]]]:
    """Reference PF by exhaustive search over every combination of rows (tests only).

    Returns the optimal objective ``(apps with finite ρ, Σ log 1/ρ over them)`` and one optimal
    allocation. It shares no code with the solver above.
    """
    bids = list(bids)
    best_value: tuple[int, float] = (-1, -math.inf)
    best: dict[str, frozenset[str]] = {}
    for combo in itertools.product(*(list(b.rows.items()) for b in bids)):
        sets = [k for k, _ in combo]
        if not all(k <= offered for k in sets):
            continue
        if sum(len(k) for k in sets) != len(frozenset().union(*sets)):
            continue
        value = _lex_value(rho for _, rho in combo)
        if value > best_value:
            best_value = value
            best = {b.app_id: k for b, (k, _) in zip(bids, combo, strict=True)}
    return best_value, best


def brute_force_payments(
    bids: Iterable[Bid], offered: frozenset[str], pf_allocation: Mapping[str, frozenset[str]]
) -> dict[str, float]:
    """Reference c_i for a given PF allocation, by exhaustive search (tests only)."""
    bids = list(bids)
    rho = {b.app_id: b.rows[pf_allocation[b.app_id]] for b in bids}
    market = [b for b in bids if math.isfinite(rho[b.app_id])]
    c = {b.app_id: 1.0 for b in bids}
    for bid in market:
        others = [b for b in market if b is not bid]
        kept = _lex_value(rho[b.app_id] for b in others)
        best, _ = brute_force_pf(others, offered)
        if best[0] == kept[0]:
            c[bid.app_id] = min(1.0, math.exp(kept[1] - best[1]))
        else:  # cannot happen: the PF keeps every other market app finite
            raise AssertionError("PF allocation was not lexicographically optimal")
    return c
