"""Where refine's runs start: the spectral model's topics, or a collapsed Gibbs chain's on a sample of the documents.

Every run starts from a topic model ``(B, A)``: its word–topic counts are the
model's expected counts over the training tokens (each topic weighed by its
share of the words) and a learned ``α`` starts from the Dirichlet moment-matched
to its ``A`` (:func:`start_state`). The spectral model is every run's start but
one: ``method='auto'`` on a corpus of short documents also runs the sampled
method from a collapsed Gibbs chain's topics (:func:`chain_topics_for`), a chain
run from a random start on a sample of the training documents, and lets the
validation documents choose (:mod:`jsmf_dask.pipeline.refine_candidates`); and
``start='both'`` runs every method from each.

Whatever the start, the refined model is checked against the spectral model it refines (:func:`against_start`): a
run that ends worse on unseen documents says so (:func:`worse_than_start`) and what to try (:func:`what_to_try`).
"""

from __future__ import annotations

import math

import numpy as np

from jsmf_dask import _progress
from jsmf_dask.kernels.chain import chain_topics
from jsmf_dask.kernels.metrics import match_topics
from jsmf_dask.kernels.variational import moment_alpha, topic_shares, topics_from_model
from jsmf_dask.pipeline.refine_sweeps import IMPROVEMENT
from jsmf_dask.stages.chain import chain_task
from jsmf_dask.stages.refine import SweepParams

__all__ = ["CHAIN_SAMPLE_TOKENS", "CHAIN_ITERATIONS", "CHAIN_ALPHA", "CHAIN_ETA", "start_state", "chain_topics_for",
           "HELDOUT_CHECKED_DOCS", "checked_heldout_fraction", "against_start", "worse_than_start", "what_to_try",
           "kept_state", "nan_to_none"]

#: The chain samples about this many training tokens (all of them on a smaller corpus), for
#: :data:`CHAIN_ITERATIONS` passes under the symmetric priors :data:`CHAIN_ALPHA` and :data:`CHAIN_ETA` (tomotopy's
#: starting α and its η). Measured (session 38, the benchmarks README; the sampled method refined from the chain's
#: topics against from the AP model's, held-out perplexity by the exact fold-in against Gibbs's median chain of
#: three): on the NIPS papers cut into 100-word pieces (K 20) 400k sampled tokens (a fifth of the training
#: documents) gave +0.3% after 200 passes and +0.0% after 100, against +1.3% from the AP start (a tenth: +0.7%); on
#: the 300-word pieces' 12k sample at K 50 −0.4% against it; on the 100-word pieces at K 50 and the 300-word
#: pieces at K 20 the AP start was better by 0.6% and 0.8%; at K 50 on the 300-word pieces the two were level. So
#: it is a candidate beside the spectral start, not a replacement. The chain's time is O(tokens · passes · K): 2.6 s
#: / 5.0 s / 9.7 s for 200k / 400k / 400k tokens at K 20 / 20 / 50, 200 passes, one core.
CHAIN_SAMPLE_TOKENS = 400_000
CHAIN_ITERATIONS = 200
CHAIN_ALPHA = 0.1
CHAIN_ETA = 0.01


def start_state(B: np.ndarray, A: np.ndarray, p_word: np.ndarray | None, alpha: float | str,
                tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """A run's starting word–topic counts over ``tokens`` training tokens and its first ``α``.

    Each topic's share of the tokens is the one with which ``B`` explains the word frequencies ``p_word``
    (:func:`~jsmf_dask.kernels.variational.topic_shares`: positive for every topic, where ``A``'s row sums — for a
    spectral model the anchors' block of ``C̄`` — can leave a topic with none, which refine could never revive);
    ``alpha='auto'`` starts from the Dirichlet with those shares as its mean, its concentration moment-matched to
    ``A``; a number is a symmetric prior.
    """
    shares = topic_shares(B, p_word, A)
    first = moment_alpha(A, mean=shares) if alpha == "auto" else np.full(B.shape[1], float(alpha))
    return topics_from_model(B, shares, tokens, 0.0), first


def chain_topics_for(blocks: list, params: SweepParams, like: np.ndarray,
                     training_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """The topics ``(B, A)`` (:func:`~jsmf_dask.kernels.chain.chain_topics`) of a collapsed Gibbs chain on a
    sample by id of the documents ``params`` trains on (about :data:`CHAIN_SAMPLE_TOKENS` of their
    ``training_tokens``), computed now (:func:`~jsmf_dask.stages.chain.chain_task`), in the order of the topics
    of ``like`` (N × K, the spectral model's) they match best (:func:`~jsmf_dask.kernels.metrics.match_topics`):
    so a model refined from them lists its topics as one refined from ``like`` would, and its changes from
    ``like`` are topic by topic."""
    fraction = min(1.0, CHAIN_SAMPLE_TOKENS / max(training_tokens, 1.0))
    ((word_topic, doc_topic, _),) = _progress.compute(chain_task(blocks, params, like.shape[1], fraction=fraction,
                                                                 alpha=CHAIN_ALPHA, eta=CHAIN_ETA,
                                                                 iterations=CHAIN_ITERATIONS))
    B, A = chain_topics(word_topic, doc_topic, alpha=CHAIN_ALPHA, eta=CHAIN_ETA)
    order = match_topics(B, like)
    return B[:, order], A[np.ix_(order, order)]


def _perplexities(loglik, tokens: float) -> list[float]:
    return [math.exp(-ll / tokens) if tokens else math.nan for ll in loglik]


#: With ``start_check='heldout'`` the final pass scores about this many held-out documents (by id; all of them below
#: it) by the exact fold-in, under the refined topics and the start's, to check the one against the other
#: (:func:`against_start`): at 300k documents and K 100, 8 s of a 218-s refine; on the NIPS papers (174 held-out
#: documents of about 470 scored tokens) at K 100, 4–5 s of a 7–8-s refine of 5 sweeps (the benchmarks README,
#: sessions 46 and 47).
HELDOUT_CHECKED_DOCS = 2000


def checked_heldout_fraction(start_check: str, heldout_docs: float) -> float:
    """The fraction of the ``heldout_docs`` held-out documents the final pass scores by the exact fold-in to check
    the refined model against its start: about :data:`HELDOUT_CHECKED_DOCS` of them, none for
    ``start_check='validation'`` (the validation documents' first and last scores check it instead)."""
    return 0.0 if start_check == "validation" else min(1.0, HELDOUT_CHECKED_DOCS / max(1.0, heldout_docs))


def against_start(final, validation_curve: list[float], source: str, method: str,
                  advice: str) -> tuple[str | None, dict]:
    """The warning a refine gives when it ended worse than its start (None when it did not), and its ``heldout``
    attributes, from the final pass's sums (:class:`~jsmf_dask.stages.refine.BlockSums`).

    Judged on the held-out documents by the exact fold-in (``heldout_sampled``: the reference scorer, on a
    sample of them), else (no held-out split, or ``start_check='validation'``) by the validation curve's first and
    last scores (documents unseen by the start too; by the chosen state too, whose score the curve ends with when
    refitted). The VB fold-in's perplexities of every held-out document are kept beside.
    """
    vb = _perplexities(final.heldout_loglik if final.heldout_loglik is not None else (0.0, 0.0), final.heldout_tokens)
    checked = final.heldout_sampled if final.heldout_sampled is not None else np.zeros(3)
    exact = _perplexities(checked[:2], checked[2])
    attrs = {"n_tokens": final.heldout_tokens, "start_perplexity": nan_to_none(vb[1]),
             "final_perplexity": nan_to_none(vb[0]),
             "sampled_fold_in": {"n_tokens": int(round(checked[2])), "start_perplexity": nan_to_none(exact[1]),
                                 "final_perplexity": nan_to_none(exact[0])}}
    if checked[2]:
        return worse_than_start(exact[1], exact[0], source, method, "held-out", advice), attrs
    return worse_than_start(validation_curve[0], validation_curve[-1], source, method, "validation", advice), attrs


def kept_state(attrs: dict, n_sweeps: int) -> str | None:
    """What a refined model (its ``attrs``, after ``n_sweeps`` sweeps) kept when its stop undid sweeps: the state
    after the validation documents' best sweep, or its start when no sweep improved on it. After CVB0 a kept start
    names the sampled method, which can gain where CVB0 cannot: on a plain-LDA corpus of 100k documents of 200 tokens
    at K 50, CVB0 kept its AP start (held-out perplexity 2228.4 by the exact fold-in, the start's 2228.5) where the
    sampled method ended 0.9% lower with half the B error, in 16 sweeps of 3.5× CVB0's time (the benchmarks README,
    session 46)."""
    kept = attrs["returned_state"] - 1
    if kept >= n_sweeps:
        return None
    if kept:
        return f"kept the state after sweep {kept}, their best"
    return "kept its start: no sweep improved on it" + (
        " (method='sampled' may, at about 3x CVB0's time a sweep)" if attrs.get("method") == "cvb0" else "")


def nan_to_none(value: float) -> float | None:
    """``value``, or None for NaN (a score that could not be made, in a model's JSON attributes)."""
    return None if math.isnan(value) else value


def worse_than_start(start: float, final: float, source: str, method: str, which: str, advice: str) -> str | None:
    """The warning to give when the refined topics' held-out (else validation) perplexity ends above the
    source model's by more than the stopping rule's resolution (:data:`IMPROVEMENT`, relative: a smaller change
    is no measured difference), ending with ``advice`` (:func:`what_to_try`). ``source``: what it started from as
    the warning names it (the spectral model's name, quoted; a chain's topics where the validation documents compare
    a run from them with its start). No choice of the fit depends on the held-out comparison, so those documents
    stay unseen."""
    if math.isnan(start) or math.isnan(final) or final <= start * (1 + IMPROVEMENT):
        return None
    return (f"refine ({method}) ended with {which} perplexity {final:.1f}, above {start:.1f} of the topics of "
            f"{source} it started from: the refined model is worse on unseen documents; {advice}")


def what_to_try(method: str, alpha, validation: float, stored_validation: float | None, model: str, swept: int) -> str:
    """What a refine that ended worse than its start could change, leaving out what it already did: a learned document
    prior, the validation stop (it chooses the sweeps; else half the ``swept``), another method (after CVB0 the sampled
    passes: where CVB0 ended worse than its start, at 300k documents and K 100, they ended 1.5% better, the
    benchmarks README, session 45); or keep the start."""
    tries = [] if isinstance(alpha, str) else ["alpha='auto'"]
    if not validation:
        tries.append(f"the validation stop (validation={stored_validation})" if stored_validation else
                     "validation documents to stop by (`jsmf cooccur --validation 0.05`, then refine)")
        if swept > 1:
            tries.append(f"fewer sweeps (sweeps={swept // 2})")
    tries.append(f"method='{'sampled' if method == 'cvb0' else 'cvb0'}'")
    return f"try {', '.join(tries)}, or keep {model!r}"
