"""Document–topic compositions (LDA's fold-in under fixed topics) against a slow reference."""

import numpy as np
import scipy.sparse as sps
from scipy.special import digamma

from jsmf_dask.kernels.infer import document_topics, model_prior
from jsmf_dask.kernels.synthetic import separable_topics
from jsmf_dask.kernels.variational import moment_alpha


def _reference(B: np.ndarray, counts: np.ndarray, alpha: np.ndarray, iterations: int = 5000) -> np.ndarray:
    """The textbook fixed point, one document at a time: φ_wk ∝ B_wk exp(ψ(γ_k)), γ = α + Σ_w n_w φ_w."""
    out = np.empty((counts.shape[0], B.shape[1]))
    for d, n in enumerate(counts):
        words = np.flatnonzero(n)
        gamma = alpha + n.sum() / B.shape[1]
        for _ in range(iterations):
            phi = B[words] * np.exp(digamma(gamma))
            phi /= phi.sum(axis=1, keepdims=True)
            new = alpha + n[words] @ phi
            if np.abs(new - gamma).max() < 1e-13:
                break
            gamma = new
        out[d] = gamma / gamma.sum()
    return out


def test_equals_the_textbook_fixed_point_and_handles_empty_documents():
    rng = np.random.default_rng(1)
    B = separable_topics(200, 5, rng, concentration=0.1)
    truth = rng.dirichlet(np.full(5, 0.5), size=30)
    counts = rng.poisson(100 * truth @ B.T)
    counts[3] = 0
    alpha = np.array([0.05, 0.1, 0.2, 0.3, 0.5])
    theta = document_topics(B, sps.csr_array(counts), alpha, fold_in_tol=1e-12)
    np.testing.assert_allclose(theta, _reference(B, counts, alpha), rtol=0, atol=1e-9)
    np.testing.assert_allclose(theta[3], alpha / alpha.sum())  # no words: the prior's mean
    # the default tolerance stays within a few thousandths of the converged weights
    assert np.abs(document_topics(B, sps.csr_array(counts), alpha) - theta).max() < 5e-3


def test_a_topic_distribution_returns_that_topic():
    rng = np.random.default_rng(0)
    B = separable_topics(300, 6, rng, concentration=0.05)
    theta = document_topics(B, B.T * 1000.0, np.full(6, 0.1), fold_in_tol=1e-10)
    # 1000 tokens of topic k: the prior keeps about α/(1000 + Σα) on each other topic
    np.testing.assert_allclose(theta, np.eye(6), atol=2e-3)


def test_the_model_prior_is_its_own_else_moment_matched_to_a():
    A = np.array([[0.3, 0.1], [0.1, 0.5]])
    np.testing.assert_array_equal(model_prior({"A": A, "alpha": np.array([0.2, 0.4])}), [0.2, 0.4])
    np.testing.assert_array_equal(model_prior({"A": A}), moment_alpha(A))
    np.testing.assert_array_equal(model_prior({"A": A, "alpha": None}), moment_alpha(A))
