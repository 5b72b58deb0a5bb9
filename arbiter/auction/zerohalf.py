"""Zero-half cuts for the PA auction's 0/1 program (Themis §3.3, Pseudocode 1; spec B.5 solver).

The benchmark's tail (64 apps x 256 GPUs x 32 rows) is instances whose LP relaxation, even with
every maximal-clique cut, is half-integral: about 20 apps at ½ on equal-ρ rows over
interchangeable machines, in odd cycles of cliques. HiGHS's MILP closes that gap at its root
node (1 node in each), but each ``-i`` solve then costs a fresh MILP of 20-30 ms, about 42 times
per instance. Here {0, ½} cuts are separated on the solver's own warm LP, so the LP itself
becomes integral and no MILP runs.

A {0, ½}-Chvátal-Gomory cut: take a set S of valid rows ``Σ_{k in r} x_k <= 1`` (an app's rows,
the rows on one GPU, a clique cut, or a bound ``x_k <= 1``), add them up and halve::

    Σ_k floor(c_k / 2) x_k <= floor(|S| / 2)        c_k = how many rows of S contain column k

valid for every 0/1 point satisfying the rows (x >= 0 and the left side is an integer). At an
LP point x* where every row of S is tight, its violation is ``½ (1 - Σ_{k: c_k odd} x*_k)``
when |S| is odd: exactly ½ when every column with x*_k > 0 appears an even number of times (a
column at 1 can be evened out by its bound row). Finding such an S is linear algebra over GF(2):
a combination of tight rows, restricted to the columns with x* > 0, that sums to zero and uses
an odd number of rows. Gaussian elimination (rows as bitmasks, shortest rows first, so the
combinations found stay short) gives one per dependent row.

Every input row is valid for the whole market and for every market without some apps (those
only fix more columns to 0), so each cut holds for the model's whole life, like the clique
cuts. The cuts' coefficients are integers computed exactly; floating point only decides which
rows count as tight and whether a cut is worth adding.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ZeroHalfCut", "zero_half_cuts"]

# A cut: (columns, their integer coefficients, integer right-hand side): Σ coef x <= rhs.
ZeroHalfCut = tuple[tuple[int, ...], tuple[int, ...], int]

_EPS = 1e-6


def zero_half_cuts(
    rows: Sequence[Sequence[int]],
    values: np.ndarray,
    limit: int = 64,
    activity: np.ndarray | None = None,
) -> list[ZeroHalfCut]:
    """Violated {0, ½}-CG cuts at the LP point ``values`` from ``rows`` (each a set of columns
    whose sum is at most 1 in every 0/1 solution), at most ``limit`` of them, most violated
    first. ``activity`` (optional) is each row's Σ x at ``values``, if the caller has it."""
    positive = np.flatnonzero(values > _EPS).tolist()
    bit = {k: n for n, k in enumerate(positive)}
    if activity is None:
        activity = np.array([values[list(r)].sum() if r else 0.0 for r in rows])
    tight: list[Sequence[int]] = [rows[n] for n in np.flatnonzero(activity > 1 - _EPS).tolist()]
    tight.extend((k,) for k in positive if values[k] > 1 - _EPS)  # bound rows x_k <= 1
    basis: dict[int, tuple[int, int]] = {}  # pivot -> (vector over positive columns, rows used)
    combos: list[int] = []
    for n in sorted(range(len(tight)), key=lambda n: len(tight[n])):
        vec = 0
        for k in tight[n]:
            if k in bit:
                vec ^= 1 << bit[k]
        used = 1 << n
        while vec:
            pivot = vec.bit_length() - 1
            if pivot not in basis:
                basis[pivot] = (vec, used)
                break
            vec ^= basis[pivot][0]
            used ^= basis[pivot][1]
        if not vec and used.bit_count() % 2 == 1:
            combos.append(used)
    cuts: list[tuple[float, ZeroHalfCut]] = []
    seen: set[ZeroHalfCut] = set()
    for used in combos:
        count: dict[int, int] = {}
        size = 0
        while used:
            n = (used & -used).bit_length() - 1
            used &= used - 1
            size += 1
            for k in tight[n]:
                count[k] = count.get(k, 0) + 1
        cols = tuple(sorted(k for k, c in count.items() if c >= 2))
        coef = tuple(count[k] // 2 for k in cols)
        cut = (cols, coef, size // 2)
        violation = float(np.dot(values[list(cols)], coef)) - cut[2] if cols else -1.0
        if violation > _EPS and cut not in seen:
            seen.add(cut)
            cuts.append((violation, cut))
    cuts.sort(key=lambda vc: (-vc[0], len(vc[1][0])))
    return [cut for _, cut in cuts[:limit]]
