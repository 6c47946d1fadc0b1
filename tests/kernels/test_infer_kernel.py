"""Document–topic compositions (EG on BᵀB) against exact answers."""

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels.infer import document_topics
from jsmf_dask.kernels.recover import simplex_least_squares
from jsmf_dask.kernels.synthetic import separable_topics


def test_a_topic_distribution_returns_that_topic():
    rng = np.random.default_rng(0)
    B = separable_topics(300, 6, rng, concentration=0.05)
    theta = document_topics(B, B.T * 1000.0)  # document k: 1000 × topic k's distribution
    # EG approaches a vertex only as O(1/t): its duality-gap stop (1e-10 of ‖w‖²) leaves about 1e-3 of
    # weight off the vertex here (measured 1.2e-3; 4.7e-4 at 1e-12, 1.2e-4 at 1e-14)
    np.testing.assert_allclose(theta, np.eye(6), atol=2e-3)
    assert (theta.argmax(axis=1) == np.arange(6)).all()


def test_matches_the_exact_simplex_solver_and_handles_empty_documents():
    rng = np.random.default_rng(1)
    B = separable_topics(200, 5, rng, concentration=0.1)
    truth = rng.dirichlet(np.full(5, 0.5), size=40)
    counts = rng.poisson(300 * truth @ B.T)
    counts[3] = 0
    theta = document_topics(B, sps.csr_array(counts))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, atol=1e-12)
    assert (theta >= 0).all()
    np.testing.assert_allclose(theta[3], np.full(5, 0.2))
    G = B.T @ B
    for d in (0, 1, 7, 20):
        w = counts[d] / counts[d].sum()
        exact = simplex_least_squares(G, B.T @ w)
        f = lambda y: y @ G @ y - 2 * (B.T @ w) @ y + w @ w  # noqa: E731
        # objective within 1e-6 relative of the exact optimum (EG's gap stop is 1e-10 of ‖w‖²)
        assert f(theta[d]) <= f(exact) + 1e-6 * (w @ w)
