"""``fit``: ``<root>/cooc.zarr`` → ``<root>/model.zarr/<name>`` and ``<root>/topics/<name>.txt``.

Rectify (AP, DC, ENN or none) → anchors → B and A (paper §3). This runner
validates the request, plans where it runs (:mod:`jsmf_dask.pipeline.fit_plan`),
calls the stages and commits the model:

* the **in-task** path (:func:`jsmf_dask.stages.rectify.rectify_in_task`) and
  the **low-rank** path (ENN + LAW, :func:`jsmf_dask.stages.rectify.enn_in_task`)
  rectify and pick anchors in one task;
* the **tiled** path runs AP's loop here, each product a graph over C's tiles
  (:mod:`jsmf_dask.pipeline.fit_tiled`);

then a task per block of words recovers B (:mod:`jsmf_dask.stages.recover`),
and :func:`jsmf_dask.kernels.recover.recovered_topics` forms B, A and the
least-squares A. See ``docs/architecture.md``.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import dask
import numpy as np
import zarr

from jsmf_dask import _progress, config
from jsmf_dask._validation import check_name, check_topics_for_vocabulary
from jsmf_dask.parameters import auto_anchor_words, parameter
from jsmf_dask.cluster import Work, choose_engine, killed_worker_message, pending_worker_memory
from jsmf_dask.exceptions import ClusterError, InvalidParameterError, StoreError
from jsmf_dask.io.fs import refuse_existing, staged_output
from jsmf_dask.io.model_store import ensure_model_group, model_path, open_model, write_arrays
from jsmf_dask.io.parquet import corpus_dir, corpus_tokens, display_words, read_vocabulary, vocabulary_hash
from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.io.zarr_store import CooccurrenceStore, cooc_path, open_cooccurrence, zarr_store
from jsmf_dask.kernels.eigen import top_eigenpairs
from jsmf_dask.kernels.anchor_words import unrestricted_weights
from jsmf_dask.kernels.enn import checked_rows, enn_memory, enn_min_memory
from jsmf_dask.kernels.recover import Recovered, recovered_topics
from jsmf_dask.pipeline.anchor_floor import first_floor, raise_floor
from jsmf_dask.pipeline.fit_model import (CycleRecord, FitResult, convergence_issues, cycle_records, default_name,
                                          low_rank_arrays, low_rank_attrs, model_attrs, outside_anchors_message,
                                          weightless_topics_message, write_topics)
from jsmf_dask.pipeline.fit_plan import (
    anchor_words_memory,
    check_low_rank_memory,
    choose_path,
    dense_start_fits,
    fat_worker,
    in_task_memory,
    plan_anchor_vocabulary,
)
from jsmf_dask.pipeline.fit_tiled import TiledAP, check_matrix, rectify_tiled
from jsmf_dask.stages.cooccurrence import word_block_edges
from jsmf_dask.stages.recover import law_recovery_tasks, least_squares_tasks, recovery_tasks
from jsmf_dask.stages.rectify import RectifiedAnchors, RectifyParams, enn_in_task, rectify_in_task

__all__ = ["fit", "FitResult", "CycleRecord", "RECTIFIERS", "PATHS", "END_WITH"]

RECTIFIERS = parameter("fit", "rectifier").choices
PATHS = parameter("fit", "path").choices
END_WITH = parameter("fit", "end_with").choices


@dataclass
class _Plan:
    """A validated fit request and where it runs."""

    root: str
    store: CooccurrenceStore
    words: list[str]
    name: str
    params: RectifyParams
    path: str  # 'in-task', 'tiled' or 'low-rank'
    path_reason: str
    candidates: np.ndarray
    min_anchor_df: int  # the floor of the anchors' pick (anchor_floor.first_floor of the one asked, or raised)
    solver: str
    warm_start: str | None  # as recorded in the model (an array given is recorded as "vectors")
    overwrite: bool
    anchor_floor: dict | None = None  # a second pick's record (anchor_floor.raise_floor)


def fit(
    root: str,
    *,
    n_topics: int,
    rectifier: str | None = None,
    iterations: int = 150,
    tol: float | None = None,
    end_with: str = "nonnegative",
    solver: str = "exact",
    min_anchor_df: int | str = "auto",
    seed: int = 0,
    name: str | None = None,
    path: str = "auto",
    eig_tol: float = 1e-6,
    warm_start: str | np.ndarray | None = None,
    anchor_words: int | str | None = None,
    overwrite: bool = False,
    on_cycle: Callable[[CycleRecord], None] | None = None,
) -> FitResult:
    """Fit a model from ``<root>/cooc.zarr``.

    Parameters
    ----------
    root : str
        Run root (local path or fsspec URL) holding ``corpus/`` and ``cooc.zarr``.
    n_topics : int
        K, with ``2 <= K < N``.
    rectifier : {'ap', 'dc', 'enn', 'none'}, optional
        Alternating projection, diagonal completion, ε-non-negative
        rectification on a low-rank C (with low-rank anchor inference, LAW:
        O(N·K) memory, :mod:`jsmf_dask.kernels.enn`), or none (the
        Baseline of Arora et al. 2013). Default: 'ap' on a dense store where
        its in-task path fits the workers (else 'enn', see ``path``), 'enn' on
        a compressed one (``cooccur(rank=...)``), which holds no N×N C and
        supports only 'enn'.
    iterations : int, default=150
        AP or ENN cycles (at most, with ``tol``).
    tol : float, optional
        AP (ENN) stops when the relative change ``‖C_t − C_{t−1}‖_F / ‖C_t‖_F``
        (of ``Y Yᵀ``) falls below it; None (default) runs every one of
        ``iterations``. 1e-6 (the eigensolver's accuracy) is the measured
        choice for speed; see the README for what it costs (for ENN: at
        N = 100,000 it stopped at cycle 6 with the anchors and B of 40 cycles;
        on a small semi-synthetic corpus at cycle 4 with dominancy 0.66
        instead of 0.99). ENN also stops, whatever ``tol``, once the change is
        below what it can measure (1e-7,
        :data:`~jsmf_dask.kernels.enn.CHANGE_FLOOR`).
    end_with : {'nonnegative', 'psd'}, default='nonnegative'
        AP's last projection.
    solver : {'exact', 'eg'}, default='exact'
        Simplex least-squares solver for B.
    min_anchor_df : int or 'auto', default='auto'
        Only words in at least this many documents may be anchors. ``'auto'``:
        10 (chosen by measurement: see the README); where more than a tenth of
        the topics then have almost no weight in A, the anchors are picked
        again on the same rectified C among the words in at least 0.5% of its
        documents, and that pick is kept if it leaves fewer such topics
        (:mod:`jsmf_dask.pipeline.anchor_floor`; ``attrs['anchor_floor']``).
    seed : int, default=0
        Seeds the eigensolver's start block and DC's permutations.
    name : str, optional
        Model name (default ``k<K>-<rectifier>``).
    path : {'auto', 'in-task', 'tiled'}, default='auto'
        Rectification path of AP, DC and none (ENN has one: ``low-rank``);
        auto takes the in-task path where its memory
        (:func:`~jsmf_dask.pipeline.fit_plan.in_task_memory`, about ``2.5 · 8N²`` bytes)
        fits 80% of the largest worker's memory limit; otherwise, with the
        default rectifier, the low-rank path (ENN + LAW, O(N·K) memory, the
        model named ``k<K>-enn``), and with an explicit one the tiled path
        (see :func:`~jsmf_dask.pipeline.fit_plan.choose_path`; the choice and
        its reason are in the model's ``attrs["path"]``).
    eig_tol : float, default=1e-6
        Relative eigen-residual of every PSD step.
    warm_start : str or ndarray of shape (N, m), m >= K, optional
        Name of a model of the same root and K whose eigenvectors ``Y`` start
        AP's first eigensolve (the refit after ``cooccur --update``), or
        orthonormal vectors whose first K span the top eigenvectors
        (``choose-k`` passes C's, computed once for every K, with the solver's
        next ones: with :func:`~jsmf_dask.kernels.eigen.block_size` vectors the
        first solve is a warm refinement, AP's first projection at hand).
    anchor_words : int or 'auto', optional
        Rectify and pick the anchors on the block of C of the ``anchor_words``
        words of highest tf·idf only (a vocabulary ``ingest --vocab-size``
        ranked: its first ``anchor_words``), and recover every word's topic
        weights from its co-occurrence with those words
        (:mod:`jsmf_dask.kernels.anchor_words`): AP costs O(n²) a cycle
        instead of O(N²), in one task of O(N·n) memory. AP only, on a dense
        store, without ``warm_start``; None (default) or at least N: every
        word. ``'auto'``: :func:`~jsmf_dask.parameters.auto_anchor_words` of
        K and C's documents (max(1000, 20 K) words below 10,000 documents,
        else every word; every word too where the fit asked for cannot take
        one or fewer than K of those words may be anchors), what ``jsmf topics``, ``jsmf run`` and the estimator
        pass when refine follows (see the README for the measurements). The
        model keeps the vocabulary (``anchor_words``) and its block's
        rectified C.
    overwrite : bool, default=False
        Replace an existing model of the same name.
    on_cycle : callable, optional
        Called with a :class:`CycleRecord` after each AP cycle, on either path
        (from inside the in-task path's task through worker events).

    Returns
    -------
    FitResult
    """
    root = os.fspath(root)
    _check_arguments(n_topics, rectifier, end_with, solver, path, iterations, seed, name, warm_start, min_anchor_df,
                     tol, anchor_words)
    store = open_cooccurrence(cooc_path(root))
    words = _checked_vocabulary(root, store, n_topics, rectifier)
    choose_engine(Work(tokens=corpus_tokens(corpus_dir(root))))
    plan = _plan(root, store, words, n_topics, rectifier, iterations, tol, end_with, solver,
                 first_floor(min_anchor_df), seed, name, path, eig_tol, warm_start, overwrite, anchor_words)
    client = _progress.active_client()
    if plan.path == "low-rank":
        plan, anchored = _rectify_low_rank(plan, client, on_cycle)
    else:
        anchored = _rectify(plan, client, on_cycle)
    recovered, unconverged = _recover(plan, anchored, client)
    raised = raise_floor(min_anchor_df, int(store.attrs["n_docs"]), store.D1, plan.params, anchored,
                         recovered.A, lambda again: _recover(plan, again, client))
    if raised is not None:
        plan = dataclasses.replace(plan, candidates=raised.candidates, min_anchor_df=raised.floor,
                                   anchor_floor=raised.record)
        if raised.recovered is not None:
            anchored, (recovered, unconverged) = raised.anchored, raised.recovered
    convergence = convergence_issues(anchored.trace, anchored.eig, n_topics, eig_tol, solver, unconverged,
                                     store.n_words)
    weightless = weightless_topics_message(recovered.legality, recovered.A, anchored.anchors, plan.words,
                                           plan.min_anchor_df, plan.params.rectifier, anchored.n_iter)
    if weightless is not None:
        warnings.warn(weightless, UserWarning, stacklevel=2)
    return _commit(plan, anchored, recovered, convergence)


def _check_arguments(n_topics, rectifier, end_with, solver, path, iterations, seed, name, warm_start, min_anchor_df,
                     tol, anchor_words) -> None:
    given = {"n_topics": n_topics, "rectifier": rectifier, "end_with": end_with, "solver": solver, "path": path,
             "iterations": iterations, "seed": seed, "min_anchor_df": min_anchor_df, "tol": tol,
             "anchor_words": anchor_words}
    for key, value in given.items():  # the ranges of the parameter table
        parameter("fit", key).check(value, "fit")
    check_name(name, "name", "fit", allow_none=True)
    if not isinstance(warm_start, np.ndarray):
        check_name(warm_start, "warm_start", "fit", allow_none=True)


def _checked_vocabulary(root: str, store: CooccurrenceStore, n_topics: int, rectifier: str | None) -> list[str]:
    """The corpus's words, after checking the rectifier and K against the store (its form and rank, N, its
    documents) and the vocabulary against the store's."""
    n = store.n_words
    if store.compressed and rectifier not in (None, "enn"):
        raise InvalidParameterError(
            f"{store.url} is compressed (the top {store.rank} eigenpairs of C, no N x N matrix); rectifier="
            f"{rectifier!r} needs the dense C. Use rectifier='enn', or rebuild the dense store with "
            "`jsmf cooccur --overwrite` (no --rank)")
    if store.compressed and n_topics > store.rank:
        raise InvalidParameterError(
            f"The 'n_topics' parameter of fit must be at most the rank {store.rank} of the compressed store "
            f"{store.url}. Got {n_topics} instead; rebuild it with `jsmf cooccur --overwrite --rank {n_topics}` "
            "(or more)")
    check_topics_for_vocabulary(n_topics, n)
    words = read_vocabulary(corpus_dir(root)).column("word").to_pylist()
    if vocabulary_hash(words) != store.attrs["vocab_hash"]:
        raise StoreError(
            f"{store.url}: its vocab_hash differs from {corpus_dir(root)}/vocab.parquet; the corpus changed "
            "after C was built: rerun `jsmf cooccur --overwrite`"
        )
    n_docs = int(store.attrs["n_docs"])
    if n_topics > n_docs:
        raise InvalidParameterError(
            f"The 'n_topics' parameter of fit must be at most the {n_docs} documents C was built from (each topic "
            f"needs documents that show it). Got {n_topics} instead."
        )
    return words


def _plan(root, store, words, n_topics, rectifier, iterations, tol, end_with, solver, min_anchor_df, seed, name,
          path, eig_tol, warm_start, overwrite, anchor_words) -> _Plan:
    """The rectifier, path and model name (AP where its in-task path fits, else ENN; a warm start or a PSD end
    ask for AP), the anchor candidates and the warm start, each checked before anything runs."""
    auto = anchor_words == "auto"
    if auto:
        anchor_words = auto_anchor_words(n_topics, int(store.attrs["n_docs"]))
    if anchor_words is not None and anchor_words < store.n_words:
        plan = _plan_anchor_words(root, store, words, n_topics, rectifier, iterations, tol, end_with, solver,
                                  min_anchor_df, seed, name, path, eig_tol, warm_start, overwrite, anchor_words,
                                  auto=auto)
        if plan is not None:
            return plan
    by_memory = (rectifier is None and not store.compressed and path == "auto" and warm_start is None
                 and end_with == "nonnegative")
    rectifier = rectifier or ("enn" if store.compressed else "ap")
    n = store.n_words
    path_reason = f"path={path!r} was asked for"
    planned = pending_worker_memory() if path == "auto" else None
    if by_memory and name is None and planned is not None:  # the cluster's memory is known: decide now
        path, path_reason = choose_path(None, n, rectifier, low_rank=True, planned=planned)
        rectifier = "enn" if path == "low-rank" else rectifier
    if name is not None or not by_memory or path != "auto":
        name = name or default_name(n_topics, rectifier)
        refuse_existing(model_path(root, name), overwrite=overwrite)
    candidates = store.D1[:] >= min_anchor_df
    if candidates.sum() < n_topics:
        raise InvalidParameterError(
            f"only {int(candidates.sum())} words occur in at least min_anchor_df={min_anchor_df} documents; "
            f"need at least n_topics={n_topics}. Lower min_anchor_df."
        )
    start_Y = _warm_start_vectors(root, warm_start, n, n_topics)
    if rectifier == "enn" and (warm_start is not None or end_with != "nonnegative"):
        raise InvalidParameterError("rectifier='enn' takes neither warm_start nor end_with='psd' (it always ends "
                                    "with its non-negativity correction)")
    if path == "auto" and rectifier != "enn":
        path, path_reason = choose_path(_progress.active_client(), n, rectifier, low_rank=by_memory)
        rectifier = "enn" if path == "low-rank" else rectifier
    if rectifier == "enn" and path != "low-rank":  # asked for, or the only one a compressed store supports
        path = "low-rank"
        path_reason = ("the store is compressed" if store.compressed else "rectifier='enn' was asked for") + \
            ": ENN + LAW in O(N·K) memory"
    if name is None:
        name = default_name(n_topics, rectifier)
        refuse_existing(model_path(root, name), overwrite=overwrite)
    params = RectifyParams(n_topics, rectifier, iterations, tol, end_with, eig_tol, seed, start_Y=start_Y)
    recorded = "vectors" if isinstance(warm_start, np.ndarray) else warm_start
    return _Plan(root, store, words, name, params, path, path_reason, candidates, min_anchor_df, solver,
                 recorded, overwrite)


def _plan_anchor_words(root, store, words, n_topics, rectifier, iterations, tol, end_with, solver, min_anchor_df,
                       seed, name, path, eig_tol, warm_start, overwrite, anchor_words, *, auto: bool) -> _Plan | None:
    """:func:`_plan` of a fit on an anchor vocabulary: AP in one task on its block (None: ``auto`` fits every
    word, see :func:`~jsmf_dask.pipeline.fit_plan.plan_anchor_vocabulary`)."""
    planned = plan_anchor_vocabulary(root, store, n_topics, anchor_words, min_anchor_df, rectifier=rectifier,
                                     path=path, warm_start=warm_start, auto=auto)
    if planned is None:
        return None
    vocabulary, candidates = planned
    name = name or default_name(n_topics, "ap")
    refuse_existing(model_path(root, name), overwrite=overwrite)
    reason = (f"AP on the block of the {vocabulary.size} words of highest tf-idf (anchor_words), in one task "
              f"(about {anchor_words_memory(store.n_words, vocabulary.size) / 2**30:.2f} GiB)")
    params = RectifyParams(n_topics, "ap", iterations, tol, end_with, eig_tol, seed, anchor_words=vocabulary)
    return _Plan(root, store, words, name, params, "in-task", reason, candidates, min_anchor_df, solver, None,
                 overwrite)


def _warm_start_vectors(root: str, warm_start: str | np.ndarray | None, n: int, n_topics: int) -> np.ndarray | None:
    if warm_start is None:
        return None
    if isinstance(warm_start, np.ndarray):
        if warm_start.ndim != 2 or warm_start.shape[0] != n or warm_start.shape[1] < n_topics:
            raise InvalidParameterError(f"warm_start vectors must have shape ({n}, {n_topics}) or more columns; "
                                        f"got {warm_start.shape}")
        return np.ascontiguousarray(warm_start, dtype=np.float64)
    start_Y = open_model(root, warm_start).arrays.get("Y")
    if start_Y is None or start_Y.shape != (n, n_topics):
        raise InvalidParameterError(
            f"warm_start={warm_start!r} has no eigenvectors of shape ({n}, {n_topics}) to start from "
            f"(got {None if start_Y is None else start_Y.shape}); fit it with the same K on this vocabulary"
        )
    return start_Y


def _rectify(plan: _Plan, client, on_cycle) -> RectifiedAnchors:
    """AP, DC or none on the in-task or the tiled path."""
    store, params = plan.store, plan.params
    edges = word_block_edges(store.n_words, int(store.attrs["tile_size"]))
    if plan.path == "tiled":
        c_stats = check_matrix(store.url, edges)  # the first pass over C, after every check that needs none
        return rectify_tiled(store.url, params, edges, plan.candidates, c_stats, on_cycle)
    need = in_task_memory(store.n_words) if params.anchor_words is None else \
        anchor_words_memory(store.n_words, params.anchor_words.size)
    worker = fat_worker(client, need)
    placement = {"workers": [worker], "allow_other_workers": True} if worker else {}
    return _one_task(lambda channel: rectify_in_task(store.url, params, plan.candidates, progress=channel),
                     placement, on_cycle, "ap", what="the in-task rectification", need=need,
                     advice="give a worker more memory (--memory-limit, or fewer --workers on one machine), or use "
                            "--rectifier enn (memory O(N·K))")


def _rectify_low_rank(plan: _Plan, client, on_cycle) -> tuple[_Plan, RectifiedAnchors]:
    """ENN + LAW in one task (its start pairs by tiled products when the dense C does not fit it)."""
    store, params = plan.store, plan.params
    n, k = store.n_words, params.n_topics
    start = None
    dense_start = not store.compressed
    if dense_start and not dense_start_fits(client, n, k):
        # The dense C does not fit one task: its top-K eigenpairs by products tile by tile.
        edges = word_block_edges(n, int(store.attrs["tile_size"]))
        start = top_eigenpairs(lambda V: TiledAP(store.url, edges).matmat(None, V), n, k, tol=params.eig_tol,
                               rng=np.random.default_rng(params.seed))
        dense_start = False
    worker, budget = check_low_rank_memory(client, n, k, dense_start)
    params = dataclasses.replace(params, max_bytes=budget)
    memory = (f"about {enn_min_memory(n, k) / 2**30:.2f} GiB with exact eigensolves, "
              f"{min(enn_memory(n, k), budget) / 2**30:.2f} GiB at most")
    plan = dataclasses.replace(plan, params=params, path_reason=f"{plan.path_reason} ({memory})")
    placement = {"workers": [worker], "allow_other_workers": True} if worker else {}
    anchored = _one_task(lambda channel: enn_in_task(store.url, params, plan.candidates, start=start,
                                                     progress=channel), placement, on_cycle, "enn",
                         what="the low-rank rectification (ENN + LAW)", need=budget)
    return plan, anchored


def _one_task(build, placement: dict, on_cycle, rectifier: str, *, what: str, need: int,
              advice: str | None = None):
    """Compute the one task ``build(channel)`` makes, its cycles reported to ``on_cycle`` (not dask's 0%/100%).

    Workers that die running it (most often out of memory: a pool that shrank, a larger task than planned)
    are a :class:`ClusterError` naming ``what``, its ``need`` in bytes, the last worker and its limit.
    """
    channel = f"fit-{uuid.uuid4().hex}" if on_cycle is not None else None
    with dask.annotate(**placement):
        task = build(channel)
    try:
        if channel is None:
            (result,) = _progress.compute(task)
            return result
        with _progress.listen(channel, cycle_records(on_cycle, rectifier)), \
                dask.config.set({"jsmf.progress": False}):
            (result,) = _progress.compute(task)
        return result
    except Exception as err:
        message = killed_worker_message(err, what, need=need, **({"advice": advice} if advice else {}))
        if message is None:
            raise
        raise ClusterError(message) from None


def _recover(plan: _Plan, anchored: RectifiedAnchors, client) -> tuple[Recovered, int]:
    """Every word's weights by a task per block of words, then B, A and the least-squares A."""
    block = config.get("fit.recover-block")
    rect = anchored.rectified
    if anchored.Z is not None:  # LAW: the least squares in K dimensions
        with _progress.data_in_graph():  # Z's K × block slices, as a task rerun needs them
            parts = _progress.compute(*law_recovery_tasks(anchored.Z, anchored.anchors, plan.solver, block=block))
    elif anchored.columns is not None:  # an anchor vocabulary: every word against its columns, then ρ
        if (problem := outside_anchors_message(anchored.shares, anchored.anchors, plan.words,
                                               anchored.columns.words.size, plan.min_anchor_df)) is not None:
            raise InvalidParameterError(problem)
        columns = client.scatter(anchored.columns, broadcast=True) if client is not None else anchored.columns
        parts = _progress.compute(*recovery_tasks(columns, None, anchored.Cbar_S, anchored.Cbar_S @ anchored.Cbar_S.T,
                                                  anchored.anchors, plan.solver, block=block,
                                                  n_words=plan.store.n_words))
        parts = [(unrestricted_weights(w, anchored.shares), o, u) for w, o, u in parts]
    else:
        Cbar_S = client.scatter(anchored.Cbar_S, broadcast=True) if client is not None else anchored.Cbar_S
        dense = isinstance(rect, StoredRows)  # the Baseline, DC: the store's C (scaled, DC's diagonal)
        source = client.scatter(rect, broadcast=True) if client is not None and not dense else rect
        parts = _progress.compute(*recovery_tasks(source, anchored.p_word, Cbar_S,
                                                  anchored.Cbar_S @ anchored.Cbar_S.T, anchored.anchors,
                                                  plan.solver, block=block))
    weights = np.vstack([w for w, _, _ in parts])
    objective = np.concatenate([o for _, o, _ in parts])
    if isinstance(rect, StoredRows):
        def pinv_times_C(M: np.ndarray) -> np.ndarray:
            return _progress.compute(least_squares_tasks(rect, M, block=block))[0]
    elif anchored.columns is not None:  # the block's least-squares A, on C's scale
        def pinv_times_C(M: np.ndarray) -> np.ndarray:
            return anchored.block_mass * rect.rmatmat(M)
    else:
        pinv_times_C = rect.rmatmat
    recovered = recovered_topics(weights, objective, anchored.p_word, anchored.C_SS, anchored.anchors, pinv_times_C,
                                 words=None if anchored.columns is None else anchored.columns.words)
    return recovered, sum(u for _, _, u in parts)


def _commit(plan: _Plan, anchored: RectifiedAnchors, recovered: Recovered, convergence: list[dict]) -> FitResult:
    """Write the model (arrays, trace, attrs) atomically, then its topic lines."""
    root, name, rect, params = plan.root, plan.name, anchored.rectified, plan.params
    arrays = {"anchors": anchored.anchors, "anchor_pivots": anchored.pivots, "B": recovered.B, "A": recovered.A,
              "A_least_squares": recovered.A_least_squares, "weights": recovered.weights,
              "objective": recovered.objective, "p_word": anchored.p_word}
    attrs = model_attrs(name, params, plan.solver, plan.min_anchor_df, plan.path, plan.warm_start, plan.path_reason,
                        anchored.n_iter, convergence, recovered.legality, anchored.eig.residual, plan.store)
    if plan.anchor_floor is not None:
        attrs["anchor_floor"] = plan.anchor_floor
    if isinstance(rect, StoredRows):
        arrays |= {"Y": anchored.eig.vectors, "eigenvalues": anchored.eig.values}
        if rect.diagonal is not None:
            arrays["rectified_diagonal"] = rect.diagonal
        attrs["rectified"] = {"form": "cooc.zarr C / scale" + (", diagonal: rectified_diagonal" if
                                                               rect.diagonal is not None else ""),
                              "scale": rect.scale}
    elif anchored.Z is not None:  # ENN: Y as its eigenpairs
        arrays |= low_rank_arrays(rect, anchored.eig.vectors, anchored.eig.values)
        attrs["low_rank"] = low_rank_attrs(rect) | {"checked_rows": checked_rows(params.n_topics, rect.n_words)}
    else:
        arrays |= low_rank_arrays(rect)
        attrs["low_rank"] = low_rank_attrs(rect)
    if anchored.columns is not None:  # the rectified C above is the block of these words'
        arrays["anchor_words"] = anchored.columns.words
        attrs["anchor_words"] = {"n": int(anchored.columns.words.size), "chosen_by": "tf-idf",
                                 "block_mass": anchored.block_mass}
    with staged_output(model_path(root, name), root=root, overwrite=plan.overwrite) as tmp:
        write_arrays(tmp, arrays)
        write_arrays(tmp, {f"trace/{key}": values for key, values in anchored.trace.items()})
        zarr.open_group(zarr_store(tmp), mode="r+").attrs.update(attrs)
        ensure_model_group(root)  # only now: a failed run leaves no models group behind
    fitted = FitResult(name, anchored.anchors, recovered.B, recovered.A, recovered.A_least_squares,
                       display_words(corpus_dir(root), plan.words), anchored.trace, anchored.eig.values,
                       anchored.n_iter, model_path(root, name), attrs)
    write_topics(root, name, fitted)
    return fitted
