"""The compiled loop of the sampled fold-in (numba; no dask, no I/O).

See :func:`jsmf_dask.kernels.heldout.sampled_theta` for what it estimates.
Each document reseeds numba's generator (NumPy's legacy Mersenne Twister, one
stream per thread) with its own seed and takes one uniform per token and pass,
so its estimate depends on nothing but its seed, its tokens and the model.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from jsmf_dask.kernels._categorical import pick


@njit(cache=True, nogil=True)
def sampled_theta_loop(indptr, indices, data, B, alpha, seeds, burn_in, draws, theta):
    """Fill ``theta`` (D × K) with each CSR row's posterior mean of θ under fixed topics ``B`` and prior ``alpha``.

    A document's tokens (its distinct words ascending, a word's tokens one
    after another) are first drawn from ``B_wk α_k``, then ``burn_in + draws``
    Gibbs passes draw each in turn from ``B_wk (n_k^¬i + α_k)``. Over the last
    ``draws`` passes each token adds its conditional ``p(z_i = · | z_¬i)``
    (Rao–Blackwellised counts); ``θ = (their mean + α) / (n_d + α₀)``. A
    token no topic can produce (``B_w = 0``) is left out of the counts.
    """
    n_docs = indptr.size - 1
    k = B.shape[1]
    alpha_sum = 0.0
    for t in range(k):
        alpha_sum += alpha[t]
    longest = 1
    for d in range(n_docs):
        n_d = 0
        for j in range(indptr[d], indptr[d + 1]):
            n_d += int(data[j])
        longest = max(longest, n_d)
    words = np.empty(longest, np.int64)
    topic = np.empty(longest, np.int64)
    weights = np.empty(k)
    counts = np.empty(k)
    expected = np.empty(k)
    for d in range(n_docs):
        n_d = 0
        for j in range(indptr[d], indptr[d + 1]):
            for _ in range(int(data[j])):
                words[n_d] = indices[j]
                n_d += 1
        np.random.seed(seeds[d])
        for t in range(k):
            counts[t] = 0.0
            expected[t] = 0.0
        for i in range(n_d):
            total = 0.0
            for t in range(k):
                weights[t] = B[words[i], t] * alpha[t]
                total += weights[t]
            u = np.random.random()
            topic[i] = pick(weights, total, u) if total > 0.0 else -1
            if topic[i] >= 0:
                counts[topic[i]] += 1.0
        for sweep in range(burn_in + draws):
            for i in range(n_d):
                u = np.random.random()
                if topic[i] < 0:
                    continue
                counts[topic[i]] -= 1.0
                total = 0.0
                for t in range(k):
                    weights[t] = B[words[i], t] * (counts[t] + alpha[t])
                    total += weights[t]
                if sweep >= burn_in:
                    for t in range(k):
                        expected[t] += weights[t] / total
                topic[i] = pick(weights, total, u)
                counts[topic[i]] += 1.0
        n_counted = 0.0
        for t in range(k):
            n_counted += counts[t]
        for t in range(k):
            theta[d, t] = (expected[t] / draws + alpha[t]) / (n_counted + alpha_sum)
