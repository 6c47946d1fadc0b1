"""A symmetric sparse matrix kept as its upper triangle (scipy; the mirror compiled, no dask, no I/O).

AP's iterates and ENN's correction are low rank plus a sparse symmetric part
whose entries come row-major from a scan of the upper triangle
(:func:`jsmf_dask.kernels.ap.clipped_entries`). :class:`UpperSparse` does the
algebra an AP cycle needs on the upper triangle alone;
:func:`symmetric_from_upper` mirrors it into a full CSR matrix (ENN's
correction, the stored model) with :mod:`~jsmf_dask.kernels._mirror_loop`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels._mirror_loop import fill_symmetric, symmetric_indptr

__all__ = ["UpperSparse", "symmetric_from_upper", "mirror_upper"]


def symmetric_from_upper(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, n: int) -> sps.csr_array:
    """The symmetric N×N CSR matrix whose entries ``i ≤ j`` are ``(rows, cols, values)`` (repeats add up).

    Entries in row-major order, each once (as :func:`~jsmf_dask.kernels.ap.clipped_entries` gives them), are
    placed by a counting pass and a filling pass (:mod:`~jsmf_dask.kernels._mirror_loop`): on the clip of a
    20-topic AP fit of MovieLens with every movie (N = 9,724; 33M entries, 71% of the upper triangle) 0.55 s
    against 2.3 s for ``U + Uᵀ`` in scipy, the path before, with the same matrix to the bit (medians of 3,
    ``pipelines/benchmarks/kernels.py``, session 48). Entries in any other order go through COO.
    """
    key = rows.astype(np.int64) * n + cols
    if key.size and np.all(key[1:] > key[:-1]):
        indptr = symmetric_indptr(rows, cols, n)
        nnz = int(indptr[-1])
        index = np.int32 if max(n, nnz) < np.iinfo(np.int32).max else np.int64
        indices, data = np.empty(nnz, dtype=index), np.empty(nnz)
        fill_symmetric(rows, cols, values, indptr, indices, data)
        return sps.csr_array((data, indices, indptr.astype(index)), shape=(n, n))
    off = rows != cols
    E = sps.coo_array((np.concatenate([values, values[off]]),
                       (np.concatenate([rows, cols[off]]), np.concatenate([cols, rows[off]]))), shape=(n, n)).tocsr()
    E.sum_duplicates()
    return E


def mirror_upper(X: np.ndarray, step: int) -> None:
    """Fill the lower part of ``X`` from its upper part, for ``X`` formed by row chunks of ``step`` rows
    (diagonal blocks whole, blocks right of them valid)."""
    n = X.shape[0]
    for r0 in range(0, n, step):
        r1 = min(r0 + step, n)
        X[r1:, r0:r1] = X[r0:r1, r1:].T


@dataclass(frozen=True)
class UpperSparse:
    """A symmetric sparse ``E = U + Uᵀ − diag(d)`` kept as its upper triangle ``U`` (CSR, diagonal ``d``
    included).

    What an AP cycle does with its clip: products, sums, norms, differences
    and inner products, each on the upper triangle alone. Built straight from
    :func:`clipped_entries`' row-major entries (0.1–0.5 ms on the NIPS papers,
    where mirroring them into a symmetric CSR took 2–33 ms); products cost what
    the symmetric matrix's do.
    """

    U: sps.csr_array
    d: np.ndarray

    @classmethod
    def from_upper(cls, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, n: int) -> UpperSparse:
        """From entries ``i ≤ j``, each once, in row-major order."""
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        U = sps.csr_array((values, cols, indptr), shape=(n, n))
        d = np.zeros(n)
        on = rows == cols
        d[rows[on]] = values[on]
        return cls(U, d)

    @property
    def nnz(self) -> int:
        """Non-zeros of ``E``."""
        return 2 * self.U.nnz - int(np.count_nonzero(self.d))

    def __matmul__(self, V: np.ndarray) -> np.ndarray:
        out = self.U @ V
        out += self.U.T @ V
        out -= (self.d if V.ndim == 1 else self.d[:, None]) * V
        return out

    def __sub__(self, other: UpperSparse) -> UpperSparse:
        return UpperSparse((self.U - other.U).tocsr(), self.d - other.d)

    def sum(self) -> float:
        """``Σ_ij E_ij``."""
        return 2.0 * float(self.U.data.sum()) - float(self.d.sum())

    def sumsq(self) -> float:
        """``‖E‖_F²``."""
        return 2.0 * float(self.U.data @ self.U.data) - float(self.d @ self.d)

    def inner(self, factors: tuple[np.ndarray, np.ndarray]) -> float:
        """``⟨L, E⟩ = Σ_ij L_ij E_ij`` for ``L = left @ right`` (an AP iterate's
        :attr:`~jsmf_dask.kernels.ap.LowRankIterate.factors`): O(nnz(U)·K), no gathers."""
        left, right = factors
        diagonal = np.einsum("ik,ki->i", left, right)
        return 2.0 * float(np.einsum("ij,ij->", left, self.U @ right.T)) - float(self.d @ diagonal)
