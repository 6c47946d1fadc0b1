"""Graph builders for the recovery of B: a task per block of words, in N dimensions or LAW's K.

Each task reads its rows of the rectified C (:func:`recovery_tasks`; a
:class:`~jsmf_dask.kernels.lowrank.LowRankCooccurrence` or the store's C) or
its slice of LAW's coordinates (:func:`law_recovery_tasks`), solves the
simplex least squares of every word (:func:`~jsmf_dask.kernels.recover.recover_weights`)
and returns ``(weights, objective, unconverged)``. :func:`least_squares_tasks`
forms ``B⁺ C`` for the least-squares A from the store's rows.
"""

from __future__ import annotations


import dask
import numpy as np
from dask.base import tokenize

from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.kernels.anchor_words import AnchorColumns
from jsmf_dask.kernels.law import law_weights
from jsmf_dask.kernels.lowrank import LowRankCooccurrence
from jsmf_dask.kernels.recover import fix_anchor_rows, recover_weights

__all__ = ["recovery_tasks", "least_squares_tasks", "law_recovery_tasks"]


def _rectified_rows(source: LowRankCooccurrence | StoredRows, rows: tuple[int, int]) -> np.ndarray:
    """Rows ``[r0, r1)`` of the rectified C."""
    return source.rows(np.arange(*rows))


def _recover_block(
    source, rows: tuple[int, int], p_rows: np.ndarray, Cbar_S: np.ndarray, G: np.ndarray,
    anchors: np.ndarray, solver: str,
) -> tuple[np.ndarray, np.ndarray, int]:
    r0, r1 = rows
    C_rows = _rectified_rows(source, rows)
    p_rows = C_rows.sum(axis=1) if p_rows is None else p_rows  # restricted rows: each by its own sum
    Cbar = C_rows / np.where(p_rows > 0, p_rows, 1.0)[:, None]
    b = Cbar @ Cbar_S.T
    norms2 = np.einsum("ij,ij->i", Cbar, Cbar)
    weights, objective, unconverged = recover_weights(G, b, norms2, solver=solver)
    fix_anchor_rows(weights, objective, anchors, r0)
    return weights, objective, unconverged


def recovery_tasks(
    source, p_word: np.ndarray | None, Cbar_S, G: np.ndarray, anchors: np.ndarray, solver: str, *, block: int,
    n_words: int | None = None,
) -> list[dask.delayed]:
    """One delayed task per block of ``block`` words → ``(weights, objective, unconverged)`` of those words.

    ``source`` is the rectified C: a :class:`LowRankCooccurrence` (or a future
    of one), :class:`~jsmf_dask.io.stored_rows.StoredRows`, or a fit on an anchor
    vocabulary's :class:`~jsmf_dask.kernels.anchor_words.AnchorColumns` (or a
    future of one), whose rows are each divided by their own sum: ``p_word``
    None and ``n_words`` given. ``Cbar_S`` (K×N, K×n on an anchor vocabulary)
    may be an array or a future already on the cluster (K×N is 12 MB at K = 100,
    N = 15k: scatter it rather than embed it in the graph).
    """
    n = p_word.shape[0] if p_word is not None else n_words
    shared = (dask.delayed(Cbar_S, pure=True) if isinstance(Cbar_S, np.ndarray) else Cbar_S,
              dask.delayed(G, pure=True))
    if isinstance(source, LowRankCooccurrence | AnchorColumns):
        source = dask.delayed(source, pure=True)
    token = tokenize(source, p_word, shared, anchors, solver, block)
    return [
        dask.delayed(_recover_block, pure=True)(
            source, (r0, min(r0 + block, n)), None if p_word is None else p_word[r0 : r0 + block], *shared,
            anchors, solver,
            dask_key_name=f"recover-B-{token}-{r0}",
        )
        for r0 in range(0, n, block)
    ]


def _pinv_times_rows(source: StoredRows, rows: tuple[int, int], pinv: np.ndarray) -> np.ndarray:
    r0, r1 = rows
    return pinv[:, r0:r1] @ source.rows(np.arange(r0, r1))


def least_squares_tasks(source: StoredRows, M: np.ndarray, *, block: int) -> dask.delayed:
    """``M C`` (K×N; ``M = B⁺`` for the least-squares A) summed over row blocks of the store's C, as one delayed
    value."""
    shared = dask.delayed(M, pure=True)  # one K×N array shared by every task
    n = M.shape[1]
    parts = [
        dask.delayed(_pinv_times_rows, pure=True)(source, (r0, min(r0 + block, n)), shared)
        for r0 in range(0, n, block)
    ]
    while len(parts) > 1:
        parts = [dask.delayed(sum, pure=True)(parts[i : i + 8]) for i in range(0, len(parts), 8)]
    return parts[0]


def _law_block(Z_block: np.ndarray, Z_S: np.ndarray, r0: int, anchors: np.ndarray, solver: str):
    weights, objective, unconverged = law_weights(Z_block, Z_S, solver=solver)
    fix_anchor_rows(weights, objective, anchors, r0)
    return weights, objective, unconverged


def law_recovery_tasks(Z: np.ndarray, anchors: np.ndarray, solver: str, *, block: int) -> list[dask.delayed]:
    """One delayed task per block of ``block`` words → ``(weights, objective, unconverged)``, in K dimensions.

    Each task carries only its K × block slice of ``Z`` and the K×K anchor columns.
    """
    n = Z.shape[1]
    Z_S = dask.delayed(np.ascontiguousarray(Z[:, anchors]), pure=True)
    token = tokenize(Z, anchors, solver, block)
    return [
        dask.delayed(_law_block, pure=True)(np.ascontiguousarray(Z[:, r0 : r0 + block]), Z_S, r0, anchors, solver,
                                            dask_key_name=f"recover-B-law-{token}-{r0}")
        for r0 in range(0, n, block)
    ]
