"""Graph builders for rectification and anchor selection in one task: the in-task and low-rank paths.

* **in-task** (:func:`rectify_in_task`): one task loads ``C`` and runs the
  whole AP loop (or DC, or none) with threaded BLAS on one worker, then picks
  the anchors; memory C plus AP's iterates and result factored in O(N·K + nnz E)
  (DC and the Baseline: plus the dense rectified C the anchors are read from),
  within :func:`~jsmf_dask.pipeline.fit_plan.in_task_memory`, which the runner checks before it starts.
* **low-rank** (:func:`enn_in_task`): one task runs ENN and the LAW anchors on
  ``Y Yᵀ + E + r·11ᵀ`` (:mod:`jsmf_dask.kernels.enn`, memory
  :func:`~jsmf_dask.kernels.enn.enn_min_memory` to
  :func:`~jsmf_dask.kernels.enn.enn_memory`), never holding N×N beyond the
  dense C its first eigensolve may read.

Both return a :class:`RectifiedAnchors`. The third path, tiled AP, applies the
operator row block by row block (:mod:`jsmf_dask.stages.tiled`) and its loop
runs in the runner (:mod:`jsmf_dask.pipeline.fit_tiled`). See
``docs/architecture.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import dask
import numpy as np
from dask.base import tokenize
from threadpoolctl import threadpool_limits

from jsmf_dask import _progress
from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.io.zarr_store import read_checked_C, read_checked_columns, stored_eigenpairs
from jsmf_dask.kernels.anchor_words import AnchorColumns, column_shares
from jsmf_dask.kernels.eigen import Eigenpairs, top_eigenpairs
from jsmf_dask.kernels.factorize import anchors_low_rank, find_anchors, rectify, rectify_low_rank
from jsmf_dask.kernels.enn import enn_rectify
from jsmf_dask.kernels.law import law_anchors, law_coordinates
from jsmf_dask.kernels.lowrank import LowRankCooccurrence

__all__ = ["RectifyParams", "RectifiedAnchors", "in_task_blas_threads", "rectify_in_task", "enn_in_task"]


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
    start_Y: np.ndarray | None = None  # AP warm start: a previous fit's eigenvectors (N×K), or a block (N×m, m > K)
    max_bytes: int | None = None  # ENN: the memory its cycles may use (see kernels.enn.enn_rectify)
    anchor_words: np.ndarray | None = None  # AP on this vocabulary's block only (kernels.anchor_words), sorted

    def start(self) -> Eigenpairs | None:
        """The warm start as :class:`Eigenpairs` (None without one)."""
        if self.start_Y is None:
            return None
        return Eigenpairs(np.zeros(self.start_Y.shape[1]), self.start_Y, float("nan"), 0)


@dataclass
class RectifiedAnchors:
    """What rectification and anchor selection hand to the recovery of B and A (every path).

    Attributes
    ----------
    rectified : LowRankCooccurrence or StoredRows
        The rectified C: in low-rank form ``Y Yᵀ + E + r·11ᵀ`` (AP, ENN;
        O(N·K + nnz E)), or for the Baseline and DC the co-occurrence store's C
        with their scale and (DC) diagonal
        (:class:`~jsmf_dask.io.stored_rows.StoredRows`).
    eig : Eigenpairs
        The last eigensolve's top-K pairs.
    trace : dict of str to ndarray
        Per-cycle diagnostics (AP, ENN; empty otherwise).
    n_iter : int
    p_word : ndarray, shape (N,)
        Row sums of the rectified C.
    anchors, pivots : ndarray, shape (K,)
    C_SS : ndarray, shape (K, K)
        The rectified C's anchor block.
    Cbar_S : ndarray, shape (K, N), or None
        The anchors' rows of C̄ (row-normalised C): what recovery in N dimensions solves against.
    Z : ndarray, shape (K, N), or None
        ENN: the LAW coordinates of every word; recovery solves in these K dimensions instead.
    columns : AnchorColumns or None
        A fit on an anchor vocabulary: ``rectified`` is its block's, ``Cbar_S`` K×n, ``C_SS`` the block's,
        ``p_word`` C's own row sums (divided by C's sum), and every word is recovered against these rows.
    shares : ndarray, shape (K,), or None
        With ``columns``: ``ρ``, each anchor's share of its row of C in the vocabulary's columns.
    block_mass : float
        With ``columns``: the block's share of C's sum.
    """

    rectified: LowRankCooccurrence | StoredRows
    eig: Eigenpairs
    trace: dict[str, np.ndarray]
    n_iter: int
    p_word: np.ndarray
    anchors: np.ndarray
    pivots: np.ndarray
    C_SS: np.ndarray
    Cbar_S: np.ndarray | None = None
    Z: np.ndarray | None = None
    columns: AnchorColumns | None = None
    shares: np.ndarray | None = None
    block_mass: float = 1.0


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


def _rectify_in_task(
    cooc_url: str, params: RectifyParams, candidates: np.ndarray | None, progress: str | None
) -> RectifiedAnchors:
    def on_cycle(cycle: int, of: int, change: float, seconds: float) -> None:
        _progress.report(progress, {"cycle": cycle, "of": of, "relative_change": change, "seconds": seconds})

    if params.anchor_words is not None:
        return _rectify_anchor_words(cooc_url, params, candidates, on_cycle if progress is not None else None)
    C = read_checked_C(cooc_url)
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
            return RectifiedAnchors(rectified, eig, trace, n_iter, p, anchors, pivots, C_SS, Cbar_S=Cbar_S)
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
    return RectifiedAnchors(rectified, rect.eig, rect.trace, rect.n_iter, p, anchors, pivots, C_SS, Cbar_S=Cbar_S)


def _rectify_anchor_words(cooc_url: str, params: RectifyParams, candidates: np.ndarray | None,
                          on_cycle) -> RectifiedAnchors:
    """AP and the anchors on the anchor vocabulary's block of C; every word's restricted row kept for recovery
    (:mod:`jsmf_dask.kernels.anchor_words`)."""
    words = params.anchor_words
    columns, row_sums = read_checked_columns(cooc_url, words)
    total = float(row_sums.sum())
    block = columns[words]
    block_sum = float(block.sum())
    with threadpool_limits(limits=in_task_blas_threads(words.size), user_api="blas"):
        rectified, eig, trace, n_iter = rectify_low_rank(
            block / block_sum, params.n_topics, iterations=params.iterations, tol=params.tol,
            end_with=params.end_with, eig_tol=params.eig_tol, rng=np.random.default_rng(params.seed),
            start=params.start(), on_cycle=on_cycle,
        )
        _, local, pivots, Cbar_S, C_SS = anchors_low_rank(
            rectified, params.n_topics, candidates=None if candidates is None else candidates[words],
            nonnegative=params.end_with == "nonnegative")
    anchors = words[local]
    others = np.ones(row_sums.size, dtype=bool)
    others[words] = False
    restricted = AnchorColumns(rectified, words, columns[others], row_sums.size)
    return RectifiedAnchors(rectified, eig, trace, n_iter, row_sums / total, anchors, pivots, C_SS,
                            Cbar_S=Cbar_S, columns=restricted, shares=column_shares(columns, row_sums, anchors),
                            block_mass=block_sum / total)


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


def _start_pairs(cooc_url: str, params: RectifyParams) -> Eigenpairs:
    """The top-K eigenpairs of the empirical C: stored (compressed store) or computed from the dense C."""
    k = params.n_topics
    stored = stored_eigenpairs(cooc_url, k)
    if stored is not None:
        return Eigenpairs(*stored, 0)
    C = read_checked_C(cooc_url)
    return top_eigenpairs(lambda V: C @ V, C.shape[0], k, tol=params.eig_tol, rng=np.random.default_rng(params.seed),
                          cold="auto")


def _enn_in_task(cooc_url: str, params: RectifyParams, candidates: np.ndarray | None, start: Eigenpairs | None,
                 progress: str | None) -> RectifiedAnchors:
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
    return RectifiedAnchors(rect, eig, trace.as_arrays(), n_iter, p, anchors, pivots, C_SS, Z=Z)


def enn_in_task(cooc_url: str, params: RectifyParams, candidates: np.ndarray | None, *,
                start: Eigenpairs | None = None, progress: str | None = None) -> dask.delayed:
    """One delayed task: ENN from the top-K eigenpairs of C, then the LAW map and anchors (:class:`RectifiedAnchors`).

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
