"""``fit``: ``<root>/cooc.zarr`` → ``<root>/model.zarr/<name>`` and ``<root>/topics/<name>.txt``.

Rectify (AP, DC, ENN or none) → anchors → B and A (paper §3), each a Dask stage.
See :mod:`jsmf_dask.stages.fit` for the execution paths of rectification: AP
in one task or tiled over a dense C, and ENN + LAW on a low-rank C (from a
compressed store or a dense one) without any N×N array.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import dask
import numpy as np
import psutil
import scipy.sparse as sps
import zarr

from jsmf_dask import _progress, config
from jsmf_dask._validation import check_int, check_name, check_option
from jsmf_dask.cluster import pending_worker_memory
from jsmf_dask.exceptions import ConvergenceWarning, InvalidParameterError, StoreError
from jsmf_dask.io.fs import refuse_existing, staged_output, write_file
from jsmf_dask.io.model_store import ensure_model_group, model_path, open_model, provenance, topics_path
from jsmf_dask.io.parquet import corpus_dir, display_words, read_vocabulary, vocabulary_hash
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.zarr_store import StoredRows, cooc_path, open_cooccurrence, zarr_store
from jsmf_dask.kernels.factorize import anchors_from_rows, anchors_low_rank
from jsmf_dask.kernels.lowrank import LowRankCooccurrence, checked_rows, enn_memory, enn_min_memory, from_iterate
from jsmf_dask.kernels.rectify import (
    Comparison,
    LowRankIterate,
    alternating_projection,
    cold_start_memory,
    top_eigenpairs,
)
from jsmf_dask.kernels.recover import SOLVERS, least_squares_topic_topic, topic_topic, topic_word
from jsmf_dask.pipeline.cooccur import library_versions
from jsmf_dask.stages.cooccurrence import word_block_edges
from jsmf_dask.stages.fit import (
    RectifyParams,
    RectifyResult,
    check_entries,
    in_task_memory,
    least_squares_tasks,
    recovery_tasks,
    rectify_in_task,
    row_block_tasks,
    enn_in_task,
    law_recovery_tasks,
    clipped_entry_tasks,
    write_small,
)

__all__ = ["FitResult", "CycleRecord", "topic_labels", "choose_path", "convergence_issues", "fit", "RECTIFIERS", "default_name", "write_topics"]

RECTIFIERS = ("ap", "dc", "enn", "none")
PATHS = ("auto", "in-task", "tiled")
END_WITH = ("nonnegative", "psd")


def default_name(n_topics: int, rectifier: str) -> str:
    """``k20-ap`` for K = 20 with AP."""
    return f"k{n_topics}-{rectifier}"


def topic_labels(B: np.ndarray, anchors: np.ndarray, words: list[str], n: int = 3) -> list[str]:
    """A name per topic: its anchor word in brackets (a model with anchors), then its ``n`` most probable words.

    ``words`` are the words as shown (:func:`~jsmf_dask.io.parquet.display_words`: with item labels,
    ``ingest(labels=...)``, those labels, e.g. film titles).
    """
    order = np.argsort(-B, axis=0, kind="stable")[:n]
    return [(f"[{words[anchors[k]]}] " if k < len(anchors) else "") + " ".join(words[i] for i in order[:, k])
            for k in range(B.shape[1])]


@dataclass
class FitResult:
    """A fitted model's outputs (also in ``<root>/model.zarr/<name>``)."""

    name: str
    anchors: np.ndarray
    B: np.ndarray
    A: np.ndarray
    A_least_squares: np.ndarray
    words: list[str]
    trace: dict[str, np.ndarray]
    eigenvalues: np.ndarray
    n_iter: int
    path: str
    attrs: dict = field(default_factory=dict)

    def top_words(self, n: int = 20) -> list[list[str]]:
        """Each topic's ``n`` most probable words."""
        order = np.argsort(-self.B, axis=0, kind="stable")[:n]
        return [[self.words[i] for i in order[:, k]] for k in range(self.B.shape[1])]

    def labels(self, n: int = 3) -> list[str]:
        """A short name per topic (:func:`topic_labels`)."""
        return topic_labels(self.B, self.anchors, self.words, n)

    def lines(self, n: int = 20) -> list[str]:
        """One line per topic: its number, then :meth:`labels` with the ``n`` top words."""
        return [f"{k:3d} {label}" for k, label in enumerate(self.labels(n))]


class TiledAP:
    """The AP operator applied row block by row block as Dask tasks (the tiled path)."""

    cold_start = "lobpcg"  # every product is a pass over the tiles: vectors travel in blocks

    def __init__(self, cooc_url: str, edges: np.ndarray):
        self.source = (cooc_url, "C")
        self.edges = edges

    def _src(self, iterate):
        return self.source if iterate is None else iterate

    def matmat(self, iterate, V):
        return np.vstack(dask.compute(*row_block_tasks("matmat", self.edges, self._src(iterate), V)))

    def frobenius(self, iterate):
        stats = np.vstack(dask.compute(*row_block_tasks("rowstats", self.edges, self._src(iterate))))
        return float(np.sqrt(stats[:, 1].sum()))

    def compare(self, previous, current, V=None):
        parts = dask.compute(*row_block_tasks("compare", self.edges, self._src(previous), current, V))
        acc = np.sum([a for a, _ in parts], axis=0)
        CV = None if V is None else np.vstack([p for _, p in parts])
        return Comparison(float(np.sqrt(acc[0])), float(acc[1]), float(np.sqrt(acc[2])), CV, float(np.sqrt(acc[3])))


@dataclass
class CycleRecord:
    """One AP or ENN cycle as reported to ``fit``'s ``on_cycle``."""

    cycle: int
    of: int
    relative_change: float
    seconds: float
    eta: float  # seconds left at the mean pace so far, if every cycle up to ``of`` runs
    rectifier: str = "ap"

    def line(self) -> str:
        return (f"fit: {self.rectifier.upper()} cycle {self.cycle}/{self.of}, relative change "
                f"{self.relative_change:.3g}, {self.seconds:.2f} s/cycle, ETA {self.eta:.0f} s")


def _cycle_records(on_cycle: Callable[[CycleRecord], None], rectifier: str = "ap") -> Callable[[dict], None]:
    """A :func:`_progress.listen` callback turning cycle messages into :class:`CycleRecord` calls."""
    spent: list[float] = []

    def receive(message: dict) -> None:
        spent.append(float(message["seconds"]))
        eta = (message["of"] - message["cycle"]) * sum(spent) / len(spent)
        on_cycle(CycleRecord(int(message["cycle"]), int(message["of"]), float(message["relative_change"]),
                             float(message["seconds"]), eta, rectifier))

    return receive


def _largest_memory(client) -> tuple[str | None, int, str]:
    """The worker with the most memory: (address or None when running locally, its limit in bytes, a label)."""
    if client is None:
        return None, psutil.virtual_memory().available, "this process (available memory)"
    workers = client.scheduler_info(n_workers=-1)["workers"]
    addr, info = max(workers.items(), key=lambda kv: kv[1].get("memory_limit") or 0)
    return addr, info.get("memory_limit") or psutil.virtual_memory().total, f"the largest worker ({addr})"


#: Share of a worker's memory limit the in-task path may plan to use (dask pauses a worker at 80%).
IN_TASK_SHARE = 0.8


def _fat_worker(client, need: int) -> str | None:
    """The worker with the most memory (None when running locally), after checking ``need`` bytes fit."""
    addr, limit, where = _largest_memory(client)
    if need > IN_TASK_SHARE * limit:
        raise StoreError(
            f"the in-task rectification needs about {need / 2**30:.1f} GiB in one task; {where} has a memory "
            f"limit of {limit / 2**30:.1f} GiB. Start a worker with --memory-limit of at least "
            f"{need / IN_TASK_SHARE / 2**30:.1f}GiB, or use path='tiled'."
        )
    return addr


def _check_low_rank_memory(client, n_words: int, n_topics: int, dense_start: bool) -> tuple[str | None, int]:
    """The worker to run ENN + LAW on and the bytes its cycles may use, after checking it holds the least they need.

    The least is :func:`~jsmf_dask.kernels.lowrank.enn_min_memory` (every
    eigensolve exact), plus the dense C and its first eigensolve's basis
    (:func:`~jsmf_dask.kernels.rectify.cold_start_memory`) when the task loads it; the budget is
    the worker's share :data:`IN_TASK_SHARE` of its limit.
    """
    dense = 8 * n_words * n_words + cold_start_memory(n_words, n_topics)  # C and its first eigensolve
    need = enn_min_memory(n_words, n_topics) + (dense if dense_start else 0)
    addr, limit, where = _largest_memory(client)
    if need > IN_TASK_SHARE * limit:
        raise StoreError(
            f"the low-rank rectification (ENN + LAW) needs about {need / 2**30:.2f} GiB in one task for N = "
            f"{n_words}, K = {n_topics} (O(N·K)); {where} has a memory limit of {limit / 2**30:.2f} GiB. Start a "
            f"worker with --memory-limit of at least {need / IN_TASK_SHARE / 2**30:.2f}GiB"
        )
    return addr, int(IN_TASK_SHARE * limit)


def choose_path(client, n_words: int, rectifier: str, *, low_rank: bool = False,
                planned: int | None = None) -> tuple[str, str]:
    """``path='auto'``: the in-task path where its dense C and iterates fit the largest worker, else the
    low-rank path (ENN + LAW, when the rectifier was left to the default: ``low_rank``) or the tiled one.

    ``planned`` is the workers' memory limit of a LocalCluster not started yet
    (so that the choice, and the model name it implies, are known before it starts).
    Returns the path and the reason (stored in the model's attrs and printed).
    """
    need = in_task_memory(n_words)
    if planned is not None:
        limit, where = planned, "each worker of the LocalCluster"
    else:
        _, limit, where = _largest_memory(client)
    figures = (f"the in-task path needs about {need / 2**30:.2f} GiB for N = {n_words}; {where} has "
               f"{limit / 2**30:.2f} GiB")
    if need <= IN_TASK_SHARE * limit:
        return "in-task", f"{figures}: it fits"
    if low_rank:
        return "low-rank", (f"{figures}: too little, so ENN + LAW in O(N·K) memory (rectifier='ap' with "
                            "path='tiled' keeps AP, C in tiles)")
    if rectifier == "dc":
        raise StoreError(f"{figures}, and rectifier='dc' runs only in one task (it needs the whole C): start a "
                         f"worker with --memory-limit of at least {need / IN_TASK_SHARE / 2**30:.1f}GiB")
    return "tiled", f"{figures}: too little, so C stays in tiles"


def convergence_issues(trace: dict, eig, n_topics: int, eig_tol: float, solver: str, unconverged: int,
                       n_words: int) -> list[dict]:
    """What stopped short of its tolerance, each as a :class:`ConvergenceWarning` and a record for the attrs.

    The steps run in tasks (where a warning would stay in the worker's log), so
    the driver checks what they report: every eigensolve's relative residual
    against ``eig_tol``, the number of eigenpairs, and the words whose B solver
    stopped at its iteration cap.
    """
    issues: list[dict] = []
    residuals = np.append(np.asarray(trace.get("eig_residual", []), dtype=float), eig.residual)
    above = residuals > eig_tol
    if above.any():
        issues.append({"step": "eigensolve", "tol": eig_tol, "solves_above_tol": int(above.sum()),
                       "of": int(residuals.size), "max_residual": float(residuals.max()),
                       "message": f"{int(above.sum())} of {residuals.size} eigensolves stopped above the relative "
                                  f"residual {eig_tol:g} (largest {residuals.max():.2e}); anchors are sensitive to "
                                  "eigenvector error"})
    if len(eig.values) < n_topics:
        issues.append({"step": "eigensolve", "pairs": int(len(eig.values)), "expected": n_topics,
                       "message": f"the eigensolver returned {len(eig.values)} of the {n_topics} eigenpairs"})
    if unconverged:
        issues.append({"step": "recover", "solver": solver, "words": int(unconverged), "of": n_words,
                       "message": f"the {solver!r} B solver stopped at its iteration cap for {unconverged} of "
                                  f"{n_words} words"})
    for issue in issues:
        warnings.warn(issue["message"], ConvergenceWarning, stacklevel=3)
    return issues


def _check_matrix(cooc_url: str, edges: np.ndarray) -> np.ndarray:
    """Row statistics of the store's C (sum, sum of squares, minimum, all finite), checked by
    :func:`~jsmf_dask.stages.fit.check_entries`: one pass over the tiles. (A task that reads the whole C
    checks it there instead.)"""
    stats = np.vstack(dask.compute(*row_block_tasks("rowstats", edges, (cooc_url, "C"))))
    check_entries(cooc_url, stats[:, 3].astype(bool), stats[:, 2])
    return stats


def _rectify_tiled(cooc_url: str, params: RectifyParams, edges: np.ndarray,
                   candidates: np.ndarray | None, c_stats: np.ndarray, on_cycle=None) -> RectifyResult:
    """The tiled path; ``c_stats`` are the row statistics of C from :func:`_check_matrix`."""
    relay = None
    if on_cycle is not None:
        records = _cycle_records(on_cycle)

        def relay(cycle, of, change, seconds):
            records({"cycle": cycle, "of": of, "relative_change": change, "seconds": seconds})

    n = int(edges[-1])
    rng = np.random.default_rng(params.seed)
    op = TiledAP(cooc_url, edges)
    trace: dict[str, np.ndarray] = {}
    n_iter = 0
    if params.rectifier == "ap":
        iterate, eig, ap_trace, n_iter = alternating_projection(
            op, n, params.n_topics, iterations=params.iterations, tol=params.tol, eig_tol=params.eig_tol, rng=rng,
            start=params.start(), on_cycle=relay,
        )
        trace = ap_trace.as_arrays()
        if params.end_with == "psd":
            iterate = LowRankIterate(eig.vectors, np.maximum(eig.values, 0.0), 0.0, clip=False)
        parts = _progress.compute(*clipped_entry_tasks(iterate, edges))
        rectified = from_iterate(iterate, None, tuple(np.concatenate(x) for x in zip(*parts, strict=True)))
        p, anchors, pivots, Cbar_S, C_SS = anchors_low_rank(rectified, params.n_topics, candidates=candidates,
                                                             nonnegative=params.end_with == "nonnegative")
    elif params.rectifier == "none":  # C itself divided by its sum, read from the store (no copy)
        scale = float(c_stats[:, 0].sum())
        eig = top_eigenpairs(lambda V: op.matmat(None, V) / scale, n, params.n_topics, tol=params.eig_tol, rng=rng)
        rectified = StoredRows(cooc_url, "C", scale)
        p = c_stats[:, 0] / scale

        def product(q: np.ndarray) -> np.ndarray:
            return np.vstack(dask.compute(*row_block_tasks("matmat", edges, (cooc_url, "C"), q[:, None])))[:, 0] / scale

        anchors, pivots, Cbar_S, C_SS = anchors_from_rows(params.n_topics, p, c_stats[:, 1] / scale**2,
                                                          rectified.rows, product, candidates=candidates)
    else:
        raise InvalidParameterError("rectifier='dc' runs on the in-task path only (it needs the whole C); "
                                    "use path='in-task' or rectifier='ap'")
    return RectifyResult(eig, trace, n_iter, p, anchors, pivots, Cbar_S, C_SS, rectified)


def fit(
    root: str,
    *,
    n_topics: int,
    rectifier: str | None = None,
    iterations: int = 150,
    tol: float | None = None,
    end_with: str = "nonnegative",
    solver: str = "exact",
    min_anchor_df: int | None = None,
    seed: int = 0,
    name: str | None = None,
    path: str = "auto",
    eig_tol: float = 1e-6,
    warm_start: str | None = None,
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
        O(N·K) memory, :mod:`jsmf_dask.kernels.lowrank`), or none (the
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
        :data:`~jsmf_dask.kernels.lowrank.CHANGE_FLOOR`).
    end_with : {'nonnegative', 'psd'}, default='nonnegative'
        AP's last projection.
    solver : {'exact', 'eg'}, default='exact'
        Simplex least-squares solver for B.
    min_anchor_df : int, optional
        Only words in at least this many documents may be anchors
        (default ``jsmf.fit.min-anchor-df``).
    seed : int, default=0
        Seeds the eigensolver's start block and DC's permutations.
    name : str, optional
        Model name (default ``k<K>-<rectifier>``).
    path : {'auto', 'in-task', 'tiled'}, default='auto'
        Rectification path of AP, DC and none (ENN has one: ``low-rank``);
        auto takes the in-task path where its memory
        (:func:`~jsmf_dask.stages.fit.in_task_memory`, about ``2.5 · 8N²`` bytes)
        fits 80% of the largest worker's memory limit; otherwise, with the
        default rectifier, the low-rank path (ENN + LAW, O(N·K) memory, the
        model named ``k<K>-enn``), and with an explicit one the tiled path
        (see :func:`choose_path`; the choice and its reason are in the model's
        ``attrs["path"]``).
    eig_tol : float, default=1e-6
        Relative eigen-residual of every PSD step.
    warm_start : str, optional
        Name of a model of the same root and K whose eigenvectors ``Y`` start
        AP's first eigensolve (the refit after ``cooccur --update``).
    overwrite : bool, default=False
        Replace an existing model of the same name.
    on_cycle : callable, optional
        Called with a :class:`CycleRecord` after each AP cycle, on either path
        (from inside the in-task path's task through worker events).

    Returns
    -------
    FitResult
    """
    owner = "fit"
    root = os.fspath(root)
    check_int(n_topics, "n_topics", owner, low=2)
    if rectifier is not None:
        check_option(rectifier, "rectifier", owner, RECTIFIERS)
    check_option(end_with, "end_with", owner, END_WITH)
    check_option(solver, "solver", owner, SOLVERS)
    check_option(path, "path", owner, PATHS)
    check_int(iterations, "iterations", owner, low=1)
    check_int(seed, "seed", owner, low=0)
    check_name(name, "name", owner, allow_none=True)
    check_name(warm_start, "warm_start", owner, allow_none=True)
    min_anchor_df = config.get("fit.min-anchor-df", min_anchor_df)
    check_int(min_anchor_df, "min_anchor_df", owner, low=0)
    if tol is not None and not tol > 0:
        raise InvalidParameterError(f"The 'tol' parameter of fit must be a float > 0 or None. Got {tol!r} instead.")
    store = open_cooccurrence(cooc_path(root))
    n = store.n_words
    # AP where it fits, else ENN (a warm start or a PSD end ask for AP)
    by_memory = (rectifier is None and not store.compressed and path == "auto" and warm_start is None
                 and end_with == "nonnegative")
    if rectifier is None:
        rectifier = "enn" if store.compressed else "ap"
    if store.compressed and rectifier != "enn":
        raise InvalidParameterError(
            f"{store.url} is compressed (the top {store.rank} eigenpairs of C, no N x N matrix); rectifier="
            f"{rectifier!r} needs the dense C. Use rectifier='enn', or rebuild the dense store with "
            "`jsmf cooccur --overwrite` (no --rank)")
    if store.compressed and n_topics > store.rank:
        raise InvalidParameterError(
            f"The 'n_topics' parameter of fit must be at most the rank {store.rank} of the compressed store "
            f"{store.url}. Got {n_topics} instead; rebuild it with `jsmf cooccur --overwrite --rank {n_topics}` "
            "(or more)")
    if n_topics >= n:
        raise InvalidParameterError(
            f"The 'n_topics' parameter of fit must be an int in the range [2, {n - 1}] for a vocabulary of "
            f"{n} words. Got {n_topics} instead."
        )
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
    path_reason = f"path={path!r} was asked for"
    planned = pending_worker_memory() if path == "auto" else None
    if by_memory and name is None and planned is not None:  # the cluster's memory is known: decide now
        path, path_reason = choose_path(None, n, rectifier, low_rank=True, planned=planned)
        rectifier = "enn" if path == "low-rank" else rectifier
    if name is not None or not by_memory or path != "auto":
        name = name or default_name(n_topics, rectifier)
        refuse_existing(model_path(root, name), overwrite=overwrite)
    tile = int(store.attrs["tile_size"])
    edges = word_block_edges(n, tile)
    doc_freq = store.D1[:]
    candidates = doc_freq >= min_anchor_df
    if candidates.sum() < n_topics:
        raise InvalidParameterError(
            f"only {int(candidates.sum())} words occur in at least min_anchor_df={min_anchor_df} documents; "
            f"need at least n_topics={n_topics}. Lower min_anchor_df."
        )
    start_Y = None
    if warm_start is not None:
        previous = open_model(root, warm_start)
        start_Y = previous.arrays.get("Y")
        if start_Y is None or start_Y.shape != (n, n_topics):
            raise InvalidParameterError(
                f"warm_start={warm_start!r} has no eigenvectors of shape ({n}, {n_topics}) to start from "
                f"(got {None if start_Y is None else start_Y.shape}); fit it with the same K on this vocabulary"
            )
    if rectifier == "enn" and (warm_start is not None or end_with != "nonnegative"):
        raise InvalidParameterError("rectifier='enn' takes neither warm_start nor end_with='psd' (it always ends "
                                    "with its non-negativity correction)")
    client = _progress.active_client()
    if path == "auto" and rectifier != "enn":
        path, path_reason = choose_path(client, n, rectifier, low_rank=by_memory)
        if path == "low-rank":
            rectifier = "enn"
    if name is None:
        name = default_name(n_topics, rectifier)
        refuse_existing(model_path(root, name), overwrite=overwrite)
    params = RectifyParams(n_topics, rectifier, iterations, tol, end_with, eig_tol, seed, start_Y=start_Y)
    if rectifier == "enn":
        return _fit_low_rank(root, store, name, params, candidates, min_anchor_df, words, solver, client, overwrite,
                             on_cycle, path_reason if path == "low-rank" else None)
    # the first pass over C, after every check that needs none (the in-task path checks C as it reads it)
    c_stats = _check_matrix(store.url, edges) if path == "tiled" else None
    with staged_output(model_path(root, name), root=root, overwrite=overwrite) as tmp:
        if path == "in-task":
            worker = _fat_worker(client, in_task_memory(n))
            placement = {"workers": [worker], "allow_other_workers": True} if worker else {}
            channel = f"fit-{uuid.uuid4().hex}" if on_cycle is not None else None
            with dask.annotate(**placement):
                task = rectify_in_task(store.url, params, candidates, progress=channel)
            if channel is None:
                (result,) = _progress.compute(task)
            else:  # one task: its cycles are the progress, not dask's 0%/100% bar
                with _progress.listen(channel, _cycle_records(on_cycle)), dask.config.set({"jsmf.progress": False}):
                    (result,) = _progress.compute(task)
        else:
            result = _rectify_tiled(store.url, params, edges, candidates, c_stats, on_cycle)
        Cbar_S = client.scatter(result.Cbar_S, broadcast=True) if client is not None else result.Cbar_S
        rect = result.rectified
        dense = isinstance(rect, StoredRows)  # the Baseline, DC: the store's C (scaled, DC's diagonal)
        source = client.scatter(rect, broadcast=True) if client is not None and not dense else rect
        parts = _progress.compute(*recovery_tasks(source, result.p_word, Cbar_S, result.Cbar_S @ result.Cbar_S.T,
                                                   result.anchors, solver, block=config.get("fit.recover-block")))
        weights = np.vstack([w for w, _, _ in parts])
        objective = np.concatenate([o for _, o, _ in parts])
        convergence = convergence_issues(result.trace, result.eig, n_topics, eig_tol, solver,
                                         sum(u for _, _, u in parts), n)
        B = topic_word(weights, result.p_word)
        A, legality = topic_topic(result.C_SS, B, result.anchors)
        if legality <= 0:
            warnings.warn(
                f"the {n_topics} anchors never co-occur in C (C_SS is zero), so A is zero; this happens without "
                "rectification when rare words are anchors: raise min_anchor_df or use rectifier='ap'",
                UserWarning, stacklevel=2,
            )
        if dense:
            (BtC,) = _progress.compute(least_squares_tasks(rect, B, block=config.get("fit.recover-block")))
            stored = {"Y": result.eig.vectors, "eigenvalues": result.eig.values}
            if rect.diagonal is not None:
                stored["rectified_diagonal"] = rect.diagonal
        else:
            BtC = rect.rmatmat(np.linalg.pinv(B))
            stored = _low_rank_arrays(rect)
        A_ls = least_squares_topic_topic(BtC, B)
        write_small(tmp, {
            "anchors": result.anchors, "anchor_pivots": result.pivots, "B": B, "A": A, "A_least_squares": A_ls,
            "weights": weights, "objective": objective, "p_word": result.p_word,
        } | stored)
        for key, values in result.trace.items():
            write_small(tmp, {f"trace/{key}": values})
        attrs = _model_attrs(name, params, solver, min_anchor_df, path, warm_start, path_reason, result.n_iter,
                             convergence, legality, result.eig.residual, store)
        if dense:
            attrs["rectified"] = {"form": "cooc.zarr C / scale" + (", diagonal: rectified_diagonal" if
                                                                   rect.diagonal is not None else ""),
                                  "scale": rect.scale}
        else:
            attrs["low_rank"] = _low_rank_attrs(rect)
        zarr.open_group(zarr_store(tmp), mode="r+").attrs.update(attrs)
        ensure_model_group(root)  # only now: a failed run leaves no models group behind
    fitted = FitResult(name, result.anchors, B, A, A_ls, display_words(corpus_dir(root), words), result.trace,
                       result.eig.values, result.n_iter,
                       model_path(root, name), attrs)
    write_topics(root, name, fitted)
    return fitted


def _model_attrs(name, params: RectifyParams, solver, min_anchor_df, path, warm_start, path_reason, n_iter,
                 convergence, legality, final_residual, store) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "params": {"n_topics": params.n_topics, "rectifier": params.rectifier, "iterations": params.iterations,
                   "tol": params.tol, "end_with": params.end_with, "solver": solver, "min_anchor_df": min_anchor_df,
                   "seed": params.seed, "path": path, "eig_tol": params.eig_tol, "warm_start": warm_start},
        "path": {"chosen": path, "reason": path_reason},
        "n_iter": n_iter,
        "convergence": convergence,
        "legality": legality,
        "final_eig_residual": final_residual,
        "n_words": store.n_words,
        "tile_size": int(store.attrs["tile_size"]),
        "vocab_hash": store.attrs["vocab_hash"],
        "heldout_fraction": float(store.attrs.get("heldout_fraction", 0.0)),
        "cooccurrence": provenance(store.attrs),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "versions": library_versions(),
    }


def _fit_low_rank(root: str, store, name: str, params: RectifyParams, candidates: np.ndarray, min_anchor_df: int,
                  words: list[str], solver: str, client, overwrite: bool, on_cycle,
                  chosen_because: str | None = None) -> FitResult:
    """ENN + LAW (the low-rank path): no N×N array anywhere; the model stores ``C_rect`` as Y, E and r."""
    n, k = store.n_words, params.n_topics
    start = None
    dense_start = not store.compressed
    if dense_start and (enn_min_memory(n, k) + 8 * n * n + cold_start_memory(n, k)
                        > IN_TASK_SHARE * _largest_memory(client)[1]):
        # The dense C does not fit one task: its top-K eigenpairs by products tile by tile.
        edges = word_block_edges(n, int(store.attrs["tile_size"]))
        start = top_eigenpairs(lambda V: TiledAP(store.url, edges).matmat(None, V), n, k, tol=params.eig_tol,
                               rng=np.random.default_rng(params.seed))
        dense_start = False
    worker, budget = _check_low_rank_memory(client, n, k, dense_start)
    params = dataclasses.replace(params, max_bytes=budget)
    memory = (f"about {enn_min_memory(n, k) / 2**30:.2f} GiB with exact eigensolves, "
              f"{min(enn_memory(n, k), budget) / 2**30:.2f} GiB at most")
    if chosen_because is None:
        chosen_because = ("the store is compressed" if store.compressed else "rectifier='enn' was asked for") + \
            ": ENN + LAW in O(N·K) memory"
    reason = f"{chosen_because} ({memory})"
    with staged_output(model_path(root, name), root=root, overwrite=overwrite) as tmp:
        placement = {"workers": [worker], "allow_other_workers": True} if worker else {}
        channel = f"fit-{uuid.uuid4().hex}" if on_cycle is not None else None
        with dask.annotate(**placement):
            task = enn_in_task(store.url, params, candidates, start=start, progress=channel)
        if channel is None:
            (result,) = _progress.compute(task)
        else:
            with _progress.listen(channel, _cycle_records(on_cycle, "enn")), dask.config.set({"jsmf.progress": False}):
                (result,) = _progress.compute(task)
        with _progress.data_in_graph():  # Z's K × block slices, as a task rerun needs them
            parts = _progress.compute(*law_recovery_tasks(result.Z, result.anchors, solver,
                                                          block=config.get("fit.recover-block")))
        weights = np.vstack([w for w, _, _ in parts])
        objective = np.concatenate([o for _, o, _ in parts])
        convergence = convergence_issues(result.trace, result.eig, k, params.eig_tol, solver,
                                         sum(u for _, _, u in parts), n)
        B = topic_word(weights, result.p_word)
        A, legality = topic_topic(result.C_SS, B, result.anchors)
        rect = result.rectified
        A_ls = least_squares_topic_topic(rect.rmatmat(np.linalg.pinv(B)), B)
        write_small(tmp, {
            "anchors": result.anchors, "anchor_pivots": result.pivots, "B": B, "A": A, "A_least_squares": A_ls,
            "weights": weights, "objective": objective, "p_word": result.p_word,
        } | _low_rank_arrays(rect, result.eig.vectors, result.eig.values))
        for key, values in result.trace.items():
            write_small(tmp, {f"trace/{key}": values})
        attrs = _model_attrs(name, params, solver, min_anchor_df, "low-rank", None, reason,
                             result.n_iter, convergence, legality, result.eig.residual, store)
        attrs["low_rank"] = _low_rank_attrs(rect) | {"checked_rows": checked_rows(k, n)}
        zarr.open_group(zarr_store(tmp), mode="r+").attrs.update(attrs)
        ensure_model_group(root)  # only now: a failed run leaves no models group behind
    fitted = FitResult(name, result.anchors, B, A, A_ls, display_words(corpus_dir(root), words), result.trace,
                       result.eig.values, result.n_iter, model_path(root, name), attrs)
    write_topics(root, name, fitted)
    return fitted


def _low_rank_arrays(rect: LowRankCooccurrence, vectors: np.ndarray | None = None,
                     values: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The model arrays of a rectified C ``Y Yᵀ + E + r·11ᵀ``: its factor as eigenpairs and E's upper triangle.

    ``Y Yᵀ = vectors · diag(max(values, 0)) · vectorsᵀ``. Without them (AP,
    whose ``Y`` is orthonormal eigenvectors times ``√(λ/s)``) each column is
    split into its squared norm and its direction: entry by entry, so a row
    that is zero (a word the clip emptied) stays exactly zero, which a
    re-orthogonalisation (an SVD) would not keep.
    """
    if vectors is None:
        values = np.einsum("ik,ik->k", rect.Y, rect.Y)
        vectors = rect.Y / np.sqrt(np.where(values > 0, values, 1.0))
    E = sps.triu(rect.E).tocoo()
    return {"Y": vectors, "eigenvalues": values, "correction/rows": E.row.astype(np.int64),
            "correction/cols": E.col.astype(np.int64), "correction/values": E.data}


def _low_rank_attrs(rect: LowRankCooccurrence) -> dict:
    return {"shift": rect.r, "correction_nnz": int(rect.E.nnz), "correction_sum": float(rect.E.sum()),
            "form": "C_rect = Y diag(max(eigenvalues, 0)) Y^T + E + shift (E: correction/*, upper triangle)"}


def write_topics(root: str, name: str, fitted: FitResult) -> None:
    """Write ``fitted.lines()`` to ``<root>/topics/<name>.txt`` atomically."""
    write_file(topics_path(root, name), "\n".join(fitted.lines()) + "\n", root=root)
