"""Graph builders for tiled AP: products and passes over C (or an AP iterate) row block by row block.

The operator ``max(YΛYᵀ + c, 0)`` (or the store's C, tile by tile) is applied
as Dask tasks that each hold one tile at a time (O(tile²) memory), never
materialising N×N in one task. The loop that drives these graphs, and the
:class:`~jsmf_dask.kernels.ap.APOperator` built on them, are in
:mod:`jsmf_dask.pipeline.fit_tiled`.
"""

from __future__ import annotations


import dask
import numpy as np
from dask.base import tokenize

from jsmf_dask.io.zarr_store import read_tile
from jsmf_dask.kernels.ap import LowRankIterate, clipped_entries

__all__ = ["row_block_tasks", "clipped_entry_tasks"]


def _row_block(source, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    """Rows × columns of a C: a :class:`LowRankIterate`, or ``(store URL, array name)`` on disk."""
    if isinstance(source, LowRankIterate):
        return source.block(slice(*rows), slice(*cols))
    url, name = source
    return read_tile(url, name, rows, cols)


def _tiles(edges: np.ndarray):
    for j in range(len(edges) - 1):
        yield int(edges[j]), int(edges[j + 1])


def _matmat_rows(source, rows: tuple[int, int], edges: np.ndarray, V: np.ndarray) -> np.ndarray:
    out = np.zeros((rows[1] - rows[0], V.shape[1]))
    for cols in _tiles(edges):
        out += _row_block(source, rows, cols) @ V[cols[0] : cols[1]]
    return out


def _compare_rows(
    previous, current: LowRankIterate, V: np.ndarray | None, rows: tuple[int, int], edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    acc = np.zeros(4)
    CV = None if V is None else np.zeros((rows[1] - rows[0], V.shape[1]))
    raw = LowRankIterate(current.Y, current.lam, current.c, clip=False)
    for cols in _tiles(edges):
        cur = raw.block(slice(*rows), slice(*cols))
        below = np.minimum(cur, 0.0)
        if current.clip:
            np.maximum(cur, 0.0, out=cur)
        prev = _row_block(previous, rows, cols)
        acc += (np.sum((cur - prev) ** 2), cur.sum(), np.sum(cur * cur), np.sum(below * below))
        if V is not None:
            CV += cur @ V[cols[0] : cols[1]]
    return acc, CV


def _rowstats_rows(source, rows: tuple[int, int], edges: np.ndarray) -> np.ndarray:
    """Per row: sum, sum of squares, minimum, and whether every entry is finite."""
    out = np.zeros((rows[1] - rows[0], 4))
    out[:, 2] = np.inf
    out[:, 3] = 1.0
    for cols in _tiles(edges):
        X = _row_block(source, rows, cols)
        out[:, 0] += X.sum(axis=1)
        out[:, 1] += np.einsum("ij,ij->i", X, X)
        out[:, 2] = np.minimum(out[:, 2], X.min(axis=1))
        out[:, 3] = np.minimum(out[:, 3], np.isfinite(X).all(axis=1))
    return out


_KINDS = {"matmat": _matmat_rows, "compare": _compare_rows, "rowstats": _rowstats_rows}


def row_block_tasks(kind: str, edges: np.ndarray, *args) -> list[dask.delayed]:
    """One delayed task per row block of C, for the tiled path.

    ``kind`` is ``'matmat'`` (args: source, V → the block's rows of ``C V``),
    ``'compare'`` (args: previous, current, V or None → ``[‖ΔC‖², ΣC, ‖C‖², ‖min(L, 0)‖²]``
    of the block and its rows of ``C_current V``) or ``'rowstats'`` (args: source → per row: sum, sum of squares, min,
    all-finite). A source is a :class:`LowRankIterate` or ``(store URL, array
    name)``. Each task holds one tile at a time: O(tile²) memory.
    """
    func = _KINDS[kind]
    shared = [dask.delayed(a, pure=True) if isinstance(a, np.ndarray | LowRankIterate) else a for a in args]
    tasks = []
    for rows in _tiles(edges):
        if kind == "matmat":
            tasks.append(dask.delayed(func, pure=True)(shared[0], rows, edges, shared[1]))
        elif kind == "compare":
            tasks.append(dask.delayed(func, pure=True)(shared[0], shared[1], shared[2], rows, edges))
        else:
            tasks.append(dask.delayed(func, pure=True)(shared[0], rows, edges))
    return tasks


def clipped_entry_tasks(iterate: LowRankIterate, edges: np.ndarray) -> list[dask.delayed]:
    """:func:`~jsmf_dask.kernels.ap.clipped_entries` of an AP iterate, a task per row block ((i, j, value) each)."""
    shared = dask.delayed(iterate, pure=True)
    token = tokenize(iterate, edges)
    return [dask.delayed(clipped_entries, pure=True)(shared, rows, dask_key_name=f"clipped-{token}-{rows[0]}")
            for rows in _tiles(edges)]
