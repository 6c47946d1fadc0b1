"""LAW: low-rank anchor words — anchors and B from a low-rank C in K dimensions (numpy/scipy only).

With ``Y = QR`` (thin QR) and ``p`` the row sums of ``C = Y Yᵀ + E + r·11ᵀ``,
the rows of ``C̄ = diag(1/p) C`` are mapped to ``Z = Qᵀ C̄ᵀ`` (K×N,
:func:`law_coordinates`). Where ``E = 0`` and ``r = 0`` the map is an isometry
(``C̄ᵀ = Q Z``), so pivoted QR on ``Z`` picks the anchors that pivoted QR on
``C̄ᵀ`` picks (:func:`law_anchors`) and the simplex least squares of every word
is the same problem in K dimensions (:func:`law_weights`); otherwise ``Z`` is
the projection of the rows onto the span of ``Y``.
"""

from __future__ import annotations


import numpy as np
import scipy.linalg as sla

from jsmf_dask.kernels.anchors import greedy_anchors
from jsmf_dask.kernels.recover import recover_weights
from jsmf_dask.kernels.lowrank import LowRankCooccurrence

__all__ = ["law_coordinates", "law_anchors", "law_weights", "principal_coordinates"]


def law_coordinates(C: LowRankCooccurrence) -> tuple[np.ndarray, np.ndarray]:
    """``Z = Qᵀ C̄ᵀ`` (K×N) and the row sums ``p`` of ``C`` (see the module docstring).

    Rows with ``p_i <= 0`` (rare words whose unchecked entries went negative)
    get ``Z_i = 0``: they cannot be anchors and recover to zero weights.

    Returns
    -------
    Z : ndarray, shape (K, N)
    p : ndarray, shape (N,)
    """
    p = C.row_sums()
    inv = np.where(p > 0, 1.0 / np.where(p > 0, p, 1.0), 0.0)
    Q, R = sla.qr(C.Y, mode="economic")
    Z = R @ (C.Y * inv[:, None]).T
    if C.E.nnz:
        Z += np.asarray((C.E @ Q).T) * inv  # Qᵀ E diag(1/p) with E symmetric
    if C.r:
        Z += C.r * np.outer(Q.sum(axis=0), inv)
    return Z, p


def law_anchors(Z: np.ndarray, p: np.ndarray, k: int, candidates: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Anchors by greedy pivoted QR on the columns of ``Z`` (words with ``p > 0`` and among ``candidates``).

    Returns the anchors in the order picked and their pivots (see
    :func:`jsmf_dask.kernels.anchors.greedy_anchors`).
    """
    usable = p > 0 if candidates is None else (p > 0) & np.asarray(candidates, dtype=bool)
    norms2 = np.einsum("ij,ij->j", Z, Z)
    return greedy_anchors(k, lambda i: Z[:, i], lambda q: q @ Z, norms2, candidates=usable)


def law_weights(Z_block: np.ndarray, Z_S: np.ndarray, *, solver: str = "exact"
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """``p(z | w)`` of a block of words by the simplex least squares in K dimensions.

    Parameters
    ----------
    Z_block : ndarray, shape (K, n)
        The block's columns of ``Z``.
    Z_S : ndarray, shape (K, K)
        The anchors' columns.
    solver : {'exact', 'eg'}

    Returns
    -------
    weights, objective, unconverged
        As :func:`jsmf_dask.kernels.recover.recover_weights`.
    """
    return recover_weights(Z_S.T @ Z_S, Z_block.T @ Z_S, np.einsum("ij,ij->j", Z_block, Z_block), solver=solver)


def principal_coordinates(X: np.ndarray, n: int = 2) -> np.ndarray:
    """Each row of ``X`` (N×q, q small) projected on the top ``n`` principal axes of the centred rows.

    For rows given in an orthonormal basis (``C̄`` rows as ``Z`` columns, or a
    compressed store's ``diag(1/p) V Λ``) this is the PCA of the N-dimensional rows.
    """
    centred = X - X.mean(axis=0)
    U, s, _ = np.linalg.svd(centred, full_matrices=False)
    return U[:, :n] * s[:n]
