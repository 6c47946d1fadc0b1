"""Graph builders for fitting: rectification, anchors, recovery of B and A.

Two execution paths for rectification (DESIGN §2):

* **in-task** (:func:`rectify_in_task`): one task loads ``C`` and runs the
  whole AP loop (or DC) with threaded BLAS on one worker, then picks the
  anchors; memory C plus AP's iterates and result factored in O(N·K + nnz E)
  (DC and the Baseline: plus the dense rectified C the anchors are read from),
  within the ~2.5·8N² bytes the caller checks before it starts.
* **tiled** (:func:`row_block_tasks` and friends): the operator
  ``max(YΛYᵀ + c, 0)`` is applied row block by row block as Dask tasks, never
  materialising N×N in one task; the loop itself runs in the caller.

Recovery of B is a task per block of words in both paths
(:func:`recovery_tasks`), reading rows of the rectified ``C``. AP's rectified
``C`` is kept in low-rank form, ``Y Yᵀ + E + r·11ᵀ`` with ``E`` the sparse part
its last clip added (:func:`~jsmf_dask.kernels.lowrank.from_iterate`): O(N·K +
nnz E) on disk instead of N² (the Baseline's and DC's stay dense in the store).

A third, **low-rank** path (:func:`enn_in_task`, :func:`law_recovery_tasks`)
never holds N×N: one task runs ENN and the LAW anchors on
``Y Yᵀ + E + r·11ᵀ`` (:mod:`jsmf_dask.kernels.lowrank`, memory
:func:`~jsmf_dask.kernels.lowrank.enn_min_memory` to
:func:`~jsmf_dask.kernels.lowrank.enn_memory`), then a task per block of words
solves the simplex least squares in K dimensions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import dask
from dask.base import tokenize
import numpy as np
import zarr
from threadpoolctl import threadpool_limits

from jsmf_dask import _progress
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.model_store import write_array
from jsmf_dask.io.zarr_store import StoredRows, zarr_store
from jsmf_dask.kernels.factorize import anchors_low_rank, find_anchors, rectify, rectify_low_rank
from jsmf_dask.kernels.lowrank import (
    LowRankCooccurrence,
    enn_rectify,
    law_anchors,
    law_coordinates,
    law_weights,
)
from jsmf_dask.kernels.rectify import Eigenpairs, LowRankIterate, clipped_entries, top_eigenpairs
from jsmf_dask.kernels.recover import recover_weights

__all__ = [
    "RectifyParams",
    "RectifyResult",
    "check_entries",
    "in_task_memory",
    "in_task_blas_threads",
    "rectify_in_task",
    "recovery_tasks",
    "least_squares_tasks",
    "row_block_tasks",
    "clipped_entry_tasks",
    "write_small",
    "LowRankResult",
    "enn_in_task",
    "law_recovery_tasks",
]


@dataclass(frozen=True)
class RectifyParams:
    """What rectification needs (validated by the caller)."""

    n_topics: int
    rectifier: str
    iterations: int
    tol: float | None
    end_with: str
    eig_tol: float
    seed: int
    dc_permutations: int = 30
    start_Y: np.ndarray | None = None  # AP warm start: a previous fit's eigenvectors (N×K)
    max_bytes: int | None = None  # ENN: the memory its cycles may use (see kernels.lowrank.enn_rectify)

    def start(self) -> Eigenpairs | None:
        """The warm start as :class:`Eigenpairs` (None without one)."""
        if self.start_Y is None:
            return None
        return Eigenpairs(np.zeros(self.start_Y.shape[1]), self.start_Y, float("nan"), 0)


@dataclass
class RectifyResult:
    """Outputs of rectification and anchor selection.

    ``rectified`` is AP's rectified C in low-rank form (O(N·K + nnz E)), or for
    the Baseline and DC the co-occurrence store's C with their scale and (DC)
    diagonal (:class:`~jsmf_dask.io.zarr_store.StoredRows`).
    """

    eig: Eigenpairs
    trace: dict[str, np.ndarray]
    n_iter: int
    p_word: np.ndarray
    anchors: np.ndarray
    pivots: np.ndarray
    Cbar_S: np.ndarray
    C_SS: np.ndarray
    rectified: LowRankCooccurrence | StoredRows


def in_task_memory(n_words: int) -> int:
    """Bytes the in-task path needs: C and a dense rectified C (2 · 8N²), plus 1/2 · 8N² of slack.

    DC and the Baseline form the dense rectified C. AP's iterates are
    factored (:class:`~jsmf_dask.kernels.rectify.DenseAP`; in one N×N buffer
    where the clip is not sparse) and so is its result
    (:func:`~jsmf_dask.kernels.factorize.rectify_low_rank`); measured at
    N = 8,000 on a sampled corpus when AP still formed the dense result, the
    peak of ``rectify`` and the anchors was 2.14 · 8N² including C (3% of the
    entries clipped in the first cycle; the dense iterates took 4.1 · 8N²).
    """
    return int(2.5 * 8 * n_words * n_words) + (256 << 20)


#: Below this many words the in-task rectification runs BLAS on one thread (see :func:`in_task_blas_threads`).
MULTITHREADED_MIN_WORDS = 10_000


def in_task_blas_threads(n_words: int) -> int:
    """BLAS threads for the rectification in one task: every core of the machine from
    :data:`MULTITHREADED_MIN_WORDS` words, otherwise one.

    Workers run BLAS single-threaded, and this task has the machine to itself.
    But an AP cycle at small N is many small products (N×30 blocks), whose
    cost on several threads is their wake-up and synchronisation: measured on
    the NIPS papers (N = 5,000, K = 20, 150 cycles, 2 cores) 8.7–9.1 s on one
    thread against 10.4 s on two with the machine quiet and 21–25 s with
    another tenant busy. At N = 15,000, K = 100 the cycles take the same time
    either way (1.0 s) and the first eigensolve on C is faster on two
    (18.7 s against 27.4 s). ENN's cycles (after its start pairs, which take
    every core) follow the same rule: its NIPS fit took 8.7–9.0 s on one thread
    against 19.8–20.2 s on two, the machine loaded, the metrics identical.
    Splitting AP's clip scan (one large product a cycle) between two Python
    threads instead took 12.5 against 17.4 ms a scan alone but gave nothing
    measurable over the 150 cycles with the machine quiet, and lost 1–2 s with
    another process busy on one core.
    """
    return (os.cpu_count() or 1) if n_words >= MULTITHREADED_MIN_WORDS else 1


def _read_dense(url: str, name: str) -> np.ndarray:
    return zarr.open_group(zarr_store(url, read_only=True), mode="r")[name][...]


def check_entries(cooc_url: str, finite_rows: np.ndarray, row_min: np.ndarray) -> None:
    """Raise :class:`~jsmf_dask.exceptions.StoreError` naming the first row of C with a NaN or infinite
    entry, else the row of its most negative entry; ``finite_rows`` and ``row_min`` are per row of C."""
    if not np.all(finite_rows):
        row = int(np.flatnonzero(~np.asarray(finite_rows, dtype=bool))[0])
        raise StoreError(f"{cooc_url}: C has NaN or infinite entries (first in row {row}); rebuild it with `jsmf cooccur`")
    if np.min(row_min) < 0:
        row = int(np.argmin(row_min))
        raise StoreError(f"{cooc_url}: C has negative entries (row {row}: {row_min[row]:.3g}); expected C >= 0")


def _read_checked(cooc_url: str) -> np.ndarray:
    """The store's dense C, checked as :func:`check_entries` does (two passes over C in memory; the rows are
    looked at only when something is wrong)."""
    C = _read_dense(cooc_url, "C")
    lo, hi = float(C.min(initial=0.0)), float(C.max(initial=0.0))  # NaN propagates to both
    if not (np.isfinite(lo) and np.isfinite(hi) and lo >= 0):
        check_entries(cooc_url, np.isfinite(C).all(axis=1), C.min(axis=1))
    return C


def _rectify_in_task(
    cooc_url: str, params: RectifyParams, candidates: np.ndarray | None, progress: str | None
) -> RectifyResult:
    def on_cycle(cycle: int, of: int, change: float, seconds: float) -> None:
        _progress.report(progress, {"cycle": cycle, "of": of, "relative_change": change, "seconds": seconds})

    C = _read_checked(cooc_url)
    blas_threads = in_task_blas_threads(C.shape[0])
    rng, start = np.random.default_rng(params.seed), params.start()
    on_cycle = on_cycle if progress is not None else None
    with threadpool_limits(limits=blas_threads, user_api="blas"):
        if params.rectifier == "ap":  # no second N×N array: the result in low-rank form, its anchors from there
            rectified, eig, trace, n_iter = rectify_low_rank(
                C, params.n_topics, iterations=params.iterations, tol=params.tol, end_with=params.end_with,
                eig_tol=params.eig_tol, rng=rng, start=start, on_cycle=on_cycle,
            )
            del C
            p, anchors, pivots, Cbar_S, C_SS = anchors_low_rank(rectified, params.n_topics, candidates=candidates,
                                                                 nonnegative=params.end_with == "nonnegative")
            return RectifyResult(eig, trace, n_iter, p, anchors, pivots, Cbar_S, C_SS, rectified)
        # the Baseline, DC: C itself divided by its sum, DC with a new diagonal
        rect = rectify(C, params.n_topics, rectifier=params.rectifier, eig_tol=params.eig_tol,
                       dc_permutations=params.dc_permutations, rng=rng)
        diagonal = np.diagonal(rect.C).copy() if params.rectifier == "dc" else None
        rectified = StoredRows(cooc_url, "C", rect.scale, diagonal)
        del C
        C_rect = rect.C
        p = C_rect.sum(axis=1)
        anchors, pivots = find_anchors(C_rect, params.n_topics, candidates=candidates, in_place=True)
        # C_rect now holds C̄; C_SS is read back off its anchor rows.
        Cbar_S = C_rect[anchors].copy()
        C_SS = Cbar_S[:, anchors] * p[anchors][:, None]
    return RectifyResult(rect.eig, rect.trace, rect.n_iter, p, anchors, pivots, Cbar_S, C_SS, rectified)


def rectify_in_task(
    cooc_url: str, params: RectifyParams, candidates: np.ndarray | None, *, progress: str | None = None,
) -> dask.delayed:
    """One delayed task: load C, rectify, pick anchors; the rectified C comes back in low-rank form (AP) or as a
    reference to the store's C with a scale and (DC) a diagonal.

    BLAS inside the task uses every core of the worker's machine. With
    ``progress`` (a channel name), each AP cycle is reported there
    (:func:`jsmf_dask._progress.report`).
    """
    return dask.delayed(_rectify_in_task, pure=False)(
        cooc_url, params, candidates, progress,
        dask_key_name=f"rectify-in-task-{params.rectifier}-{tokenize(cooc_url, params, candidates)}"
    )


def _rectified_rows(source: LowRankCooccurrence | StoredRows, rows: tuple[int, int]) -> np.ndarray:
    """Rows ``[r0, r1)`` of the rectified C."""
    return source.rows(np.arange(*rows))


def _recover_block(
    source, rows: tuple[int, int], p_rows: np.ndarray, Cbar_S: np.ndarray, G: np.ndarray,
    anchors: np.ndarray, solver: str,
) -> tuple[np.ndarray, np.ndarray, int]:
    r0, r1 = rows
    C_rows = _rectified_rows(source, rows)
    Cbar = C_rows / np.where(p_rows > 0, p_rows, 1.0)[:, None]
    b = Cbar @ Cbar_S.T
    norms2 = np.einsum("ij,ij->i", Cbar, Cbar)
    weights, objective, unconverged = recover_weights(G, b, norms2, solver=solver)
    for k, s in enumerate(anchors):
        if r0 <= s < r1:
            weights[s - r0] = 0.0
            weights[s - r0, k] = 1.0
            objective[s - r0] = 0.0
    return weights, objective, unconverged


def recovery_tasks(
    source, p_word: np.ndarray, Cbar_S, G: np.ndarray, anchors: np.ndarray, solver: str, *, block: int
) -> list[dask.delayed]:
    """One delayed task per block of ``block`` words → ``(weights, objective, unconverged)`` of those words.

    ``source`` is the rectified C: a :class:`LowRankCooccurrence` (or a future
    of one) or :class:`~jsmf_dask.io.zarr_store.StoredRows`. ``Cbar_S`` (K×N) may be
    an array or a future already on the cluster (K×N is 12 MB at K = 100,
    N = 15k: scatter it rather than embed it in the graph).
    """
    n = p_word.shape[0]
    shared = (dask.delayed(Cbar_S, pure=True) if isinstance(Cbar_S, np.ndarray) else Cbar_S,
              dask.delayed(G, pure=True))
    if isinstance(source, LowRankCooccurrence):
        source = dask.delayed(source, pure=True)
    token = tokenize(source, p_word, shared, anchors, solver, block)
    return [
        dask.delayed(_recover_block, pure=True)(
            source, (r0, min(r0 + block, n)), p_word[r0 : r0 + block], *shared, anchors, solver,
            dask_key_name=f"recover-B-{token}-{r0}",
        )
        for r0 in range(0, n, block)
    ]


def _pinv_times_rows(source: StoredRows, rows: tuple[int, int], pinv: np.ndarray) -> np.ndarray:
    r0, r1 = rows
    return pinv[:, r0:r1] @ source.rows(np.arange(r0, r1))


def least_squares_tasks(source: StoredRows, B: np.ndarray, *, block: int) -> dask.delayed:
    """``B⁺ C`` (K×N) summed over row blocks of the rectified C, as one delayed value."""
    pinv = dask.delayed(np.linalg.pinv(B), pure=True)  # one K×N array shared by every task
    n = B.shape[0]
    parts = [
        dask.delayed(_pinv_times_rows, pure=True)(source, (r0, min(r0 + block, n)), pinv)
        for r0 in range(0, n, block)
    ]
    while len(parts) > 1:
        parts = [dask.delayed(sum, pure=True)(parts[i : i + 8]) for i in range(0, len(parts), 8)]
    return parts[0]


# ------------------------------------------------------------------ low-rank path


@dataclass
class LowRankResult:
    """What the ENN + LAW task returns: the rectified ``C`` in low-rank form, its LAW map and the anchors."""

    rectified: LowRankCooccurrence
    eig: Eigenpairs
    trace: dict[str, np.ndarray]
    n_iter: int
    p_word: np.ndarray
    Z: np.ndarray
    anchors: np.ndarray
    pivots: np.ndarray
    C_SS: np.ndarray


def _start_pairs(cooc_url: str, params: RectifyParams) -> Eigenpairs:
    """The top-K eigenpairs of the empirical C: stored (compressed store) or computed from the dense C."""
    group = zarr.open_group(zarr_store(cooc_url, read_only=True), mode="r")
    k = params.n_topics
    if group.attrs.get("form", "dense") == "compressed":
        return Eigenpairs(group["eigenvalues"][:k], group["eigenvectors"][:, :k],
                          float(group.attrs["eig_residual"]), 0)
    C = _read_checked(cooc_url)
    return top_eigenpairs(lambda V: C @ V, C.shape[0], k, tol=params.eig_tol, rng=np.random.default_rng(params.seed),
                          cold="auto")


def _enn_in_task(cooc_url: str, params: RectifyParams, candidates: np.ndarray | None, start: Eigenpairs | None,
                 progress: str | None) -> LowRankResult:
    def on_cycle(cycle: int, of: int, change: float, seconds: float) -> None:
        _progress.report(progress, {"cycle": cycle, "of": of, "relative_change": change, "seconds": seconds})

    with threadpool_limits(limits=os.cpu_count() or 1, user_api="blas"):  # a dense C's eigensolve: every core
        start = _start_pairs(cooc_url, params) if start is None else start
    with threadpool_limits(limits=in_task_blas_threads(start.vectors.shape[0]), user_api="blas"):
        rect, eig, trace, n_iter = enn_rectify(
            start, params.n_topics, iterations=params.iterations, tol=params.tol, eig_tol=params.eig_tol,
            rng=np.random.default_rng(params.seed), max_bytes=params.max_bytes,
            on_cycle=on_cycle if progress is not None else None,
        )
        Z, p = law_coordinates(rect)
        anchors, pivots = law_anchors(Z, p, params.n_topics, candidates)
        C_SS = rect.rows(anchors)[:, anchors]
    return LowRankResult(rect, eig, trace.as_arrays(), n_iter, p, Z, anchors, pivots, C_SS)


def enn_in_task(cooc_url: str, params: RectifyParams, candidates: np.ndarray | None, *,
                start: Eigenpairs | None = None, progress: str | None = None) -> dask.delayed:
    """One delayed task: ENN from the top-K eigenpairs of C, then the LAW map and anchors (:class:`LowRankResult`).

    ``start`` is those eigenpairs when the caller computed them (a dense C too
    large for one task); otherwise the task reads them from a compressed store
    or computes them from the dense C it loads. BLAS uses every core of the
    worker's machine for that eigensolve, and :func:`in_task_blas_threads` for the
    cycles; ``progress`` as in :func:`rectify_in_task`.
    """
    return dask.delayed(_enn_in_task, pure=False)(
        cooc_url, params, candidates, start, progress,
        dask_key_name=f"rectify-enn-{tokenize(cooc_url, params, candidates, start)}",
    )


def _law_block(Z_block: np.ndarray, Z_S: np.ndarray, r0: int, anchors: np.ndarray, solver: str):
    weights, objective, unconverged = law_weights(Z_block, Z_S, solver=solver)
    for k, s in enumerate(anchors):
        if r0 <= s < r0 + Z_block.shape[1]:
            weights[s - r0] = 0.0
            weights[s - r0, k] = 1.0
            objective[s - r0] = 0.0
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


# ------------------------------------------------------------------ tiled path


def _row_block(source, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    """Rows × columns of a C: a :class:`LowRankIterate`, or ``(store URL, array name)`` on disk."""
    if isinstance(source, LowRankIterate):
        return source.block(slice(*rows), slice(*cols))
    url, name = source
    return zarr.open_group(zarr_store(url, read_only=True), mode="r")[name][rows[0] : rows[1], cols[0] : cols[1]]


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
    """:func:`~jsmf_dask.kernels.rectify.clipped_entries` of an AP iterate, a task per row block ((i, j, value) each)."""
    shared = dask.delayed(iterate, pure=True)
    token = tokenize(iterate, edges)
    return [dask.delayed(clipped_entries, pure=True)(shared, rows, dask_key_name=f"clipped-{token}-{rows[0]}")
            for rows in _tiles(edges)]


def write_small(model_url: str, arrays: dict[str, np.ndarray]) -> None:
    """Write the small arrays of a model (driver side)."""
    for name, values in arrays.items():
        write_array(model_url, name, np.asarray(values))
