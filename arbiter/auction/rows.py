"""The warm LP's constraint rows, kept beside HiGHS in its order (Themis §3.3, Pseudocode 1;
spec B.5 solver).

The dual certificates (:mod:`arbiter.auction.certify`) price every column with the LP's row
duals (``Aᵀy``) once per solve, and each round of Gomory cuts (:mod:`arbiter.auction.gomory`)
substitutes rows into a cut (``Aᵀh``). Reading A back from HiGHS (``getLp().a_matrix_``) copies
the whole matrix into Python lists each time, 0.4 ms at 64 apps x 256 GPUs x 32 rows; the
market adds and deletes its own rows, so it keeps them here instead, row for row in HiGHS's
order, and builds the flat (CSR) arrays again only after a change.

>>> rows = LpRows(n_cols=3)
>>> rows.append([0, 1]); rows.append([1, 2], [2.0, 1.0]); rows.append([0, 2])
>>> rows.transpose_times(np.array([1.0, 0.0, -1.0])).tolist()
[0.0, 1.0, -1.0]
>>> rows.delete([1]); len(rows), rows.transpose_times(np.array([1.0, 1.0])).tolist()
(2, [2.0, 1.0, 1.0])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["LpRows"]


class LpRows:
    """Rows ``Σ_k a_k x_k`` of an LP over ``n_cols`` columns, in the LP's order."""

    def __init__(self, n_cols: int) -> None:
        self.n_cols = n_cols
        self._cols: list[np.ndarray] = []
        self._coefs: list[np.ndarray] = []
        self._csr: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._cols)

    def copy(self) -> LpRows:
        """Rows of a copy of the LP (the row arrays themselves are never changed, so shared)."""
        twin = LpRows(self.n_cols)
        twin._cols, twin._coefs, twin._csr = list(self._cols), list(self._coefs), self._csr
        return twin

    def append(self, cols: Iterable[int], coefs: Iterable[float] | None = None) -> None:
        """Add a row at the end (coefficients 1 when ``coefs`` is None)."""
        index = np.fromiter(cols, dtype=np.int64)
        value = np.ones(index.size) if coefs is None else np.fromiter(coefs, dtype=np.float64)
        if value.size != index.size:
            raise ValueError(f"a row of {index.size} columns with {value.size} coefficients")
        self._cols.append(index)
        self._coefs.append(value)
        self._csr = None

    def delete(self, rows: Sequence[int]) -> None:
        """Remove these rows (the later ones move up, as in HiGHS's ``deleteRows``)."""
        for r in sorted(set(rows), reverse=True):
            del self._cols[r]
            del self._coefs[r]
        self._csr = None

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows as (start, columns, coefficients): row r is ``start[r]:start[r + 1]``."""
        if self._csr is None:
            lengths = [c.size for c in self._cols]
            start = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=start[1:])
            cols = np.concatenate(self._cols) if self._cols else np.zeros(0, np.int64)
            coefs = np.concatenate(self._coefs) if self._coefs else np.zeros(0)
            self._csr = (start, cols, coefs)
        return self._csr

    def transpose_times(self, weights: np.ndarray) -> np.ndarray:
        """``Aᵀw``: per column, Σ over rows of the row's weight times its coefficient there."""
        start, cols, coefs = self.csr()
        if weights.size != start.size - 1:
            raise ValueError(f"{weights.size} weights for {start.size - 1} rows")
        per_entry = np.repeat(weights, np.diff(start)) * coefs
        return np.bincount(cols, weights=per_entry, minlength=self.n_cols)
