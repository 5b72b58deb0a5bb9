"""Gomory mixed-integer cuts for the PA auction's solves without one app (Themis §3.3,
Pseudocode 1; spec B.5 solver).

The benchmark's tail (64 apps x 256 GPUs x 32 rows) is markets whose LP, after every clique
cut, sits on a huge face of equally good half-integral points: apps at ½ on equal-ρ rows over
interchangeable machines. Zero-half cuts (:mod:`arbiter.auction.zerohalf`) cut one such point
per round and the simplex moves to its twin, so a ``-i`` solve could run 20-40 rounds without
moving its bound, then end in HiGHS's MILP anyway. A Gomory mixed-integer (GMI) cut is read off
the optimal basis itself, so it cuts the vertex the simplex stands on along every direction the
basis can move in: on the tail's ``-i`` solves one to four rounds of them close the gap.

**Derivation.** HiGHS's basis holds the structural columns x and one logical per row,
``s = -A x``; the row of the simplex tableau of a basic column x_b is
``Σ_j ā_j x_j + Σ_r β_r s_r = 0`` (ā: that row of B⁻¹A, with ā_b = 1; β: that row of B⁻¹).
Every nonbasic variable is written as its distance t >= 0 from the bound it sits at::

    x_j = t_j  (at 0)      x_j = 1 - t_j  (at 1)
    row r at its upper bound U_r:  A_r x = U_r - t_r     at its lower bound L_r:  A_r x = L_r + t_r

so that ``x_b + Σ α t = x̄_b`` (α = ā_j, -ā_j, β_r, -β_r in that order). With
f0 = frac(x̄_b) in (0, 1), the GMI cut ``Σ g t >= 1`` holds at every point where x is 0/1,
with ``g = f/f0`` (f = frac(α) <= f0) or ``(1 - f)/(1 - f0)`` for a t that is integral there,
and ``g = α/f0`` (α >= 0) or ``-α/(1 - f0)`` for one that is not. A row's t is integral at 0/1
points when the row's coefficients and bound are integers: the app, GPU, clique and zero-half
rows; the GMI rows themselves are not. Substituting t back gives the cut over x.

**Scope.** A GMI cut holds for the LP it was read from, *with its bounds*: in a ``-i`` solve
the excluded app's rows and the starving apps' empty rows are fixed to 0, and reduced-cost
fixing fixes more. So, unlike the clique and zero-half cuts, it is only valid within that one
solve, at its root (a branch's fixings would narrow it further): the caller adds them at the
root of a ``-i`` solve and removes them when the solve ends.

**Safety.** The tableau comes from floating point. A coefficient below ``_TINY`` is dropped
towards the weaker cut (a positive one is moved into the right-hand side, since x <= 1), the
right-hand side is relaxed by ``_RELAX`` (relative), and a cut whose coefficients span more than
``_DYNAMISM`` is not used. Whatever a cut does, a solve only ever returns an allocation it has
checked (disjoint GPUs, one row per app) and priced exactly, so a cut that were wrong could
only make the market without i look worse than it is: c_i too high, never an overcharge.

Example (a triangle of conflicts, every row at ½): the cut read off the basis is the clique
``x0 + x1 + x2 <= 1``, here as ``-2 x0 - 2 x1 - 2 x2 >= -2``.

>>> import numpy as np
>>> vertex = Vertex(
...     col_up=np.zeros(3, bool), col_free=np.array([False, False, False]),
...     row_up=np.ones(3, bool), row_down=np.zeros(3, bool), row_integral=np.ones(3, bool),
...     row_lower=np.full(3, -np.inf), row_upper=np.ones(3), row_start=np.array([0, 2, 4, 6]),
...     row_cols=np.array([0, 1, 1, 2, 0, 2]), row_coefs=np.ones(6))
>>> # rows x0 + x1, x1 + x2, x0 + x2 <= 1 with x0, x1, x2 basic at ½; the tableau row of x0:
>>> # x0 = ½ (A_0 x - A_1 x + A_2 x), so B⁻¹A's row is (1, 0, 0) and B⁻¹'s is (½, -½, ½)
>>> cols, coef, rhs = gomory_cut(vertex, 0.5, np.array([1.0, 0, 0]), np.array([0.5, -0.5, 0.5]))
>>> cols.tolist(), np.round(coef, 6).tolist(), round(rhs, 6)
([0, 1, 2], [-2.0, -2.0, -2.0], -2.0)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import highspy
import numpy as np

from arbiter.auction.rows import LpRows

__all__ = ["Vertex", "gomory_cut", "gomory_cuts", "read_vertex"]

# Fractionality a basic column needs before a cut is read off its row.
_MIN_FRACTION = 0.01
# Coefficients below this (in absolute value) are dropped towards the weaker cut.
_TINY = 1e-9
# The right-hand side is relaxed by this much (relative to max(1, |rhs|)).
_RELAX = 1e-7
# Largest ratio of a cut's largest to its smallest coefficient.
_DYNAMISM = 1e6


class _Tableau(Protocol):
    """What the cuts read of a solved HiGHS model's basis (highspy 1.16 has these methods, but
    its type stubs do not declare them)."""

    def getBasicVariables(self) -> tuple[Any, np.ndarray]: ...

    def getReducedRow(self, row: int) -> tuple[Any, np.ndarray]: ...

    def getBasisInverseRow(self, row: int) -> tuple[Any, np.ndarray]: ...


@dataclass(frozen=True, slots=True)
class Vertex:
    """An optimal basis of the warm LP, as the cuts read it (arrays over columns or rows).

    ``col_up``: nonbasic at its upper bound 1; ``col_free``: nonbasic and not fixed
    (lower < upper); ``row_up`` / ``row_down``: the row's logical is nonbasic and the row sits
    at its upper / lower bound (not an equality row); ``row_integral``: the row's activity is
    an integer at every 0/1 point; the rows' bounds; the matrix row-wise (row r's columns and
    coefficients are ``row_cols`` / ``row_coefs[row_start[r]:row_start[r + 1]]``).
    """

    col_up: np.ndarray
    col_free: np.ndarray
    row_up: np.ndarray
    row_down: np.ndarray
    row_integral: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    row_start: np.ndarray
    row_cols: np.ndarray
    row_coefs: np.ndarray


def gomory_cut(
    vertex: Vertex, x_b: float, reduced_row: np.ndarray, inverse_row: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The GMI cut ``Σ coef_k x_k >= rhs`` (columns, coefficients, rhs) of the tableau row of a
    basic 0/1 column at the fractional value ``x_b``: ``reduced_row`` is that row of B⁻¹A,
    ``inverse_row`` that row of B⁻¹ (module docstring). None when ``x_b`` is too close to an
    integer or the cut is numerically unsafe."""
    f0 = x_b - math.floor(x_b)
    if not _MIN_FRACTION <= f0 <= 1 - _MIN_FRACTION:
        return None
    up, free = vertex.col_up, vertex.col_free
    # structural columns: t = x (at 0) or 1 - x (at 1)
    alpha = np.where(up, -reduced_row, reduced_row)
    frac = alpha - np.floor(alpha)
    g = np.where(frac <= f0, frac / f0, (1.0 - frac) / (1.0 - f0))
    g[~free] = 0.0
    # logicals: t = U - A_r x (row at its upper bound) or A_r x - L (at its lower bound)
    row_alpha = np.where(vertex.row_up, inverse_row, -inverse_row)
    row_frac = row_alpha - np.floor(row_alpha)
    integral = np.where(row_frac <= f0, row_frac / f0, (1.0 - row_frac) / (1.0 - f0))
    continuous = np.where(row_alpha >= 0, row_alpha / f0, -row_alpha / (1.0 - f0))
    h = np.where(vertex.row_integral, integral, continuous)
    h[~(vertex.row_up | vertex.row_down)] = 0.0
    # back to x: Σ g t >= 1 with t substituted
    coef = np.where(up, -g, g)
    const = float(g[up].sum())
    h_up = np.where(vertex.row_up, h, 0.0)
    h_down = np.where(vertex.row_down, h, 0.0)
    if h_up.any():
        const += float(h_up @ np.where(vertex.row_up, vertex.row_upper, 0.0))
    if h_down.any():
        const -= float(h_down @ np.where(vertex.row_down, vertex.row_lower, 0.0))
    per_entry = np.repeat(h_down - h_up, np.diff(vertex.row_start)) * vertex.row_coefs
    coef += np.bincount(vertex.row_cols, weights=per_entry, minlength=coef.size)
    rhs = 1.0 - const
    # drop tiny coefficients towards the weaker cut (0 <= x <= 1)
    tiny = np.abs(coef) < _TINY
    rhs -= float(coef[tiny & (coef > 0)].sum())
    coef[tiny] = 0.0
    cols = np.flatnonzero(coef)
    if cols.size == 0:
        return None
    size = np.abs(coef[cols])
    if size.max() > _DYNAMISM * size.min():
        return None
    rhs -= _RELAX * max(1.0, abs(rhs))
    return cols, coef[cols], rhs


def read_vertex(
    h: highspy.Highs,
    values: np.ndarray,
    basic: np.ndarray,
    rows: LpRows,
    fractional_rows: Sequence[int],
    fixed: Collection[int] = (),
) -> Vertex:
    """The optimal basis of the LP in ``h`` (just solved, at ``values``; ``basic`` from its
    ``getBasicVariables``), with ``rows`` its rows in HiGHS's order; ``fractional_rows`` are
    the rows whose activity need not be an integer at 0/1 points; ``fixed`` columns count as
    fixed at 0 (nonbasic at 0 in this basis) whatever their bounds in ``h``."""
    lp = h.getLp()
    n_cols, n_rows = lp.num_col_, lp.num_row_
    if len(rows) != n_rows:
        raise ValueError(f"{len(rows)} rows kept for an LP of {n_rows}")
    row_start, row_cols, row_coefs = rows.csr()
    col_basic = np.zeros(n_cols, dtype=bool)
    col_basic[basic[basic >= 0]] = True
    row_basic = np.zeros(n_rows, dtype=bool)
    row_basic[-basic[basic < 0] - 1] = True
    col_free = ~col_basic & (np.asarray(lp.col_lower_) < np.asarray(lp.col_upper_))
    col_free[list(fixed)] = False
    lower, upper = np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
    activity = np.asarray(h.getSolution().row_value)
    nonbasic = ~row_basic & (lower < upper)
    with np.errstate(invalid="ignore"):
        nearer_upper = np.abs(upper - activity) <= np.abs(activity - lower)
    integral = np.ones(n_rows, dtype=bool)
    integral[list(fractional_rows)] = False
    return Vertex(
        col_up=col_free & (values > 0.5),
        col_free=col_free,
        row_up=nonbasic & nearer_upper & np.isfinite(upper),
        row_down=nonbasic & ~nearer_upper & np.isfinite(lower),
        row_integral=integral,
        row_lower=lower,
        row_upper=upper,
        row_start=row_start,
        row_cols=row_cols,
        row_coefs=row_coefs,
    )


def gomory_cuts(
    h: highspy.Highs,
    values: np.ndarray,
    rows: LpRows,
    fractional_rows: Sequence[int],
    limit: int,
    fixed: Collection[int] = (),
) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Up to ``limit`` GMI cuts ``Σ coef x >= rhs`` at the optimal basis of the 0/1 LP in ``h``
    (just solved, at ``values``; every column binary), read off the tableau rows of its most
    fractional basic columns (ties by basis position, so a run is repeatable). ``rows`` and
    ``fractional_rows`` and ``fixed`` as for :func:`read_vertex`."""
    tableau = cast(_Tableau, h)
    basic = np.asarray(tableau.getBasicVariables()[1])
    positions = np.flatnonzero(basic >= 0)
    x = values[basic[positions]]
    fraction = x - np.floor(x)
    fractional = (fraction > 1e-6) & (fraction < 1 - 1e-6)
    positions, fraction = positions[fractional], fraction[fractional]
    if not positions.size:
        return []
    order = np.lexsort((positions, np.abs(fraction - 0.5)))
    vertex = read_vertex(h, values, basic, rows, fractional_rows, fixed)
    cuts = []
    for p in positions[order][:limit].tolist():
        cut = gomory_cut(
            vertex,
            float(values[basic[p]]),
            np.asarray(tableau.getReducedRow(p)[1]),
            np.asarray(tableau.getBasisInverseRow(p)[1]),
        )
        if cut is not None:
            cuts.append(cut)
    return cuts
