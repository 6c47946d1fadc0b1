"""The report's figures as PNG bytes (matplotlib, Agg backend; no I/O, no dask).

Each function takes plain arrays and returns the encoded PNG, so the caller
decides where it goes (a file, a data URI in the HTML report). Text drawn from
data (model names, method names, words) is text, never markup: every figure is
drawn with matplotlib's mathtext and TeX off (:func:`_plain_text`).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.spatial import ConvexHull, QhullError

__all__ = ["metric_curves", "choose_k_curves", "refine_trace", "anchor_hull", "topic_topic_heatmaps", "ap_trace"]

_LABELS = {
    "recovery": "Recovery (lower better)",
    "approximation": "Approximation (lower better)",
    "dominancy": "Dominancy (higher better)",
    "specificity": "Specificity, bits (higher better)",
    "dissimilarity": "Dissimilarity (higher better)",
    "coherence": "Coherence (higher better)",
    "npmi": "NPMI (higher better)",
    "perplexity": "Held-out perplexity (lower better)",
    "perplexity_sampled": "Held-out perplexity, sampled fold-in",
}


def _pyplot():
    """matplotlib's pyplot on the Agg backend, imported on first use (it costs ~0.5 s of every CLI start)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plain_text(draw):
    """Draw with ``$…$`` shown as typed (no mathtext) and no TeX, whatever the caller's rcParams say."""
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with _pyplot().rc_context({"text.parse_math": False, "text.usetex": False}):
            return draw(*args, **kwargs)

    return wrapper


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    _pyplot().close(fig)
    return buf.getvalue()


@_plain_text
def metric_curves(rows: Sequence[Mapping], metrics: Sequence[str]) -> bytes:
    """The analogue of the paper's Figure 4: each metric against K (log axis), one line per method.

    Parameters
    ----------
    rows : sequence of mappings
        Each with ``method``, ``n_topics`` and a value (or None) per metric.
    metrics : sequence of str
    """
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cols = 3
    fig, axes = _pyplot().subplots((len(metrics) + cols - 1) // cols, cols, figsize=(4.2 * cols, 3.2 * ((len(metrics) + 2) // 3)),
                             squeeze=False)
    for ax, metric in zip(axes.flat, metrics, strict=False):
        for method in methods:
            pts = sorted((r["n_topics"], r[metric]) for r in rows if r["method"] == method and r.get(metric) is not None)
            if pts:
                ks, vs = zip(*pts, strict=True)
                ax.plot(ks, vs, marker="o", label=method)
        ax.set_xscale("log")
        _plain_k_ticks(ax, [r["n_topics"] for r in rows])
        ax.set_xlabel("K (topics)")
        ax.set_title(_LABELS.get(metric, metric), fontsize=10)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    handles = {}  # every method, whichever panels it has values in
    for ax in axes.flat:
        for line in ax.get_lines():
            handles.setdefault(line.get_label(), line)
    fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=min(len(handles), 6), fontsize=8,
               bbox_to_anchor=(0.5, 1.04))
    fig.tight_layout()
    return _png(fig)


def _plain_k_ticks(ax, ks: Sequence[int], keep: int | None = None) -> None:
    """K on a log axis, ticked at the values measured, as plain numbers (not 3×10⁰); labels that would
    overlap (less than 6% of a decade apart) are thinned, ``keep`` always labelled."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    kept: list[int] = [] if keep is None else [keep]
    for k in sorted(set(ks)):
        if all(abs(np.log10(k) - np.log10(other)) >= 0.06 for other in kept):
            kept.append(k)
    ax.xaxis.set_major_locator(FixedLocator(sorted(kept)))
    ax.xaxis.set_minor_locator(NullLocator())
    formatter = ScalarFormatter()
    formatter.set_scientific(False)
    ax.xaxis.set_major_formatter(formatter)


@_plain_text
def choose_k_curves(rows: Sequence[Mapping], eigenvalues: np.ndarray, recommended: int) -> bytes:
    """``choose-k``'s figure: validation perplexity (± paired SE), coherence and NPMI, dissimilarity against K,
    and C's eigenvalues; the recommended K marked on each panel.

    Parameters
    ----------
    rows : sequence of mappings
        Each with ``n_topics``, ``perplexity``, ``perplexity_se``, ``coherence``, ``npmi``, ``dissimilarity``.
    eigenvalues : ndarray
        C's top eigenvalues, descending.
    recommended : int
    """
    rows = sorted(rows, key=lambda r: r["n_topics"])
    ks = [r["n_topics"] for r in rows]
    fig, axes = _pyplot().subplots(2, 2, figsize=(10, 7))
    ax = axes[0, 0]
    ax.errorbar(ks, [r["perplexity"] for r in rows], yerr=[r["perplexity_se"] for r in rows], marker="o", capsize=3)
    ax.set_title("Validation perplexity (lower better; bars: paired SE to the best K)", fontsize=9)
    ax = axes[0, 1]
    ax.plot(ks, [r["coherence"] for r in rows], marker="o", color="C1", label="coherence (paper)")
    ax.set_title("Coherence (higher better)", fontsize=10)
    twin = ax.twinx()
    twin.plot(ks, [r["npmi"] for r in rows], marker="s", color="C2", label="NPMI")
    twin.set_ylabel("NPMI")
    ax.legend(handles=ax.get_lines() + twin.get_lines(), fontsize=8)
    ax = axes[1, 0]
    ax.plot(ks, [r["dissimilarity"] for r in rows], marker="o", color="C3")
    ax.set_title("Dissimilarity (higher better)", fontsize=10)
    for ax in (axes[0, 0], axes[0, 1], axes[1, 0]):
        ax.set_xscale("log")
        _plain_k_ticks(ax, ks, recommended)
        ax.axvline(recommended, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel("K (topics)")
        ax.grid(alpha=0.3)
    ax = axes[1, 1]
    values = np.asarray(eigenvalues, dtype=np.float64)
    ax.semilogy(np.arange(1, values.size + 1), np.maximum(np.abs(values), np.finfo(float).tiny), marker=".")
    from matplotlib.ticker import LogFormatter

    ax.yaxis.set_major_formatter(LogFormatter())  # 1e-04, not mathtext (drawn as typed here)
    ax.axvline(recommended, color="grey", linestyle="--", linewidth=1)
    ax.set_title("|eigenvalues| of C (scree)", fontsize=10)
    ax.set_xlabel("rank")
    ax.grid(alpha=0.3)
    fig.suptitle(f"choose-k: recommended K = {recommended} (dashed)", fontsize=11)
    fig.tight_layout()
    return _png(fig)


@_plain_text
def anchor_hull(spaces: Mapping[str, np.ndarray], anchors: np.ndarray) -> bytes:
    """The analogue of the paper's Figure 1: words in 2-D PCA of ``C̄``'s rows, anchors and their hull.

    Parameters
    ----------
    spaces : mapping of title → ndarray, shape (N, 2)
        Each space's 2-D projection of every word (e.g. original and rectified).
    anchors : ndarray, shape (K,)
    """
    fig, axes = _pyplot().subplots(1, len(spaces), figsize=(5.5 * len(spaces), 5), squeeze=False)
    for ax, (title, xy) in zip(axes.flat, spaces.items(), strict=True):
        ax.scatter(xy[:, 0], xy[:, 1], s=3, c="0.55", alpha=0.5, label="words", rasterized=True)
        S = xy[anchors]
        ax.scatter(S[:, 0], S[:, 1], s=28, c="tab:red", label="anchors", zorder=3)
        if len(S) >= 3:
            try:
                hull = ConvexHull(S)
                for simplex in hull.simplices:
                    ax.plot(S[simplex, 0], S[simplex, 1], c="tab:red", lw=1)
            except QhullError:  # anchors on a line in 2-D
                pass
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return _png(fig)


def _tick_step(n: int, most: int = 12) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, … that labels ``n`` topics with at most ``most`` ticks."""
    step, factors = 1, (2, 2.5, 2)
    i = 0
    while -(-n // step) > most:
        step = int(step * factors[i % 3])
        i += 1
    return step


@_plain_text
def topic_topic_heatmaps(matrices: Mapping[str, np.ndarray]) -> bytes:
    """The analogue of the paper's Figure 3: each topic–topic matrix as a heat map (own scale, centred at 0)."""
    fig, axes = _pyplot().subplots(1, len(matrices), figsize=(4.8 * len(matrices), 4), squeeze=False)
    for ax, (title, A) in zip(axes.flat, matrices.items(), strict=True):
        vmax = float(np.nanmax(np.abs(A))) or 1.0
        im = ax.imshow(A, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
        neg = int(np.count_nonzero(A < 0))
        ax.set_title(f"{title}\n(sum {np.nansum(A):.3g}, min {np.nanmin(A):.2g}, {neg} negative)", fontsize=9)
        ax.set_xlabel("topic")
        ax.set_ylabel("topic")
        ticks = np.arange(0, A.shape[0], _tick_step(A.shape[0]))  # at most 12 labels a side: readable at K = 50
        ax.set_xticks(ticks)  # topics are whole numbers
        ax.set_yticks(ticks)
        ax.tick_params(labelsize=8)
        fig.colorbar(im, ax=ax, shrink=0.75)
    fig.tight_layout()
    return _png(fig)


@_plain_text
def ap_trace(trace: Mapping[str, np.ndarray]) -> bytes:
    """AP's convergence (‖ΔC‖ and the distance to PSD_K per iteration), or ENN's (the relative change of YYᵀ
    and the correction's mass ΣE per cycle), on a log scale."""
    fig, ax = _pyplot().subplots(figsize=(6.5, 4))
    enn = "correction_sum" in trace
    series = ((("relative_change", "‖Y_tY_tᵀ − Y_{t−1}Y_{t−1}ᵀ‖_F / ‖Y_tY_tᵀ‖_F"), ("correction_sum", "ΣE (negative mass corrected)"))
              if enn else (("delta", "‖C_t − C_{t−1}‖_F"), ("dist_psd", "distance of C_t to PSD_K")))
    for key, label in series:
        values = np.asarray(trace.get(key, []), dtype=np.float64)
        if values.size:
            ax.semilogy(np.arange(1, values.size + 1), np.maximum(values, 1e-300), label=label)
    ax.set_xlabel("ENN cycle" if enn else "AP iteration")
    ax.set_ylabel("relative change, mass" if enn else "Frobenius norm")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


@_plain_text
def refine_trace(trace: Mapping[str, np.ndarray]) -> bytes:
    """A refined model's sweeps: the validation documents' perplexity entering each sweep (and after the last),
    and the training documents' log likelihood (CVB0) or bound (VB) per token after each."""
    fig, axes = _pyplot().subplots(1, 2, figsize=(10, 3.6), squeeze=False)
    valid = np.asarray(trace.get("validation_perplexity", []), dtype=np.float64)
    ax = axes[0, 0]
    if valid.size and np.isfinite(valid).any():
        ax.plot(np.arange(valid.size), valid, marker="o")
        ax.set_xlabel("sweeps done")
        ax.set_title("Validation perplexity (lower better)", fontsize=10)
    else:
        ax.text(0.5, 0.5, "no validation documents", ha="center", va="center", transform=ax.transAxes)
        ax.set_title("Validation perplexity", fontsize=10)
    ax.grid(alpha=0.3)
    bound = np.asarray(trace.get("bound_per_word", []), dtype=np.float64)
    ax = axes[0, 1]
    ax.plot(np.arange(1, bound.size + 1), bound, marker=".")
    ax.set_xlabel("sweep")
    ax.set_title("Training log likelihood (CVB0) or bound (VB) per token", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)
