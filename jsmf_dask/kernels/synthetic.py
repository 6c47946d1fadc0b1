"""Synthetic corpora drawn from a known topic model (numpy only): ``jsmf synth``, tests and benchmarks.

Documents follow the generative model the paper assumes: a document's topic
weights ``θ_m`` come from a prior (Dirichlet here), each of its ``n_m`` tokens
picks a topic from ``θ_m`` and a word from that topic's column of ``B``. Then
``E[C] = B A Bᵀ`` with ``A = E[θ θᵀ]``, the ground truth for the estimator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "draw_theta",
    "random_covariance",
    "SyntheticCorpus",
    "separable_topics",
    "dirichlet_topic_topic",
    "sample_corpus",
]


@dataclass
class SyntheticCorpus:
    """Documents as CSR buffers (``offsets``, ``word_ids``, ``counts``) and their true weights.

    Attributes
    ----------
    offsets : ndarray of int64, shape (M + 1,)
    word_ids : ndarray of int32
        Sorted within each document.
    counts : ndarray of int32
    theta : ndarray of float64, shape (M, K)
        Each document's topic weights.
    """

    offsets: np.ndarray
    word_ids: np.ndarray
    counts: np.ndarray
    theta: np.ndarray

    @property
    def n_docs(self) -> int:
        return self.offsets.size - 1

    def documents(self) -> list[dict[int, int]]:
        """Each document as ``{word_id: count}`` (for slow references in tests)."""
        return [
            dict(zip(self.word_ids[a:b].tolist(), self.counts[a:b].tolist(), strict=True))
            for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True)
        ]


def separable_topics(
    n_words: int, n_topics: int, rng: np.random.Generator, *, concentration: float = 0.1,
    anchor_mass: float = 0.05,
) -> np.ndarray:
    """A column-stochastic ``B`` (N×K) whose words ``0..K-1`` are anchors (word k only in topic k).

    Non-anchor rows draw each topic from a Dirichlet(``concentration``) over
    the remaining words; each anchor carries ``anchor_mass`` of its topic.
    """
    if n_words <= n_topics:
        raise ValueError(f"need more words ({n_words}) than topics ({n_topics})")
    B = np.zeros((n_words, n_topics))
    for k in range(n_topics):
        B[n_topics:, k] = rng.dirichlet(np.full(n_words - n_topics, concentration)) * (1 - anchor_mass)
        B[k, k] = anchor_mass
    return B


def dirichlet_topic_topic(alpha: np.ndarray) -> np.ndarray:
    """``A = E[θθᵀ]`` for θ ~ Dirichlet(α): ``(ααᵀ + diag α) / (α₀ (α₀ + 1))``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    a0 = alpha.sum()
    return (np.outer(alpha, alpha) + np.diag(alpha)) / (a0 * (a0 + 1))


def draw_theta(prior: str, alpha: np.ndarray, size: int, rng: np.random.Generator,
               covariance: np.ndarray | None = None) -> np.ndarray:
    """Topic weights of ``size`` documents.

    ``dirichlet``: θ ~ Dirichlet(α). ``correlated``: logistic normal,
    θ = softmax(log α + L z) with ``L Lᵀ = covariance`` (default: a random
    correlation structure), the prior of correlated topic models.
    """
    if prior == "dirichlet":
        return rng.dirichlet(alpha, size=size)
    k = alpha.shape[0]
    if covariance is None:
        raise ValueError("the correlated prior needs a covariance")
    z = rng.standard_normal((size, k)) @ np.linalg.cholesky(covariance).T + np.log(alpha / alpha.sum())
    z -= z.max(axis=1, keepdims=True)
    theta = np.exp(z)
    return theta / theta.sum(axis=1, keepdims=True)


def random_covariance(k: int, rng: np.random.Generator, *, scale: float = 1.0) -> np.ndarray:
    """A random covariance with strong correlations between some topics (for the correlated prior)."""
    F = rng.standard_normal((k, max(1, k // 4)))
    S = F @ F.T + np.eye(k)
    d = np.sqrt(np.diag(S))
    return scale * S / np.outer(d, d)


def sample_corpus(
    B: np.ndarray,
    alpha: np.ndarray,
    n_docs: int,
    mean_length: float,
    rng: np.random.Generator,
    *,
    min_length: int = 2,
    chunk_docs: int = 20000,
    prior: str = "dirichlet",
    covariance: np.ndarray | None = None,
) -> SyntheticCorpus:
    """Draw ``n_docs`` documents of Poisson(``mean_length``) tokens (at least ``min_length``).

    Topic weights come from :func:`draw_theta` (``prior``). Vectorised in chunks
    of documents, so a NYTimes-sized corpus takes seconds per million
    documents' worth of tokens.
    """
    n_words, n_topics = B.shape
    cumB = np.cumsum(B, axis=0)
    cumB[-1, :] = 1.0
    offsets = [np.zeros(1, dtype=np.int64)]
    words_out, counts_out, thetas = [], [], []
    total = 0
    for start in range(0, n_docs, chunk_docs):
        m = min(chunk_docs, n_docs - start)
        theta = draw_theta(prior, alpha, m, rng, covariance)
        lengths = np.maximum(rng.poisson(mean_length, size=m), min_length)
        doc_of = np.repeat(np.arange(m), lengths)
        cumT = np.cumsum(theta, axis=1)
        cumT[:, -1] = 1.0
        u = rng.random(doc_of.size)
        topic = np.empty(doc_of.size, dtype=np.int64)
        for k0 in range(0, doc_of.size, 1 << 22):
            sl = slice(k0, k0 + (1 << 22))
            topic[sl] = (u[sl, None] > cumT[doc_of[sl]]).sum(axis=1)
        np.minimum(topic, n_topics - 1, out=topic)
        word = np.empty(doc_of.size, dtype=np.int64)
        v = rng.random(doc_of.size)
        for k in range(n_topics):
            sel = topic == k
            word[sel] = np.searchsorted(cumB[:, k], v[sel], side="right")
        np.minimum(word, n_words - 1, out=word)
        keys, cnt = np.unique(doc_of * n_words + word, return_counts=True)
        d = keys // n_words
        per_doc = np.bincount(d, minlength=m)
        offsets.append(total + np.cumsum(per_doc))
        total += keys.size
        words_out.append((keys % n_words).astype(np.int32))
        counts_out.append(cnt.astype(np.int32))
        thetas.append(theta)
    return SyntheticCorpus(
        offsets=np.concatenate(offsets),
        word_ids=np.concatenate(words_out),
        counts=np.concatenate(counts_out),
        theta=np.concatenate(thetas),
    )
