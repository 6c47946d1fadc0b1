"""A collapsed Gibbs chain on a sample of documents, and the topic model it ends in (pure numpy; loop compiled).

Collapsed Gibbs sampling for LDA (Griffiths & Steyvers 2004, "Finding
scientific topics"): with ``n_wk`` the tokens of word ``w`` assigned to topic
``k``, ``n_k = Σ_w n_wk`` and ``n_dk`` document ``d``'s tokens in topic ``k``,
each token ``i`` of word ``w`` in document ``d`` is drawn in turn from

    p(z_i = k) ∝ (n_wk^¬i + η) / (n_k^¬i + Nη) · (n_dk^¬i + α_k),

its own assignment removed from every count, from a uniform start. Unlike
refine's sweeps (:mod:`jsmf_dask.kernels.collapsed`: the topics fixed for a
pass, documents keeping only average counts) every draw moves the topics at
once, which is why a chain finds its basin from a random start; and why it is
sequential, so refine runs one on a sample of the training documents only, as
a start (:func:`jsmf_dask.pipeline.refine_start.chain_topics_for`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels._chain_loop import chain_loop

__all__ = ["collapsed_chain", "chain_topics"]


def collapsed_chain(X: sps.csr_array | sps.csr_matrix, n_topics: int, *, alpha: float, eta: float,
                    iterations: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The last state of a collapsed Gibbs chain over the documents of ``X``: its word–topic and document–topic
    counts.

    Parameters
    ----------
    X : sparse matrix, shape (D, N)
        Word counts (CSR, whole non-negative counts), the documents in the chain's order.
    n_topics : int
    alpha, eta : float
        Symmetric document–topic and topic–word priors.
    iterations : int
        Passes over every token after the uniform start.
    seed : int
        The chain's draws depend on it and on ``X`` (its rows in their order) alone.

    Returns
    -------
    word_topic : ndarray, shape (N, K)
        ``n_wk``, whole numbers in float64.
    doc_topic : ndarray, shape (D, K)
        ``n_dk``.
    """
    if n_topics < 1 or iterations < 0 or alpha <= 0 or eta <= 0:
        raise ValueError(f"collapsed_chain: needs n_topics >= 1, iterations >= 0 and positive priors, got "
                         f"{n_topics}, {iterations}, alpha {alpha}, eta {eta}")
    X = sps.csr_array(X)
    if X.nnz and (X.data.min() < 0 or not np.array_equal(X.data, np.round(X.data))):
        raise ValueError("collapsed_chain: X must hold whole non-negative counts (a token is drawn at a time)")
    word_topic = np.zeros((X.shape[1], n_topics))
    doc_topic = np.zeros((X.shape[0], n_topics))
    chain_loop(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64),
               np.full(n_topics, float(alpha)), float(eta), int(iterations), int(seed), word_topic, doc_topic)
    return word_topic, doc_topic


def chain_topics(word_topic: np.ndarray, doc_topic: np.ndarray, *, alpha: float,
                 eta: float) -> tuple[np.ndarray, np.ndarray]:
    """A chain state's topics ``B`` (``(n_wk + η)/(n_k + Nη)``, N × K) and ``A``, the documents' mean
    ``θ_d θ_dᵀ`` with ``θ_d = (n_d + α)/(n_d + Kα)`` (K × K, summing to 1; uniform for a chain over no
    document): a model refine can start from as it starts from a spectral one."""
    n_words, k = word_topic.shape
    B = (word_topic + eta) / (word_topic.sum(axis=0) + n_words * eta)
    if doc_topic.shape[0] == 0:
        return B, np.full((k, k), 1.0 / k**2)
    theta = (doc_topic + alpha) / (doc_topic.sum(axis=1, keepdims=True) + k * alpha)
    A = theta.T @ theta
    return B, A / A.sum()
