"""Batch variational Bayes for LDA: the document E-step, the M-step and the bound.

Notation (Blei, Ng & Jordan 2003; batch form of Hoffman, Blei & Bach 2010):

* ``λ`` (N×K here, word-major like ``B``): the variational Dirichlet parameters
  of the topics; ``E[log β_wk] = ψ(λ_wk) − ψ(Σ_w λ_wk)``. The refined topics
  are ``B = λ`` with its columns normalised.
* ``γ_d`` (K): the variational Dirichlet of document ``d``'s topic weights;
  ``E[log θ_dk] = ψ(γ_dk) − ψ(Σ_k γ_dk)``.
* ``α`` (K): the document–topic prior; ``η``: the topic–word prior.

For a document with counts ``n_dw`` the coordinate ascent alternates
``φ_dwk ∝ exp(E[log θ_dk]) exp(E[log β_wk])`` and ``γ_d = α + Σ_w n_dw φ_dw``;
the expected word–topic counts ``Σ_d n_dw φ_dwk`` of all documents give the
M-step ``λ = η + counts``. Every function here works on a CSR count matrix of
a block of documents at once; the per-document loop is compiled
(:mod:`jsmf_dask.kernels._vb_loop`), and each document iterates until its own
mean change of ``γ`` falls below ``tol``, so a document's result does not
depend on which block it is in. Memory: the block's counts, its ``γ``, the
N×K topics and counts, and one document's L×K rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps
from scipy.optimize import nnls
from scipy.special import gammaln, psi

from jsmf_dask.kernels._vb_loop import e_step_loop
from jsmf_dask.kernels.cooccurrence import document_weights

__all__ = [
    "EStepResult",
    "dirichlet_expectation",
    "initial_gamma",
    "e_step",
    "document_bound",
    "topic_bound",
    "topic_shares",
    "topics_from_model",
    "moment_alpha",
    "expected_topic_topic",
]

def dirichlet_expectation(param: np.ndarray, axis: int = -1) -> np.ndarray:
    """``E[log x]`` for ``x ~ Dirichlet(param)`` along ``axis``: ``ψ(param) − ψ(Σ param)``."""
    return psi(param) - psi(param.sum(axis=axis, keepdims=True))


def initial_gamma(lengths: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The usual start ``γ_d = α + n_d / K`` (each token split evenly over the topics)."""
    k = alpha.shape[0]
    return alpha[None, :] + np.asarray(lengths, dtype=np.float64)[:, None] / k


@dataclass
class EStepResult:
    """What the E-step of one block returns.

    Attributes
    ----------
    gamma : ndarray, shape (D, K)
        Each document's variational Dirichlet parameters after the E-step.
    counts : ndarray, shape (N, K)
        Expected word–topic counts ``Σ_d n_dw φ_dwk`` of the block.
    bound : float
        The documents' part of the evidence lower bound at the *incoming*
        ``γ`` and topics (with the optimal ``φ``): see :func:`document_bound`.
    iterations : int
        Inner iterations summed over documents.
    """

    gamma: np.ndarray
    counts: np.ndarray
    bound: float
    iterations: int


def e_step(
    X: sps.csr_array | sps.csr_matrix,
    exp_elog_beta: np.ndarray,
    alpha: np.ndarray,
    gamma: np.ndarray | None = None,
    *,
    max_iter: int = 100,
    tol: float = 1e-3,
) -> EStepResult:
    """The VB E-step of a block of documents.

    Parameters
    ----------
    X : sparse matrix, shape (D, N)
        Word counts of the block (CSR, non-negative).
    exp_elog_beta : ndarray, shape (N, K)
        ``exp(E[log β])`` of the current topics (from :func:`dirichlet_expectation`
        of ``λ`` along axis 0), or a fixed topic–word matrix ``B`` for folding in
        documents under a point estimate.
    alpha : ndarray, shape (K,)
    gamma : ndarray, shape (D, K), optional
        The documents' ``γ`` from the previous sweep (default
        :func:`initial_gamma`). Not modified.
    max_iter : int, default=100
        Inner iterations per document at most; 0 only scores (``bound``) the
        incoming ``γ``.
    tol : float, default=1e-3
        A document stops when the mean absolute change of its ``γ`` falls below this.

    Returns
    -------
    EStepResult
    """
    X = sps.csr_array(X, dtype=np.float64)
    X.sort_indices()
    alpha = np.asarray(alpha, dtype=np.float64)
    k = exp_elog_beta.shape[1]
    lengths = np.asarray(X.sum(axis=1)).ravel()
    gamma = initial_gamma(lengths, alpha) if gamma is None else np.array(gamma, dtype=np.float64)
    counts = np.zeros((X.shape[1], k))
    bound, iterations = e_step_loop(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data,
                                    np.ascontiguousarray(exp_elog_beta, dtype=np.float64), alpha, gamma,
                                    int(max_iter), float(tol), counts)
    counts *= exp_elog_beta
    return EStepResult(gamma, counts, bound, iterations)


def document_bound(X, exp_elog_beta: np.ndarray, alpha: np.ndarray, gamma: np.ndarray) -> float:
    """The documents' part of the evidence lower bound at ``γ`` with the optimal ``φ``.

    ``Σ_d Σ_w n_dw log Σ_k exp(E[log θ_dk] + E[log β_wk])
    + Σ_d [Σ_k (α_k − γ_dk) E[log θ_dk] + ln Γ(γ_dk) − ln Γ(α_k) + ln Γ(Σα) − ln Γ(Σ_k γ_dk)]``.
    """
    return e_step(X, exp_elog_beta, alpha, gamma, max_iter=0).bound


def topic_bound(lam: np.ndarray, eta: float) -> float:
    """The topics' part of the bound: ``Σ_k [Σ_w (η − λ_wk) E[log β_wk] + ln Γ(λ_wk) − ln Γ(η)]
    + ln Γ(Nη) − ln Γ(Σ_w λ_wk)``."""
    n = lam.shape[0]
    elog_beta = dirichlet_expectation(lam, axis=0)
    per_topic = ((eta - lam) * elog_beta).sum(axis=0) + (gammaln(lam) - gammaln(eta)).sum(axis=0)
    return float((per_topic + gammaln(n * eta) - gammaln(lam.sum(axis=0))).sum())


def topic_shares(B: np.ndarray, p_word: np.ndarray | None, A: np.ndarray | None = None) -> np.ndarray:
    """Each topic's share of the tokens, ``p(k)``, as the topics ``B`` explain the word frequencies ``p_word``.

    ``p(w) = Σ_k B_wk p(k)`` for any topic model, so ``p(k)`` is the
    non-negative least-squares solution of ``B s = p_word`` (solved on the
    K×K triangle of ``B``'s QR factorisation). For a recovered model (paper
    §3) the fit is exact: ``B``'s columns were normalised by these very
    shares, ``Σ_w p(k | w) p(w)``. Unlike the row sums of ``A`` — read off the
    anchors' K×K block of ``C̄``, which can leave a topic without any mass —
    a share is positive for every topic whose anchor word occurs.

    Parameters
    ----------
    B : ndarray, shape (N, K)
        Columns sum to 1.
    p_word : ndarray, shape (N,) or None
        The word frequencies the model was fitted to. Without them (or when
        they say nothing, or the solver does not settle) the row sums of
        ``A`` are used, then uniform shares.
    A : ndarray, shape (K, K), optional

    Returns
    -------
    ndarray, shape (K,)
        Non-negative, sums to 1.
    """
    B = np.clip(np.asarray(B, dtype=np.float64), 0.0, None)
    k = B.shape[1]
    share = None
    if p_word is not None and np.isfinite(p_word).all() and np.asarray(p_word).sum() > 0:
        q, r = np.linalg.qr(B)
        try:
            share = nnls(r, q.T @ (np.asarray(p_word, dtype=np.float64) / np.sum(p_word)), maxiter=50 * k)[0]
        except RuntimeError:  # the active set did not settle (a degenerate B): A's row sums instead
            share = None
    if (share is None or share.sum() <= 0) and A is not None:
        share = np.asarray(A, dtype=np.float64).sum(axis=1)
    if share is None or not np.isfinite(share).all() or share.sum() <= 0 or (share < 0).any():
        share = np.ones(k)
    return share / share.sum()


def topics_from_model(B: np.ndarray, share: np.ndarray, n_tokens: float, eta: float) -> np.ndarray:
    """``λ`` for a start from a fitted model: ``η`` plus the expected counts ``n_tokens · B_wk · p(k)``.

    ``share`` is ``p(k)``, each topic's share of the tokens
    (:func:`topic_shares`). This is the scale a sweep's M-step produces, so
    the first sweep's ``E[log β]`` is the spectral model's ``log B`` to
    within the digamma's small-count correction.
    """
    share = np.asarray(share, dtype=np.float64)
    return eta + n_tokens * np.clip(B, 0.0, None) * (share / share.sum())[None, :]


def moment_alpha(A: np.ndarray, *, mean: np.ndarray | None = None,
                 bounds: tuple[float, float] = (1e-3, 1e3)) -> np.ndarray:
    """The Dirichlet ``α`` whose ``E[θθᵀ]`` matches ``A`` in its mean and trace.

    For ``θ ~ Dirichlet(α)``, ``E[θ] = α/α₀`` and
    ``tr E[θθᵀ] = (α₀ Σ_k m_k² + 1)/(α₀ + 1)`` with ``m = E[θ]``, so with
    ``m = A·1`` (the row sums of the topic–topic matrix, or ``mean`` when
    given: the topics' shares of :func:`topic_shares`)
    ``α₀ = (1 − tr A)/(tr A − Σ m²)`` and ``α = α₀ m``. ``α₀`` is kept within
    ``bounds`` times K (a trace at or below ``Σ m²`` means no sign of sparse
    documents: the upper bound is used). An ``A`` without mass (a fit whose
    anchors never co-occur: ``A`` is zero) says nothing: the symmetric
    ``α = 0.1`` then (LDA's customary prior).
    """
    A = np.asarray(A, dtype=np.float64)
    k = A.shape[0]
    total = A.sum()
    if not np.isfinite(A).all() or total <= 0:
        return np.full(k, 0.1)
    A = A / total
    m = np.clip(A.sum(axis=1) if mean is None else np.asarray(mean, dtype=np.float64), 1e-12, None)
    m = m / m.sum()
    tr = float(np.trace(A))
    excess = tr - float(m @ m)
    a0 = (1.0 - tr) / excess if excess > 0 else np.inf
    a0 = float(np.clip(a0, bounds[0] * k, bounds[1] * k))
    return a0 * m


def expected_topic_topic(gamma: np.ndarray, alpha: np.ndarray, weighting: str = "documents") -> np.ndarray:
    """``Σ_d w_d (n_d n_dᵀ − diag n_d)/(ℓ_d(ℓ_d − 1))`` over documents with ``ℓ_d ≥ 2``, not yet normalised.

    ``n_d = γ_d − α`` are the expected topic counts of document ``d`` and
    ``ℓ_d`` their sum: the topic–topic matrix ``A`` formed from the
    documents the way ``C`` is formed from word counts (paper eq. 1), each
    weighed as ``C`` weighed them (``w_d``: :func:`~jsmf_dask.kernels.cooccurrence.document_weights`).
    """
    n = np.clip(gamma - alpha[None, :], 0.0, None)
    length = n.sum(axis=1)
    ok = length >= 2
    n, length = n[ok], length[ok]
    scale = document_weights(length, weighting) / (length * (length - 1))
    return (n * scale[:, None]).T @ n - np.diag((n * scale[:, None]).sum(axis=0))
