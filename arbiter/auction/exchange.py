"""Exchange chains: the market without app i solved by the PF LP's prices, when they allow it
(Themis §3.3, Pseudocode 1; spec B.5 solver).

:mod:`arbiter.auction.certify` bounds every market without one app i from below with one set
of prices ``y <= 0`` on the packing rows (GPUs and cuts: the PF LP's duals, clamped):
``L_i = Σ_{a ≠ i} min_a + Σ_r y_r b_r``, ``min_a`` the smallest reduced cost of app a's
columns. For any allocation x of that market::

    cost(x) - L_i = Σ_{a ≠ i} slack(x_a) + Σ_r |y_r| (b_r - A_r x)

(``slack_k`` = reduced cost of column k less its app's smallest), so x is optimal when every
app sits on a column of zero slack and every priced row is used to the full. On the
benchmark's 64 x 256 x 32 tail this bound is often the optimum (26012: about 31 of its 50
markets without one app whose c_i the certificate cannot settle): the others really gain
from i's GPUs, by exactly what those GPUs and cuts are priced at.

The others' PF rows (``kept``) have zero slack (complementary slackness at the PF), so only
the priced rows that i's PF row filled are left open. :class:`Exchange` searches, depth
first, for a chain of moves that fills them again: an app moves to a zero-slack column of an
open priced row (into GPUs that are free or its own), which may open rows of its old column
for the next app. When a chain brings the cost within ``target`` (``L_i`` plus the payment
gap), the allocation is checked (disjoint GPUs, every app once) and returned: its cost is
within the gap of the optimum and never below it, what a ``-i`` solve with that gap returns,
without an LP run. Otherwise (no such chain within the node limit) the solve runs as before.
Feasibility is only the GPUs: every cut is valid for every 0/1 allocation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from arbiter.auction.formulation import _App, _cost

__all__ = ["Exchange"]

# Reduced-cost slack below which a column counts as priced at its app's best (the prices are
# HiGHS's duals: tiny residues are not a real slack; the final cost test is exact).
_ZERO = 1e-9
# A row counts as priced when its (clamped) dual is below this; open when its activity is
# below its bound by more than _OPEN.
_PRICED = -1e-9
_OPEN = 1e-9
# Moves tried per market before giving up (the warm LP solve then runs).
_NODES = 48
# Longest chain of moves.
_DEPTH = 5


class Exchange:
    """The PF LP's prices, indexed for the search (built once per auction component).

    ``price`` per LP row (0 on the app rows), ``upper`` each row's bound, the LP's matrix
    column-wise (``start``, ``index``, ``value``), ``slack`` per column, and the market's
    columns (``col_app``, ``col_row``)."""

    def __init__(
        self,
        apps: list[_App],
        price: np.ndarray,
        upper: np.ndarray,
        start: np.ndarray,
        index: np.ndarray,
        value: np.ndarray,
        slack: np.ndarray,
        col_app: Sequence[int],
        col_row: Sequence[int],
    ) -> None:
        self.apps = apps
        self.col_app = col_app
        self.col_row = col_row
        self.upper = upper
        self.price = price
        col_of = np.repeat(np.arange(start.size - 1), np.diff(start))
        priced = price[index] < _PRICED
        # per column: its priced rows and coefficients; per priced row: its zero-slack columns
        self.rows_of: dict[int, list[tuple[int, float]]] = {}
        self.candidates: dict[int, list[int]] = {}
        zero = slack <= _ZERO
        for k, r, v in zip(
            col_of[priced].tolist(), index[priced].tolist(), value[priced].tolist(), strict=True
        ):
            self.rows_of.setdefault(k, []).append((r, v))
            if zero[k]:
                self.candidates.setdefault(r, []).append(k)
        self.col = {(a, rr): k for k, (a, rr) in enumerate(zip(col_app, col_row, strict=True))}

    def settle(self, kept: Mapping[int, int], target: float) -> dict[int, int] | None:
        """An allocation of the apps of ``kept`` (each on one row, GPUs disjoint) costing at
        most ``target``, reached from ``kept`` by a chain of zero-slack moves that fill the
        open priced rows; None if the search finds none."""
        apps = self.apps
        choice = dict(kept)
        cost = _cost(apps, choice)
        if cost <= target:
            return choice
        owner: dict[int, int] = {}
        activity: dict[int, float] = {}
        for a, r in choice.items():
            for g in apps[a].rows[r][0]:
                owner[g] = a
            for row, v in self.rows_of.get(self.col[a, r], ()):
                activity[row] = activity.get(row, 0.0) + v
        opened = [r for r in self.candidates if activity.get(r, 0.0) < self.upper[r] - _OPEN]
        if not opened:
            return None
        moved: set[int] = set()
        nodes = 0

        def move(a: int, old: int, new: int) -> None:
            for row, v in self.rows_of.get(self.col[a, old], ()):
                activity[row] = activity.get(row, 0.0) - v
            for row, v in self.rows_of.get(self.col[a, new], ()):
                activity[row] = activity.get(row, 0.0) + v
            held, gpus = apps[a].rows[old][0], apps[a].rows[new][0]
            for g in held - gpus:
                del owner[g]
            for g in gpus - held:
                owner[g] = a
            choice[a] = new

        def search(depth: int, open_rows: list[int]) -> bool:
            nonlocal cost, nodes
            # the most expensive open priced row must be filled
            rows = [r for r in open_rows if activity.get(r, 0.0) < self.upper[r] - _OPEN]
            if not rows:
                return False
            r = min(rows, key=lambda r: self.price[r])
            for k in self.candidates.get(r, ()):
                a = self.col_app[k]
                if a not in choice or a in moved:
                    continue
                old, new = choice[a], self.col_row[k]
                if any(owner.get(g, a) != a for g in apps[a].rows[new][0]):
                    continue
                nodes += 1
                if nodes > _NODES:
                    return False
                delta = apps[a].rows[new][1] - apps[a].rows[old][1]
                move(a, old, new)
                moved.add(a)
                cost += delta
                if cost <= target:
                    return True
                if depth > 1:
                    more = [row for row, _ in self.rows_of.get(self.col[a, old], ())]
                    if search(depth - 1, rows + more):
                        return True
                cost -= delta
                moved.discard(a)
                move(a, new, old)
            return False

        if not search(_DEPTH, opened):
            return None
        used: set[int] = set()
        for a, r in choice.items():  # the answer is checked, not trusted
            gpus = apps[a].rows[r][0]
            if not used.isdisjoint(gpus):
                return None
            used |= gpus
        return choice if _cost(apps, choice) <= target else None
