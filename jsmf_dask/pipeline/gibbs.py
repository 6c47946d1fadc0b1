"""A Gibbs-sampled LDA reference (tomotopy) stored as a model, so every method is scored by the same code.

``B`` is the sampler's topic–word distribution; ``A`` comes from its
document–topic counts the way ``C`` comes from word counts (paper eq. 1):
``A ∝ Σ_d w_d (n_d n_dᵀ − diag(n_d)) / (ℓ_d (ℓ_d − 1))``, the joint
distribution of the topics of two distinct tokens of a document, each
document weighed as the root's ``C`` weighed it (``w_d`` 1 or ``ℓ_d``). The model has
no anchor words and no rectified ``C``.

tomotopy is an optional dependency: ``pip install 'jsmf_dask[gibbs]'``.
"""

from __future__ import annotations

import datetime as _dt
import os
import warnings

import numpy as np
import pyarrow as pa
import zarr

from jsmf_dask._validation import check_heldout, check_int, check_name
from jsmf_dask.exceptions import JSMFError
from jsmf_dask.io.fs import staged_output
from jsmf_dask.io.model_store import ensure_model_group, model_path, open_model
from jsmf_dask.io.parquet import corpus_dir, display_words, list_blocks, read_block, read_vocabulary, vocabulary_hash
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.zarr_store import stored_heldout_fraction, stored_weighting, write_array, zarr_store
from jsmf_dask.kernels.doc_split import DocumentSplit
from jsmf_dask.kernels.variational import expected_topic_topic
from jsmf_dask.io.provenance import library_versions
from jsmf_dask.pipeline.fit_model import FitResult, write_topics

__all__ = ["fit_gibbs", "median_chain", "MissingExtraError", "require_tomotopy"]


class MissingExtraError(JSMFError):
    """An optional dependency is not installed."""


def require_tomotopy():
    """The tomotopy module, or :class:`MissingExtraError` naming the extra to install."""
    try:
        import tomotopy
    except ImportError as err:
        raise MissingExtraError(
            "method 'gibbs' needs tomotopy, an optional dependency: pip install 'jsmf_dask[gibbs]'"
        ) from err
    return tomotopy


def fit_gibbs(
    root: str,
    *,
    n_topics: int,
    iterations: int = 1000,
    alpha: float = 0.1,
    eta: float = 0.01,
    seed: int = 0,
    workers: int | None = None,
    name: str | None = None,
    heldout: float | None = None,
    samples: int = 1,
    thin: int = 10,
    overwrite: bool = False,
) -> FitResult:
    """Fit LDA by collapsed Gibbs sampling on ``<root>/corpus`` and store it as ``model.zarr/<name>``.

    Parameters
    ----------
    root : str
    n_topics : int
    iterations : int, default=1000
    alpha, eta : float
        Symmetric Dirichlet priors of document–topic and topic–word. tomotopy
        learns an asymmetric document prior from ``alpha`` as it samples (its
        default: every 10 iterations); the model stores the one it ends with,
        the prior its topics were sampled under (``alpha`` here is its start).
    seed : int, default=0
    workers : int, optional
        Sampler threads (default: every core). With more than one, tomotopy's
        result depends on thread timing even with a fixed seed.
    name : str, optional
        Default ``k<K>-gibbs``.
    heldout : float, optional
        Leave out the documents whose doc_id hashes below this fraction
        (default: the fraction ``cooc.zarr`` was built with). Every other
        document trains, the validation ones included: the refined models
        this reference is compared with learn from them too.
    samples : int, default=1
        ``B`` and ``A`` averaged over this many states of the chain after the
        ``iterations`` (1: the last state alone, the usual reference): an
        estimate of the posterior means instead of one draw.
    thin : int, default=10
        Iterations between two of those states.
    overwrite : bool, default=False

    Returns
    -------
    FitResult
        With no anchors (an empty array) and no trace.
    """
    check_name(name, "name", "fit_gibbs", allow_none=True)
    check_int(samples, "samples", "fit_gibbs", low=1)
    check_int(thin, "thin", "fit_gibbs", low=1)
    tp = require_tomotopy()
    root = os.fspath(root)
    heldout = stored_heldout_fraction(root) if heldout is None else check_heldout(heldout, "fit_gibbs")
    weighting = stored_weighting(root)
    # every document not held out: a sampler has no use for validation documents, and the refined models it is
    # compared with train on them too (refine's refit; beyond its scored sample of them)
    split = DocumentSplit(heldout)
    name = name or f"k{n_topics}-gibbs"
    corpus = corpus_dir(root)
    words = read_vocabulary(corpus).column("word").to_pylist()
    n = len(words)
    model = tp.LDAModel(k=n_topics, alpha=alpha, eta=eta, seed=seed)
    n_docs = n_tokens = 0
    for block in list_blocks(corpus):
        table = read_block(block, n)
        table = table.filter(pa.array(split.training(table.column("doc_id"))))
        for ids, counts in zip(table.column("word_ids").to_pylist(), table.column("counts").to_pylist(),
                               strict=True):
            tokens = [str(i) for i, c in zip(ids, counts, strict=True) for _ in range(c)]
            if len(tokens) >= 2:
                model.add_doc(tokens)
                n_docs, n_tokens = n_docs + 1, n_tokens + len(tokens)
    threads = workers or os.cpu_count() or 1
    B, A = np.zeros((n, n_topics)), np.zeros((n_topics, n_topics))
    for sample in range(samples):
        with warnings.catch_warnings():  # "may differ even with fixed seed if workers != 1": said in the docstring
            warnings.filterwarnings("ignore", message="The training result may differ", category=RuntimeWarning)
            model.train(iterations if sample == 0 else thin, workers=threads)
        B_s, A_s = _state_topics(model, n, n_topics, weighting)
        B += B_s / samples
        A += A_s / samples
    vocab_index = np.array([int(w) for w in model.used_vocabs])
    p = np.zeros(n)
    p[vocab_index] = np.asarray(model.used_vocab_freq, dtype=np.float64)
    p /= p.sum()
    anchors = np.zeros(0, dtype=np.int64)
    attrs = {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "params": {"n_topics": n_topics, "rectifier": "gibbs", "iterations": iterations, "alpha": alpha,
                   "eta": eta, "seed": seed, "samples": samples, "thin": thin},
        "n_iter": iterations,
        "n_words": n,
        "vocab_hash": vocabulary_hash(words),
        "heldout_fraction": heldout,
        "training": {"n_docs": n_docs, "n_tokens": n_tokens},
        "log_likelihood_per_word": float(model.ll_per_word),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "versions": library_versions() | {"tomotopy": tp.__version__},
    }
    with staged_output(model_path(root, name), root=root, overwrite=overwrite) as tmp:
        zarr.open_group(zarr_store(tmp), mode="a", zarr_format=3)
        for key, values in {"anchors": anchors, "B": B, "A": A, "p_word": p,
                            "alpha": np.asarray(model.alpha, dtype=np.float64)}.items():
            write_array(tmp, key, values)
        zarr.open_group(zarr_store(tmp), mode="r+").attrs.update(attrs)
        ensure_model_group(root)  # only now: a failed run leaves no models group behind
    fitted = FitResult(name, anchors, B, A, np.full_like(A, np.nan), display_words(corpus, words), {}, np.zeros(0),
                       iterations,
                       model_path(root, name), attrs)
    write_topics(root, name, fitted)
    return fitted


def median_chain(root: str, chains: list[str], metrics: dict) -> str:
    """Of several Gibbs models of ``root`` (chains of different seeds), the one of median held-out perplexity
    (the lower middle of an even number), the reference to compare with: tomotopy's chains on one corpus can
    differ by several per cent. ``metrics``: :func:`~jsmf_dask.evaluate`'s ``"models"`` entry; without held-out
    documents the chains are ranked by their training log likelihood per word."""
    def score(name: str) -> float:
        ppl = metrics[name].get("heldout", {}).get("perplexity")
        return ppl if ppl is not None else -float(open_model(root, name).attrs["log_likelihood_per_word"])

    return sorted(chains, key=score)[(len(chains) - 1) // 2]


def _state_topics(model, n: int, n_topics: int, weighting: str) -> tuple[np.ndarray, np.ndarray]:
    """The sampler's current ``B`` (N×K, columns summing to 1) and ``A`` (K×K, summing to 1)."""
    vocab_index = np.array([int(w) for w in model.used_vocabs])
    B = np.zeros((n, n_topics))
    for k in range(n_topics):
        B[vocab_index, k] = model.get_topic_word_dist(k)
    B /= B.sum(axis=0, keepdims=True)
    counts = np.array([np.bincount(np.asarray(doc.topics, dtype=np.int64), minlength=n_topics)
                       for doc in model.docs], dtype=np.float64).reshape(-1, n_topics)
    A = expected_topic_topic(counts, np.zeros(n_topics), weighting)
    return B, A / A.sum()
