"""Anchors and recovery: exact on noise-free separable data; solvers against the exact one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jsmf_dask.kernels.anchors import greedy_anchors
from jsmf_dask.kernels.factorize import find_anchors, recover, rectify
from jsmf_dask.kernels.recover import (exponentiated_gradient, recover_weights, simplex_least_squares, topic_topic,
                                      topic_word)
from jsmf_dask.kernels.synthetic import dirichlet_topic_topic, separable_topics
from tests.conftest import examples


def separable_truth(n=60, k=4, seed=0):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    B = np.empty((n, k))
    B[perm] = separable_topics(n, k, rng, concentration=0.5, anchor_mass=0.08)
    A = dirichlet_topic_topic(np.linspace(0.3, 0.8, k))
    return B, A, perm[:k]


@pytest.mark.parametrize("rectifier", ["ap", "dc", "none"])
def test_noise_free_separable_case_is_recovered_exactly(rectifier):
    B, A, anchors = separable_truth()
    C = B @ A @ B.T
    rect = rectify(C, 4, rectifier=rectifier, iterations=20, eig_tol=1e-12)
    # C = BABᵀ already lies in every set: rectification must leave it alone.
    np.testing.assert_allclose(rect.C, C, rtol=0, atol=1e-12 * C.max())
    found, _ = find_anchors(rect.C, 4)
    assert sorted(found) == sorted(anchors)
    rec = recover(rect.C, found)
    order = [list(found).index(a) for a in anchors]
    np.testing.assert_allclose(rec.B[:, order], B, atol=1e-8)
    np.testing.assert_allclose(rec.A[np.ix_(order, order)], A, atol=1e-8)
    assert abs(rec.legality - 1) < 1e-8


def test_greedy_anchors_by_hand():
    # Rows: two orthogonal extremes and their mixtures; the largest row first, then the farthest from it.
    R = np.array([[3.0, 0, 0], [0, 2.0, 0], [1.0, 1.0, 0], [0, 0, 0.5]])
    anchors, pivots = greedy_anchors(3, lambda i: R[i], lambda q: R @ q, (R**2).sum(1))
    assert anchors.tolist() == [0, 1, 3]
    np.testing.assert_allclose(pivots, [3.0, 2.0, 0.5])
    anchors, _ = greedy_anchors(2, lambda i: R[i], lambda q: R @ q, (R**2).sum(1),
                                candidates=np.array([False, True, True, True]))
    assert anchors.tolist() == [1, 2]


@pytest.mark.parametrize("nudge", [-1e-15, 0.0, 1e-15])
def test_rows_tied_to_rounding_go_to_the_lowest_index(nudge):
    """Two equal rows (two words a rank-K C makes identical): whichever rounding makes larger, the first is
    picked, so anchors do not depend on the order C was summed in; a real difference still decides."""
    R = np.array([[0.0, 2.0, 0], [1.0, 0, 1.0], [1.0, 0, 1.0], [0, 0, 0.5]])
    R[2] *= 1 + nudge
    anchors, _ = greedy_anchors(2, lambda i: R[i], lambda q: R @ q, (R**2).sum(1))
    assert anchors.tolist() == [0, 1]
    R[2] *= 1 + 1e-9  # far above rounding: the larger row wins
    anchors, _ = greedy_anchors(2, lambda i: R[i], lambda q: R @ q, (R**2).sum(1))
    assert anchors.tolist() == [0, 2]


def test_anchors_refuse_when_rank_is_short():
    R = np.array([[1.0, 0], [2.0, 0]])
    with pytest.raises(ValueError, match="linearly independent"):
        greedy_anchors(2, lambda i: R[i], lambda q: R @ q, (R**2).sum(1))


def test_simplex_least_squares_satisfies_kkt():
    rng = np.random.default_rng(4)
    U = rng.random((6, 40))
    G = U @ U.T
    for _ in range(20):
        c = rng.random(40)
        b = U @ c
        y = simplex_least_squares(G, b)
        assert y.min() >= 0 and abs(y.sum() - 1) < 1e-12
        grad = 2 * (G @ y - b)
        free = y > 0
        # stationary on the free set, no descent direction into the bound set
        assert np.ptp(grad[free]) < 1e-9 * np.abs(grad).max()
        assert np.all(grad[~free] >= grad[free].min() - 1e-9 * np.abs(grad).max())


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 25), repeated=st.booleans())
def test_compiled_active_set_equals_the_python_one(seed, k, repeated):
    """recover_weights' compiled loop is simplex_least_squares step for step (1e-12), including the (nearly)
    singular KKT systems of repeated anchor rows, which it hands to the Python version."""
    rng = np.random.default_rng(seed)
    S = rng.random((k, 30))
    if repeated and k > 2:
        S[k - 1] = S[0]
    W = rng.dirichlet(np.full(k, 0.3), 60) @ S + 0.05 * rng.random((60, 30))
    G, B = S @ S.T, W @ S.T
    Y, objective, unconverged = recover_weights(G, B, np.einsum("ij,ij->i", W, W))
    solved = [simplex_least_squares(G, b, return_converged=True) for b in B]
    ref = np.vstack([y for y, _ in solved])
    if repeated and k > 2:  # two equal anchor rows: the weight may sit on either (a rounding tie); same optimum
        ref_objective = np.einsum("ij,jk,ik->i", ref, G, ref) - 2 * np.einsum("ij,ij->i", ref, B)
        ours = np.einsum("ij,jk,ik->i", Y, G, Y) - 2 * np.einsum("ij,ij->i", Y, B)
        np.testing.assert_allclose(ours, ref_objective, rtol=1e-12, atol=1e-12 * np.abs(ref_objective).max())
        np.testing.assert_allclose(np.delete(Y, [0, k - 1], axis=1), np.delete(ref, [0, k - 1], axis=1),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(Y[:, 0] + Y[:, k - 1], ref[:, 0] + ref[:, k - 1], rtol=0, atol=1e-12)
    else:
        np.testing.assert_allclose(Y, ref, rtol=0, atol=1e-12)
    assert unconverged == sum(not ok for _, ok in solved) == 0
    assert np.allclose(Y.sum(axis=1), 1) and Y.min() >= 0


def test_every_solver_within_one_percent_of_exact_on_real_rows(reuters_cbar):
    Cbar, anchors = reuters_cbar
    Cbar_S = Cbar[anchors]
    G = Cbar_S @ Cbar_S.T
    # Anchor rows are fixed to e_k by recovery, not solved; every other row is compared.
    rows = np.setdiff1d(np.arange(Cbar.shape[0]), anchors)
    b = Cbar[rows] @ Cbar_S.T
    norms2 = np.einsum("ij,ij->i", Cbar[rows], Cbar[rows])
    _, exact, exact_short = recover_weights(G, b, norms2, solver="exact")
    _, eg, eg_short = recover_weights(G, b, norms2, solver="eg")
    assert exact_short == 0
    assert eg_short <= 0.01 * len(rows)  # EG reaches its 2000-iteration cap on a few real rows: reported, not hidden
    # relative objective gap, per word (the objective is a squared residual, > 0 for non-anchor rows)
    rel = (eg - exact) / np.maximum(exact, 1e-300)
    assert rel.min() > -1e-9          # nothing beats the exact solver
    assert rel.max() < 0.01
    Y = exponentiated_gradient(G, b, norms2=norms2)
    assert np.allclose(Y.sum(axis=1), 1) and Y.min() >= 0


def test_solvers_report_when_they_stop_at_their_cap(reuters_cbar):
    Cbar, anchors = reuters_cbar
    Cbar_S = Cbar[anchors]
    G = Cbar_S @ Cbar_S.T
    b = Cbar[:50] @ Cbar_S.T
    _, converged = exponentiated_gradient(G, b, max_iter=2, return_converged=True)
    assert not converged.all()
    _, ok = simplex_least_squares(G, b[0], max_iter=0, return_converged=True)
    assert ok is False
    y, ok = simplex_least_squares(G, b[0], return_converged=True)
    assert ok is True
    np.testing.assert_array_equal(y, simplex_least_squares(G, b[0]))


def test_bayes_rule_and_a_by_hand_where_an_enn_c_goes_below_zero():
    """B = y p(w) / Σ (columns sum to 1): a word whose row of an ε-non-negative C sums below zero has p(w) 0, so its
    row of B is 0, not negative; A is C_SS over the anchors' B entries, divided by its sum, and zero (with that sum
    returned) when the sum is not positive."""
    weights = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0], [0.3, 0.7]])
    B = topic_word(weights, np.array([0.4, 0.2, 0.4, -1e-6]))
    np.testing.assert_allclose(B, [[0.4 / 0.5, 0.0], [0.1 / 0.5, 0.1 / 0.5], [0.0, 0.4 / 0.5], [0.0, 0.0]], atol=1e-15)
    anchors = np.array([0, 2])
    A, raw = topic_topic(np.array([[0.2, 0.1], [0.1, 0.2]]), B, anchors)
    assert raw == pytest.approx(0.6 / 0.64) and A == pytest.approx(np.array([[2, 1], [1, 2]]) / 6)
    A, raw = topic_topic(np.array([[0.1, -0.3], [-0.3, 0.1]]), B, anchors)
    assert raw == pytest.approx(-0.4 / 0.64) and not A.any()
