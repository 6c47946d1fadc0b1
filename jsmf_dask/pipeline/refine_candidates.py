"""Refine's candidates: which of the runs from the same start is kept, and the line that says so.

``refine`` runs one candidate per (η, drawn sweeps) pair it is given — ``eta`` as a list, and
``drawn_sweeps='auto'`` on a small corpus (none and :data:`~jsmf_dask.pipeline.refine.DRAWN_SWEEPS`) — each to
its own stop, in lockstep (:func:`~jsmf_dask.pipeline.refine_sweeps.run_together`). :func:`choose` keeps one
by the validation documents' scores, per document, so that two runs compare with a paired error
(:func:`~jsmf_dask.kernels.model_selection.paired_gap`); :func:`choice_line` says what was kept.
:func:`method_note` says when another method than the one run measured better on corpora like the one refined.
"""

from __future__ import annotations

import math

import numpy as np

from jsmf_dask.kernels.model_selection import paired_gap

__all__ = ["DRAWN_MARGIN_SE", "SAMPLED_MIN_TOKENS", "SAMPLED_MAX_MEAN_TOKENS", "choose", "choice_line",
           "method_note", "eta_text"]

#: The drawn candidate is kept unless the best soft one beats it on the validation documents by more than this
#: many paired standard errors (their own noise). Measured (session 22, the benchmarks README: session 21's roots,
#: held-out documents and scorer): the validation documents (16–122 of them below REFIT_MAX_DOCS) resolve a
#: difference of 0.1–1.8%, while the drawn run's held-out gains are 0.2–1.6% where it gains (MovieLens K = 50:
#: −1.6% ± 0.4% held out, +0.2% ± 0.7% on its 29 validation documents). Requiring the drawn run to win beyond
#: the noise kept the soft run on MovieLens (+0.7% / +1.6% held out); the lowest score alone kept it on the
#: NIPS papers at K = 50 (+0.2% ± 0.1%); this rule loses neither, and keeps the soft run where it is clearly
#: better (the NIPS papers at K = 20, by 1.5 errors).
DRAWN_MARGIN_SE = 1.0


def choose(candidates: list[tuple], runs: list) -> tuple[int, list[tuple[float | None, float | None]]]:
    """The candidate kept, and each one's gain over the best soft candidate (validation log likelihood per
    token, positive: better) with its paired standard error (None without a soft candidate or scores).

    Parameters
    ----------
    candidates : list of (eta, drawn_sweeps)
    runs : list of :class:`~jsmf_dask.pipeline.refine_sweeps.SweepRun`
        Each candidate's run, in the same order (``best_seen``, ``best_seen_scores``, ``best_sweep``).

    Notes
    -----
    The lowest validation perplexity wins among the soft candidates (the ``eta`` values asked for), and among
    the drawn ones; the best drawn candidate is kept unless the best soft one beats it by more than
    :data:`DRAWN_MARGIN_SE` paired standard errors: on the corpora measured the drawn sweeps helped or tied,
    and a few dozen validation documents cannot tell differences of a percent apart. A drawn run whose best
    state is its start (every state after its drawn sweeps scored worse) drew nothing worth keeping: it is not
    a candidate then, whatever its score (the start's, which the soft run's scores can only improve on).
    """
    scores = [r.best_seen if math.isfinite(r.best_seen) else math.inf for r in runs]
    soft = [j for j, (_, drawn) in enumerate(candidates) if drawn == 0]
    if len(candidates) == 1 or not soft:
        return int(np.argmin(scores)), [(None, None)] * len(candidates)
    best_soft = min(soft, key=scores.__getitem__)
    reference = runs[best_soft].best_seen_scores
    gains = []
    for run in runs:
        if reference is None or run.best_seen_scores is None:
            gains.append((None, None))
            continue
        gains.append(paired_gap(run.best_seen_scores[0], reference[0], reference[1]))  # ℓ − ℓ of the reference
    drawn = [j for j in range(len(candidates)) if j not in soft and runs[j].best_sweep > 1]
    if not drawn:
        return best_soft, gains
    best_drawn = min(drawn, key=scores.__getitem__)
    gain, se = gains[best_drawn]
    if gain is None or not math.isfinite(scores[best_drawn]) or gain < -DRAWN_MARGIN_SE * se:
        return best_soft, gains
    return best_drawn, gains


def choice_line(attrs: dict) -> str | None:
    """What the validation documents chose among a refined model's candidates (``attrs['candidates']``), with
    every candidate's validation perplexity and a drawn one's change against the best soft one (relative, ± its
    paired standard error); None for a model refined without candidates."""
    candidates = attrs.get("candidates")
    if not candidates:
        return None

    def tried(c: dict) -> str:
        score = "not scored" if c["validation_perplexity"] is None else f"{c['validation_perplexity']:.1f}"
        line = f"eta {eta_text(c['eta'])} with {c['drawn_sweeps']} drawn: {score}"
        if c["drawn_sweeps"] and c.get("gain_se") is not None:  # −gain: the perplexity's change, to first order
            line += f" ({-100 * c['gain']:+.2f}% ± {100 * c['gain_se']:.2f}%)"
        return line

    scores = [(c["drawn_sweeps"], c["validation_perplexity"]) for c in candidates
              if c["validation_perplexity"] is not None]
    kept = [score for drawn, score in scores if drawn and drawn == attrs["drawn_sweeps"]]
    # a drawn run scored worse than a soft one and kept all the same: within the margin (DRAWN_MARGIN_SE)
    within_margin = bool(kept) and any(not drawn and score < min(kept) for drawn, score in scores)
    how = ("kept: the validation documents score a soft run lower, but within their paired error, and a drawn "
           "run is dropped only beyond it" if within_margin else "chosen by the validation documents")
    return (f"eta {attrs['eta']:g} with {attrs['drawn_sweeps']} drawn sweep(s) {how} "
            f"({', '.join(tried(c) for c in candidates)})")


def eta_text(value: float | str) -> str:
    """A candidate's ``eta``: the value, or 'auto' (learned)."""
    return value if isinstance(value, str) else f"{value:g}"


#: Where ``method='sampled'`` measured better than CVB0 (session 34, the benchmarks README; the same starts,
#: held-out documents and scorer; K 20 / 50): on the NIPS papers cut into 100-word documents (42 tokens after
#: curation) −0.9% / −6.4% with 53k documents (2.0M training tokens), −0.5% / −4.6% with 25k (0.9M), +0.6% /
#: −0.6% with 15k, +1.4% / +1.3% with 8k, +6.0% / +4.9% with 3k; cut into 300-word ones (124 tokens) −1.3% /
#: −2.5% with 18k (1.9M), −0.0% / −2.4% with 12k (1.3M), +1.9% / +3.1% with 3k. Worse on the corpora of long
#: documents (NIPS papers +0.1% / +0.9%, MovieLens +1.2% / +2.3%, Reuters +1.6% / +3.4%), level on lda-20k
#: (+0.07%), worse on 6-item baskets (+0.9%). So: at least this many training tokens, in documents of at most
#: :data:`SAMPLED_MAX_MEAN_TOKENS` tokens on average.
SAMPLED_MIN_TOKENS = 1_000_000
SAMPLED_MAX_MEAN_TOKENS = 150


def method_note(attrs: dict, root: str) -> str | None:
    """A ``note:`` line for a model of run root ``root`` refined by CVB0 on a corpus where ``method='sampled'``
    measured better (:data:`SAMPLED_MIN_TOKENS`, :data:`SAMPLED_MAX_MEAN_TOKENS`), from its ``attrs``, with the
    command that refines its source so; None elsewhere."""
    if attrs.get("params", {}).get("method") != "cvb0":
        return None
    docs, tokens = attrs["training"]["n_docs"], attrs["training"]["n_tokens"]
    if not docs or tokens < SAMPLED_MIN_TOKENS or tokens / docs > SAMPLED_MAX_MEAN_TOKENS:
        return None
    return (f"note: {tokens:,} training tokens in documents of {tokens / docs:.0f} on average: on corpora of "
            f"{SAMPLED_MIN_TOKENS:,} tokens or more in documents of up to {SAMPLED_MAX_MEAN_TOKENS}, the sampled "
            f"method measured 0-6.4% lower held-out perplexity than cvb0, with broader topics, in 1-4 times "
            f"refine's time (README): `jsmf refine {root} --model {attrs['source']['name']} --method sampled`")
