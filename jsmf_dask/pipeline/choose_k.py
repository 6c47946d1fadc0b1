"""``choose-k``: how many topics, from one co-occurrence matrix → ``<root>/report/choose_k.{json,csv,png}``.

C is built once; for each candidate K a spectral fit (AP,
:data:`~jsmf_dask.parameters.CHOOSE_K_ITERATIONS` cycles) and a short CVB0
refine from it, both stored as models of the root (``choose-k<K>-ap`` and
``choose-k<K>-ap-cvb0``), so a rerun resumes: a K whose models exist is not
fitted again. Every refined model is then scored by document completion (by the
exact fold-in, ``evaluate``'s reference; the VB fold-in until session 46) on the
*validation* documents (the ones ``cooccur --validation`` left out of C and
refine scores, never trains on: about 2,000, a sample by id, on a large
corpus), document by document, so that two K are
compared on the same documents with a paired standard error
(:mod:`jsmf_dask.kernels.model_selection`). The held-out (evaluation)
documents take no part in the choice. Beside the curve: coherence (the
paper's and NPMI), dissimilarity, and the top eigenvalues of C.

The K are fitted side by side where each fit's AP runs on one core: in this
process (the threads engine) one per core, on a cluster one per worker thread
when the workers' memory allows (:func:`parallel_fits`); in this process C is
also read once for all of them (:func:`~jsmf_dask.io.zarr_store.sharing_C`).
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import io
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import dask
import numpy as np
from threadpoolctl import threadpool_limits

from jsmf_dask import _progress
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.fs import join, write_file
from jsmf_dask.io.model_store import list_models, open_model
from jsmf_dask.io.parquet import corpus_dir, corpus_tokens, list_blocks
from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.io.zarr_store import cooc_path, open_cooccurrence, sharing_C
from jsmf_dask.kernels.doc_split import DocumentSplit
from jsmf_dask.kernels.eigen import block_size, start_block
from jsmf_dask.kernels.metrics import coherence, dissimilarity, npmi_coherence, top_words
from jsmf_dask.kernels.model_selection import RULE, perplexity_curve, recommend_k
from jsmf_dask.parameters import CHOOSE_K_EIG_TOL, CHOOSE_K_ITERATIONS, CHOOSE_K_SWEEPS
from jsmf_dask.pipeline.evaluate import TOP_WORDS, document_prior, top_word_codocs
from jsmf_dask.pipeline.fit import fit
from jsmf_dask.pipeline.fit_plan import IN_TASK_SHARE, concurrent_in_task_fits, in_task_memory, largest_memory
from jsmf_dask.pipeline.refine import refine
from jsmf_dask.pipeline.report import report_dir
from jsmf_dask.stages.evaluate import document_scores_tasks
from jsmf_dask.stages.rectify import MULTITHREADED_MIN_WORDS
from jsmf_dask.stages.spectrum import eigenpairs_task
from jsmf_dask.cluster import Work, choose_engine

__all__ = ["choose_k", "ChooseKResult", "KRecord", "model_names"]



def model_names(k: int, rectifier: str = "ap") -> tuple[str, str]:
    """The spectral and the refined model of candidate ``k``: ``choose-k<K>-ap``, ``choose-k<K>-ap-cvb0`` (``enn``
    in place of ``ap`` on a compressed store)."""
    return f"choose-k{k}-{rectifier}", f"choose-k{k}-{rectifier}-cvb0"


@dataclass
class KRecord:
    """One candidate K as reported to ``on_k``: its models and what they cost."""

    n_topics: int
    spectral: str
    refined: str
    fit_seconds: float  # 0 when resumed
    refine_seconds: float
    sweeps: int
    resumed: bool
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        if self.resumed:
            return f"choose-k K={self.n_topics}: models {self.spectral}, {self.refined} already fitted (resumed)"
        return (f"choose-k K={self.n_topics}: fit {self.fit_seconds:.1f} s, refine {self.refine_seconds:.1f} s "
                f"({self.sweeps} sweeps)" + "".join(f"; warning: {w}" for w in self.warnings))


@dataclass
class ChooseKResult:
    """The table (one row per K), the recommendation and where they were written."""

    rows: list[dict]
    recommended: int
    rule: str
    best_perplexity_k: int
    coherence_peak_k: int
    npmi_peak_k: int
    eigenvalues: np.ndarray
    validation: dict
    json_path: str
    csv_path: str
    figure_path: str

    def lines(self) -> list[str]:
        head = "| K | validation perplexity | ± paired SE | coherence | NPMI | dissimilarity |"
        out = [head, "|---|---|---|---|---|---|"]
        for r in self.rows:
            out.append(f"| {r['n_topics']} | {r['perplexity']:.1f} | {r['perplexity_se']:.1f} | "
                       f"{r['coherence']:.1f} | {r['npmi']:.3f} | {r['dissimilarity']:.2f} |")
        v = self.validation
        return out + [
            f"scored: {v['n_docs']} validation documents ({v['n_tokens']} tokens; cooccur --validation "
            f"{v['fraction']}); the {v['heldout_fraction']} held out for evaluate took no part",
            f"lowest perplexity at K={self.best_perplexity_k}; coherence peaks at K={self.coherence_peak_k}, "
            f"NPMI at K={self.npmi_peak_k}",
            f"recommended K: {self.recommended} ({self.rule})",
            f"written {self.json_path}, {self.csv_path}, {self.figure_path}",
        ]


def _check(topics, n_words: int, sweeps: int, iterations: int) -> list[int]:
    ok = isinstance(topics, (list, tuple)) and topics and all(isinstance(k, int) and not isinstance(k, bool)
                                                               for k in topics)
    if not ok or min(topics) < 2 or max(topics) >= n_words or len(set(topics)) < 2:
        raise InvalidParameterError(
            f"The 'topics' parameter of choose_k must be a list of at least two different ints in [2, {n_words}) "
            f"(N = {n_words} words). Got {topics!r} instead.")
    for key, value in (("sweeps", sweeps), ("iterations", iterations)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidParameterError(f"The {key!r} parameter of choose_k must be an int >= 1. Got {value!r} "
                                        "instead.")
    return sorted(set(topics))


def _fitted(root: str, name: str, wanted: dict) -> bool:
    """True when model ``name`` exists and was fitted with every parameter of ``wanted``."""
    if name not in list_models(root):
        return False
    params = open_model(root, name).attrs.get("params", {})
    return all(params.get(key) == value for key, value in wanted.items())


def _fit_k(root: str, k: int, *, rectifier: str, iterations: int, sweeps: int, seed: int,
           start: np.ndarray | None) -> KRecord:
    spectral, refined = model_names(k, rectifier)
    fit_params = {"n_topics": k, "rectifier": rectifier, "iterations": iterations, "seed": seed}
    refine_params = {"source": spectral, "method": "cvb0", "sweeps": sweeps}
    fit_done = _fitted(root, spectral, fit_params)
    if fit_done and _fitted(root, refined, refine_params):
        return KRecord(k, spectral, refined, 0.0, 0.0, int(open_model(root, refined).attrs.get("n_iter", 0)), True)
    with _warnings_of_this_k() as caught:  # each K's warnings go in its line (KRecord.line)
        t0 = time.perf_counter()
        if not fit_done:
            fit(root, n_topics=k, rectifier=rectifier, iterations=iterations, seed=seed, name=spectral,
                overwrite=True, warm_start=start)
        t1 = time.perf_counter()
        # no refit: the validation documents score every K afterwards, so none may train on them; their scores
        # check each refine against its start (free), not the held-out documents' exact fold-in (4–5 s at K 100)
        result = refine(root, model=spectral, method="cvb0", sweeps=sweeps, name=refined, refit="never",
                        start_check="validation", overwrite=True)
    return KRecord(k, spectral, refined, t1 - t0, time.perf_counter() - t1, int(result.attrs["n_iter"]), False,
                   caught)


#: The warnings of the K being fitted in this context (a thread of :func:`_fit_all`, and the dask threads it
#: submits to, which inherit the context), or None outside :func:`_warnings_of_this_k`.
_CAUGHT: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("jsmf_choose_k_warnings", default=None)


@contextlib.contextmanager
def _warnings_by_k() -> Iterator[None]:
    """Route every warning to the list of the K whose context raised it (:func:`_warnings_of_this_k`).

    ``warnings.catch_warnings`` is process-wide, so K fitted in parallel
    threads cannot each hold one: one capture for the whole loop, sorted by
    a context variable. A warning from outside any K is shown as usual.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            caught = _CAUGHT.get()
            if caught is None:
                shown(message, category, filename, lineno, file, line)
            else:
                caught.append(str(message))

        warnings.showwarning = show
        yield


@contextlib.contextmanager
def _warnings_of_this_k() -> Iterator[list[str]]:
    caught: list[str] = []
    token = _CAUGHT.set(caught)
    try:
        yield caught
    finally:
        _CAUGHT.reset(token)


def parallel_fits(n_words: int, n_candidates: int) -> int:
    """How many K to fit at once, while each fit's rectification runs BLAS on one thread (N below
    :data:`~jsmf_dask.stages.rectify.MULTITHREADED_MIN_WORDS`; above, each uses every core: one K at a time).

    In this process (threads): one per core, as many as the in-task fits' memory allows. On a cluster: one
    per worker thread when every worker holds an in-task fit for each of its threads (the scheduler then
    places them freely, :func:`~jsmf_dask.pipeline.fit_plan.fat_worker`), else one.

    AP's cycles are dense products on one core at that size, so fitting K after K leaves the other cores idle
    for most of a sweep (NIPS papers, 10 K in 5…100: 38.5 s on one K at a time, see the benchmark README).
    """
    if n_words >= MULTITHREADED_MIN_WORDS:
        return 1
    client = _progress.active_client()
    if client is not None:
        return max(1, min(concurrent_in_task_fits(client, in_task_memory(n_words)), n_candidates))
    _, available, _ = largest_memory(None)
    by_memory = int(IN_TASK_SHARE * available // in_task_memory(n_words))
    return max(1, min(os.cpu_count() or 1, by_memory, n_candidates))


def _fit_all(topics: list[int], width: int, fit_one: Callable[[int], KRecord],
             on_k: Callable[[KRecord], None] | None) -> list[KRecord]:
    """``fit_one(k)`` for every K, ``width`` at a time (the largest K first: the longest start first), reported
    to ``on_k`` as each ends; the records in the order of ``topics``. The first error cancels the K not
    started and is raised once the running ones end."""
    records: dict[int, KRecord] = {}

    def done(rec: KRecord) -> None:
        records[rec.n_topics] = rec
        if on_k is not None:
            on_k(rec)

    with _warnings_by_k(), dask.config.set({"jsmf.progress": False}):  # one line per K instead of bars
        if width == 1:
            for k in topics:
                done(fit_one(k))
        else:
            # every fit's BLAS on one thread (as each sets it): nested limits restore this, not each other's
            with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(width) as pool:
                pending = {pool.submit(contextvars.copy_context().run, fit_one, k) for k in sorted(topics)[::-1]}
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    for future in finished:
                        if future.exception() is not None:
                            for other in pending:
                                other.cancel()
                            wait(pending)
                            raise future.exception()
                        done(future.result())
    return [records[k] for k in topics]


def _eigenpairs(root: str, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` eigenvalues of C and a block of vectors that holds their eigenvectors first
    (:func:`~jsmf_dask.kernels.eigen.start_block`): stored (compressed store), in one task, or by products over
    C's tiles."""
    store = open_cooccurrence(cooc_path(root))
    if store.compressed:
        values, vectors = store.eigenpairs(min(k, store.rank))
        return np.asarray(values), np.asarray(vectors)
    _, limit, _ = largest_memory(_progress.active_client())
    if in_task_memory(store.n_words) <= IN_TASK_SHARE * limit:
        (pairs,) = _progress.compute(eigenpairs_task(store.url, k, seed=seed, tol=CHOOSE_K_EIG_TOL))
        return pairs
    from jsmf_dask.kernels.eigen import top_eigenpairs

    C = StoredRows(store.url).to_dask().persist()  # in the workers' memory, spread over them, for the products
    pairs = top_eigenpairs(lambda X: (C @ X).compute(), store.n_words, k, tol=CHOOSE_K_EIG_TOL,
                           rng=np.random.default_rng(seed))
    return pairs.values, start_block(pairs)


def choose_k(
    root: str,
    *,
    topics: list[int],
    iterations: int = CHOOSE_K_ITERATIONS,
    sweeps: int = CHOOSE_K_SWEEPS,
    seed: int = 0,
    on_k: Callable[[KRecord], None] | None = None,
) -> ChooseKResult:
    """Fit and refine a model at each K of ``topics``, score them on the validation documents and recommend one.

    Parameters
    ----------
    root : str
        Run root with ``corpus/`` and a ``cooc.zarr`` built with validation
        documents (``jsmf cooccur --validation 0.05``).
    topics : list of int
        The candidate K (at least two, each in ``[2, N)``).
    iterations : int, default=2
        AP cycles of each spectral fit (:data:`~jsmf_dask.parameters.CHOOSE_K_ITERATIONS`:
        the refine that follows corrects the topics; measured in the README).
    sweeps : int, default=5
        CVB0 sweeps of each refine at most (:data:`~jsmf_dask.parameters.CHOOSE_K_SWEEPS`;
        it also stops by the validation documents).
    seed : int, default=0
    on_k : callable, optional
        Called with a :class:`KRecord` as each K ends (in the order they end when
        K are fitted side by side).

    Returns
    -------
    ChooseKResult
        Also written to ``<root>/report/choose_k.json``, ``choose_k.csv`` and
        ``choose_k.png``. The recommendation is :func:`~jsmf_dask.kernels.model_selection.recommend_k`'s
        rule (:data:`~jsmf_dask.kernels.model_selection.RULE`).
    """
    root = os.fspath(root)
    store = open_cooccurrence(cooc_path(root))
    topics = _check(topics, store.n_words, sweeps, iterations)
    validation = float(store.attrs.get("validation_fraction", 0.0))
    heldout = float(store.attrs.get("heldout_fraction", 0.0))
    if validation <= 0:
        raise StoreError(
            f"{store.url} has no validation documents, and choose-k scores each K on them (never on the held-out "
            f"documents evaluate reports): rebuild C with `jsmf cooccur {root} --overwrite --validation 0.05"
            + (f" --heldout {heldout}`" if heldout else "`"))
    corpus = corpus_dir(root)
    choose_engine(Work(tokens=corpus_tokens(corpus)))
    rectifier = "enn" if store.compressed else "ap"  # a compressed store holds no dense C for AP
    with sharing_C(store.url):  # on threads: C read once for the eigensolve and every fit
        # C's top eigenpairs, once: the scree plot, and the first projection of AP at every K (the top K of them)
        # (each K's start: the first block_size(K) vectors of the solve's block, which holds the top K eigenvectors
        # first, so that its first solve is a warm refinement: 0.4 s instead of a cold 2.9 s at K 100, N = 5,000)
        eigenvalues, block = _eigenpairs(root, min(max(topics) + 1, store.n_words - 1), seed)
        records = _fit_all(
            topics, parallel_fits(store.n_words, len(topics)),
            lambda k: _fit_k(root, k, rectifier=rectifier, iterations=iterations, sweeps=sweeps, seed=seed,
                             start=None if rectifier == "enn" else block[:, :block_size(k, store.n_words)]),
            on_k)
    models, samples = {}, []
    for rec in records:
        m = open_model(root, rec.refined)
        models[rec.refined] = (m.arrays["B"], document_prior(m)[0])
        samples.append(float(m.attrs.get("validation", {}).get("sample", 1.0)))
    blocks = list_blocks(corpus)
    with _progress.data_in_graph():
        # the validation documents every refine scored: beyond its sample of them, refine trains on the rest
        (scored,) = _progress.compute(document_scores_tasks(
            blocks, store.n_words, DocumentSplit(heldout, validation), models, sample=min(samples),
            fold_ins=("sampled",)))
    scored = scored["sampled"]
    n_tok, scores = scored.n_tokens, scored.log_likelihood
    if n_tok.sum() == 0:
        raise StoreError(f"{corpus}: the validation documents have no tokens to score (documents of one token)")
    curve = perplexity_curve(topics, np.vstack([scores[r.refined] for r in records]), n_tok)
    D1 = store.D1[:].astype(np.float64)
    n_docs = int(store.attrs.get("n_docs", 0))  # the documents C (and D1, D2) counted
    tops = [top_words(models[rec.refined][0], TOP_WORDS) for rec in records]
    # every K's top words' co-document counts in one read of D2 (one pass over the corpus without it)
    D2_tops = np.split(top_word_codocs(store, blocks, np.vstack(tops)), np.cumsum([len(t) for t in tops])[:-1])
    rows = []
    for j, (rec, top, D2_top) in enumerate(zip(records, tops, D2_tops, strict=True)):
        ppl, gap, se = curve.perplexity[j], curve.gap_to_best[j], curve.paired_se[j]
        rows.append({
            "n_topics": rec.n_topics, "model": rec.refined, "perplexity": float(ppl),
            # the gap's standard error on the perplexity scale (first order: d exp(−ℓ) = exp(−ℓ) dℓ)
            "perplexity_se": float(ppl * se), "loglik_gap_to_best": float(gap), "loglik_gap_se": float(se),
            "coherence": coherence(top, D1, D2_top, form="paper"),
            "npmi": npmi_coherence(top, D1, D2_top, max(n_docs, 1)),
            "dissimilarity": dissimilarity(top),
            "fit_seconds": rec.fit_seconds, "refine_seconds": rec.refine_seconds, "sweeps": rec.sweeps,
        })
    recommended = recommend_k(curve)
    out = report_dir(root)
    result = ChooseKResult(
        rows, recommended, RULE, curve.best,
        int(topics[int(np.argmax([r["coherence"] for r in rows]))]),
        int(topics[int(np.argmax([r["npmi"] for r in rows]))]),
        eigenvalues,
        {"n_docs": curve.n_docs, "n_tokens": curve.n_tokens, "fraction": validation, "heldout_fraction": heldout},
        join(out, "choose_k.json"), join(out, "choose_k.csv"), join(out, "choose_k.png"))
    _write(root, result)
    return result


def _write(root: str, result: ChooseKResult) -> None:
    from jsmf_dask.render.figures import choose_k_curves

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(result.rows[0]))
    writer.writeheader()
    writer.writerows(result.rows)
    summary = {
        "recommended": result.recommended, "rule": result.rule,
        "lowest_perplexity": result.best_perplexity_k, "coherence_peak": result.coherence_peak_k,
        "npmi_peak": result.npmi_peak_k, "validation": result.validation,
        "eigenvalues": [float(v) for v in result.eigenvalues],
        "rows": [{key: (None if isinstance(v, float) and not math.isfinite(v) else v) for key, v in r.items()}
                 for r in result.rows],
    }
    write_file(result.figure_path, choose_k_curves(result.rows, result.eigenvalues, result.recommended), root=root)
    write_file(result.csv_path, buf.getvalue().encode(), root=root)
    write_file(result.json_path, json.dumps(summary, indent=2, allow_nan=False), root=root)
