"""Document–topic compositions: each document's word distribution fitted by the topics.

For a document with word distribution ``w_d`` (its counts over its length) the
composition ``θ_d`` solves ``min ‖w_d − B θ‖²`` over the simplex, a K-dimensional
problem through ``G = BᵀB`` and ``b_d = Bᵀ w_d``; solved by exponentiated
gradient (:func:`jsmf_dask.kernels.recover.exponentiated_gradient`) for many
documents at once.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels.recover import exponentiated_gradient

__all__ = ["document_topics"]


def document_topics(
    B: np.ndarray, counts: np.ndarray | sps.sparray | sps.spmatrix, *, max_iter: int = 2000, rel_gap: float = 1e-10
) -> np.ndarray:
    """Topic compositions of documents.

    Parameters
    ----------
    B : ndarray, shape (N, K)
        Topics (columns sum to 1).
    counts : array or sparse matrix, shape (M, N)
        Word counts per document.
    max_iter : int, default=2000
    rel_gap : float, default=1e-10
        Stopping test of each document's duality gap, relative to ``‖w_d‖²``.

    Returns
    -------
    ndarray, shape (M, K)
        Rows on the simplex; documents with no words get uniform weights.
    """
    X = sps.csr_array(counts, dtype=np.float64)
    length = np.asarray(X.sum(axis=1)).ravel()
    inv = np.where(length > 0, 1.0 / np.where(length > 0, length, 1.0), 0.0)
    Wd = sps.diags_array(inv) @ X
    b = np.asarray(Wd @ B)
    norms2 = np.asarray(Wd.multiply(Wd).sum(axis=1)).ravel()
    theta = exponentiated_gradient(B.T @ B, b, max_iter=max_iter, rel_gap=rel_gap, norms2=norms2)
    theta[length == 0] = 1.0 / B.shape[1]
    return theta
