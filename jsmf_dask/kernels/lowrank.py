"""A rectified co-occurrence in low-rank form, ``C = Y Yᵀ + E + r·11ᵀ`` (numpy/scipy only).

``Y`` is N×K, ``E`` sparse, symmetric and non-negative, ``r`` a scalar
(:class:`LowRankCooccurrence`): what AP's factored iterates
(:func:`from_iterate`) and ENN (:mod:`jsmf_dask.kernels.enn`) produce, and
what LAW (:mod:`jsmf_dask.kernels.law`) picks anchors and recovers B from,
with no N×N array anywhere (Lee, Cho, Dong, Mimno & Bindel, ICML 2021).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels.ap import LowRankIterate
from jsmf_dask.kernels.upper_sparse import symmetric_from_upper

__all__ = ["LowRankCooccurrence", "row_sums", "factor", "from_iterate"]


@dataclass(frozen=True)
class LowRankCooccurrence:
    """``C = Y Yᵀ + E + r·11ᵀ``.

    Attributes
    ----------
    Y : ndarray, shape (N, K)
    E : scipy.sparse.csr_array, shape (N, N)
        Symmetric, non-negative.
    r : float
    """

    Y: np.ndarray
    E: sps.csr_array
    r: float

    @property
    def n_words(self) -> int:
        return self.Y.shape[0]

    def matmat(self, X: np.ndarray) -> np.ndarray:
        """``C @ X`` in O(N·K·b + nnz(E)·b)."""
        out = self.Y @ (self.Y.T @ X)
        out += self.E @ X
        out += self.r * X.sum(axis=0)
        return out

    def rmatmat(self, M: np.ndarray) -> np.ndarray:
        """``M @ C`` for ``M`` of shape (q, N), in O(N·K·q + nnz(E)·q)."""
        out = (M @ self.Y) @ self.Y.T
        out += np.asarray((self.E @ M.T).T)  # E symmetric
        out += self.r * M.sum(axis=1)[:, None]
        return out

    def row_sums(self) -> np.ndarray:
        """``C 1``, zero where it is below its rounding error (:func:`row_sums`)."""
        n, k = self.Y.shape
        return row_sums(np.column_stack([self.Y, np.ones(n)]), np.append(np.ones(k), self.r), self.E)

    def total(self) -> float:
        """``1ᵀ C 1``."""
        s = self.Y.sum(axis=0)
        return float(s @ s + self.E.sum() + self.r * self.n_words**2)

    def rows(self, index: np.ndarray) -> np.ndarray:
        """Rows ``index`` of ``C`` (dense, len(index) × N)."""
        index = np.asarray(index)
        return self.Y[index] @ self.Y.T + self.E[index].toarray() + self.r

    def row_norms2(self) -> np.ndarray:
        """``‖C_i‖²`` of every row, exactly in O(N·K² + nnz(E)·K).

        With ``a_ij = Y_i·Y_j + r``: ``Σ_j a_ij² = Y_i (YᵀY) Y_iᵀ + 2r Y_i·(Yᵀ1) + r²N``,
        plus ``Σ_j (2 a_ij + E_ij) E_ij = 2 Y_i·(E Y)_i + 2r (E 1)_i + Σ_j E_ij²`` (one sparse product
        ``E Y``; no nnz(E)×K temporaries).
        """
        Y, n = self.Y, self.n_words
        dense = np.einsum("ik,ik->i", Y @ (Y.T @ Y), Y) + 2 * self.r * (Y @ Y.sum(axis=0)) + self.r**2 * n
        E = sps.csr_array(self.E)
        clipped = 2 * np.einsum("ik,ik->i", Y, E @ Y) + 2 * self.r * np.asarray(E.sum(axis=1)).ravel() + \
            np.asarray(E.multiply(E).sum(axis=1)).ravel()
        norms2 = dense + clipped
        return np.maximum(norms2, 0.0, out=norms2)  # a sum of squares: rounding of the factors can dip below 0


def row_sums(U: np.ndarray, s: np.ndarray, E: sps.csr_array | None) -> np.ndarray:
    """Row sums of ``C = U diag(s) Uᵀ + E``, set to 0 where they are within their rounding error.

    A row that a clip zeroed (``L_ij + max(−L_ij, 0)`` for every ``j``: an AP
    iterate's word that co-occurs with nothing) sums to ±1e-19 instead of 0,
    and dividing by that would blow the row up. The bound is the usual one for
    a sum of products, ``N·ε·(|U_i| |s| |U|ᵀ1 + |E_i|1)``, in O(N·q).
    """
    n = U.shape[0]
    Ea = np.zeros(n) if E is None else np.asarray(abs(E).sum(axis=1)).ravel()
    p = U @ (s * U.sum(axis=0)) + (0.0 if E is None else np.asarray(E.sum(axis=1)).ravel())
    bound = 4 * n * np.finfo(float).eps * (np.abs(U) @ (np.abs(s) * np.abs(U).sum(axis=0)) + Ea)
    return np.where(np.abs(p) > bound, p, 0.0)


def factor(values: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``Y = V diag(√max(λ, 0))``: the rank-K PSD projection as ``Y Yᵀ``."""
    return vectors * np.sqrt(np.maximum(values, 0.0))


def from_iterate(iterate: LowRankIterate, scale: float | None,
                 upper: tuple[np.ndarray, np.ndarray, np.ndarray]) -> LowRankCooccurrence:
    """An AP iterate divided by ``scale``, ``max(L, 0)/s``, as ``Y Yᵀ + E + r·11ᵀ`` (exact to rounding).

    ``upper`` is :func:`~jsmf_dask.kernels.ap.clipped_entries` of ``iterate`` (all rows); ``Y = Y_t diag(√(λ/s))``,
    ``E = max(−L, 0)/s`` and ``r = c/s``. ``scale`` None divides by the iterate's own sum, ``ΣL + ΣE`` by exact
    algebra on the factors (a rectified C summing to 1).
    """
    n = iterate.Y.shape[0]
    E = symmetric_from_upper(*upper, n)
    if scale is None:
        s = iterate.Y.sum(axis=0)
        scale = float((s * iterate.lam) @ s) + iterate.c * n * n + float(E.sum())
    return LowRankCooccurrence(iterate.Y * np.sqrt(iterate.lam / scale), E / scale, float(iterate.c / scale))
