"""Anchor selection: greedy pivoted Gram–Schmidt on the rows of C̄ (paper §3, appendix).

``C̄`` is ``C`` with rows normalised to sum 1 (``C̄_i = p(w_2 | w_1 = i)``).
The anchors ``S`` are the rows picked by column-pivoted QR of ``C̄ᵀ``: each step
takes the row with the largest norm left after projecting out the rows
already taken. Norms are downdated implicitly (``‖r_i‖² −= (q · C̄_i)²``), so
``C̄`` is never modified and is touched only through ``C̄ q`` products.

Rows whose residuals tie to rounding (two words with the same row, which a
rank-K rectified ``C`` makes exactly equal) go to the lowest index: without
that, which of them is picked depends on the order C's sums were taken in
(worker counts, tile sizes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jsmf_dask.exceptions import RankDeficientError

__all__ = ["greedy_anchors"]

#: Residuals within this fraction of the largest row norm² of the best one are a tie (rounding of the
#: downdates and of C's summation order moves them by about 1e-15 of it).
TIE = 1e-12
#: A row whose residual (squared distance from the span of the anchors chosen) is at most this fraction of
#: the largest row norm² is in that span to working precision: the rows' numerical rank is reached. Rounding
#: leaves residuals of about 1e-16 of it there, which without a floor would be picked by their noise (a
#: different anchor, or none, from one process to the next).
RANK_TOL = 1e-10


def greedy_anchors(
    k: int,
    row: Callable[[int], np.ndarray],
    project: Callable[[np.ndarray], np.ndarray],
    row_norms2: np.ndarray,
    *,
    candidates: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Pick ``k`` anchor rows of ``C̄`` by greedy pivoted Gram–Schmidt.

    Parameters
    ----------
    k : int
        K, the number of anchors.
    row : callable
        ``i -> C̄_i`` (a row, as a dense vector of the space the rows live in).
    project : callable
        ``q -> C̄ q``: every row's inner product with the unit vector ``q``.
    row_norms2 : ndarray, shape (N,)
        ``‖C̄_i‖²``.
    candidates : ndarray of bool, shape (N,), optional
        Rows allowed as anchors (for example a document-frequency floor).

    Returns
    -------
    anchors : ndarray of int64, shape (K,)
        In the order picked.
    pivots : ndarray, shape (K,)
        The residual norm of each pick (the diagonal of R in ``C̄ᵀ P = Q R``).

    Raises
    ------
    RankDeficientError
        If fewer than ``k`` candidate rows are linearly independent (residual above
        :data:`RANK_TOL` of the largest row norm²): the error names the rank found.

    Notes
    -----
    Deterministic: a residual within :data:`TIE` of the best is a tie, decided by the lowest index.
    """
    residual = np.array(row_norms2, dtype=np.float64, copy=True)
    allowed = np.ones(residual.shape, dtype=bool) if candidates is None else np.asarray(candidates, bool).copy()
    basis: list[np.ndarray] = []
    anchors, pivots = [], []
    largest = float(np.max(row_norms2, initial=0.0))
    window, floor = TIE * largest, RANK_TOL * largest
    for _ in range(k):
        scores = np.where(allowed, residual, -np.inf)
        best = float(scores.max(initial=-np.inf))
        if not np.isfinite(best) or best <= floor:
            raise RankDeficientError(len(anchors), k)
        i = int(np.flatnonzero(scores >= best - window)[0])  # ties to the lowest index
        q = np.array(row(i), dtype=np.float64, copy=True)
        for _ in range(2):  # Gram–Schmidt twice is enough for orthogonality to working precision
            for b in basis:
                q -= (b @ q) * b
        norm = np.linalg.norm(q)
        if norm * norm <= floor:  # its residual was rounding: the span is already full
            raise RankDeficientError(len(anchors), k)
        q /= norm
        basis.append(q)
        residual -= project(q) ** 2
        residual[i] = 0.0
        allowed[i] = False
        anchors.append(i)
        pivots.append(norm)
    return np.array(anchors, dtype=np.int64), np.array(pivots)
