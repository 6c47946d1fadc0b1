"""Diagonal completion (DC, paper appendix) of the co-occurrence matrix (numpy/scipy only)."""

from __future__ import annotations


import numpy as np
import scipy.sparse.linalg as spla

__all__ = ["diagonal_completion"]


def diagonal_completion(
    C: np.ndarray, k: int, *, permutations: int = 30, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Diagonal completion (DC, paper appendix): fill the diagonal from the off-diagonal rank-K structure.

    For a random split of the words into halves S1, S2, the off-diagonal block
    ``G = C[S1, S2]`` has no diagonal entries; its top-K left (right) singular
    vectors ``U`` span the columns of ``C[S1, S1]`` (``C[S2, S2]``) if ``C`` has
    rank K. The diagonal entry ``x_j`` that puts column j of the diagonal block
    in that span, by least squares, is ``u_jᵀ Uᵀ f⁰_j / (1 − ‖u_j‖²)`` where
    ``f⁰_j`` is the column with its diagonal zeroed and ``u_j`` row j of ``U``.
    Each entry is the median over ``permutations`` random splits, clipped at 0;
    the result is divided by its sum.

    Parameters
    ----------
    C : ndarray, shape (N, N)
    k : int
    permutations : int, default=30
    rng : numpy.random.Generator, optional

    Returns
    -------
    ndarray, shape (N, N)
        ``C`` with its diagonal replaced, summing to 1.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    n = C.shape[0]
    estimates = np.empty((permutations, n))
    for p in range(permutations):
        perm = rng.permutation(n)
        s1, s2 = np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])
        G = C[np.ix_(s1, s2)]
        kk = min(k, min(G.shape) - 1)
        if kk < min(G.shape) - 1:
            U, _, Vt = spla.svds(G, k=kk, random_state=int(rng.integers(2**31)))
        else:
            U, _, Vt = np.linalg.svd(G, full_matrices=False)
        for idx, basis in ((s1, U[:, :kk]), (s2, Vt[:kk].T)):
            F = C[np.ix_(idx, idx)].copy()
            np.fill_diagonal(F, 0.0)
            P = basis.T @ F  # K × |idx|
            num = np.einsum("ij,ji->i", basis, P)
            den = 1.0 - np.einsum("ij,ij->i", basis, basis)
            estimates[p, idx] = num / np.maximum(den, 1e-12)
    out = C.copy()
    np.fill_diagonal(out, np.maximum(np.median(estimates, axis=0), 0.0))
    return out / out.sum()
