"""``report``: ``<root>/report/report.html`` (self-contained) and its figures as PNGs beside it.

Sections: the topics (anchor marked), the metric table (from
``metrics.json``; :func:`~jsmf_dask.pipeline.evaluate.evaluate` runs first
if it is missing or stale), the analogue of the paper's Figure 1 (2-D PCA of
``C̄``'s rows with the anchors and their convex hull, original and rectified),
of Figure 3 (the topic–topic matrices: the Baseline's least-squares ``A``, the
unrectified diagonal ``A``, the rectified ``A``), the AP trace, and the
``compare`` sweep when one has been run.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os

import numpy as np

from jsmf_dask import _progress
from jsmf_dask.cluster import Work, choose_engine
from jsmf_dask._validation import check_name
from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.fs import get_fs, join, write_file
from jsmf_dask.io.model_store import FittedModel, list_models, low_rank_rectified, open_model, stored_rectified
from jsmf_dask.io.parquet import corpus_dir, corpus_tokens, display_words, read_vocabulary
from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.io.zarr_store import cooc_path, open_cooccurrence
from jsmf_dask.kernels.law import law_coordinates, principal_coordinates
from jsmf_dask.kernels.lowrank import LowRankCooccurrence
from jsmf_dask.kernels.upper_sparse import symmetric_from_upper
from jsmf_dask.kernels.metrics import top_words, topic_changes
from jsmf_dask.kernels.recover import topic_topic
from jsmf_dask.pipeline.evaluate import METRICS, evaluate, metrics_path, read_metrics
from jsmf_dask.pipeline.fit_model import change_line, word_separator
from jsmf_dask.pipeline.refine import METHODS as REFINE_METHODS
from jsmf_dask.render import figures
from jsmf_dask.render.page import Marked, Section, report_html, table_html
from jsmf_dask.stages.evaluate import pca_coordinates

__all__ = ["report", "report_dir", "report_model"]


def report_dir(root: str) -> str:
    """``<root>/report``."""
    return join(root, "report")


def _pick(models: dict[str, FittedModel], wanted: str | None, rectifier: str, k: int | None = None) -> str | None:
    if wanted is not None:
        if wanted not in models:
            raise StoreError(f"no model named {wanted!r}; fitted models: {sorted(models)}")
        return wanted
    for name, m in models.items():
        if m.attrs.get("params", {}).get("rectifier") == rectifier and (k is None or m.arrays["B"].shape[1] == k):
            return name
    return None


def _default_model(models: dict[str, FittedModel]) -> str:
    """The model a report shows by default: a rectified (AP, else DC) model that has a Baseline of the same K
    to compare with, else the first rectified model, else the first model."""
    def k_of(m: FittedModel) -> int:
        return m.arrays["B"].shape[1]

    baselines = {k_of(m) for m in models.values() if m.attrs.get("params", {}).get("rectifier") == "none"}
    for rectifier in ("ap", "dc"):
        for name, m in models.items():
            if m.attrs.get("params", {}).get("rectifier") == rectifier and k_of(m) in baselines:
                return name
    return _pick(models, None, "ap") or _pick(models, None, "dc") or next(iter(models))


def report_model(root: str) -> str:
    """The model ``report`` shows when none is named (see :func:`_default_model`)."""
    names = list_models(root)
    if not names:
        raise StoreError(f"{root}: no fitted models under model.zarr; run `jsmf fit` first")
    return _default_model({n: open_model(root, n) for n in names})


def _topics_table(model: FittedModel, words: list[str], anchors: np.ndarray | None = None) -> str:
    """Topics with their anchor words (``anchors``: those of the model a refined model came from)."""
    B = model.arrays["B"]
    anchors = model.arrays.get("anchors", np.zeros(0, dtype=np.int64)) if anchors is None else anchors
    rows = []
    for k, top in enumerate(top_words(B, 20)):
        listed = [Marked(words[i], "anchor") if k < len(anchors) and i == anchors[k] else words[i] for i in top]
        anchor = words[anchors[k]] if k < len(anchors) else "–"
        rows.append([k, Marked(anchor, "anchor"), listed])
    return table_html(["topic", "anchor", "top 20 words"], rows, text_columns=(1, 2))


def _refined_from(models: dict[str, FittedModel], source: str) -> str | None:
    """The first model refined from ``source`` (by ``jsmf refine``), if any."""
    for name, m in models.items():
        params = m.attrs.get("params", {})
        if params.get("rectifier") in REFINE_METHODS and params.get("source") == source:
            return name
    return None


def _perplexity_table(metrics: dict) -> str:
    rows = []
    for name, entry in metrics["models"].items():
        held = entry.get("heldout")
        if held is not None:
            sampled = held.get("sampled_fold_in", {})
            rows.append([name, held.get("perplexity"), held.get("perplexity_se"), held.get("log_likelihood_per_word"),
                         held.get("loglik_gap_to_best"), held.get("loglik_gap_se"), sampled.get("perplexity"),
                         sampled.get("loglik_gap_to_best"), sampled.get("loglik_gap_se"),
                         held.get("document_prior") or held.get("notes")])
    return table_html(["model", "perplexity", "± standard error", "log likelihood per token",
                       "gap to the best", "± paired standard error", "perplexity, sampled fold-in",
                       "gap to the best, sampled", "± paired standard error", "document prior (or why n/a)"], rows,
                      text_columns=(0, 9))


def _metrics_table(metrics: dict) -> str:
    rows = []
    for name, entry in metrics["models"].items():
        for label in ("original_C", "rectified_C"):
            if label in entry:
                vals = entry[label]
                rows.append([name, label.replace("_", " "), *(vals.get(m) for m in METRICS), vals.get("coherence_mimno"),
                             vals.get("npmi")])
    return table_html(["model", "against", *METRICS, "coherence (Mimno form)", "NPMI"], rows, text_columns=(0, 1))


def report(root: str, *, model: str | None = None, baseline: str | None = None) -> str:
    """Write ``<root>/report/report.html`` and the PNGs; return the HTML's path.

    Parameters
    ----------
    root : str
    model : str, optional
        The model shown in the topic, Figure 1 and trace sections (default:
        an AP model with a Baseline of the same K, else the first AP model).
    baseline : str, optional
        The Baseline for Figure 3 (default: the unrectified model of the same K).
    """
    check_name(model, "model", "report", allow_none=True)
    check_name(baseline, "baseline", "report", allow_none=True)
    root = os.fspath(root)
    names = list_models(root)
    if not names:
        raise StoreError(f"{root}: no fitted models under model.zarr; run `jsmf fit` first")
    models = {n: open_model(root, n) for n in names}
    main = model if model is not None else _default_model(models)
    if main not in models:
        raise StoreError(f"no model named {main!r}; fitted models: {sorted(models)}")
    m = models[main]
    k = m.arrays["B"].shape[1]
    base = _pick(models, baseline, "none", k)
    fs, mpath = get_fs(metrics_path(root))
    metrics = read_metrics(root) if fs.exists(mpath) else None
    choose_engine(Work(tokens=corpus_tokens(corpus_dir(root))))
    if metrics is None or set(metrics["models"]) != set(names):
        metrics = evaluate(root)
    words = display_words(corpus_dir(root), read_vocabulary(corpus_dir(root)).column("word").to_pylist())
    store = open_cooccurrence(cooc_path(root))
    out = report_dir(root)
    images: dict[str, bytes] = {}
    sections = []

    sections.append(Section(f"Topics of {main}", [
        "Each topic's anchor word (red) and its 20 most probable words."], _topics_table(m, words)))
    if base and base != main:
        sections.append(Section(f"Topics of {base} (the Baseline, no rectification)", [],
                                _topics_table(models[base], words)))

    refined = _refined_from(models, main)
    if refined:
        r = models[refined]
        sep = word_separator(words)
        changes = [change_line(t, gained, lost, words, sep=sep)
                   for t, (gained, lost) in enumerate(topic_changes(m.arrays["B"], r.arrays["B"], 10))]
        sections.append(Section(f"Topics of {refined} (refined from {main})", [
            f"{r.attrs.get('n_iter')} sweep(s) of {r.attrs['params'].get('rectifier')} over the training documents started from "
            f"{main}'s topics; topic t descends from {main}'s topic t (its anchor shown).",
            "Top-10 words gained +[...] and lost -[...] per topic: " + "; ".join(changes)],
            _topics_table(r, words, m.arrays.get("anchors")), {}))

    sections.append(Section("Metrics (paper §4)", [
        "B and A are each model's; recovery, approximation and specificity are measured against the original C "
        "(the paper's measures) and against the model's rectified C. n/a: undefined (metrics.json says why)."], _metrics_table(metrics)))
    if metrics.get("heldout_fraction"):
        sections.append(Section("Held-out perplexity", [
            f"Document completion on the {metrics['heldout_fraction']:.0%} of documents held out of training "
            "(doc_id hash): θ inferred from half of each document's tokens, the other half scored; lower is "
            "better. The gap is each model's log likelihood per token below the best model's, with the standard "
            "error of the per-document differences (every model scores the same documents): a gap within about "
            "two of its standard errors is no measured difference. θ is the posterior mean of the observed half: "
            "variational Bayes's (the mean field), and the exact one by Gibbs sampling (the sampled fold-in), "
            "which the mean field understates most for sharp topics on short documents."],
            _perplexity_table(metrics)))

    anchors = m.arrays.get("anchors", np.zeros(0, dtype=np.int64))
    if anchors.size:
        if store.compressed:  # rows of C̄ in the eigenbasis the store holds: the same PCA, in memory
            values, vectors = store.eigenpairs(store.rank)
            p_R = vectors @ (values * vectors.sum(axis=0))
            scaled = (vectors * values) / np.where(p_R > 0, p_R, 1.0)[:, None]
            spaces = {f"original C̄ (rank-{store.rank} compression, 2-D PCA)": principal_coordinates(scaled)}
        else:
            spaces = {"original C̄ (2-D PCA)": pca_coordinates(StoredRows(store.url))}
        if "rectified" in m.attrs and not m.has("correction"):  # the Baseline, DC (unless C changed since)
            with contextlib.suppress(StoreError):
                spaces[f"rectified C̄ of {main} (2-D PCA)"] = pca_coordinates(stored_rectified(m))
        elif m.has("correction") and "anchor_words" not in m.attrs:  # low-rank form (AP, ENN): the rows in
            # LAW's K-dimensional space (an anchor vocabulary's is its block's alone: the original C̄ shows every word)
            U, s_, upper = low_rank_rectified(m)
            E = symmetric_from_upper(*upper, U.shape[0])
            k_ = U.shape[1] - 1
            Z, _ = law_coordinates(LowRankCooccurrence(U[:, :k_] * np.sqrt(s_[:k_]), E, float(s_[-1])))
            spaces[f"rectified C̄ of {main} (LAW space, 2-D PCA)"] = principal_coordinates(Z.T)
        lazy = {k: v for k, v in spaces.items() if not isinstance(v, np.ndarray)}
        spaces |= dict(zip(lazy, _progress.compute(*lazy.values()), strict=True))
        coords = list(spaces.values())
        png = figures.anchor_hull(dict(zip(spaces, coords, strict=True)), anchors)
        images["anchor-hull.png"] = png
        sections.append(Section("Anchor words and their convex hull (the paper's Figure 1)", [
            "Every word's row of C̄ projected on its two principal axes; the anchors (red) should span the "
            "others. Without rectification many words fall outside the anchors' hull."
            + (f" The store is compressed: the original C̄ is the rank-{store.rank} compression it holds."
               if store.compressed else "")
            + (f" {main}'s rectified C is kept in low-rank form: its rows are shown in LAW's K-dimensional space "
               "(their projection on the span of Y)." if m.has("correction") and "anchor_words" not in m.attrs
               else "")
            + (f" {main} was fitted on an anchor vocabulary ({m.attrs['anchor_words']['n']} words): its rectified C "
               "is their block's alone, not shown." if "anchor_words" in m.attrs else "")],
            "", {"Figure 1 analogue": png}))

        if store.compressed:
            values, vectors = store.eigenpairs(store.rank)
            C_SS = (vectors[anchors] * values) @ vectors[anchors].T
        else:
            C_SS = StoredRows(store.url).rows(anchors)[:, anchors]
        A_unrect, _ = topic_topic(C_SS, m.arrays["B"], anchors)
        mats = {}
        if base:
            mats[f"Baseline least-squares A ({base})"] = models[base].arrays["A_least_squares"]
            first = f"The Baseline's ({base}) least-squares A"
        else:
            mats[f"least-squares A of {main}'s B"] = m.arrays["A_least_squares"]
            first = f"The least-squares A of {main}'s B (no Baseline model of K = {k} under this root)"
        mats["unrectified diagonal A (original C_SS)"] = A_unrect
        mats[f"rectified A ({main})"] = m.arrays["A"]
        png = figures.topic_topic_heatmaps(mats)
        images["topic-topic.png"] = png
        negatives = int((next(iter(mats.values())) < 0).sum())
        sections.append(Section("Topic–topic matrices (the paper's Figure 3)", [
            f"{first} has {negatives} negative entries; the diagonal recovery from the original C_SS, and from "
            f"the rectified C ({main}), in the middle and on the right. A from the rectified C is doubly "
            "non-negative."], "", {"Figure 3 analogue": png}))

    if not anchors.size:  # a refined (or Gibbs) model: the figures that apply to it, and why the others do not
        png = figures.topic_topic_heatmaps({f"A of {main}": m.arrays["A"]})
        images["topic-topic.png"] = png
        sections.append(Section(f"Topic–topic matrix of {main}", [
            f"{main} has no anchor words, so the paper's Figures 1 and 3 (the anchors' hull, and A recovered from "
            "the anchors' rows of C) do not apply to it: report the spectral model it was refined from "
            f"(--model) for those. Its A is formed from the training documents' expected topic counts."],
            "", {"A": png}))
        if len(m.trace.get("bound_per_word", [])):
            png = figures.refine_trace(m.trace)
            images["refine-trace.png"] = png
            averaged = m.attrs.get("averaged_states", 1)
            returned = (f"the mean of the last {averaged} states (sampled sweeps: each one noisy draw)"
                        if averaged > 1 else
                        f"the one entering sweep {m.attrs.get('returned_state')} (the validation documents' best)")
            sections.append(Section(f"Refinement trace ({main})", [
                f"{m.attrs.get('n_iter')} sweep(s); stopped by {m.attrs.get('stopped')}; the state returned is "
                f"{returned}."], "", {"refine trace": png}))

    if m.attrs.get("params", {}).get("rectifier") in ("ap", "enn") and len(m.trace.get("relative_change", [])):
        png = figures.ap_trace(m.trace)
        images["ap-trace.png"] = png
        title = "ENN (ε-non-negative rectification) trace" if "correction_sum" in m.trace else \
            "Alternating projection trace"
        sections.append(Section(f"{title} ({main})", [
            f"{m.attrs.get('n_iter')} iterations; final eigen-residual {m.attrs.get('final_eig_residual', float('nan')):.2g}."],
            "", {"AP trace": png}))

    fs_out, out_path = get_fs(join(out, "compare.png"))
    if fs_out.exists(out_path):
        with fs_out.open(out_path, "rb") as f:
            sections.append(Section("K sweep (the paper's Figure 4)", ["From `jsmf compare`."], "",
                                    {"Figure 4 analogue": f.read()}))

    fs_out, out_path = get_fs(join(out, "choose_k.png"))
    if fs_out.exists(out_path):
        with fs_out.open(out_path, "rb") as f:
            sections.append(Section("How many topics (`jsmf choose-k`)", [
                "Validation perplexity (paired standard errors), coherence, NPMI, dissimilarity and C's eigenvalues "
                "for each K tried; the recommended K dashed (choose_k.json has the table and the rule)."], "",
                {"choose-k": f.read()}))

    for filename, png in images.items():
        write_file(join(out, filename), png, root=root)
    page = report_html(
        f"jsmf report: {root}", sections,
        subtitle=f"{store.n_words} words, {store.attrs.get('n_docs')} documents; models: {', '.join(names)}; "
                 f"written {_dt.datetime.now(_dt.UTC).isoformat(timespec='seconds')}",
    )
    url = join(out, "report.html")
    write_file(url, page.encode("utf-8"), root=root)
    return url
