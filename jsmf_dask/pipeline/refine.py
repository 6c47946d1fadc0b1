"""``refine``: variational Bayes for LDA started from a fitted model → ``<root>/model.zarr/<name>``.

The spectral model's ``B`` (and ``A``) start batch variational Bayes (Blei, Ng
& Jordan 2003; batch form of Hoffman, Blei & Bach 2010) over the corpus in
``<root>/corpus``: ``λ = η + n_tokens · B · diag(p(k))``, then each sweep is one
pass over the Parquet row groups (:mod:`jsmf_dask.stages.refine`) and an M-step
``λ = η + expected counts`` in the driver. The result is stored like any other
model (``B`` = ``λ`` with normalised columns, ``A`` from the documents'
expected topic counts, no anchors), so ``evaluate``, ``compare``, ``report``
and ``infer`` read it unchanged; it also holds ``alpha``, ``lambda``, a
per-sweep trace and each training document's topic weights under
``doc_topics/``.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import dask
import numpy as np
import zarr

from jsmf_dask import _progress, config
from jsmf_dask._validation import check_heldout
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.fs import get_fs, join, refuse_existing, remove, staged_output, write_file
from jsmf_dask.io.model_store import ensure_model_group, model_path, open_model, topics_path, write_array
from jsmf_dask.io.parquet import corpus_dir, display_words, list_blocks, read_vocabulary, vocabulary_hash
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.zarr_store import stored_heldout_fraction, zarr_store
from jsmf_dask.kernels.metrics import topic_changes
from jsmf_dask.kernels.variational import dirichlet_expectation, moment_alpha, topic_bound, topics_from_model
from jsmf_dask.pipeline.cooccur import library_versions
from jsmf_dask.pipeline.fit import FitResult, write_topics
from jsmf_dask.pipeline.infer import INFER_INFO, topic_info
from jsmf_dask.stages.refine import SweepParams, finish_tasks, gamma_dir, sweep_tasks

__all__ = ["refine", "RefineResult", "SweepRecord", "default_refined_name", "change_line"]


def default_refined_name(source: str) -> str:
    """``<source>-vb``."""
    return f"{source}-vb"


@dataclass
class SweepRecord:
    """One sweep as reported to ``on_sweep`` and stored in the trace."""

    sweep: int
    of: int
    bound_per_word: float  # of the state entering this sweep (NaN for the first: γ not yet inferred)
    relative_change: float
    inner_iterations: float  # mean per document
    seconds: float
    topics: np.ndarray | None = None  # B after this sweep (λ with normalised columns), N×K

    def line(self) -> str:
        bound = "" if math.isnan(self.bound_per_word) else f"bound {self.bound_per_word:.5f}/word before it, "
        return (f"refine sweep {self.sweep}/{self.of}: {bound}relative change of lambda {self.relative_change:.3g}, "
                f"{self.inner_iterations:.1f} inner iterations per document, {self.seconds:.1f} s")


@dataclass
class RefineResult(FitResult):
    """A refined model (also in ``<root>/model.zarr/<name>``) and what changed from its source."""

    source: str = ""
    source_B: np.ndarray | None = None

    def changes(self, n: int = 10) -> list[str]:
        """Per topic: the top-``n`` words gained and lost against the source model's same topic."""
        if self.source_B is None:
            return []
        return [change_line(k, gained, lost, self.words)
                for k, (gained, lost) in enumerate(topic_changes(self.source_B, self.B, n))]


def change_line(k: int, gained: list[int], lost: list[int], words: list[str]) -> str:
    """``  3 +[gained words] -[lost words]`` or ``  3 unchanged``."""
    if not gained and not lost:
        return f"{k:3d} unchanged"
    return f"{k:3d} +[{' '.join(words[i] for i in gained)}] -[{' '.join(words[i] for i in lost)}]"


def _check_params(sweeps, tol, alpha, eta, inner_iterations) -> None:
    owner = "refine"
    if isinstance(sweeps, bool) or not isinstance(sweeps, int) or sweeps < 1:
        raise InvalidParameterError(f"The 'sweeps' parameter of {owner} must be an int in the range [1, inf). "
                                    f"Got {sweeps!r} instead.")
    if isinstance(inner_iterations, bool) or not isinstance(inner_iterations, int) or inner_iterations < 1:
        raise InvalidParameterError(f"The 'inner_iterations' parameter of {owner} must be an int in the range "
                                    f"[1, inf). Got {inner_iterations!r} instead.")
    if tol is not None and not (isinstance(tol, (int, float)) and tol > 0):
        raise InvalidParameterError(f"The 'tol' parameter of {owner} must be a float > 0 or None. Got {tol!r} instead.")
    if not (alpha == "auto" or (isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha > 0)):
        raise InvalidParameterError(f"The 'alpha' parameter of {owner} must be 'auto' or a float > 0. "
                                    f"Got {alpha!r} instead.")
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not eta > 0:
        raise InvalidParameterError(f"The 'eta' parameter of {owner} must be a float > 0. Got {eta!r} instead.")


def refine(
    root: str,
    *,
    model: str,
    sweeps: int | None = None,
    tol: float | None = None,
    alpha: float | str | None = None,
    eta: float = 0.01,
    name: str | None = None,
    heldout: float | None = None,
    inner_iterations: int | None = None,
    inner_tol: float = 1e-3,
    overwrite: bool = False,
    on_sweep: Callable[[SweepRecord], None] | None = None,
) -> RefineResult:
    """Refine model ``model`` of ``root`` by batch variational Bayes for LDA.

    Parameters
    ----------
    root : str
        Run root holding ``corpus/`` and the model.
    model : str
        The model to start from (its ``B`` and ``A``).
    sweeps : int, optional
        Passes over the corpus at most (default ``jsmf.refine.sweeps``).
    tol : float, optional
        Stop earlier when ``‖λ_s − λ_{s−1}‖_F / ‖λ_{s−1}‖_F`` falls below it
        (default ``jsmf.refine.tol``).
    alpha : 'auto' or float, optional
        Document–topic prior: ``'auto'`` matches a Dirichlet to the source
        model's ``A`` (:func:`~jsmf_dask.kernels.variational.moment_alpha`), a
        float is a symmetric prior (default ``jsmf.refine.alpha``).
    eta : float, default=0.01
        Symmetric topic–word prior.
    name : str, optional
        Output model (default ``<model>-vb``).
    heldout : float, optional
        Leave out the documents whose id hashes below this fraction (default:
        the fraction ``cooc.zarr`` was built with, so every model of the root
        is trained on the same documents).
    inner_iterations : int, optional
        E-step iterations per document and sweep at most (``γ`` is kept
        between sweeps, so a few suffice; default ``jsmf.refine.inner-iterations``).
    inner_tol : float, default=1e-3
        A document's E-step stops when its mean change of ``γ`` falls below this.
    overwrite : bool, default=False
    on_sweep : callable, optional
        Called with a :class:`SweepRecord` after each sweep (progress).

    Returns
    -------
    RefineResult
    """
    root = os.fspath(root)
    sweeps = config.get("refine.sweeps", sweeps)
    tol = config.get("refine.tol", tol)
    alpha = config.get("refine.alpha", alpha)
    inner_iterations = config.get("refine.inner-iterations", inner_iterations)
    _check_params(sweeps, tol, alpha, eta, inner_iterations)
    heldout = stored_heldout_fraction(root) if heldout is None else check_heldout(heldout, "refine")
    name = name or default_refined_name(model)
    source = open_model(root, model)
    refuse_existing(model_path(root, name), overwrite=overwrite)
    corpus = corpus_dir(root)
    vocab = read_vocabulary(corpus)
    words = vocab.column("word").to_pylist()
    B0, A0 = source.arrays["B"], source.arrays["A"]
    if B0.shape[0] != len(words) or source.attrs.get("vocab_hash", vocabulary_hash(words)) != vocabulary_hash(words):
        raise StoreError(
            f"{source.url}: model {model!r} was fitted on another vocabulary ({B0.shape[0]} words) than "
            f"{corpus}/vocab.parquet ({len(words)} words); refit it on this corpus"
        )
    k = B0.shape[1]
    blocks = list_blocks(corpus)
    alpha_vec = moment_alpha(A0) if alpha == "auto" else np.full(k, float(alpha))
    n_tokens = float(np.asarray(vocab.column("tf")).sum()) * (1.0 - heldout)
    lam = topics_from_model(B0, A0, n_tokens, eta)
    params = SweepParams(len(words), alpha_vec, heldout, inner_iterations, inner_tol)
    records: list[SweepRecord] = []
    with staged_output(model_path(root, name), overwrite=overwrite) as tmp:
        scratch = join(tmp, "_scratch")
        for d in (gamma_dir(scratch, 0), gamma_dir(scratch, 1), join(tmp, "doc_topics")):
            fs, path = get_fs(d)
            fs.makedirs(path, exist_ok=True)
        for s in range(1, sweeps + 1):
            t0 = time.perf_counter()
            # in the graph, not scattered: a task that must rerun after a worker died can always get it
            shared = dask.delayed(np.exp(dirichlet_expectation(lam, axis=0)), pure=True)
            gamma_in = None if s == 1 else gamma_dir(scratch, s - 1)
            with _progress.data_in_graph():
                (total,) = _progress.compute(sweep_tasks(blocks, params, shared, gamma_in, gamma_dir(scratch, s),
                                                         sweep=s))
            if total.n_docs == 0:
                raise StoreError(f"{corpus}: no training documents (every document is held out)")
            entering = math.nan if s == 1 else (total.bound + topic_bound(lam, eta)) / total.n_tokens
            new = eta + total.counts
            change = float(np.linalg.norm(new - lam) / np.linalg.norm(lam))
            lam = new
            counts = total.counts
            rec = SweepRecord(s, sweeps, entering, change, total.iterations / total.n_docs, time.perf_counter() - t0,
                              lam / lam.sum(axis=0, keepdims=True))
            records.append(rec)
            if on_sweep is not None:
                on_sweep(rec)
            if tol is not None and change < tol:
                break
        t0 = time.perf_counter()
        shared = dask.delayed(np.exp(dirichlet_expectation(lam, axis=0)), pure=True)
        with _progress.data_in_graph():
            (final,) = _progress.compute(finish_tasks(blocks, params, shared, gamma_dir(scratch, len(records)),
                                                  join(tmp, "doc_topics")))
        final_bound = (final.bound + topic_bound(lam, eta)) / final.n_tokens
        remove(scratch)
        B = lam / lam.sum(axis=0, keepdims=True)
        shown = display_words(corpus, words)
        write_file(join(tmp, "doc_topics", INFER_INFO), topic_info(name, B, np.zeros(0, dtype=np.int64), shown))
        A = final.topic_topic / final.topic_topic.sum() if final.topic_topic.sum() > 0 else np.full((k, k), 1 / k**2)
        p_word = counts.sum(axis=1) / counts.sum()
        # the bound entering sweep s+1 is the bound after sweep s; the last comes from the final pass
        after = [r.bound_per_word for r in records[1:]] + [final_bound]
        trace = {
            "bound_per_word": np.array(after),
            "relative_change": np.array([r.relative_change for r in records]),
            "inner_iterations": np.array([r.inner_iterations for r in records]),
            "seconds": np.array([r.seconds for r in records]),
        }
        zarr.open_group(zarr_store(tmp), mode="a", zarr_format=3)
        arrays = {"anchors": np.zeros(0, dtype=np.int64), "B": B, "A": A, "p_word": p_word, "alpha": alpha_vec,
                  "lambda": lam} | {f"trace/{key}": v for key, v in trace.items()}
        for key, values in arrays.items():
            write_array(tmp, key, values)
        attrs = {
            "schema_version": SCHEMA_VERSION,
            "name": name,
            "params": {"n_topics": k, "rectifier": "vb", "source": model, "sweeps": sweeps, "tol": tol,
                       "alpha": alpha, "eta": eta, "inner_iterations": inner_iterations, "inner_tol": inner_tol,
                       "heldout": heldout},
            "source": {"name": model, "rectifier": source.attrs.get("params", {}).get("rectifier")},
            "n_iter": len(records),
            "n_words": len(words),
            "vocab_hash": vocabulary_hash(words),
            "heldout_fraction": heldout,
            "training": {"n_docs": final.n_docs, "n_tokens": final.n_tokens},
            "bound_per_word": final_bound,
            "finish_seconds": time.perf_counter() - t0,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "versions": library_versions(),
        }
        zarr.open_group(zarr_store(tmp), mode="r+").attrs.update(attrs)
        ensure_model_group(root)  # only now: a failed run leaves no models group behind
    result = RefineResult(name, np.zeros(0, dtype=np.int64), B, A, np.full_like(A, np.nan),
                          shown, trace,
                          np.zeros(0), len(records), model_path(root, name), attrs, source=model, source_B=B0)
    write_topics(topics_path(root, name), result)
    return result
