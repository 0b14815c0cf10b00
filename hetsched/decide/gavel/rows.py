"""Constraint rows as COO blocks, stacked into one CSC matrix per solve.

Policy problems are small (hundreds of variables) and re-solved thousands of times per simulation, so
scipy's per-operation overhead (hstack, vstack, diags, format conversions: tens of microseconds each) would
cost more than the solver. Blocks keep (data, row, col) arrays; `stack` builds the matrix once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hetsched.compiled import kernels


@dataclass(frozen=True)
class Rows:
    """Sparse rows `M x <= rhs` (or `= rhs`): entries `data` at (`row`, `col`), rows local to the block."""

    data: np.ndarray
    row: np.ndarray
    col: np.ndarray
    rhs: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.rhs)

    @classmethod
    def of(cls, data, row, col, rhs) -> "Rows":
        return cls(np.asarray(data, float), np.asarray(row, np.int64), np.asarray(col, np.int64),
                   np.asarray(rhs, float))

    @classmethod
    def identity(cls, cols: np.ndarray, value: float, rhs: np.ndarray | float = 0.0) -> "Rows":
        """One row per column in `cols` with entry `value` (e.g. -1 for non-negativity)."""
        k = len(cols)
        return cls.of(np.full(k, value), np.arange(k), cols, np.broadcast_to(rhs, (k,)))

    def scaled(self, factor: np.ndarray | float) -> "Rows":
        """Each row r multiplied by `factor[r]` (or all rows by a scalar), right-hand side too."""
        per_entry = factor[self.row] if np.ndim(factor) else factor
        return Rows(self.data * per_entry, self.row, self.col, self.rhs * factor)

    def select(self, rows: np.ndarray) -> "Rows":
        """The given rows (in that order), renumbered from 0."""
        new = np.full(self.num_rows, -1, np.int64)
        new[rows] = np.arange(len(rows))
        keep = new[self.row] >= 0
        return Rows(self.data[keep], new[self.row[keep]], self.col[keep], self.rhs[rows])

    def with_rhs(self, rhs) -> "Rows":
        return Rows(self.data, self.row, self.col, np.broadcast_to(np.asarray(rhs, float), (self.num_rows,)))

    def with_column(self, col: int, values) -> "Rows":
        """One more entry per row, in column `col` (e.g. an epigraph variable)."""
        values = np.broadcast_to(np.asarray(values, float), (self.num_rows,))
        return Rows(np.concatenate([self.data, values]), np.concatenate([self.row, np.arange(self.num_rows)]),
                    np.concatenate([self.col, np.full(self.num_rows, col, np.int64)]), self.rhs)

    def matrix(self, num_cols: int) -> sp.csr_matrix:
        return sp.csr_matrix((self.data, (self.row, self.col)), shape=(self.num_rows, num_cols))


def stack(blocks: list[Rows], num_cols: int) -> tuple[sp.csc_matrix, np.ndarray]:
    """The blocks one below the other, as one CSC matrix and its right-hand side."""
    if not blocks:
        return sp.csc_matrix((0, num_cols)), np.zeros(0)
    sizes = np.array([b.num_rows for b in blocks])
    offsets = np.cumsum(sizes) - sizes
    data = np.concatenate([b.data for b in blocks])
    row = np.concatenate([b.row + o for b, o in zip(blocks, offsets)])
    col = np.concatenate([b.col for b in blocks])
    shape = (int(sizes.sum()), num_cols)
    rhs = np.concatenate([b.rhs for b in blocks])
    if kernels.ENABLED and max(shape[0], len(data)) < 2 ** 31:    # the same matrix, without scipy's COO overhead
        indptr, indices, values = np.zeros(num_cols + 1, np.int32), np.empty(len(data), np.int32), np.empty(len(data))
        if kernels.coo_to_csc(data, row, col, indptr, indices, values):
            return sp.csc_matrix((values, indices, indptr), shape=shape), rhs
    return sp.csc_matrix((data, (row, col)), shape=shape), rhs
