"""``evaluate``: the paper's six measures (§4) for every model under a root → ``<root>/report/metrics.json``.

Each model is measured against the original ``C`` (``cooc.zarr``), as in the
paper (§4: ``B`` and ``A`` come from the rectified ``C``, the measures use the
original), and against its own rectified ``C``, labelled as such.
Only recovery, approximation and specificity involve ``C``; dominancy,
dissimilarity and coherence depend on the model (and the corpus's document
frequencies) alone, so they are the same under both labels.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from jsmf_dask import _progress, config
from jsmf_dask._validation import check_heldout, check_name
from jsmf_dask.cluster import Work, choose_engine
from jsmf_dask.exceptions import InvalidParameterError, StoreError
from jsmf_dask.io.damage import read_json_object
from jsmf_dask.io.fs import get_fs, join, write_file
from jsmf_dask.io.model_store import FittedModel, list_models, low_rank_rectified, open_model, stored_rectified
from jsmf_dask.io.parquet import corpus_dir, corpus_tokens, list_blocks, read_vocabulary
from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.io.zarr_store import CooccurrenceStore, cooc_path, open_cooccurrence, stored_heldout_fraction
from jsmf_dask.kernels.doc_split import DocumentSplit
from jsmf_dask.kernels.heldout import FOLD_IN_BURN_IN, FOLD_IN_DRAWS, PROBABILITY_FLOOR
from jsmf_dask.kernels.infer import model_prior
from jsmf_dask.kernels.metrics import (
    approximation,
    coherence,
    dissimilarity,
    dominancy,
    low_rank_partials,
    npmi_coherence,
    recovery,
    specificity,
    top_words,
)
from jsmf_dask.kernels.model_selection import paired_gap, ratio_se
from jsmf_dask.kernels.upper_sparse import symmetric_from_upper
from jsmf_dask.stages.evaluate import (
    DocumentScores,
    codoc_tasks,
    corpus_codoc_task,
    document_scores_tasks,
    fit_partials_tasks,
)

__all__ = ["evaluate", "METRICS", "metrics_path", "read_metrics", "TOP_WORDS", "heldout_perplexity",
           "heldout_document_scores",
           "document_prior", "top_word_codocs"]

METRICS = ("recovery", "approximation", "dominancy", "specificity", "dissimilarity", "coherence")
TOP_WORDS = 20


def metrics_path(root: str) -> str:
    """``<root>/report/metrics.json``."""
    return join(root, "report", "metrics.json")


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _has_anchors(model: FittedModel) -> bool:
    anchors = model.arrays.get("anchors")
    return bool(anchors is not None and anchors.size and (anchors >= 0).all())


def _against(source: StoredRows, model: FittedModel, block: int) -> dict[str, Any]:
    """Recovery, approximation, dominancy and specificity against one stored C."""
    B, A = model.arrays["B"], model.arrays["A"]
    anchors = model.arrays.get("anchors")
    has_anchors = _has_anchors(model)
    Cbar_S = W = None
    if has_anchors:
        rows = source.rows(anchors)
        p_S = rows.sum(axis=1)
        Cbar_S = rows / np.where(p_S > 0, p_S, 1.0)[:, None]
        W = model.arrays.get("weights")
    with _progress.data_in_graph():  # B's rows, B A and the anchors' rows of C̄: N × K each
        (parts, p), = _progress.compute(fit_partials_tasks(source, B, A, W=W if has_anchors else None,
                                                             Cbar_S=Cbar_S, block=block))
    return _measures(parts, p, model)


def _against_low_rank(U: np.ndarray, s: np.ndarray, E, model: FittedModel, p: np.ndarray | None = None,
                      note: str | None = None) -> dict[str, Any]:
    """The same measures against ``C = U diag(s) Uᵀ + E`` by exact algebra (:func:`low_rank_partials`);
    ``p`` overrides the row sums used by specificity."""
    has_anchors = _has_anchors(model)
    parts, p_low = low_rank_partials(U, s, E, model.arrays["B"], model.arrays["A"],
                                     model.arrays.get("weights") if has_anchors else None,
                                     model.arrays["anchors"] if has_anchors else None)
    out = _measures(parts, p_low if p is None else p, model)
    if note:
        out.setdefault("notes", {})["C"] = note
    return out


def _measures(parts, p: np.ndarray, model: FittedModel) -> dict[str, Any]:
    B, A = model.arrays["B"], model.arrays["A"]
    has_anchors = _has_anchors(model)
    dom, why = dominancy(A)
    out = {
        "recovery": _finite(recovery(parts)) if has_anchors else None,
        "approximation": approximation(parts, B, A),
        "dominancy": _finite(dom),
        "specificity": specificity(B, p),
    }
    notes = {}
    if not has_anchors:
        notes["recovery"] = ("the model has no anchor words (Gibbs sampling, variational Bayes): recovery is "
                             "undefined")
    if why:
        notes["dominancy"] = why
    return out | ({"notes": notes} if notes else {})


def top_word_codocs(store: CooccurrenceStore, blocks: list, top: np.ndarray) -> np.ndarray:
    """``D2[top[k]][:, top[k]]`` for each topic ``k`` (K×n×n): the co-document counts among its top words.

    Read from the store's ``D2`` by row blocks; a store without one (compressed,
    ``--no-codoc``) has them counted from the corpus's documents it counted.
    """
    words = np.unique(top)
    if store.has("D2"):
        (sub,) = _progress.compute(codoc_tasks(store.url, words, store.n_words,
                                               block=int(config.get("fit.recover-block"))))
    else:
        split = DocumentSplit(float(store.attrs.get("heldout_fraction", 0.0)),
                              float(store.attrs.get("validation_fraction", 0.0)))
        (sub,) = _progress.compute(corpus_codoc_task(blocks, words, store.n_words, split))
    pos = np.searchsorted(words, top)
    return sub[pos[:, :, None], pos[:, None, :]].astype(np.float64)


def document_prior(model: FittedModel) -> tuple[np.ndarray, str]:
    """The Dirichlet ``α`` used to infer a held-out document's ``θ`` under ``model``, and where it came from.

    Models that define one (refined, Gibbs) use theirs; a spectral model uses
    the Dirichlet moment-matched to its own ``A``.
    """
    return model_prior(model.arrays), "the model's" if "alpha" in model.arrays else "moment-matched to the model's A"


def _saw_heldout(model: FittedModel, fraction: float) -> str | None:
    """Why ``model`` cannot be scored on the documents held out at ``fraction`` (None when it can)."""
    trained = float(model.attrs.get("heldout_fraction", 0.0))
    if trained >= fraction:
        return None
    return (f"model {model.name!r} was trained with held-out fraction {trained}, so it saw some of the documents "
            f"held out at {fraction}; refit it on a store built with `jsmf cooccur --heldout {fraction}`")


def heldout_document_scores(root: str, names: list[str], fraction: float, *,
                            fold_ins: tuple[str, ...] = ("vb",)) -> dict[str, DocumentScores]:
    """Document completion of every held-out document (doc_id hash below ``fraction``) under each model in
    ``names`` with its own document prior (:func:`document_prior`): per document, in one order for all, under each
    fold-in of ``fold_ins`` (how each document's ``θ`` is inferred:
    :func:`~jsmf_dask.kernels.heldout.document_completion`), keyed by it; the corpus is read once."""
    models = {}
    for name in names:
        model = open_model(root, name)
        models[name] = (model.arrays["B"], document_prior(model)[0])
    return _heldout_scores(root, models, fraction, fold_ins)


def _heldout_scores(root: str, models: dict[str, tuple[np.ndarray, np.ndarray]], fraction: float,
                    fold_ins: tuple[str, ...]) -> dict[str, DocumentScores]:
    """:func:`heldout_document_scores` of models given as ``name -> (B, alpha)``."""
    corpus = corpus_dir(root)
    with _progress.data_in_graph():  # every model's B
        (scores,) = _progress.compute(document_scores_tasks(list_blocks(corpus), read_vocabulary(corpus).num_rows,
                                                            DocumentSplit(heldout=fraction), models,
                                                            which="heldout", fold_ins=fold_ins))
    if scores[fold_ins[0]].n_tokens.sum() == 0:
        raise StoreError(f"{corpus}: no held-out document at fraction {fraction}")
    return scores


def _perplexities(scores: DocumentScores) -> dict[str, dict]:
    """Each model's log likelihood per token, perplexity with its standard error and, among two or more, its
    gap to the best model's log likelihood with the paired standard error."""
    n = scores.n_tokens
    per_word = {name: float(L.sum() / n.sum()) for name, L in scores.log_likelihood.items()}
    finite = [name for name in per_word if math.isfinite(per_word[name])]
    best = max(finite, key=per_word.get) if len(finite) > 1 else None
    out = {}
    for name, L in scores.log_likelihood.items():
        entry = {"log_likelihood_per_word": per_word[name], "perplexity": math.exp(-per_word[name]),
                 "perplexity_se": math.exp(-per_word[name]) * ratio_se(L, n)}
        if best is not None and name in finite:
            gap, se = paired_gap(scores.log_likelihood[best], L, n)
            entry |= {"best_model": best, "loglik_gap_to_best": gap, "loglik_gap_se": se if name != best else 0.0}
        out[name] = entry
    return out


def heldout_perplexity(root: str, names: list[str], fraction: float, *, strict: bool,
                       sampled_fold_in: bool = True) -> dict[str, dict]:
    """Document-completion log likelihood and perplexity of each model on the held-out documents.

    Each entry also has the standard error of the model's perplexity over the
    documents and, when two or more models are scored, the gap of its log
    likelihood per token to the best model's with the *paired* standard error
    (the same documents score every model, so the gap is far less noisy than
    either score: a gap within about two of its standard errors is no measured
    difference). ``θ`` of a document's observed half is the VB fold-in's and,
    with ``sampled_fold_in``, also the exact posterior mean's by Gibbs
    sampling: those figures under ``"sampled_fold_in"``
    (:func:`~jsmf_dask.kernels.heldout.document_completion`). A model trained
    with a smaller held-out fraction saw some of these documents: with
    ``strict`` that is an error, otherwise its entry is null with the reason.
    """
    out: dict[str, dict] = {}
    priors: dict[str, str] = {}
    scored: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in names:
        model = open_model(root, name)
        why = _saw_heldout(model, fraction)
        if why:
            if strict:
                raise InvalidParameterError(why)
            out[name] = {"log_likelihood_per_word": None, "perplexity": None, "notes": why}
            continue
        alpha, priors[name] = document_prior(model)
        scored[name] = (model.arrays["B"], alpha)
    if not scored:
        return out
    by_fold_in = _heldout_scores(root, scored, fraction, ("vb", "sampled") if sampled_fold_in else ("vb",))
    scores = by_fold_in["vb"]
    sampled = _perplexities(by_fold_in["sampled"]) if sampled_fold_in else {}

    def finite(entry: dict) -> dict:
        return {key: (_finite(v) if isinstance(v, float) else v) for key, v in entry.items()}

    for name, entry in _perplexities(scores).items():
        entry |= {"n_docs": int(scores.n_tokens.size), "n_tokens": int(round(scores.n_tokens.sum())),
                  "n_floored": int(scores.n_floored[name]), "document_prior": priors[name]}
        if name in sampled:
            entry["sampled_fold_in"] = finite(sampled[name])
        out[name] = finite(entry)
    return {name: out[name] for name in names}


def evaluate(root: str, *, models: list[str] | None = None, heldout: float | None = None,
             sampled_fold_in: bool = True) -> dict[str, Any]:
    """Measure every model (or ``models``) under ``root`` and write ``<root>/report/metrics.json``.

    Parameters
    ----------
    root : str
    models : list of str, optional
        Model names (default: all under ``<root>/model.zarr``).
    heldout : float, optional
        Held-out fraction for the document-completion perplexity (default:
        the fraction ``cooc.zarr`` was built with; none when it has none).
        Given explicitly, a model trained on any of those documents is an
        error; taken from the store, its entry is null with the reason.
    sampled_fold_in : bool, default=True
        Also score the held-out documents with ``θ`` the exact posterior mean
        by Gibbs sampling (``heldout.sampled_fold_in``), beside the VB fold-in's
        (:func:`~jsmf_dask.kernels.heldout.document_completion`). The two rank
        models differently on short documents (the definitions say how).

    Returns
    -------
    dict
        What was written: ``{"models": {name: {...}}, "definitions": {...}}``.
        NaN values are written as null with the reason under ``notes``.
    """
    for name in models or ():
        check_name(name, "models", "evaluate")
    root = os.fspath(root)
    strict = heldout is not None
    fraction = check_heldout(heldout, "evaluate") if strict else stored_heldout_fraction(root)
    store = open_cooccurrence(cooc_path(root))
    choose_engine(Work(tokens=corpus_tokens(corpus_dir(root))))
    names = list_models(root) if models is None else list(models)
    if not names:
        raise StoreError(f"{root}: no fitted models under model.zarr; run `jsmf fit` first")
    if strict:  # refuse before measuring anything
        for name in names:
            if why := _saw_heldout(open_model(root, name), fraction):
                raise InvalidParameterError(why)
    block = int(config.get("fit.recover-block"))
    D1 = store.D1[:].astype(np.float64)
    n_docs = max(int(store.attrs.get("n_docs", 0)), 1)  # the documents C, D1 and D2 counted
    blocks = list_blocks(corpus_dir(root))
    results: dict[str, Any] = {}
    for name in names:
        model = open_model(root, name)
        B = model.arrays["B"]
        if B.shape[0] != store.n_words:
            raise StoreError(f"{model.url}: B has {B.shape[0]} words but {store.url} has {store.n_words}")
        top = top_words(B, TOP_WORDS)
        shared: dict[str, Any] = {"dissimilarity": dissimilarity(top)}
        D2_top = top_word_codocs(store, blocks, top)
        shared["coherence"] = coherence(top, D1, D2_top, form="paper")
        shared["coherence_mimno"] = coherence(top, D1, D2_top, form="mimno")
        shared["npmi"] = npmi_coherence(top, D1, D2_top, n_docs)
        if store.compressed:
            values, vectors = store.eigenpairs(store.rank)
            original = _against_low_rank(
                vectors, values, None, model, p=store.read("row_sums"),
                note=f"recovery and approximation against the rank-{store.rank} compression of C that "
                     f"{store.url} stores (exact algebra; the N x N C is never formed); specificity from C's "
                     "exact row sums")
        else:
            original = _against(StoredRows(store.url), model, block)
        entry: dict[str, Any] = {
            "n_topics": int(B.shape[1]),
            "rectifier": model.attrs.get("params", {}).get("rectifier"),
            "original_C": original | shared,
        }
        if "anchor_words" in model.attrs:  # its rectified C is the anchor vocabulary's block alone
            entry["notes"] = {"rectified_C": f"fitted on an anchor vocabulary of {model.attrs['anchor_words']['n']} "
                                             "words: its rectified C is their block's, not every word's"}
        elif model.has("correction"):  # AP, ENN: C_rect = Y diag(λ⁺) Yᵀ + E + r·11ᵀ
            U, s, upper = low_rank_rectified(model)
            entry["rectified_C"] = _against_low_rank(U, s, symmetric_from_upper(*upper, U.shape[0]), model) | shared
        elif "rectified" in model.attrs:  # the Baseline, DC: the store's C, scaled (DC: another diagonal)
            try:
                entry["rectified_C"] = _against(stored_rectified(model), model, block) | shared
            except StoreError as err:  # the store changed since the fit: no rectified C to measure against
                entry["notes"] = {"rectified_C": str(err)}
        results[name] = entry
    if fraction > 0:
        for name, entry in heldout_perplexity(root, names, fraction, strict=strict,
                                              sampled_fold_in=sampled_fold_in).items():
            results[name]["heldout"] = entry
    out = {
        "heldout_fraction": fraction,
        "models": results,
        "definitions": {
            "recovery": "(1/N) sum_i ||Cbar_i - sum_k p(z=k|x=i) Cbar_{s_k}||_2",
            "approximation": "||C - B A B^T||_F (C divided by its sum)",
            "dominancy": "(1/K) sum_k A_kk / sum_l A_kl",
            "specificity": "(1/K) sum_k KL(B_k || p(X)) in bits, p floored at machine epsilon",
            "dissimilarity": f"mean number of a topic's top-{TOP_WORDS} words in no other topic's top-{TOP_WORDS}",
            "coherence": f"(1/K) sum_k sum over ordered pairs x1 != x2 of the top-{TOP_WORDS} of "
                         "log((D2(x1,x2) + 0.01) / D1(x2)) (the paper's formula)",
            "coherence_mimno": "the form of Mimno et al. 2011 used by the authors' code: pairs i < j by rank, "
                               "D1 of the higher-ranked word",
            "npmi": f"(1/K) sum_k mean over unordered pairs x != y of the top-{TOP_WORDS} of "
                    "log(P(x,y) / (P(x) P(y))) / -log P(x,y), P from D1 and D2 over the documents C counted "
                    "(Lau et al. 2014); -1 for a pair in no common document. Unlike coherence it does not favour "
                    "frequent top words",
            "original_C": "measured against cooc.zarr's C (the paper's measures); B and A are the model's",
            "rectified_C": "measured against the model's rectified C (AP, ENN: its low-rank form; the Baseline, "
                           "DC: cooc.zarr's C divided by the model's scale, DC's diagonal)",
            "heldout": "document completion on the held-out documents (doc_id hash below heldout_fraction): "
                       "theta inferred by variational Bayes under the model's B and document prior from a random "
                       "half of each document's tokens, log sum_k theta_k B_wk of the other half per token "
                       f"(floored at {PROBABILITY_FLOOR}); perplexity = exp(-log likelihood per token)",
            "heldout_sampled_fold_in": "the same with theta the exact posterior mean given the observed half (under "
                                       "the model's B and document prior), estimated by Gibbs sampling: "
                                       f"{FOLD_IN_BURN_IN} passes discarded, then {FOLD_IN_DRAWS} averaged "
                                       "(Rao-Blackwellised). Variational Bayes's mean field keeps no trace of how a "
                                       "short document's tokens gather in few topics, and understates the "
                                       "predictive probability of sharp topics most",
            "heldout_errors": "perplexity_se: the standard error of the perplexity over the held-out documents "
                              "(ratio estimator, first order); loglik_gap_to_best: the best model's log likelihood "
                              "per token minus this one's, loglik_gap_se its standard error from the per-document "
                              "differences (paired: every model scores the same documents)",
        },
    }
    write_file(metrics_path(root), json.dumps(out, indent=2, allow_nan=False), root=root)
    return out


def read_metrics(root: str) -> dict[str, Any]:
    """``<root>/report/metrics.json`` as written by :func:`evaluate`."""
    url = metrics_path(root)
    fs, path = get_fs(url)
    if not fs.exists(path):
        raise StoreError(f"{url}: no metrics; run `jsmf evaluate {root}` first")
    metrics = read_json_object(url, f"run `jsmf evaluate {root}` again")
    if not isinstance(metrics.get("models", {}), dict):
        raise StoreError(f"{url}: not the metrics `jsmf evaluate` writes; run `jsmf evaluate {root}` again")
    return metrics
