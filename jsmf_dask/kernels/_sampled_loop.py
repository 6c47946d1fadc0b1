"""The compiled per-document loop of a sampled pass (numba; no dask, no I/O).

See :func:`jsmf_dask.kernels.collapsed.sampled_step` for the update and the
notation. Each document draws from its own stream of uniforms started at its
seed (:mod:`jsmf_dask.kernels._stream`) and takes exactly one uniform per
token and pass, so its draws depend on nothing but its seed and the incoming
state: not on its block, the thread or the other documents. A token's topic is
the first whose cumulative weight exceeds its uniform, so a rounding-level
difference in the incoming state (another summation order of ``W`` on another
cluster) moves a draw only where the uniform falls within that rounding of a
boundary.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from jsmf_dask.kernels._stream import start_stream, uniform
from jsmf_dask.kernels._vb_loop import digamma

_FASTMATH = {"reassoc", "contract"}

#: ``ψ(n + α) − ψ(α)`` is summed as ``Σ_{i<n} 1/(α + i)`` below this count, by two digammas above.
_SUMMED_COUNTS = 16


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _draw(phi, counts, alpha, k, u_scale):
    """The topic of one token: weights ``φ_t (counts_t + α_t)``, the first topic whose cumulative weight
    exceeds ``u_scale`` times their sum (:func:`~jsmf_dask.kernels._categorical.pick`'s walk, each weight computed
    where it is added instead of read from a stored row)."""
    s = 0.0
    for t in range(k):
        s += phi[t] * (counts[t] + alpha[t])
    u = u_scale * s
    acc = 0.0
    for t in range(k - 1):
        acc += phi[t] * (counts[t] + alpha[t])
        if acc > u:
            return t
    return k - 1


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _psi_gain(n, a, psi_a):
    """``ψ(n + a) − ψ(a)`` for a whole ``n ≥ 0`` (``psi_a = ψ(a)``)."""
    if n < _SUMMED_COUNTS:
        s = 0.0
        for i in range(int(n)):
            s += 1.0 / (a + i)
        return s
    return digamma(n + a) - psi_a


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def sampled_loop(indptr, indices, data, word_topic, topic_total, alpha, eta, doc_topic, burn_in, draws, seeds,
                 counts, prior_sums, stats_docs):
    """A sampled pass over every document of a CSR block, in place on ``doc_topic``; adds to ``counts`` and
    ``prior_sums``. Returns the training log likelihood ``Σ n_dw log Σ_k θ_dk φ_wk`` at the incoming state.

    ``data`` must hold whole counts. ``prior_sums`` (K + 1) receives, summed
    over the documents ``d`` with ``stats_docs[d]``, the average over the
    draws of ``ψ(n_dk + α_k) − ψ(α_k)`` for each k, then ``ψ(n_d + α₀) − ψ(α₀)``.
    """
    n_docs = indptr.size - 1
    n_words, k = word_topic.shape
    longest_rows, longest_tokens = 1, 1
    for d in range(n_docs):
        longest_rows = max(longest_rows, indptr[d + 1] - indptr[d])
        n_d = 0
        for j in range(indptr[d], indptr[d + 1]):
            n_d += int(data[j])
        longest_tokens = max(longest_tokens, n_d)
    rows = np.empty((longest_rows, k))  # φ of the document's words
    token_row = np.empty(longest_tokens, np.int64)
    topic = np.empty(longest_tokens, np.int64)
    nd = np.empty(k)  # the document's current topic counts (whole numbers, exact in float64)
    mean = np.empty(k)  # the draws' average topic counts
    stream = np.zeros(1, np.uint64)
    denom = np.empty(k)
    psi_alpha = np.empty(k)
    alpha_sum = 0.0
    for t in range(k):
        alpha_sum += alpha[t]
        psi_alpha[t] = digamma(alpha[t])
        denom[t] = 1.0 / (topic_total[t] + n_words * eta)
    psi_alpha_sum = digamma(alpha_sum)
    weight = 1.0 / draws
    loglik = 0.0
    for d in range(n_docs):
        start, stop = indptr[d], indptr[d + 1]
        length = stop - start
        n_d = 0
        for j in range(length):
            w = indices[start + j]
            for t in range(k):
                rows[j, t] = (word_topic[w, t] + eta) * denom[t]
            for _ in range(int(data[start + j])):
                token_row[n_d] = j
                n_d += 1
        start_stream(stream, seeds[d])
        # the first draw of every token from the incoming counts, nothing removed (the old draws are gone)
        incoming = doc_topic[d]
        for j in range(length):
            s = 0.0
            for t in range(k):
                s += rows[j, t] * (incoming[t] + alpha[t])
            loglik += data[start + j] * math.log(s / (n_d + alpha_sum) + 1e-300)
        for i in range(n_d):
            topic[i] = _draw(rows[token_row[i]], incoming, alpha, k, uniform(stream))
        for t in range(k):
            nd[t] = 0.0
            mean[t] = 0.0
        for i in range(n_d):
            nd[topic[i]] += 1.0
        # Gibbs passes over the tokens: each out of the counts, drawn again, back in
        for sweep in range(burn_in + draws):
            for i in range(n_d):
                nd[topic[i]] -= 1.0
                z = _draw(rows[token_row[i]], nd, alpha, k, uniform(stream))
                topic[i] = z
                nd[z] += 1.0
            if sweep < burn_in:
                continue
            for i in range(n_d):
                counts[indices[start + token_row[i]], topic[i]] += weight
            for t in range(k):
                mean[t] += weight * nd[t]
            if stats_docs[d]:
                for t in range(k):
                    prior_sums[t] += weight * _psi_gain(nd[t], alpha[t], psi_alpha[t])
        for t in range(k):
            doc_topic[d, t] = mean[t]
        if stats_docs[d]:
            prior_sums[k] += digamma(n_d + alpha_sum) - psi_alpha_sum
    return loglik
