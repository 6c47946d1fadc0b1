"""The compiled mirror of a row-major upper triangle into a symmetric CSR matrix (numba; no dask, no I/O)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def symmetric_indptr(rows, cols, n):
    """The CSR row pointer of the symmetric matrix with the upper entries ``(rows, cols)``: row r holds its own
    entries and the mirror of every ``(i, r)``, ``i < r``."""
    indptr = np.zeros(n + 1, np.int64)
    for e in range(rows.size):
        indptr[rows[e] + 1] += 1
        if cols[e] != rows[e]:
            indptr[cols[e] + 1] += 1
    for r in range(n):
        indptr[r + 1] += indptr[r]
    return indptr


@njit(cache=True)
def fill_symmetric(rows, cols, values, indptr, indices, data):
    """Fill ``indices`` and ``data`` of the symmetric matrix from its upper entries, each once in row-major order:
    row r gets the mirrored ``(r, i)`` as ``i`` ascends, then its own ``(r, j)``, ``j ≥ r`` — so every row's
    columns ascend, as a canonical CSR's do."""
    fill = indptr[:-1].copy()
    for e in range(rows.size):
        i, j = rows[e], cols[e]
        if j != i:
            p = fill[j]
            indices[p] = i
            data[p] = values[e]
            fill[j] = p + 1
    for e in range(rows.size):
        i = rows[e]
        p = fill[i]
        indices[p] = cols[e]
        data[p] = values[e]
        fill[i] = p + 1
