"""``refine``: CVB0 or variational Bayes for LDA started from a fitted model → ``<root>/model.zarr/<name>``.

The spectral model's ``B`` (and ``A``) give the starting expected word–topic
counts ``W = n_tokens · B · diag(p(k))``; each sweep is one pass over the
Parquet row groups (:mod:`jsmf_dask.stages.refine`) whose tree sum is the next
``W``: batch CVB0 (:mod:`jsmf_dask.kernels.collapsed`, the default) or batch
variational Bayes (:mod:`jsmf_dask.kernels.variational`, ``λ = η + W``).
Between sweeps the driver updates learned priors (Minka's fixed points) and
checks the stops (``tol``, the validation documents' perplexity). The result
is stored like any other model (``B`` = ``W + η`` with normalised columns,
``A`` from the documents' expected topic counts, no anchors), so
``evaluate``, ``compare``, ``report`` and ``infer`` read it unchanged; it
also holds ``alpha``, ``lambda`` (``W + η``), a per-sweep trace and each
training document's topic weights under ``doc_topics/``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import dask
import numpy as np
import zarr

from jsmf_dask import _progress
from jsmf_dask._validation import check_heldout, check_name, check_validation
from jsmf_dask.parameters import parameter
from jsmf_dask.exceptions import ConvergenceWarning, InvalidParameterError, StoreError
from jsmf_dask.io.fs import get_fs, join, refuse_existing, remove, staged_output, write_file
from jsmf_dask.io.model_store import ensure_model_group, model_path, open_model, write_array
from jsmf_dask.io.parquet import corpus_dir, corpus_nnz, corpus_tokens, display_words, list_blocks, read_vocabulary, vocabulary_hash
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.zarr_store import cooc_path, stored_heldout_fraction, stored_validation_fraction, zarr_store
from jsmf_dask.kernels.metrics import topic_changes
from jsmf_dask.kernels.collapsed import collapsed_topics, learn_eta, minka_alpha_step
from jsmf_dask.kernels.heldout import DocumentSplit
from jsmf_dask.kernels.variational import (
    dirichlet_expectation,
    moment_alpha,
    topic_bound,
    topic_shares,
    topics_from_model,
)
from jsmf_dask.io.provenance import library_versions
from jsmf_dask.pipeline.evaluate import document_prior
from jsmf_dask.pipeline.fit_model import FitResult, write_topics
from jsmf_dask.pipeline.infer import INFER_INFO, topic_info
from jsmf_dask.stages.refine import METHODS, SweepParams, finish_tasks, gamma_dir, prepare_tasks, sweep_tasks
from jsmf_dask.cluster import Work, choose_engine, total_memory

__all__ = ["refine", "RefineResult", "SweepRecord", "default_refined_name", "change_line", "METHODS"]


def default_refined_name(source: str, method: str = "cvb0") -> str:
    """``<source>-<method>``."""
    return f"{source}-{method}"


#: Refine stops when ``PATIENCE`` sweeps improve the best validation perplexity before them by less than
#: ``IMPROVEMENT`` (relative). On the NIPS papers (K = 20) CVB0's curve falls 1891 → 1805 → 1789 → 1785 → 1780
#: at sweeps 0 / 10 / 20 / 30 / 50: 0.1% over three sweeps is reached near sweep 25, most of the gain.
PATIENCE = 3
IMPROVEMENT = 1e-3
#: Minka's statistics for a learned α are summed over about this many training documents (a sample by id
#: beyond it: they cost as much as the update itself, and the ratio they feed is settled long before).
ALPHA_SAMPLE_DOCS = 20000
#: The validation documents are scored on a sample of about this many (by id; all of them below it): the
#: stop compares one set's scores from sweep to sweep, and the scorer's fold-in costs a third of a CVB0
#: sweep at 5,000 validation documents (100k × K 50).
VALIDATION_SCORED_DOCS = 2000


@dataclass
class SweepRecord:
    """One sweep as reported to ``on_sweep`` and stored in the trace."""

    sweep: int
    of: int
    bound_per_word: float  # VB: bound; CVB0: training log likelihood, per token, of the state entering the sweep
    relative_change: float
    inner_iterations: float  # mean per document
    seconds: float
    validation_perplexity: float  # of the state entering this sweep (NaN without validation documents)
    alpha_sum: float  # α₀ used in this sweep
    eta: float  # η used in this sweep
    topics: np.ndarray | None = None  # B after this sweep, N×K

    def line(self) -> str:
        valid = "" if math.isnan(self.validation_perplexity) else \
            f"validation perplexity {self.validation_perplexity:.1f} before it, "
        return (f"refine sweep {self.sweep}/{self.of}: {valid}relative change {self.relative_change:.3g}, "
                f"alpha sum {self.alpha_sum:.3g}, eta {self.eta:.3g}, "
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


def _check_params(method, sweeps, tol, alpha, eta, inner_iterations) -> None:
    for key, value in (("method", method), ("sweeps", sweeps), ("tol", tol), ("alpha", alpha), ("eta", eta),
                       ("inner_iterations", inner_iterations)):
        parameter("refine", key).check(value, "refine")


def refine(
    root: str,
    *,
    model: str,
    method: str = "cvb0",
    sweeps: int = 50,
    tol: float | None = 1e-4,
    alpha: float | str = "auto",
    eta: float | str = 0.05,
    name: str | None = None,
    heldout: float | None = None,
    validation: float | None = None,
    inner_iterations: int = 3,
    inner_tol: float = 1e-3,
    overwrite: bool = False,
    on_sweep: Callable[[SweepRecord], None] | None = None,
) -> RefineResult:
    """Refine model ``model`` of ``root`` by batch CVB0 or variational Bayes for LDA.

    Parameters
    ----------
    root : str
        Run root holding ``corpus/`` and the model.
    model : str
        The model to start from (its ``B`` and ``A``).
    method : {'cvb0', 'vb'}, default='cvb0'
        Zero-order collapsed variational Bayes (:mod:`jsmf_dask.kernels.collapsed`)
        or variational Bayes (:mod:`jsmf_dask.kernels.variational`) (see the
        README for the measurements behind the default).
    sweeps : int, default=50
        Passes over the corpus at most.
    tol : float or None, default=1e-4
        Stop earlier when the relative change (Frobenius) of the word–topic
        counts falls below it; None: no such stop.
    alpha : 'auto' or float, default='auto'
        Document–topic prior: a float is a symmetric prior; ``'auto'`` learns
        an asymmetric one (one value per topic) by Minka's fixed point between
        sweeps, started from a Dirichlet with the topics' shares of the words as
        its mean and the concentration moment-matched to the source model's ``A``.
        The start's word–topic counts weigh each topic by the same shares
        (:func:`~jsmf_dask.kernels.variational.topic_shares`).
    eta : 'auto' or float, default=0.05
        Symmetric topic–word prior; ``'auto'`` learns it by Minka's fixed point
        between sweeps.
    name : str, optional
        Output model (default ``<model>-<method>``).
    heldout : float, optional
        Leave out the documents whose id hashes below this fraction (default:
        the fraction ``cooc.zarr`` was built with, so every model of the root
        is trained on the same documents).
    validation : float, optional
        Stop by the validation documents (those whose id hashes at or above
        ``1 − validation``, never held-out ones): they are left out of the
        sweeps and scored by document completion in each sweep, and refine
        stops when their perplexity has not improved for :data:`PATIENCE`
        sweeps. Default: the fraction ``cooc.zarr`` left out
        (``jsmf cooccur --validation``), none when it left out none; another
        non-zero value is an error (the spectral model saw those documents,
        so their score would flatter it); 0 turns it off.
    inner_iterations : int, default=3
        Updates per document and sweep at most (the documents' state is kept
        between sweeps, so a few suffice).
    inner_tol : float, default=1e-3
        A document stops when the mean change of its topic counts falls below this.
    overwrite : bool, default=False
    on_sweep : callable, optional
        Called with a :class:`SweepRecord` after each sweep (progress).

    Returns
    -------
    RefineResult
    """
    root = os.fspath(root)
    check_name(model, "model", "refine")
    check_name(name, "name", "refine", allow_none=True)
    heldout = stored_heldout_fraction(root) if heldout is None else check_heldout(heldout, "refine")
    stored_validation = stored_validation_fraction(root)
    validation = stored_validation if validation is None else check_validation(validation, heldout, "refine")
    if validation and validation != stored_validation:
        raise InvalidParameterError(
            f"The 'validation' parameter of refine ({validation}) asks to stop by documents that {cooc_path(root)} "
            f"counted (it leaves out {stored_validation or 'none'}): the model refine starts from saw them, so their "
            f"score would flatter it; rebuild C with `jsmf cooccur --validation {validation}` (or pass validation=0)")
    _check_params(method, sweeps, tol, alpha, eta, inner_iterations)
    name = name or default_refined_name(model, method)
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
    choose_engine(Work(tokens=corpus_tokens(corpus)))
    n_rows = sum(b.n_rows for b in blocks)
    # each topic's share of the tokens as B0 explains the word frequencies: positive for every topic, where
    # A0's row sums (the anchors' block of C̄) can leave a topic with none, which refine could never revive
    shares = topic_shares(B0, source.arrays.get("p_word"), A0)
    alpha_vec = moment_alpha(A0, mean=shares) if alpha == "auto" else np.full(k, float(alpha))
    eta_now = 0.01 if eta == "auto" else float(eta)
    n_tokens = float(np.asarray(vocab.column("tf")).sum()) * (1.0 - heldout - validation)
    counts = topics_from_model(B0, shares, n_tokens, 0.0)  # the start: expected counts of the spectral model
    params = SweepParams(len(words), method, alpha_vec, eta_now, DocumentSplit(heldout, validation), inner_iterations,
                         inner_tol,
                         learn_alpha=alpha == "auto" and method == "cvb0",
                         alpha_sample=_sample_fraction(ALPHA_SAMPLE_DOCS, n_rows * (1.0 - heldout - validation)),
                         validation_sample=_sample_fraction(VALIDATION_SCORED_DOCS, n_rows * validation))
    records: list[SweepRecord] = []
    stopped = "sweeps"
    best = (math.inf, 0, counts, params)  # validation perplexity, sweep entering it, the state it scored
    best_sweep = None
    with staged_output(model_path(root, name), root=root, overwrite=overwrite) as tmp, \
            _prepared_blocks(blocks, params, corpus_nnz(corpus)) as prepared:
        scratch = join(tmp, "_scratch")
        for d in (gamma_dir(scratch, 0), gamma_dir(scratch, 1), join(tmp, "doc_topics")):
            fs, path = get_fs(d)
            fs.makedirs(path, exist_ok=True)
        for s in range(1, sweeps + 1):
            t0 = time.perf_counter()
            gamma_in = None if s == 1 else gamma_dir(scratch, s - 1)
            with _progress.data_in_graph():
                (total,) = _progress.compute(sweep_tasks(prepared(), params, _shared(method, counts, params.eta),
                                                         gamma_in, gamma_dir(scratch, s), sweep=s))
            if total.n_docs == 0:
                raise StoreError(f"{corpus}: no training documents (every document is held out or validation)")
            if method == "vb":
                lam = params.eta + counts
                entering = math.nan if s == 1 else (total.bound + topic_bound(lam, params.eta)) / total.n_tokens
            else:
                entering = total.bound / total.n_tokens
            change = float(np.linalg.norm(total.counts - counts) / np.linalg.norm(counts))
            if _perplexity(total) < best[0]:  # this sweep scored the state it entered with
                best = (_perplexity(total), s, counts, params)
            counts = total.counts
            rec = SweepRecord(s, sweeps, entering, change, total.iterations / total.n_docs,
                              time.perf_counter() - t0, _perplexity(total), float(params.alpha.sum()), params.eta,
                              collapsed_topics(counts, params.eta))
            records.append(rec)
            if on_sweep is not None:
                on_sweep(rec)
            params = _learned_priors(params, total, counts, alpha, eta)
            if tol is not None and change < tol:
                stopped = "tol"
                break
            if _stopped_improving([r.validation_perplexity for r in records]):
                stopped = "validation"
                # the sweeps since the best state only made the validation documents worse: return that state
                _, best_sweep, counts, params = best
                break
        if best_sweep is None:
            best_sweep = len(records) + 1
        t0 = time.perf_counter()
        with _progress.data_in_graph():
            start = dask.delayed((B0, document_prior(source)[0]), pure=True)
            (final,) = _progress.compute(finish_tasks(blocks, params, _shared(method, counts, params.eta), start,
                                                      gamma_dir(scratch, len(records)), join(tmp, "doc_topics")))
        if method == "vb":
            final_bound = (final.bound + topic_bound(params.eta + counts, params.eta)) / final.n_tokens
        else:
            final_bound = final.bound / final.n_tokens
        remove(scratch, root=root)
        B = collapsed_topics(counts, params.eta)  # W + η, columns normalised: CVB0's φ and VB's mean of λ alike
        shown = display_words(corpus, words)
        write_file(join(tmp, "doc_topics", INFER_INFO), topic_info(name, B, np.zeros(0, dtype=np.int64), shown),
                   root=root)
        A = final.topic_topic / final.topic_topic.sum() if final.topic_topic.sum() > 0 else np.full((k, k), 1 / k**2)
        p_word = counts.sum(axis=1) / counts.sum()
        validation_curve = [r.validation_perplexity for r in records] + [_perplexity(final)]
        heldout_scores = [math.exp(-ll / final.heldout_tokens) if final.heldout_tokens else math.nan
                          for ll in (final.heldout_loglik if final.heldout_loglik is not None else (0.0, 0.0))]
        if final.heldout_tokens:
            warning = _worse_than_start(heldout_scores[1], heldout_scores[0], model, method, "held-out")
        else:  # no held-out split: the validation documents (unseen by the start too) tell the same
            warning = _worse_than_start(validation_curve[0], validation_curve[-1], model, method, "validation")
        # the bound entering sweep s+1 is the bound after sweep s; the last comes from the final pass
        after = [r.bound_per_word for r in records[1:]] + [final_bound]
        trace = {
            "bound_per_word": np.array(after),
            "relative_change": np.array([r.relative_change for r in records]),
            "inner_iterations": np.array([r.inner_iterations for r in records]),
            "seconds": np.array([r.seconds for r in records]),
            "validation_perplexity": np.array(validation_curve),  # entering sweep 1, 2, …, then the final state
            "alpha_sum": np.array([r.alpha_sum for r in records]),
            "eta": np.array([r.eta for r in records]),
        }
        zarr.open_group(zarr_store(tmp), mode="a", zarr_format=3)
        arrays = {"anchors": np.zeros(0, dtype=np.int64), "B": B, "A": A, "p_word": p_word, "alpha": params.alpha,
                  "lambda": params.eta + counts} | {f"trace/{key}": v for key, v in trace.items()}
        for key, values in arrays.items():
            write_array(tmp, key, values)
        attrs = {
            "schema_version": SCHEMA_VERSION,
            "name": name,
            "params": {"n_topics": k, "rectifier": method, "method": method, "source": model, "sweeps": sweeps,
                       "tol": tol, "alpha": alpha, "eta": eta, "inner_iterations": inner_iterations,
                       "inner_tol": inner_tol, "heldout": heldout, "validation": validation},
            "source": {"name": model, "rectifier": source.attrs.get("params", {}).get("rectifier")},
            "n_iter": len(records),
            "stopped": stopped,
            # the state returned: entering this sweep (len(records) + 1: after the last one)
            "returned_state": best_sweep,
            "eta": params.eta,
            "n_words": len(words),
            "vocab_hash": vocabulary_hash(words),
            "heldout_fraction": heldout,
            "validation_fraction": validation,
            "training": {"n_docs": final.n_docs, "n_tokens": final.n_tokens},
            "validation": {"n_docs": final.valid_docs, "n_tokens": final.valid_tokens,
                           "sample": params.validation_sample,
                           "start_perplexity": _nan_to_none(validation_curve[0]),
                           "final_perplexity": _nan_to_none(validation_curve[-1])},
            "heldout": {"n_tokens": final.heldout_tokens, "start_perplexity": _nan_to_none(heldout_scores[1]),
                        "final_perplexity": _nan_to_none(heldout_scores[0])},
            "warnings": [warning] if warning else [],
            "bound_per_word": final_bound,
            "finish_seconds": time.perf_counter() - t0,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "versions": library_versions(),
        }
        zarr.open_group(zarr_store(tmp), mode="r+").attrs.update(attrs)
        ensure_model_group(root)  # only now: a failed run leaves no models group behind
    if warning:
        warnings.warn(warning, ConvergenceWarning, stacklevel=2)
    result = RefineResult(name, np.zeros(0, dtype=np.int64), B, A, np.full_like(A, np.nan),
                          shown, trace,
                          np.zeros(0), len(records), model_path(root, name), attrs, source=model, source_B=B0)
    write_topics(root, name, result)
    return result


def _shared(method: str, counts: np.ndarray, eta: float):
    """The arrays every task of a sweep reads, in the graph (a task that must rerun can always get them):
    what the method updates from (CVB0: ``W``; VB: ``exp(E[log β])`` of ``λ = η + W``) and the topics the
    validation documents are scored under."""
    update_from = counts if method == "cvb0" else np.exp(dirichlet_expectation(eta + counts, axis=0))
    return dask.delayed((update_from, collapsed_topics(counts, eta)), pure=True)


def _sample_fraction(wanted: int, expected: float) -> float:
    """The fraction of ``expected`` documents that samples about ``wanted`` of them (1 when there are fewer)."""
    return min(1.0, wanted / max(1.0, expected))


def _perplexity(total) -> float:
    return math.exp(-total.valid_loglik / total.valid_tokens) if total.valid_tokens else math.nan


def _nan_to_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def _learned_priors(params: SweepParams, total, counts: np.ndarray, alpha, eta) -> SweepParams:
    """The next sweep's priors: one Minka step for ``α`` (CVB0's statistics), Minka's fixed point for ``η``."""
    new_alpha, new_eta = params.alpha, params.eta
    if alpha == "auto" and total.prior_sums is not None:
        new_alpha = minka_alpha_step(params.alpha, total.prior_sums)
    if eta == "auto":
        new_eta = learn_eta(counts, params.eta, max_iter=100, tol=1e-6)
    return replace(params, alpha=new_alpha, eta=new_eta)


#: Share of the memory the graphs can hold (:func:`~jsmf_dask.cluster.total_memory`) that the corpus's prepared
#: blocks may take to be kept between sweeps; bytes a non-zero of the corpus takes there, with room (measured on
#: lda-20k: 16, the CSR's int64 counts and columns, the ids' hashes and the validation documents' halves).
PREPARED_MEMORY_SHARE = 0.25
PREPARED_BYTES_PER_NONZERO = 24


@contextlib.contextmanager
def _prepared_blocks(blocks: list, params: SweepParams, nnz: int) -> Iterator[Callable[[], list]]:
    """Yield what gives each sweep its blocks' :class:`~jsmf_dask.stages.refine.PreparedBlock` tasks.

    When the corpus's prepared blocks fit in :data:`PREPARED_MEMORY_SHARE` of
    the memory the graphs can hold, they are computed once and kept (persisted)
    for every sweep: no sweep reads Parquet, splits documents or hashes their ids
    again (12–15% of a sweep at 20k documents). Otherwise each sweep reads its
    blocks again, as out-of-core work must. The results are the same either way.
    """
    if nnz * PREPARED_BYTES_PER_NONZERO > PREPARED_MEMORY_SHARE * total_memory(_progress.active_client()):
        yield lambda: prepare_tasks(blocks, params)
        return
    kept = list(_progress.persist(*prepare_tasks(blocks, params)))
    try:
        yield lambda: kept
    finally:
        kept.clear()  # released on the workers when no reference remains


def _stopped_improving(curve: list[float]) -> bool:
    """True when the last :data:`PATIENCE` validation scores improved on the best before them by less than
    :data:`IMPROVEMENT` (relative)."""
    if len(curve) <= PATIENCE or math.isnan(curve[0]):
        return False
    best_before = min(curve[:-PATIENCE])
    return min(curve[-PATIENCE:]) > best_before * (1.0 - IMPROVEMENT)


def _worse_than_start(start: float, final: float, model: str, method: str, which: str) -> str | None:
    """The warning to give when the refined topics' held-out (else validation) perplexity ends above the
    source model's by more than the stopping rule's resolution (:data:`IMPROVEMENT`, relative: a smaller change
    is no measured difference). No choice of the fit depends on the held-out comparison, so those documents stay
    unseen."""
    if math.isnan(start) or math.isnan(final) or final <= start * (1 + IMPROVEMENT):
        return None
    return (f"refine ({method}) ended with {which} perplexity {final:.1f}, above {start:.1f} of the topics of "
            f"{model!r} it started from: the refined model is worse on unseen documents; try alpha='auto', "
            f"fewer sweeps (--sweeps), another --method, or keep {model!r}")
