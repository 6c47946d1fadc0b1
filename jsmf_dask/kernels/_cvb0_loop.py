"""The compiled per-document loop of batch CVB0 (numba; no dask, no I/O).

See :func:`jsmf_dask.kernels.collapsed.cvb0_step` for the update and the
notation. The loop releases the GIL, so blocks run in parallel on the threads
scheduler too. A document's responsibilities exist only in ``rho`` (its distinct
words × K) while it is processed; everything is float64 and each document's
arithmetic is the same whichever block it is in. The passes over a document's
rows are small compiled functions of their own (:func:`_gather`,
:func:`_first_update`, :func:`_jacobi_update`), and the rows are normalised
only where they are used. Measured on one 10k-document block of lda-100k at
K 50 (one core, session 28): a pass took 0.54 s with the loops inside
:func:`cvb0_loop` and a pass of its own to normalise each row after every
iteration, 0.36 s as they are, and 0.33 s with the series' two factors
(:data:`SHORT_SERIES_MIN_TOTAL`); the model equal to 2.5e-16.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from jsmf_dask.kernels._vb_loop import digamma

_FASTMATH = {"reassoc", "contract"}
_TINY = 1e-300


#: With every topic total ``T_k`` at least this, ``1/(T_k + Nη − ρ)`` (``ρ ≤ 1``) is computed as
#: ``(1 + x)(1 + x²)(1 + x⁴)/(T_k + Nη)`` with ``x = ρ/(T_k + Nη) ≤ 0.01``: the geometric series to ``x⁷``,
#: relative error ``x⁸ ≤ 1e-16``, and no division in the innermost loop (about half its time).
SERIES_MIN_TOTAL = 100.0

#: With every topic total at least this, ``x ≤ 1e-4`` and ``(1 + x)(1 + x²)`` (relative error ``x⁴ ≤ 1e-16``)
#: takes the place of the three factors: a corpus of a few thousand documents has topics this large, and the
#: innermost loop is 8% faster (lda-100k, K 50; the model the same to every bit there).
SHORT_SERIES_MIN_TOTAL = 1e4

#: Topic counts below this are summed exactly in E_q[ψ(n + α)] (see ``cvb0_loop``'s ``prior_sums``).
EXACT_COUNTS = 10


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _gather(word_topic, indices, start, length, denom, eta, series, rows):
    """The document's rows of W (they stay in cache for its iterations); with the series, as
    ``(W_wt + η)/(T_t + Nη)``, the form every update then uses."""
    k = denom.size
    for j in range(length):
        w = indices[start + j]
        if series:
            for t in range(k):
                rows[j, t] = (word_topic[w, t] + eta) * denom[t]
        else:
            for t in range(k):
                rows[j, t] = word_topic[w, t]


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _first_update(rows, data, start, length, denom, eta, series, nd_alpha, rho, scale, nd_new):
    """One update from the incoming counts, nothing removed (the document's old responsibilities are not
    kept): each pair's responsibility before normalising into ``rho``, its row's normaliser into ``scale``,
    the new topic counts into ``nd_new``; returns ``Σ_j n_dj log s_j`` (``s_j``: word j's normaliser, its
    likelihood under the incoming state up to the document's ``n_d + α₀``)."""
    k = denom.size
    for t in range(k):
        nd_new[t] = 0.0
    loglik = 0.0
    for j in range(length):
        s = 0.0
        if series:
            for t in range(k):
                v = rows[j, t] * nd_alpha[t]
                rho[j, t] = v
                s += v
        else:
            for t in range(k):
                v = (rows[j, t] + eta) * denom[t] * nd_alpha[t]
                rho[j, t] = v
                s += v
        s += _TINY
        c = data[start + j]
        loglik += c * math.log(s)
        inv = 1.0 / s
        scale[j] = inv
        c *= inv
        for t in range(k):
            nd_new[t] += c * rho[j, t]
    return loglik


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def _jacobi_update(rho, scale, rows, data, start, length, denom, eta_denom, topic_total, n_eta, eta, factors,
                   nd_alpha, new, new_scale, nd_new):
    """One CVB0 iteration, every pair from the same state (Jacobi): the token's own responsibility
    (``rho · scale``) out of every count. Writes ``new``, ``new_scale`` and ``nd_new`` as
    :func:`_first_update` does. ``factors``: of the series for ``1/(T_k + Nη − ρ)`` (3 or 2; 0: the exact
    division, and ``rows`` are W's own)."""
    k = denom.size
    for t in range(k):
        nd_new[t] = 0.0
    for j in range(length):
        s = 0.0
        sc = scale[j]
        if factors == 3:  # 1/(T_k + Nη − ρ) without a division: see SERIES_MIN_TOTAL
            for t in range(k):
                r = rho[j, t] * sc
                x = r * denom[t]
                word = rows[j, t] - x  # (W_wt − ρ + η)/(T_t + Nη), W_wt − ρ at least 0
                word = word if word > eta_denom[t] else eta_denom[t]
                x2 = x * x
                v = word * ((1.0 + x) * (1.0 + x2) * (1.0 + x2 * x2)) * (nd_alpha[t] - r)
                new[j, t] = v
                s += v
        elif factors == 2:  # see SHORT_SERIES_MIN_TOTAL
            for t in range(k):
                r = rho[j, t] * sc
                x = r * denom[t]
                word = rows[j, t] - x
                word = word if word > eta_denom[t] else eta_denom[t]
                v = word * ((1.0 + x) * (1.0 + x * x)) * (nd_alpha[t] - r)
                new[j, t] = v
                s += v
        else:
            for t in range(k):
                r = rho[j, t] * sc
                word = rows[j, t] - r
                word = word if word > 0.0 else 0.0
                total = topic_total[t] - r
                total = total if total > 0.0 else 0.0
                v = (word + eta) / (total + n_eta) * (nd_alpha[t] - r)
                new[j, t] = v
                s += v
        inv = 1.0 / (s + _TINY)
        new_scale[j] = inv
        c = data[start + j] * inv
        for t in range(k):
            nd_new[t] += c * new[j, t]


@njit(cache=True, fastmath=_FASTMATH, nogil=True)
def cvb0_loop(indptr, indices, data, word_topic, topic_total, alpha, eta, doc_topic, max_iter, tol, counts,
              prior_sums, stats_docs, draw_seeds):
    """CVB0 for every document of a CSR block, in place on ``doc_topic``; adds to ``counts`` and ``prior_sums``.

    Returns the inner iterations summed over documents and the training log
    likelihood ``Σ n_dw log Σ_k θ_dk φ_wk`` at the incoming state.
    ``prior_sums`` (K + 1) receives Minka's statistics, summed over the
    documents ``d`` with ``stats_docs[d]``, at the outgoing state: ``Σ_d E_q[ψ(n_dk + α_k)] − ψ(α_k)`` for
    each k, then ``Σ_d ψ(n_d + α₀) − ψ(α₀)``. The expectation is over the
    document's topic count ``n_dk``, a sum of independent Bernoulli(ρ) over its
    tokens, by ``ψ(n + α) − ψ(α) = Σ_{i<n} 1/(α + i)``: the first
    :data:`EXACT_COUNTS` terms exactly from the distribution of ``n_dk``
    below that (``Σ_i P(n_dk > i)/(α + i)``, a truncated convolution over the
    tokens), the rest at the expected count, ``ψ(max(N_dk, E) + α) − ψ(E + α)``.

    With ``draw_seeds`` (one seed per document; empty: none) a document adds to
    ``counts`` and keeps in ``doc_topic`` counts *drawn* from its
    responsibilities instead of their expectation: the whole part of each
    word's count ``n_dw`` as a multinomial over ``ρ_w`` (each token a topic by
    one uniform against the cumulative ``ρ_w``), its fraction times ``ρ_w``.
    Each document reseeds the generator with its own seed, so a document's
    draws do not depend on its block, the thread or the other documents; and
    every token takes exactly one uniform, so a difference in ``ρ`` at the
    rounding level (another summation order of ``W`` or ``α`` on another
    cluster) can change a token's topic only where its uniform falls within
    that rounding of a boundary, never the draws of the tokens after it. (A
    binomial per topic would not do: whether it is called at all, and how
    many uniforms it takes, depends on ρ.)
    """
    n_docs = indptr.size - 1
    n_words, k = word_topic.shape
    longest = 1
    for d in range(n_docs):
        longest = max(longest, indptr[d + 1] - indptr[d])
    # each pair's responsibility before normalising and its row's normaliser (ρ = rho · scale), swapped with
    # their update after each iteration: no pass over the rows only to normalise them
    buffers = np.empty((2, longest, k))
    scales = np.empty((2, longest))
    rows = np.empty((longest, k))
    nd = np.empty(k)  # the document's topic counts (plus α while they are updated)
    nd_new = np.empty(k)
    cumulative = np.empty(k)  # a word's cumulative responsibilities (drawn passes)
    denom = np.empty(k)
    eta_denom = np.empty(k)
    dist = np.empty((EXACT_COUNTS, k))  # P(n_dk = m) for m < EXACT_COUNTS (the rest is 1 minus their sum)
    alpha_sum = 0.0
    for t in range(k):
        alpha_sum += alpha[t]
    n_eta = n_words * eta
    psi_alpha = np.empty(k)
    for t in range(k):
        psi_alpha[t] = digamma(alpha[t])
    psi_alpha_sum = digamma(alpha_sum)
    draw = draw_seeds.size > 0
    smallest = np.inf
    for t in range(k):
        denom[t] = 1.0 / (topic_total[t] + n_eta)
        eta_denom[t] = eta * denom[t]
        smallest = min(smallest, topic_total[t])
    factors = 2 if smallest >= SHORT_SERIES_MIN_TOTAL else 3 if smallest >= SERIES_MIN_TOTAL else 0
    series = factors > 0
    iterations = 0
    loglik = 0.0
    for d in range(n_docs):
        start, stop = indptr[d], indptr[d + 1]
        length = stop - start
        n_d = 0.0
        for j in range(length):
            n_d += data[start + j]
        for t in range(k):
            nd[t] = doc_topic[d, t] + alpha[t]
        rho, new = buffers[0], buffers[1]
        scale, new_scale = scales[0], scales[1]
        _gather(word_topic, indices, start, length, denom, eta, series, rows)
        loglik += _first_update(rows, data, start, length, denom, eta, series, nd, rho, scale, nd_new) \
            - n_d * math.log(n_d + alpha_sum)
        for t in range(k):
            nd[t] = nd_new[t] + alpha[t]
        for _ in range(max_iter):
            _jacobi_update(rho, scale, rows, data, start, length, denom, eta_denom, topic_total, n_eta, eta, factors,
                           nd, new, new_scale, nd_new)
            change = 0.0
            for t in range(k):
                change += abs(nd_new[t] + alpha[t] - nd[t])
                nd[t] = nd_new[t] + alpha[t]
            rho, new = new, rho
            scale, new_scale = new_scale, scale
            iterations += 1
            if change / k < tol:
                break
        for t in range(k):
            nd[t] -= alpha[t]
        if draw or stats_docs[d]:
            for j in range(length):
                sc = scale[j]
                for t in range(k):
                    rho[j, t] *= sc
                scale[j] = 1.0
        if draw:
            np.random.seed(draw_seeds[d])
            for t in range(k):
                nd_new[t] = 0.0
            for j in range(length):
                w = indices[start + j]
                c = data[start + j]
                whole = int(c)
                part = c - whole
                acc = 0.0
                for t in range(k):
                    acc += rho[j, t]
                    cumulative[t] = acc
                    v = part * rho[j, t]
                    counts[w, t] += v
                    nd_new[t] += v
                for _ in range(whole):  # one uniform a token, whatever ρ: a rounding in ρ cannot shift the stream
                    u = np.random.random() * acc
                    lo, hi = 0, k - 1  # the first topic whose cumulative responsibility exceeds u
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if cumulative[mid] > u:
                            hi = mid
                        else:
                            lo = mid + 1
                    counts[w, lo] += 1.0
                    nd_new[lo] += 1.0
            for t in range(k):
                doc_topic[d, t] = nd_new[t]
        else:
            for j in range(length):
                w = indices[start + j]
                c = data[start + j] * scale[j]
                for t in range(k):
                    counts[w, t] += c * rho[j, t]
            for t in range(k):
                doc_topic[d, t] = nd[t]
        if not stats_docs[d]:
            continue
        dist[:, :] = 0.0
        dist[0, :] = 1.0
        for j in range(length):
            for _ in range(int(data[start + j])):  # each token of the word: one Bernoulli(ρ) per topic
                for m in range(EXACT_COUNTS - 1, 0, -1):  # topics innermost, so that it vectorises
                    for t in range(k):
                        dist[m, t] = dist[m, t] * (1.0 - rho[j, t]) + dist[m - 1, t] * rho[j, t]
                for t in range(k):
                    dist[0, t] *= 1.0 - rho[j, t]
        for t in range(k):
            below = 0.0
            s = 0.0
            for i in range(EXACT_COUNTS):
                below += dist[i, t]
                s += max(1.0 - below, 0.0) / (alpha[t] + i)
            if nd[t] > EXACT_COUNTS:
                s += digamma(nd[t] + alpha[t]) - digamma(EXACT_COUNTS + alpha[t])
            prior_sums[t] += s
        prior_sums[k] += digamma(n_d + alpha_sum) - psi_alpha_sum
    return iterations, loglik
