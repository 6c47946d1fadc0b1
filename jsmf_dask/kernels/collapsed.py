"""Batch CVB0 and sampled passes for LDA, and Minka's fixed points for their priors, as pure numpy (loops compiled).

CVB0 (zero-order collapsed variational Bayes; Asuncion, Welling, Smyth & Teh
2009, "On smoothing and inference for topic models") keeps, for every token,
a responsibility ``γ_ik = q(z_i = k)``; with ``W_wk`` the expected word–topic
counts (``Σ_i γ_ik`` over the tokens of word ``w``; N×K, word-major like
``B``), ``T_k = Σ_w W_wk`` and ``N_dk`` the document's expected topic counts,
a token ``i`` of word ``w`` in document ``d`` is updated by

    γ_ik ∝ (W_wk − γ_ik + η) / (T_k − γ_ik + Nη) · (N_dk − γ_ik + α_k),

its own responsibility removed from every count. The topics are
``φ_wk = (W_wk + η)/(T_k + Nη)`` and a document's weights
``θ_dk = (N_dk + α_k)/(n_d + α₀)``.

Batch form kept here (what a sweep over Parquet row groups can do with
O(M·K + N·K) state, the form of stochastic CVB0, Foulds et al. 2013):

* ``W`` and ``T`` are the previous sweep's totals, fixed for the sweep; each
  block returns its expected counts and a tree sum forms the next ``W``;
* between sweeps each document keeps only ``N_dk``; its responsibilities
  exist while it is processed: first ``ρ_wk ∝ (W_wk + η)/(T_k + Nη)·(N_dk + α_k)``
  from the incoming ``N_dk`` (nothing to remove: the old responsibilities
  are gone), ``N_dk = Σ_w n_dw ρ_wk``, then up to ``max_iter`` updates of every
  word of the document at once from the same state (the formula above, with
  ``γ_ik`` the token's current ``ρ``, which is what it adds to the counts
  once the sweep is summed; identical to the textbook update at a fixed
  point), until the mean change of ``N_d`` falls below ``tol``.

The tokens of one word in one document share their responsibility, so the
loop runs over a document's distinct words. A document's result depends only
on itself and the incoming state, not on its block.

Priors (Minka 2000, "Estimating a Dirichlet distribution"; Wallach, Mimno &
McCallum 2009 on why an asymmetric ``α`` and a symmetric ``η``): the fixed
point ``α_k ← α_k Σ_d[ψ(N_dk + α_k) − ψ(α_k)] / Σ_d[ψ(n_d + α₀) − ψ(α₀)]``
and its symmetric form for ``η`` over the topics' word counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps
from scipy.special import psi

from jsmf_dask.kernels._cvb0_loop import cvb0_loop
from jsmf_dask.kernels._sampled_loop import sampled_loop

__all__ = ["CollapsedPass", "cvb0_step", "sampled_step", "draw_seeds", "initial_doc_topic", "collapsed_topics",
           "collapsed_theta", "overrelaxed_counts", "minka_alpha_step", "learn_alpha", "learn_eta", "ALPHA_BOUNDS",
           "ETA_BOUNDS", "SAMPLED_BURN_IN", "SAMPLED_DRAWS"]

#: A sampled pass's Gibbs passes per document: discarded, then averaged (:func:`sampled_step`). Measured in a
#: one-core probe on the NIPS papers cut into 100-word documents (K 50, session 34; held-out perplexity against
#: Gibbs's chain): 3 + 5 passes −2.3% after 20 sweeps and −3.5% after 40; 1 + 2 passes −1.2% after 40 and
#: −2.0% after 60 — about the same gain per pass, and fewer sweeps (graphs, validation scores) for it.
SAMPLED_BURN_IN = 3
SAMPLED_DRAWS = 5

#: Learned priors are kept in these ranges (a fixed point can run off to 0 on degenerate counts).
ALPHA_BOUNDS = (1e-4, 1e2)
ETA_BOUNDS = (1e-4, 10.0)


@dataclass
class CollapsedPass:
    """What one pass over a block returns (CVB0's, :func:`cvb0_step`, or a sampled one, :func:`sampled_step`).

    Attributes
    ----------
    doc_topic : ndarray, shape (D, K)
        The documents' expected topic counts ``N_dk`` after the pass.
    counts : ndarray, shape (N, K)
        The block's expected word–topic counts ``Σ_d n_dw ρ_dwk``.
    prior_sums : ndarray, shape (K + 1,) or None
        With ``prior_stats``: Minka's statistics at the outgoing state and the
        incoming ``α``: ``Σ_d E_q[ψ(n_dk + α_k)] − ψ(α_k)`` per topic, then
        ``Σ_d ψ(n_d + α₀) − ψ(α₀)``. The expectation is over the distribution
        of the topic count ``n_dk`` under the responsibilities, exact for
        counts below :data:`~jsmf_dask.kernels._cvb0_loop.EXACT_COUNTS`: ψ is
        concave, so the plug-in ``ψ(N_dk + α_k)`` overstates it, most for
        the small counts that dominate, and with it ``α`` (on baskets of 2–10
        items drawn with α₀ = 1 the plug-in learned α₀ ≈ 2.7).
    log_likelihood : float
        ``Σ_d Σ_w n_dw log Σ_k θ_dk φ_wk`` at the incoming state.
    iterations : int
        Inner iterations summed over documents (a sampled pass: Gibbs passes).
    """

    doc_topic: np.ndarray
    counts: np.ndarray
    prior_sums: np.ndarray | None
    log_likelihood: float
    iterations: int


def initial_doc_topic(lengths: np.ndarray, k: int) -> np.ndarray:
    """``N_dk = n_d / K``: each document's tokens split evenly (the start of the first sweep)."""
    return np.repeat(np.asarray(lengths, dtype=np.float64)[:, None] / k, k, axis=1)


def _loop_inputs(X, word_topic, alpha, doc_topic, prior_stats) -> tuple:
    """What a compiled pass takes: ``X`` as sorted float64 CSR, ``α`` and ``W`` as float64, the incoming ``N_d``
    (a copy; :func:`initial_doc_topic` when None), zeroed counts and Minka sums, and the documents whose
    statistics are summed (``prior_stats``: every one, none, or a mask)."""
    X = sps.csr_array(X, dtype=np.float64)
    X.sort_indices()
    word_topic = np.ascontiguousarray(word_topic, dtype=np.float64)
    n_words, k = word_topic.shape
    if doc_topic is None:
        doc_topic = initial_doc_topic(np.asarray(X.sum(axis=1)).ravel(), k)
    if isinstance(prior_stats, np.ndarray):
        stats_docs = np.asarray(prior_stats, dtype=np.bool_)
    else:
        stats_docs = np.full(X.shape[0], bool(prior_stats))
    return (X, np.asarray(alpha, dtype=np.float64), word_topic, np.array(doc_topic, dtype=np.float64),
            np.zeros((n_words, k)), np.zeros(k + 1), stats_docs)


def _wanted(prior_stats, prior_sums: np.ndarray) -> np.ndarray | None:
    """Minka's sums when ``prior_stats`` asked for them (True or a mask), else None."""
    return prior_sums if prior_stats is True or isinstance(prior_stats, np.ndarray) else None


def cvb0_step(
    X: sps.csr_array | sps.csr_matrix,
    word_topic: np.ndarray,
    alpha: np.ndarray,
    eta: float,
    doc_topic: np.ndarray | None = None,
    *,
    max_iter: int = 3,
    tol: float = 1e-3,
    prior_stats: bool | np.ndarray = False,
    draw_seeds: np.ndarray | None = None,
) -> CollapsedPass:
    """One CVB0 pass over a block of documents (see the module docstring).

    Parameters
    ----------
    X : sparse matrix, shape (D, N)
        Word counts of the block (CSR, non-negative).
    word_topic : ndarray, shape (N, K)
        ``W``: the expected word–topic counts entering the sweep (every
        training document's, this block's included).
    alpha : ndarray, shape (K,)
    eta : float
    doc_topic : ndarray, shape (D, K), optional
        The documents' ``N_dk`` from the previous sweep (default
        :func:`initial_doc_topic`). Not modified.
    max_iter : int, default=3
        Updates with the own responsibility removed, per document, at most.
    tol : float, default=1e-3
        A document stops when the mean absolute change of its ``N_d`` falls below this.
    prior_stats : bool or ndarray of bool, shape (D,), default=False
        Also return Minka's statistics for ``α`` (:attr:`CollapsedPass.prior_sums`),
        summed over every document (True) or over those marked (a sample is
        enough for the ratios Minka's step uses; they cost about
        :data:`~jsmf_dask.kernels._cvb0_loop.EXACT_COUNTS` operations per token
        and topic, as much as the update).
    draw_seeds : ndarray of int, shape (D,), optional
        A drawn pass: each document adds counts drawn from its
        responsibilities (a multinomial per word, seeded by the document's
        seed) to ``counts`` and keeps them as its ``N_d``, instead of their
        expectation (see :func:`draw_seeds`). The statistics for ``α``
        stay the expectations'.

    Returns
    -------
    CollapsedPass
    """
    X, alpha, word_topic, doc_topic, counts, prior_sums, stats_docs = _loop_inputs(X, word_topic, alpha, doc_topic,
                                                                                  prior_stats)
    iterations, loglik = cvb0_loop(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data, word_topic,
                                   word_topic.sum(axis=0), alpha, float(eta), doc_topic, int(max_iter), float(tol),
                                   counts, prior_sums, stats_docs,
                                   np.zeros(0, np.int64) if draw_seeds is None else
                                   np.asarray(draw_seeds, dtype=np.int64))
    return CollapsedPass(doc_topic, counts, _wanted(prior_stats, prior_sums), float(loglik), int(iterations))


def sampled_step(
    X: sps.csr_array | sps.csr_matrix,
    word_topic: np.ndarray,
    alpha: np.ndarray,
    eta: float,
    doc_topic: np.ndarray | None,
    seeds: np.ndarray,
    *,
    burn_in: int = SAMPLED_BURN_IN,
    draws: int = SAMPLED_DRAWS,
    prior_stats: bool | np.ndarray = False,
) -> CollapsedPass:
    """One sampled pass over a block: each document's topic assignments drawn by Gibbs sampling under the
    sweep's topics, their average returned.

    The local step of Mimno, Hoffman & Blei (2012, "Sparse stochastic
    inference for latent Dirichlet allocation"), in the batch form of
    :func:`cvb0_step` (``W`` fixed for the pass; a document keeps only its
    average topic counts ``N_d`` between passes). For each document, under
    ``φ = (W + η)/(T + Nη)``: every token is first drawn from
    ``p(z = k) ∝ φ_wk (N_dk + α_k)`` (its incoming counts, nothing removed),
    then ``burn_in + draws`` Gibbs passes draw each token in turn from
    ``p(z_i = k) ∝ φ_wk (n_dk^¬i + α_k)``, ``n_d^¬i`` the document's current
    assignments but the token's own. The last ``draws`` passes are averaged:
    the document's new ``N_d``, its expected word–topic counts and, for ``α``,
    ``ψ(n_dk + α_k)`` at each draw's counts. Unlike CVB0's mean field, the
    draws keep how a document's tokens gather in few topics: on short
    documents the topics and a sparser ``α`` that this finds score better on
    unseen documents (the README's measurements).

    Parameters
    ----------
    X : sparse matrix, shape (D, N)
        Word counts of the block (CSR, whole non-negative counts).
    word_topic : ndarray, shape (N, K)
        ``W``: the expected word–topic counts entering the sweep.
    alpha : ndarray, shape (K,)
    eta : float
    doc_topic : ndarray, shape (D, K) or None
        The documents' ``N_dk`` from the previous sweep (None:
        :func:`initial_doc_topic`). Not modified.
    seeds : ndarray of int, shape (D,)
        One seed per document (:func:`draw_seeds`): its draws depend on it and the incoming state only.
    burn_in, draws : int
        Gibbs passes per document discarded, then averaged.
    prior_stats : bool or ndarray of bool, shape (D,), default=False
        Also return Minka's statistics for ``α`` (:attr:`CollapsedPass.prior_sums`), summed over every
        document (True) or over those marked: the average over the draws of ``ψ(n_dk + α_k) − ψ(α_k)``.

    Returns
    -------
    CollapsedPass
    """
    if draws < 1 or burn_in < 0:
        raise ValueError(f"sampled_step: draws must be at least 1 and burn_in at least 0, got {draws}, {burn_in}")
    X, alpha, word_topic, doc_topic, counts, prior_sums, stats_docs = _loop_inputs(X, word_topic, alpha, doc_topic,
                                                                                  prior_stats)
    if X.nnz and not np.array_equal(X.data, np.round(X.data)):
        raise ValueError("sampled_step: X must hold whole counts (a token is drawn at a time)")
    loglik = sampled_loop(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data, word_topic,
                          word_topic.sum(axis=0), alpha, float(eta), doc_topic, int(burn_in), int(draws),
                          np.asarray(seeds, dtype=np.int64), counts, prior_sums, stats_docs)
    return CollapsedPass(doc_topic, counts, _wanted(prior_stats, prior_sums), float(loglik),
                         X.shape[0] * (burn_in + draws))


def draw_seeds(doc_hashes: np.ndarray, sweep: int) -> np.ndarray:
    """Seeds (0 ≤ seed < 2³²) of a drawn pass: one per document from its id's 64-bit hash and the sweep
    (splitmix64's finaliser of their mix), so that a document's draws depend on nothing else."""
    with np.errstate(over="ignore"):
        z = np.asarray(doc_hashes, dtype=np.uint64) + np.uint64(sweep) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(32)).astype(np.int64)


def collapsed_topics(word_topic: np.ndarray, eta: float) -> np.ndarray:
    """``φ = (W + η)/(T + Nη)``: the topics (N×K, columns sum to 1) of expected counts ``W``."""
    smoothed = np.asarray(word_topic, dtype=np.float64) + eta
    return smoothed / smoothed.sum(axis=0, keepdims=True)


def overrelaxed_counts(word_topic: np.ndarray, updated: np.ndarray, step: float) -> np.ndarray:
    """``max(W + s (W' − W), 0)``: the counts moved ``step`` times a sweep's update ``W' − W`` (over-relaxation).

    ``step`` 1 is the sweep's own ``W'``; above 1 it goes on along the update,
    which a fixed-point iteration that creeps along one direction (CVB0 from a
    spectral start, on real text) takes many sweeps to travel. Counts that would
    turn negative are 0.
    """
    word_topic = np.asarray(word_topic, dtype=np.float64)
    return np.maximum(word_topic + step * (np.asarray(updated, dtype=np.float64) - word_topic), 0.0)


def collapsed_theta(doc_topic: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``θ = (N_d + α)/(n_d + α₀)``: documents' topic weights (rows sum to 1)."""
    smoothed = np.asarray(doc_topic, dtype=np.float64) + alpha[None, :]
    return smoothed / smoothed.sum(axis=1, keepdims=True)


def minka_alpha_step(alpha: np.ndarray, prior_sums: np.ndarray, *,
                     bounds: tuple[float, float] = ALPHA_BOUNDS) -> np.ndarray:
    """One fixed-point update of an asymmetric ``α`` from :attr:`CollapsedPass.prior_sums` (summed over blocks).

    ``α_k ← α_k S_k / S₀`` with ``S_k = Σ_d ψ(N_dk + α_k) − ψ(α_k)`` and
    ``S₀ = Σ_d ψ(n_d + α₀) − ψ(α₀)``, clipped to ``bounds``.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    per_topic, total = prior_sums[:-1], prior_sums[-1]
    if not total > 0:
        return alpha.copy()
    return np.clip(alpha * np.maximum(per_topic, 0.0) / total, *bounds)


def _alpha_sums(doc_topic: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    lengths = doc_topic.sum(axis=1)
    per_topic = (psi(doc_topic + alpha[None, :]) - psi(alpha)[None, :]).sum(axis=0)
    return np.append(per_topic, (psi(lengths + alpha.sum()) - psi(alpha.sum())).sum())


def learn_alpha(doc_topic: np.ndarray, alpha: np.ndarray | float, *, max_iter: int = 1000, tol: float = 1e-9,
                bounds: tuple[float, float] = ALPHA_BOUNDS) -> np.ndarray:
    """Minka's fixed point for an asymmetric ``α`` iterated to convergence on a matrix of topic counts.

    Parameters
    ----------
    doc_topic : ndarray, shape (D, K)
        Documents' (expected) topic counts.
    alpha : ndarray, shape (K,), or float
        The start.
    """
    doc_topic = np.asarray(doc_topic, dtype=np.float64)
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (doc_topic.shape[1],)).copy()
    for _ in range(max_iter):
        new = minka_alpha_step(alpha, _alpha_sums(doc_topic, alpha), bounds=bounds)
        if np.max(np.abs(new - alpha) / alpha) < tol:
            return new
        alpha = new
    return alpha


def learn_eta(word_topic: np.ndarray, eta: float, *, max_iter: int = 1000, tol: float = 1e-9,
              bounds: tuple[float, float] = ETA_BOUNDS) -> float:
    """Minka's fixed point for a symmetric topic–word prior ``η`` from expected counts ``W`` (N×K).

    ``η ← η Σ_k Σ_w [ψ(W_wk + η) − ψ(η)] / (N Σ_k [ψ(T_k + Nη) − ψ(Nη)])``.
    """
    W = np.asarray(word_topic, dtype=np.float64)
    n = W.shape[0]
    totals = W.sum(axis=0)
    eta = float(eta)
    for _ in range(max_iter):
        num = float((psi(W + eta) - psi(eta)).sum())
        den = n * float((psi(totals + n * eta) - psi(n * eta)).sum())
        new = float(np.clip(eta * num / den, *bounds)) if den > 0 else eta
        if abs(new - eta) / eta < tol:
            return new
        eta = new
    return eta
