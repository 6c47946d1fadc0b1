"""Choosing the number of topics K from per-document held-out scores (pure numpy; no dask, no I/O).

Every candidate K is scored on the same documents (document completion,
:func:`jsmf_dask.kernels.heldout.document_completion`), so the comparison
between two K is *paired*: its standard error comes from the per-document
differences, which are far less noisy than either K's score alone.

Symbols: ``L[j, d]`` is the log likelihood of document ``d``'s scored tokens
under the model of the ``j``-th K, ``n[d]`` their number; a model's score is
``ℓ_j = Σ_d L[j, d] / Σ_d n[d]`` (log likelihood per token; perplexity
``exp(−ℓ_j)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PerplexityCurve", "perplexity_curve", "recommend_k", "RULE", "ratio_se", "paired_gap"]

#: How :func:`recommend_k` picks, in words (printed by ``jsmf choose-k`` and stored with its result).
RULE = ("the smallest K whose validation log likelihood per token is within one paired standard error of the "
        "best K's (the one-standard-error rule on document completion)")


@dataclass(frozen=True)
class PerplexityCurve:
    """Validation scores of each candidate K.

    Attributes
    ----------
    topics : ndarray of int, shape (J,)
    perplexity : ndarray, shape (J,)
        ``exp(−ℓ_j)``.
    loglik_per_token : ndarray, shape (J,)
        ``ℓ_j``.
    gap_to_best : ndarray, shape (J,)
        ``ℓ_best − ℓ_j`` (≥ 0).
    paired_se : ndarray, shape (J,)
        Standard error of ``gap_to_best`` over documents (0 for the best K).
    n_docs, n_tokens : int
        The scored documents and tokens.
    """

    topics: np.ndarray
    perplexity: np.ndarray
    loglik_per_token: np.ndarray
    gap_to_best: np.ndarray
    paired_se: np.ndarray
    n_docs: int
    n_tokens: int

    @property
    def best(self) -> int:
        """The K with the highest (finite) validation log likelihood."""
        return int(self.topics[int(np.nanargmax(np.where(np.isfinite(self.loglik_per_token),
                                                         self.loglik_per_token, np.nan)))])


def ratio_se(a: np.ndarray, n: np.ndarray) -> float:
    """Standard error of the ratio estimator ``Σ a / Σ n`` over documents (first-order, with ``M/(M−1)``).

    With ``a`` a model's per-document log likelihoods and ``n`` the scored
    tokens, the standard error of its log likelihood per token (``ℓ``; on the
    perplexity scale multiply by ``exp(−ℓ)``); NaN below two documents.
    """
    a = np.asarray(a, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    m = a.size
    if m < 2:
        return float("nan")
    r = a.sum() / n.sum()
    return float(np.sqrt(m / (m - 1) * np.sum((a - r * n) ** 2)) / n.sum())


def paired_gap(L_ref: np.ndarray, L: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """``ℓ_ref − ℓ`` (log likelihood per token of two models scored on the same documents) and its paired
    standard error, from the per-document differences (:func:`ratio_se`)."""
    L_ref = np.asarray(L_ref, dtype=np.float64)
    L = np.asarray(L, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    return float((L_ref.sum() - L.sum()) / n.sum()), ratio_se(L_ref - L, n)


def perplexity_curve(topics, L: np.ndarray, n: np.ndarray) -> PerplexityCurve:
    """Perplexity of each K and the paired standard error of its gap to the best K.

    Parameters
    ----------
    topics : sequence of int, length J
    L : ndarray, shape (J, M)
        Per-document log likelihoods (every row over the same documents, in the same order).
    n : ndarray, shape (M,)
        Scored tokens per document.
    """
    topics = np.asarray(topics, dtype=np.int64)
    L = np.asarray(L, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if L.shape != (topics.size, n.size):
        raise ValueError(f"L has shape {L.shape}; expected ({topics.size}, {n.size})")
    keep = n > 0
    L, n = L[:, keep], n[keep]
    ll = L.sum(axis=1) / n.sum()
    finite = np.isfinite(ll)  # a degenerate model (NaN topics) takes no part: its gap and SE are NaN
    if not finite.any():
        raise ValueError("no candidate K has a finite validation log likelihood")
    best = int(np.flatnonzero(finite)[np.argmax(ll[finite])])
    gap = np.where(finite, ll[best] - ll, np.nan)
    se = np.array([0.0 if j == best else ratio_se(L[best] - L[j], n) if finite[j] else np.nan
                   for j in range(topics.size)])
    return PerplexityCurve(topics, np.exp(-ll), ll, gap, se, int(n.size), int(round(n.sum())))


def recommend_k(curve: PerplexityCurve, *, n_se: float = 1.0) -> int:
    """:data:`RULE`: the smallest K with ``gap_to_best ≤ n_se · paired_se``.

    With a single scored document (no standard error) the best K; a K whose
    score is not finite (a degenerate model) is never recommended.
    """
    finite = np.isfinite(curve.gap_to_best)
    se = np.where(np.isnan(curve.paired_se) & finite, 0.0, curve.paired_se)  # one document: no SE, the best K
    ok = finite & (curve.gap_to_best <= n_se * se)
    return int(curve.topics[ok].min())
