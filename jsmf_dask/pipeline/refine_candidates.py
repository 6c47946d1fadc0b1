"""Refine's candidates: which runs refine tries, which one it keeps, and the line that says so.

``refine`` runs one candidate (:class:`Candidate`: method, η, drawn sweeps, start) per combination
:func:`candidates` gives — ``method='auto'`` on a corpus of short documents (cvb0 and sampled, and sampled from a
chain's topics, :mod:`~jsmf_dask.pipeline.refine_start`), ``start='both'`` (each method from the spectral model
and from a chain's topics), ``eta`` as a list, and
``drawn_sweeps='auto'`` on a small corpus (none and :data:`DRAWN_SWEEPS`) — each to its own stop, in lockstep
(:func:`~jsmf_dask.pipeline.refine_sweeps.run_together`). :func:`choose` keeps one by the validation
documents' scores, per document, so that two runs compare with a paired error
(:func:`~jsmf_dask.kernels.model_selection.paired_gap`); :func:`choice_line` says what was kept.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from jsmf_dask.kernels.model_selection import paired_gap

__all__ = ["Candidate", "DRAWN_MARGIN_SE", "DRAWN_SWEEPS", "SAMPLED_MIN_TOKENS", "SAMPLED_MAX_MEAN_TOKENS",
           "DROP_AFTER_SWEEPS", "DROP_MARGIN", "START_RACE_SWEEPS", "TrailingRuns", "candidates", "auto_methods",
           "several_routes", "choose", "choice_line", "stored_route", "route", "BROADER_SHARE", "eta_text"]


class Candidate(NamedTuple):
    """One run refine tries: its method, its topic–word prior (a value or 'auto'), its drawn sweeps and its start
    ('spectral': the model refine was given; 'chain': :func:`~jsmf_dask.pipeline.refine_start.chain_topics_for`)."""

    method: str
    eta: float | str
    drawn_sweeps: int
    start: str = "spectral"

    @property
    def route(self) -> str:
        """Its method, and its start when that is not the spectral model (:func:`route`)."""
        return route(self.method, self.start)


def route(method: str, start: str | None = "spectral") -> str:
    """'cvb0', 'sampled', or 'sampled from a chain' (a run that does not start from the spectral model)."""
    return method if start in (None, "spectral") else f"{method} from a {start}"


def stored_route(entry: dict) -> str:
    """:func:`route` of a refined model's attrs or of one of its candidates (stored before session 38: no start)."""
    return route(entry.get("method", ""), entry.get("start"))


#: ``drawn_sweeps='auto'``: this many drawn sweeps, a candidate below
#: :data:`~jsmf_dask.pipeline.refine.REFIT_MAX_DOCS` training documents (the validation documents choose between
#: it and none, :func:`choose`: on a 60-word corpus whose spectral start was already near the optimum the drawn
#: path ended 0.17% above soft CVB0's held-out perplexity). Measured
#: (session 21, the benchmarks README: the same roots, held-out documents and scorer, Gibbs the median of three
#: chains): MovieLens (543 users) −0.7% at K = 20 and −1.5% at K = 50 (+1.4% above Gibbs's median → −0.2%);
#: NIPS papers +0.06% / −0.2%, Reuters −0.1% / +0.6%; at about twice refine's time. 10 and 30 drawn sweeps
#: differed from 20 by less than the draws do (MovieLens K = 50, η 0.05: 1192.6 / 1196.5 / 1192.6 for
#: 10 / 20 / 30 under an earlier draw, a binomial per topic, where today's draw gives 1178.7 for 20).
#: Above the cap the corpora measured (lda-20k, 100k) sit within 1% of their generating model's perplexity,
#: and refine's share of the route's time is what keeps it 10–20× faster than Gibbs.
DRAWN_SWEEPS = 20

#: ``method='auto'`` tries the sampled method beside CVB0 (the validation documents choose) on at least this many
#: training tokens in documents of at most :data:`SAMPLED_MAX_MEAN_TOKENS` tokens on average; elsewhere it is
#: CVB0. Measured (session 34, the benchmarks README; the same starts, held-out documents and scorer; K 20 / 50)
#: against CVB0: on the NIPS papers cut into 100-word documents (42 tokens after curation) −0.9% / −6.4% with
#: 53k documents (2.0M training tokens), −0.5% / −4.6% with 25k (0.9M), +0.6% / −0.6% with 15k, +1.4% / +1.3%
#: with 8k, +6.0% / +4.9% with 3k; cut into 300-word ones (124 tokens) −1.3% / −2.5% with 18k (1.9M), −0.0% /
#: −2.4% with 12k (1.3M), +1.9% / +3.1% with 3k. Worse on the corpora of long documents (NIPS papers +0.1% /
#: +0.9%, MovieLens +1.2% / +2.3%, Reuters +1.6% / +3.4%), level on lda-20k (+0.07%), worse on 6-item baskets
#: (+0.9%) — and (session 35) on a plain-LDA corpus of 40-token documents (50k, 1.7M training tokens, K 20):
#: +0.5%, its B error 0.155 against CVB0's 0.119. So a candidate where it can gain, not the method there: the
#: validation documents tell real text from such corpora, which the corpus's sizes cannot.
SAMPLED_MIN_TOKENS = 1_000_000
SAMPLED_MAX_MEAN_TOKENS = 150


def auto_methods(drawn_sweeps: int | str, validation: float, training_tokens: float,
                 mean_tokens: float) -> list[str]:
    """The methods ``method='auto'`` tries: CVB0, and the sampled method beside it on a corpus of short
    documents (:data:`SAMPLED_MIN_TOKENS`, :data:`SAMPLED_MAX_MEAN_TOKENS`) with validation documents to choose
    between them, unless ``drawn_sweeps`` asks for CVB0's drawn sweeps."""
    short = training_tokens >= SAMPLED_MIN_TOKENS and mean_tokens <= SAMPLED_MAX_MEAN_TOKENS
    if short and validation and drawn_sweeps in ("auto", 0):
        return ["cvb0", "sampled"]
    return ["cvb0"]


def candidates(method: str, etas: list, drawn_sweeps: int | str, *, sweeps: int, validation: float,
               small_corpus: bool, training_tokens: float, mean_tokens: float,
               start: str = "auto") -> list[Candidate]:
    """Every run refine tries: each method (:func:`auto_methods` for 'auto') with each η of ``etas`` and each
    number of drawn sweeps (``drawn_sweeps``; 'auto': none, and :data:`DRAWN_SWEEPS` too for CVB0 on a
    ``small_corpus`` with validation documents and ``sweeps`` that leave as many soft sweeps), from ``start``
    ('auto': the spectral model; and where method 'auto' tries the sampled method, the sampled method from a
    chain's topics too, :func:`~jsmf_dask.pipeline.refine_start.chain_topics_for`; 'both': each method from the
    spectral model, and with each η and no drawn sweeps from a chain's topics)."""
    methods = auto_methods(drawn_sweeps, validation, training_tokens, mean_tokens) if method == "auto" else [method]
    runs = []
    for m in methods:
        if drawn_sweeps != "auto":
            draws = [int(drawn_sweeps)]
        else:
            draws = [0, DRAWN_SWEEPS] if m == "cvb0" and validation and small_corpus and sweeps >= 2 * DRAWN_SWEEPS \
                else [0]
        runs += [Candidate(m, e, d, "spectral" if start in ("auto", "both") else start) for e in etas for d in draws]
        if start == "both" or (start == "auto" and method == "auto" and m == "sampled"):
            runs += [Candidate(m, e, 0, "chain") for e in etas]
    return runs


def several_routes(routes) -> bool:
    """Whether candidates with these routes (:attr:`Candidate.route`, one per candidate) differ by their method or
    start (``method='auto'``)."""
    return len(set(routes)) > 1


#: Candidates of several methods (``method='auto'``) run in lockstep, each to its own stop; after this many sweeps
#: one whose best validation perplexity is more than :data:`DROP_MARGIN` (relative) above another method's best is
#: dropped there (:class:`TrailingRuns`): it would not be kept, and its sweeps cost as much as the leader's.
#: Measured (session 36, the benchmarks README; every validation curve of the default refine on the seven
#: in-band (corpus, K) of session 35): where the sampled run was kept CVB0 trailed it by 2.1% / 3.0% after 10 sweeps
#: on the 100-word pieces (K 20 / 50) and never came within 2% again, by 0.3–0.7% on the 300-word pieces
#: (1.2% after 12 at K 50); where CVB0 was kept the two were within 0.5% at every sweep. The curves cross in the
#: first 3–8 sweeps, so none is dropped sooner. Measured again in session 47, with the validation documents scored
#: by the exact fold-in: with no drop at all, the six (corpus, K) of the docstrings and the NIPS pieces keep the same
#: models to every digit, and refine takes 4.5–53 s longer.
DROP_AFTER_SWEEPS = 10
DROP_MARGIN = 0.01


#: Runs of one method from different starts (``method='auto'``'s sampled runs from the spectral model and from a
#: chain's topics; every method's with ``start='both'``) race: after this many sweeps the one whose best validation
#: perplexity is behind the other's best is dropped (:class:`TrailingRuns`; each is also dropped as above when it
#: trails another method's run). Measured (session 38, the benchmarks README; the NIPS papers cut into 100-word
#: pieces): the chain's run starts behind (1458 against 1405 at K 20, 1424 against 1272 at K 50) and falls faster;
#: at K 20 it leads from the 15th sweep on and ends 1.6% lower (1240.7 against 1260.6), at K 50 it is 0.8% behind
#: after 20 and 0.5% behind at its stop. CVB0's run from a chain's topics does the same (session 41): on the NIPS
#: papers at K 20 it trailed the spectral model's soft run by more than 1% after 10 sweeps and led after 20.
START_RACE_SWEEPS = 20


class TrailingRuns:
    """Which runs, in lockstep, trail another run by far enough to stop; a callable for
    :func:`~jsmf_dask.pipeline.refine_sweeps.run_together`'s ``drop``.

    A run is dropped once it has :data:`DROP_AFTER_SWEEPS` validation scores when its best is more than
    :data:`DROP_MARGIN` above the best of another method's runs, and once it has :data:`START_RACE_SWEEPS` when its
    best is above the best of a run of its own method from another start.

    Parameters
    ----------
    tried : list of Candidate
        The runs, in ``run_together``'s order. The η and drawn-sweep candidates of one method and start are never
        dropped for trailing each other (they run to their stops, as measured).
    """

    def __init__(self, tried: list[Candidate]):
        self.curves: list[list[float]] = [[] for _ in tried]
        self.tried = tried

    def recorder(self, j: int, on_sweep):
        """An ``on_sweep`` for run ``j``: notes its validation score of each soft sweep, then calls ``on_sweep``."""
        def record(rec) -> None:
            if rec.phase == "refine" and not rec.drawn and math.isfinite(rec.validation_perplexity):
                self.curves[j].append(rec.validation_perplexity)
            if on_sweep is not None:
                on_sweep(rec)
        return record

    def __call__(self, running: list[int]) -> list[int]:
        """The runs of ``running`` to drop now."""
        bests = [min(curve, default=math.inf) for curve in self.curves]

        def best_of(runs) -> float:
            return min((bests[i] for i in runs), default=math.inf)

        def trails(j: int) -> bool:
            me, n = self.tried[j], len(self.curves[j])
            other_methods = [i for i, c in enumerate(self.tried) if c.method != me.method]
            other_starts = [i for i, c in enumerate(self.tried) if c.method == me.method and c.start != me.start]
            return (n >= DROP_AFTER_SWEEPS and bests[j] > best_of(other_methods) * (1.0 + DROP_MARGIN)
                    or n >= START_RACE_SWEEPS and bests[j] > best_of(other_starts))

        return [j for j in running if trails(j)]


#: The drawn candidate is kept unless the best soft one beats it on the validation documents by more than this
#: many paired standard errors (their own noise). Measured (session 22, the benchmarks README: session 21's roots,
#: held-out documents and scorer): the validation documents (16–122 of them below REFIT_MAX_DOCS) resolve a
#: difference of 0.1–1.8%, while the drawn run's held-out gains are 0.2–1.6% where it gains (MovieLens K = 50:
#: −1.6% ± 0.4% held out, +0.2% ± 0.7% on its 29 validation documents). Requiring the drawn run to win beyond
#: the noise kept the soft run on MovieLens (+0.7% / +1.6% held out); the lowest score alone kept it on the
#: NIPS papers at K = 50 (+0.2% ± 0.1%); this rule loses neither, and keeps the soft run where it is clearly
#: better (the NIPS papers at K = 20, by 1.5 errors).
DRAWN_MARGIN_SE = 1.0


def choose(tried: list[Candidate], runs: list) -> tuple[int, list[tuple[float | None, float | None]]]:
    """The candidate kept, and each one's gain over the best soft candidate (validation log likelihood per
    token, positive: better) with its paired standard error (None without a soft candidate or scores).

    Parameters
    ----------
    tried : list of Candidate
    runs : list of :class:`~jsmf_dask.pipeline.refine_sweeps.SweepRun`
        Each candidate's run, in the same order (``best_seen``, ``best_seen_scores``, ``best_sweep``): the
        validation scores of the best state it could return (a sampled run's: the mean it returns).

    Notes
    -----
    The lowest validation perplexity wins among the soft candidates (the methods and ``eta`` values tried), and
    among the drawn ones; the best drawn candidate is kept unless the best soft one beats it by more than
    :data:`DRAWN_MARGIN_SE` paired standard errors: on the corpora measured the drawn sweeps helped or tied,
    and a few dozen validation documents cannot tell differences of a percent apart. A drawn run whose best
    state is its start (every state after its drawn sweeps scored worse) drew nothing worth keeping: it is not
    a candidate then, whatever its score (the start's, which the soft run's scores can only improve on). Nor is a
    run dropped in lockstep (:class:`TrailingRuns`).
    """
    scores = [r.best_seen if math.isfinite(r.best_seen) and r.stopped != "dropped" else math.inf for r in runs]
    soft = [j for j, c in enumerate(tried) if c.drawn_sweeps == 0]
    if len(tried) == 1 or not soft:
        return int(np.argmin(scores)), [(None, None)] * len(tried)
    best_soft = min(soft, key=scores.__getitem__)
    reference = runs[best_soft].best_seen_scores
    gains = []
    for run in runs:
        if reference is None or run.best_seen_scores is None:
            gains.append((None, None))
            continue
        gains.append(paired_gap(run.best_seen_scores[0], reference[0], reference[1]))  # ℓ − ℓ of the reference
    drawn = [j for j in range(len(tried)) if j not in soft and runs[j].best_sweep > 1]
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
    paired standard error); None for a model refined without candidates. Candidates that differ by their route
    alone (``method='auto'``: the method, and the start when it is not the spectral model) are named by it."""
    candidates = attrs.get("candidates")
    if not candidates:
        return None
    by_route = several_routes(stored_route(c) for c in candidates)
    methods_only = len({(eta_text(c["eta"]), c["drawn_sweeps"]) for c in candidates}) == 1  # 'auto' alone

    def tried(c: dict) -> str:
        score = "not scored" if c["validation_perplexity"] is None else f"{c['validation_perplexity']:.1f}"
        if c.get("stopped") == "dropped":
            score += f" (dropped after {c['sweeps']} sweeps)"
        if by_route and methods_only:
            return f"{stored_route(c)}: {score}"
        line = (f"{stored_route(c)}, " if by_route else "") + \
            f"eta {eta_text(c['eta'])} with {c['drawn_sweeps']} drawn: {score}"
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
    if by_route and methods_only:
        return f"{stored_route(attrs)} {how} ({', '.join(tried(c) for c in candidates)})" + _broader(attrs, candidates)
    method = f"{stored_route(attrs)}, " if by_route else ""
    return (f"{method}eta {attrs['eta']:g} with {attrs['drawn_sweeps']} drawn sweep(s) {how} "
            f"({', '.join(tried(c) for c in candidates)})")


#: :func:`choice_line` says the kept method's topics are broader when their specificity is below this share of
#: another method's run (where the sampled model is kept its specificity is 54–72% of CVB0's run's, session 37's
#: in-band runs; the benchmarks README).
BROADER_SHARE = 0.9


def _broader(attrs: dict, candidates: list[dict]) -> str:
    """'; its topics are broader than …' when the kept run's are far less specific than another method's run's,
    else ''."""
    mine = [c.get("specificity") for c in candidates
            if stored_route(c) == stored_route(attrs) and c.get("stopped") != "dropped"]
    others = [c for c in candidates if c["method"] != attrs["method"] and c.get("specificity") is not None]
    if not mine or mine[0] is None or not others:
        return ""
    sharpest = max(others, key=lambda c: c["specificity"])
    if mine[0] >= BROADER_SHARE * sharpest["specificity"]:
        return ""
    return (f"; its topics are broader than {sharpest['method']}'s (specificity {mine[0]:.2f} against "
            f"{sharpest['specificity']:.2f} bits): `--method {sharpest['method']}` keeps sharper ones")


def eta_text(value: float | str) -> str:
    """A candidate's ``eta``: the value, or 'auto' (learned)."""
    return value if isinstance(value, str) else f"{value:g}"


