"""Batch CVB0 and Minka's fixed points against slow references written here (the sampled pass: its own file).

The reference CVB0 runs token by token in plain Python: every token of the
corpus gets its own responsibility, and each update removes the token's own
responsibility from the word–topic, topic and document counts, as the
textbook update does. The compiled kernel works per distinct word of a
document; the tokens of one word in one document are updated from the same
state, so the two must agree to rounding (1e-10).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import given, settings
from hypothesis import strategies as st

from jsmf_dask.kernels._cvb0_loop import SERIES_MIN_TOTAL, SHORT_SERIES_MIN_TOTAL
from jsmf_dask.kernels.collapsed import (
    collapsed_theta,
    collapsed_topics,
    cvb0_step,
    draw_seeds,
    initial_doc_topic,
    learn_alpha,
    learn_eta,
    minka_alpha_step,
    overrelaxed_counts,
    sampled_step,
)
from tests.conftest import examples
from tests.kernels.corpora import lda_corpus, random_corpus


def reference_cvb0_sweep(docs, W, alpha, eta, doc_topic, max_iter, tol):
    """One batch sweep, token by token: W fixed (the previous sweep's totals), each token's own responsibility
    removed from every count; each document starts from its incoming N_d with nothing removed."""
    n_words, k = W.shape
    T = W.sum(axis=0)
    from scipy.special import psi

    from jsmf_dask.kernels._cvb0_loop import EXACT_COUNTS

    counts = np.zeros_like(W)
    out = np.zeros_like(doc_topic)
    sums = np.zeros(k + 1)
    for d, doc in enumerate(docs):
        tokens = [w for w, c in doc for _ in range(c)]  # one entry per token
        nd_in = doc_topic[d].copy()
        gam = []
        for w in tokens:
            g = np.array([(W[w, t] + eta) / (T[t] + n_words * eta) * (nd_in[t] + alpha[t]) for t in range(k)])
            gam.append(g / g.sum())
        nd = sum(gam)
        for _ in range(max_iter):
            new = []
            for i, w in enumerate(tokens):
                g = np.empty(k)
                for t in range(k):
                    own = gam[i][t]
                    g[t] = (max(W[w, t] - own, 0.0) + eta) / (max(T[t] - own, 0.0) + n_words * eta) \
                        * (nd[t] - own + alpha[t])
                new.append(g / g.sum())
            nd_new = sum(new)
            change = np.abs(nd_new - nd).sum() / k
            gam, nd = new, nd_new
            if change < tol:
                break
        for i, w in enumerate(tokens):
            counts[w] += gam[i]
        out[d] = nd
        for t in range(k):  # E_q[ψ(n + α)] − ψ(α): the exact distribution of n (independent Bernoulli tokens)
            dist = np.zeros(len(tokens) + 1)
            dist[0] = 1.0
            for g in gam:
                dist[1:] = dist[1:] * (1 - g[t]) + dist[:-1] * g[t]
                dist[0] *= 1 - g[t]
            above = 1 - np.cumsum(dist)  # P(n > i)
            exact = sum(above[i] / (alpha[t] + i) for i in range(min(EXACT_COUNTS, len(above))))
            tail = psi(max(nd[t], EXACT_COUNTS) + alpha[t]) - psi(EXACT_COUNTS + alpha[t])
            sums[t] += exact + tail
        sums[k] += psi(len(tokens) + alpha.sum()) - psi(alpha.sum())
    return out, counts, sums


@pytest.mark.parametrize(("seed", "scale"), [(0, 1.0), (1, 1.0), (2, 1.0), (3, 100.0), (4, 1e4)])
def test_cvb0_equals_the_per_token_reference(seed, scale):
    """Scale 100 makes every topic total exceed SERIES_MIN_TOTAL, 1e4 SHORT_SERIES_MIN_TOTAL: the division-free
    paths of three and two factors are checked too (in the first sweep; the later ones start from the tiny
    corpus's own counts)."""
    rng = np.random.default_rng(seed)
    n_docs, n_words, k = 12, 15, 3
    docs, X = random_corpus(rng, n_docs, n_words, 9 if seed < 2 else 30)  # seeds 2-4: counts past EXACT_COUNTS
    W = scale * rng.gamma(1.0, 2.0, size=(n_words, k))
    assert (W.sum(axis=0).min() >= SERIES_MIN_TOTAL) == (scale > 1)
    assert (W.sum(axis=0).min() >= SHORT_SERIES_MIN_TOTAL) == (scale > 100)
    W[rng.random(W.shape) < 0.2] = 0.0  # words a topic has not seen yet: the clip at 0 is exercised
    alpha = np.array([0.1, 0.3, 0.05])
    eta = 0.02
    nd0 = initial_doc_topic(np.asarray(X.sum(axis=1)), k)
    for sweep in range(3):  # the state carried over sweeps as the pipeline carries it
        res = cvb0_step(X, W, alpha, eta, nd0, max_iter=4, tol=1e-12, prior_stats=True)
        ref_nd, ref_counts, ref_sums = reference_cvb0_sweep(docs, W, alpha, eta, nd0, 4, 1e-12)
        np.testing.assert_allclose(res.doc_topic, ref_nd, rtol=0, atol=1e-10)
        np.testing.assert_allclose(res.counts, ref_counts, rtol=0, atol=1e-10)
        np.testing.assert_allclose(res.prior_sums, ref_sums, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(res.doc_topic.sum(axis=1), np.asarray(X.sum(axis=1)).ravel(), rtol=1e-12)
        np.testing.assert_allclose(res.counts.sum(), X.sum(), rtol=1e-12)
        W, nd0 = res.counts, res.doc_topic


def test_a_documents_result_does_not_depend_on_its_block():
    rng = np.random.default_rng(3)
    _, X = random_corpus(rng, 40, 30, 20)
    W = rng.gamma(1.0, 1.0, size=(30, 4))
    alpha = np.full(4, 0.1)
    whole = cvb0_step(X, W, alpha, 0.01, max_iter=5, prior_stats=True)
    a = cvb0_step(X[:17], W, alpha, 0.01, max_iter=5, prior_stats=True)
    b = cvb0_step(X[17:], W, alpha, 0.01, max_iter=5, prior_stats=True)
    np.testing.assert_array_equal(whole.doc_topic, np.vstack([a.doc_topic, b.doc_topic]))
    np.testing.assert_allclose(whole.counts, a.counts + b.counts, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(whole.prior_sums, a.prior_sums + b.prior_sums, rtol=1e-12)
    # statistics over a sample of the documents are those of the sample alone
    mask = np.arange(40) % 3 == 0
    sampled = cvb0_step(X, W, alpha, 0.01, max_iter=5, prior_stats=mask)
    np.testing.assert_allclose(sampled.prior_sums, cvb0_step(X[mask], W, alpha, 0.01, max_iter=5,
                                                             prior_stats=True).prior_sums, rtol=1e-12)
    np.testing.assert_array_equal(sampled.doc_topic, whole.doc_topic)
    assert cvb0_step(X, W, alpha, 0.01, max_iter=5).prior_sums is None


def test_a_drawn_pass_keeps_every_token_and_draws_whole_counts():
    """Drawn counts: each (document, word)'s whole count is split among the topics as integers, its fraction
    spread by the responsibilities; so every word's and every document's total is kept exactly."""
    rng = np.random.default_rng(4)
    _, X = random_corpus(rng, 30, 20, 15)
    X.data[::7] += 0.5  # a few fractional counts (weighted input)
    W = rng.gamma(1.0, 3.0, size=(20, 4))
    alpha = np.full(4, 0.1)
    seeds = draw_seeds(np.arange(30, dtype=np.uint64) * 7919, 1)
    res = cvb0_step(X, W, alpha, 0.01, max_iter=3, draw_seeds=seeds)
    np.testing.assert_allclose(res.counts.sum(axis=1), X.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(res.doc_topic.sum(axis=1), X.sum(axis=1), rtol=1e-12)
    whole = cvb0_step(sps.csr_array(np.floor(X.toarray())), W, alpha, 0.01, max_iter=3, draw_seeds=seeds)
    assert np.array_equal(whole.counts, np.round(whole.counts)) and whole.counts.min() >= 0
    assert np.array_equal(whole.doc_topic, np.round(whole.doc_topic))
    soft = cvb0_step(X, W, alpha, 0.01, max_iter=3)
    assert not np.allclose(res.counts, soft.counts)


def test_drawn_counts_are_unbiased_draws_of_the_responsibilities():
    """Over R seeds the drawn word–topic counts average to the soft pass's expected counts (the same
    responsibilities: the draw comes after the document's updates), and one word's draws have the multinomial's
    variance. Each drawn cell sums the words' binomials, variance ≤ n_w/4, so its mean over R = 600 seeds has a
    standard error ≤ sqrt(n_w/(4R)); 6 of them is the tolerance (a false failure has p < 1e-7 a cell)."""
    rng = np.random.default_rng(5)
    _, X = random_corpus(rng, 25, 12, 20)
    W = rng.gamma(1.0, 3.0, size=(12, 3))
    alpha = np.full(3, 0.2)
    soft = cvb0_step(X, W, alpha, 0.01, max_iter=3)
    R = 600
    drawn = np.array([cvb0_step(X, W, alpha, 0.01, max_iter=3,
                                draw_seeds=draw_seeds(np.arange(25, dtype=np.uint64), r)).counts for r in range(R)])
    n_w = np.asarray(X.sum(axis=0))
    se = np.sqrt(n_w / (4 * R))[:, None]
    assert np.all(np.abs(drawn.mean(axis=0) - soft.counts) <= 6 * se + 1e-12)
    # one document of one word, 9 tokens: n_t ~ Multinomial(9, ρ), Var n_t = 9 ρ_t (1 − ρ_t); the sample
    # variance over 4,000 seeds has a relative standard error of about sqrt(2/4000) = 2.2%: 15% is 7 of them
    one = sps.csr_array((np.array([9.0]), (np.array([0]), np.array([2]))), shape=(1, 12))
    rho = cvb0_step(one, W, alpha, 0.01, max_iter=3).counts[2] / 9
    draws = np.array([cvb0_step(one, W, alpha, 0.01, max_iter=3, draw_seeds=np.array([s])).counts[2]
                      for s in range(4000)])
    assert np.all(draws.sum(axis=1) == 9)
    np.testing.assert_allclose(draws.mean(axis=0), 9 * rho, atol=6 * np.sqrt(9 / 4 / 4000))
    np.testing.assert_allclose(draws.var(axis=0), 9 * rho * (1 - rho), rtol=0.15)


def test_a_documents_draws_depend_on_its_seed_alone():
    """Split into blocks the same documents with the same seeds draw the same counts; another sweep's seeds
    draw others. The seeds are a function of the id's hash and the sweep only."""
    rng = np.random.default_rng(6)
    _, X = random_corpus(rng, 40, 30, 20)
    W = rng.gamma(1.0, 1.0, size=(30, 4))
    alpha = np.full(4, 0.1)
    hashes = rng.integers(0, 2**63, size=40).astype(np.uint64)
    seeds = draw_seeds(hashes, 3)
    assert seeds.min() >= 0 and seeds.max() < 2**32 and len(set(seeds.tolist())) == 40
    np.testing.assert_array_equal(seeds, draw_seeds(hashes.copy(), 3))
    np.testing.assert_array_equal(seeds[17:], draw_seeds(hashes[17:], 3))
    whole = cvb0_step(X, W, alpha, 0.01, max_iter=5, draw_seeds=seeds)
    a = cvb0_step(X[:17], W, alpha, 0.01, max_iter=5, draw_seeds=seeds[:17])
    b = cvb0_step(X[17:], W, alpha, 0.01, max_iter=5, draw_seeds=seeds[17:])
    np.testing.assert_array_equal(whole.doc_topic, np.vstack([a.doc_topic, b.doc_topic]))
    np.testing.assert_allclose(whole.counts, a.counts + b.counts, rtol=1e-13, atol=1e-13)
    other = cvb0_step(X, W, alpha, 0.01, max_iter=5, draw_seeds=draw_seeds(hashes, 4))
    assert not np.array_equal(other.doc_topic, whole.doc_topic)


@pytest.mark.parametrize("method", ["cvb0", "sampled"])
@given(st.integers(0, 2**31 - 1))
@settings(max_examples=examples(6), deadline=None)
def test_held_out_likelihood_improves_over_sweeps(method, seed):
    """From a random start, the held-out documents' likelihood under φ rises from the first sweeps to later
    (CVB0's passes, and the sampled ones seeded by document and sweep)."""
    rng = np.random.default_rng(seed)
    X, _ = lda_corpus(rng, 300, 60, 3, 40)
    train, test = X[:250], X[250:]
    k = 3
    W = rng.gamma(1.0, 1.0, size=(60, k)) * (train.sum() / (60 * k))
    alpha, eta = np.full(k, 0.1), 0.01
    hashes = np.arange(250, dtype=np.uint64)
    nd = None
    scores = []
    for sweep in range(1, 13):
        if method == "sampled":
            res = sampled_step(train, W, alpha, eta, nd, draw_seeds(hashes, sweep))
        else:
            res = cvb0_step(train, W, alpha, eta, nd, max_iter=3)
        W, nd = res.counts, res.doc_topic
        phi = collapsed_topics(W, eta)
        fold = cvb0_step(test, W + 0.0, alpha, eta, None, max_iter=20)  # θ of the held-out documents
        theta = collapsed_theta(fold.doc_topic, alpha)
        T = sps.coo_array(test)
        scores.append(float(T.data @ np.log(np.einsum("ij,ij->i", theta[T.row], phi[T.col]))))
    assert scores[-1] > scores[0]
    assert np.mean(scores[-3:]) >= np.mean(scores[:3])


def test_minka_recovers_a_known_asymmetric_alpha():
    """Counts drawn from Dirichlet(α)-multinomials: the fixed point's estimate is within 15% of each α_k.

    With D = 4,000 documents of 60 tokens the estimator's relative standard error is about 1/sqrt(D·share)
    for the rarest component (α_k/α₀ = 0.05): ~7%, so 15% is two standard errors."""
    rng = np.random.default_rng(0)
    alpha = np.array([0.05, 0.1, 0.2, 0.4, 0.25])
    theta = rng.dirichlet(alpha, size=4000)
    counts = np.array([rng.multinomial(60, t) for t in theta], dtype=float)
    learned = learn_alpha(counts, 0.1)
    np.testing.assert_allclose(learned, alpha, rtol=0.15)
    # the one-step form the pipeline applies between sweeps moves towards it from a symmetric start
    from jsmf_dask.kernels.collapsed import _alpha_sums
    start = np.full(5, 0.1)
    step = minka_alpha_step(start, _alpha_sums(counts, start))
    assert np.abs(step - alpha).sum() < np.abs(start - alpha).sum()


def test_minka_recovers_a_known_eta():
    """Topics' word counts drawn from Dirichlet(η)-multinomials over N = 500 words, K = 20: within 10%."""
    rng = np.random.default_rng(1)
    eta = 0.05
    B = rng.dirichlet(np.full(500, eta), size=20).T
    W = np.column_stack([rng.multinomial(20000, B[:, t]) for t in range(20)]).astype(float)
    assert abs(learn_eta(W, 0.01) - eta) / eta < 0.1


def test_overrelaxed_counts_by_hand():
    W = np.array([[1.0, 2.0], [3.0, 0.0]])
    updated = np.array([[2.0, 1.0], [3.0, 1.0]])
    np.testing.assert_array_equal(overrelaxed_counts(W, updated, 1.0), updated)
    # W + 2 (W' − W): 1 + 2·1, 2 − 2·1, 3 + 0, 0 + 2·1
    np.testing.assert_array_equal(overrelaxed_counts(W, updated, 2.0), [[3.0, 0.0], [3.0, 2.0]])
    # 2 − 3·1 would be −1: counts stay non-negative
    np.testing.assert_array_equal(overrelaxed_counts(W, updated, 3.0), [[4.0, 0.0], [3.0, 3.0]])


@given(st.integers(0, 2**32 - 1), st.floats(1.0, 10.0))
@settings(max_examples=examples(50), deadline=None)
def test_overrelaxed_counts_are_non_negative_and_on_the_update_line(seed, step):
    rng = np.random.default_rng(seed)
    W, updated = rng.gamma(0.5, size=(2, 30, 4))
    moved = overrelaxed_counts(W, updated, step)
    assert (moved >= 0).all()
    inside = W + step * (updated - W) >= 0
    np.testing.assert_allclose(moved[inside], (W + step * (updated - W))[inside], rtol=1e-15, atol=1e-15)
