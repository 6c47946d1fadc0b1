"""The compiled loop of a collapsed Gibbs chain (numba; no dask, no I/O).

See :func:`jsmf_dask.kernels.chain.collapsed_chain` for the sampler and the
notation. The chain reseeds numba's generator (NumPy's legacy Mersenne Twister)
once and takes one uniform per token for the start and one per token and
iteration after it, the tokens in CSR order (a document's distinct words
ascending, a word's tokens one after another): its state depends on nothing but
the seed and the rows in their order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from jsmf_dask.kernels._categorical import pick


@njit(cache=True, nogil=True)
def chain_loop(indptr, indices, data, alpha, eta, iterations, seed, word_topic, doc_topic):
    """Run the chain over a CSR matrix of whole counts; fills ``word_topic`` (N × K) and ``doc_topic`` (D × K),
    both zero on entry, with the last state's counts."""
    n_docs = indptr.size - 1
    n_words, k = word_topic.shape
    n_tokens = 0
    for j in range(data.size):
        n_tokens += int(data[j])
    topic = np.empty(n_tokens, np.int64)
    topic_total = np.zeros(k)
    inverse = np.empty(k)  # 1 / (topic_total + N eta), kept as the totals change
    weights = np.empty(k)
    smoothing = n_words * eta
    np.random.seed(seed)
    i = 0
    for d in range(n_docs):  # the start: every token's topic uniform
        for j in range(indptr[d], indptr[d + 1]):
            w = indices[j]
            for _ in range(int(data[j])):
                t = min(int(np.random.random() * k), k - 1)
                topic[i] = t
                word_topic[w, t] += 1.0
                doc_topic[d, t] += 1.0
                topic_total[t] += 1.0
                i += 1
    for t in range(k):
        inverse[t] = 1.0 / (topic_total[t] + smoothing)
    for _ in range(iterations):
        i = 0
        for d in range(n_docs):
            for j in range(indptr[d], indptr[d + 1]):
                w = indices[j]
                for _ in range(int(data[j])):
                    old = topic[i]  # the token out of every count, drawn again, back in
                    word_topic[w, old] -= 1.0
                    doc_topic[d, old] -= 1.0
                    topic_total[old] -= 1.0
                    inverse[old] = 1.0 / (topic_total[old] + smoothing)
                    total = 0.0
                    for t in range(k):
                        weights[t] = (word_topic[w, t] + eta) * inverse[t] * (doc_topic[d, t] + alpha[t])
                        total += weights[t]
                    new = pick(weights, total, np.random.random())
                    topic[i] = new
                    word_topic[w, new] += 1.0
                    doc_topic[d, new] += 1.0
                    topic_total[new] += 1.0
                    inverse[new] = 1.0 / (topic_total[new] + smoothing)
                    i += 1
