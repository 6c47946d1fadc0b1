"""The VB E-step against the textbook per-document updates, and the bound's monotonicity."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import digamma, gammaln, logsumexp

from jsmf_dask.kernels.variational import (
    dirichlet_expectation,
    document_bound,
    e_step,
    expected_topic_topic,
    moment_alpha,
    topic_bound,
    topic_shares,
    topics_from_model,
)
from jsmf_dask.kernels.recover import topic_word
from jsmf_dask.kernels.synthetic import dirichlet_topic_topic
from tests.conftest import examples


def random_corpus(rng, n_docs=40, n_words=30, k=4, length=25):
    B = rng.dirichlet(np.full(n_words, 0.3), size=k).T
    docs = []
    for _ in range(n_docs):
        theta = rng.dirichlet(np.full(k, 0.3))
        words = rng.choice(n_words, size=rng.integers(2, length), p=B @ theta)
        docs.append(np.bincount(words, minlength=n_words))
    X = sps.csr_array(np.array(docs, dtype=np.float64))
    lam = 0.01 + rng.gamma(1.0, 5.0, size=(n_words, k))
    return X, lam


def reference_e_step(X, lam, alpha, max_iter, tol):
    """Blei, Ng & Jordan's updates, one document and one word at a time, with digamma."""
    X = X.toarray()
    elog_beta = digamma(lam) - digamma(lam.sum(axis=0))  # N × K
    gamma = np.zeros((X.shape[0], lam.shape[1]))
    counts = np.zeros_like(lam)
    bound = 0.0
    for d, x in enumerate(X):
        g = alpha + x.sum() / lam.shape[1]
        for it in range(max_iter):
            elog_theta = digamma(g) - digamma(g.sum())
            phi = np.zeros((lam.shape[0], lam.shape[1]))
            for w in np.flatnonzero(x):
                logits = elog_theta + elog_beta[w]
                if it == 0:
                    bound += x[w] * logsumexp(logits)
                phi[w] = np.exp(logits - logsumexp(logits))
            if it == 0:
                bound += ((alpha - g) * elog_theta).sum() + (gammaln(g) - gammaln(alpha)).sum()
                bound += gammaln(alpha.sum()) - gammaln(g.sum())
            g_new = alpha + (x[:, None] * phi).sum(axis=0)
            change = np.abs(g_new - g).mean()
            g = g_new
            if change < tol or it == max_iter - 1:
                counts += x[:, None] * phi
                break
        gamma[d] = g
    return gamma, counts, bound


@pytest.mark.parametrize("max_iter,tol", [(1, 1e-3), (5, 1e-3), (200, 1e-6)])
def test_e_step_equals_textbook_reference(max_iter, tol):
    rng = np.random.default_rng(3)
    X, lam = random_corpus(rng)
    alpha = np.array([0.1, 0.2, 0.05, 0.3])
    got = e_step(X, np.exp(dirichlet_expectation(lam, axis=0)), alpha, max_iter=max_iter, tol=tol)
    gamma, counts, bound = reference_e_step(X, lam, alpha, max_iter, tol)
    np.testing.assert_allclose(got.gamma, gamma, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.counts, counts, rtol=1e-10, atol=1e-10)
    assert got.bound == pytest.approx(bound, rel=1e-10)
    # the counts hold every token exactly once
    assert got.counts.sum() == pytest.approx(X.sum(), rel=1e-12)


def test_a_document_does_not_depend_on_its_block():
    rng = np.random.default_rng(5)
    X, lam = random_corpus(rng, n_docs=60)
    Eb = np.exp(dirichlet_expectation(lam, axis=0))
    alpha = np.full(4, 0.1)
    whole = e_step(X, Eb, alpha)
    alone = [e_step(X[[d]], Eb, alpha) for d in range(X.shape[0])]
    np.testing.assert_array_equal(np.vstack([r.gamma for r in alone]), whole.gamma)
    np.testing.assert_allclose(sum(r.counts for r in alone), whole.counts, rtol=1e-12, atol=1e-13)
    assert sum(r.iterations for r in alone) == whole.iterations
    assert sum(r.bound for r in alone) == pytest.approx(whole.bound, rel=1e-13)


def test_digamma_matches_scipy():
    from jsmf_dask.kernels._vb_loop import digamma as compiled_digamma

    x = np.concatenate([np.geomspace(1e-6, 1e6, 400), np.linspace(0.5, 30.0, 300)])
    got = np.array([compiled_digamma(v) for v in x])
    np.testing.assert_allclose(got, digamma(x), rtol=1e-14, atol=1e-13)


def test_incoming_gamma_is_not_modified_and_warm_start_needs_fewer_iterations():
    rng = np.random.default_rng(6)
    X, lam = random_corpus(rng)
    Eb = np.exp(dirichlet_expectation(lam, axis=0))
    alpha = np.full(4, 0.1)
    first = e_step(X, Eb, alpha)
    kept = first.gamma.copy()
    second = e_step(X, Eb, alpha, kept)
    np.testing.assert_array_equal(kept, first.gamma)
    assert second.iterations < first.iterations / 3


def test_document_bound_is_the_incoming_state_bound():
    rng = np.random.default_rng(7)
    X, lam = random_corpus(rng)
    Eb = np.exp(dirichlet_expectation(lam, axis=0))
    alpha = np.full(4, 0.2)
    res = e_step(X, Eb, alpha)
    _, _, expected = reference_e_step(X, lam, alpha, 1, 1.0)
    start = e_step(X, Eb, alpha, max_iter=0).gamma  # the initial γ, unchanged
    assert document_bound(X, Eb, alpha, start) == pytest.approx(expected, rel=1e-12)
    assert res.bound == pytest.approx(expected, rel=1e-12)


def _sweeps(X, lam, alpha, eta, n):
    gamma = None
    bounds = []
    for _ in range(n):
        res = e_step(X, np.exp(dirichlet_expectation(lam, axis=0)), alpha, gamma)
        bounds.append(res.bound + topic_bound(lam, eta))  # the state entering this sweep
        gamma = res.gamma
        lam = eta + res.counts
    return np.array(bounds)


@settings(max_examples=examples(15), deadline=None)
@given(seed=st.integers(0, 10_000), alpha=st.sampled_from([0.05, 0.1, 0.5]))
def test_bound_never_decreases_across_sweeps(seed, alpha):
    rng = np.random.default_rng(seed)
    X, lam = random_corpus(rng, n_docs=25, n_words=20, k=3)
    bounds = _sweeps(X, lam, np.full(3, alpha), 0.01, 8)
    # Coordinate ascent: each sweep's E-step and M-step can only raise the bound (up to rounding).
    assert (np.diff(bounds) >= -1e-9 * np.abs(bounds[1:])).all(), bounds


def test_topic_bound_by_hand():
    lam = np.array([[1.0, 2.0], [3.0, 0.5]])
    eta = 0.1
    expected = 0.0
    for k in range(2):
        col = lam[:, k]
        e = digamma(col) - digamma(col.sum())
        expected += ((eta - col) * e).sum() + (gammaln(col) - gammaln(eta)).sum() + gammaln(2 * eta) - gammaln(col.sum())
    assert topic_bound(lam, eta) == pytest.approx(expected, rel=1e-14)


def test_moment_alpha_recovers_a_dirichlet():
    alpha = np.array([0.05, 0.1, 0.2, 0.4, 0.05])
    np.testing.assert_allclose(moment_alpha(dirichlet_topic_topic(alpha)), alpha, rtol=1e-12)
    # no sign of sparsity (A = m mᵀ + tiny diagonal excess is still finite; A = m mᵀ exactly is not)
    m = np.full(4, 0.25)
    assert moment_alpha(np.outer(m, m)).sum() == pytest.approx(1e3 * 4)


def test_topics_from_model_scales_to_expected_counts():
    B = np.array([[0.5, 0.0], [0.5, 1.0]])
    lam = topics_from_model(B, np.array([0.4, 0.6]), 100.0, 0.01)
    np.testing.assert_allclose(lam, 0.01 + np.array([[20.0, 0.0], [20.0, 60.0]]))


@settings(max_examples=examples(50), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_words=st.integers(8, 60), k=st.integers(2, 8))
def test_topic_shares_of_a_recovered_model_are_its_own_normalisation(seed, n_words, k):
    """Recovery forms ``B`` by Bayes' rule from ``p(k | w)`` and ``p(w)``, dividing by ``p(k) = Σ_w p(k | w) p(w)``;
    ``topic_shares`` gets those ``p(k)`` back from ``B`` and ``p(w)`` alone (``p = B s`` is consistent)."""
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(k, 0.2), size=n_words)
    weights[:k] = np.eye(k)  # anchor words: B has full column rank
    p = rng.dirichlet(np.ones(n_words))
    B = topic_word(weights, p)
    np.testing.assert_allclose(topic_shares(B, p), weights.T @ p, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(topic_shares(B, 7.0 * p), weights.T @ p, rtol=1e-8, atol=1e-12)  # any scale of p


def test_topic_shares_where_A_gives_a_topic_no_mass():
    B = np.array([[0.5, 0.0, 0.1], [0.5, 0.2, 0.0], [0.0, 0.8, 0.9]])
    share = np.array([0.5, 0.3, 0.2])
    A = np.diag([0.6, 0.4, 0.0])  # the third topic's anchor block empty
    np.testing.assert_allclose(topic_shares(B, B @ share, A), share, rtol=1e-12)
    # an inconsistent p: the non-negative least-squares fit, never a negative share
    s = topic_shares(B, np.array([1.0, 0.0, 0.0]))
    assert (s >= 0).all() and s.sum() == pytest.approx(1.0)
    # without p the row sums of A, without either uniform shares
    np.testing.assert_allclose(topic_shares(B, None, A), [0.6, 0.4, 0.0])
    np.testing.assert_allclose(topic_shares(B, np.zeros(3), None), np.full(3, 1 / 3))
    np.testing.assert_allclose(topic_shares(B, np.full(3, np.nan), np.zeros((3, 3))), np.full(3, 1 / 3))


def test_topic_shares_fall_back_to_A_when_the_solver_does_not_settle(monkeypatch):
    import jsmf_dask.kernels.variational as variational

    def capped(*args, **kwargs):
        raise RuntimeError("Maximum number of iterations reached.")

    monkeypatch.setattr(variational, "nnls", capped)
    B = np.array([[0.5, 0.0], [0.5, 1.0]])
    np.testing.assert_allclose(topic_shares(B, np.array([0.2, 0.8]), np.array([[0.3, 0.1], [0.1, 0.5]])),
                               [0.4, 0.6])


def test_moment_alpha_with_the_mean_given():
    alpha = np.array([0.05, 0.1, 0.2, 0.4, 0.05])
    A = dirichlet_topic_topic(alpha)
    np.testing.assert_allclose(moment_alpha(A, mean=alpha / alpha.sum()), alpha, rtol=1e-12)
    # a topic A gives no mass keeps the share it is given, and the concentration from A's trace
    A[0, :] = A[:, 0] = 0.0
    given = moment_alpha(A, mean=np.full(5, 0.2))
    assert np.allclose(given, given[0]) and given[0] > 0


def test_expected_topic_topic_by_hand():
    gamma = np.array([[2.1, 1.1], [0.1, 3.1], [1.1, 0.1]])  # counts (2,1), (0,3), (1,0) with α = 0.1
    A = expected_topic_topic(gamma, np.full(2, 0.1))
    by_hand = np.array([[2.0, 2.0], [2.0, 0.0]]) / 6 + np.array([[0.0, 0.0], [0.0, 6.0]]) / 6
    np.testing.assert_allclose(A, by_hand, atol=1e-12)


def test_moment_alpha_of_a_topic_matrix_without_mass_is_the_customary_prior():
    # a fit whose anchors never co-occur has A = 0: no information, LDA's customary symmetric 0.1
    np.testing.assert_array_equal(moment_alpha(np.zeros((3, 3))), np.full(3, 0.1))
    np.testing.assert_array_equal(moment_alpha(np.full((2, 2), np.nan)), np.full(2, 0.1))
