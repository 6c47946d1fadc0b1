"""ENN and LAW (kernels.lowrank) against dense implementations written here, and on exact separable cases."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.optimize as opt
import scipy.sparse as sps
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jsmf_dask.exceptions import InsufficientMemoryError
from jsmf_dask.kernels import enn
from jsmf_dask.kernels.enn import enn_rectify, nonnegativity_correction, range_eigenpairs
from jsmf_dask.kernels.law import law_anchors, law_coordinates, law_weights
from jsmf_dask.kernels.lowrank import LowRankCooccurrence, factor
from jsmf_dask.kernels.eigen import top_eigenpairs
from jsmf_dask.kernels.recover import recover_weights, topic_topic, topic_word
from jsmf_dask.kernels.synthetic import dirichlet_topic_topic, separable_topics
from tests.conftest import examples


def dense_correction(Y: np.ndarray, checked: np.ndarray, total: float = 1.0) -> tuple[np.ndarray, float]:
    """Dense reference: E = max(−(YYᵀ + r), 0) on checked rows/columns, r by a scalar root finder."""
    n = Y.shape[0]
    M = Y @ Y.T
    mask = np.zeros((n, n), dtype=bool)
    mask[checked, :] = True
    mask[:, checked] = True

    def excess(r: float) -> float:
        return float(np.where(mask, np.maximum(-(M + r), 0.0), 0.0).sum() + r * n * n - (total - M.sum()))

    lo, hi = -1.0, 1.0
    while excess(lo) > 0:
        lo *= 2
    r = opt.brentq(excess, lo, hi, xtol=1e-300, rtol=8.9e-16, maxiter=500)
    return np.where(mask, np.maximum(-(M + r), 0.0), 0.0), r


def random_factor(seed: int, n: int, k: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((n, k)) / n
    Y[:, 0] = np.abs(Y[:, 0]) * 3  # a dominant non-negative direction, as a co-occurrence has
    return Y


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 40), k=st.integers(1, 4), frac=st.floats(0.1, 1.0))
def test_correction_is_nonnegative_where_checked_and_sums_to_one(seed, n, k, frac):
    Y = random_factor(seed, n, k)
    checked = np.sort(np.random.default_rng(seed).choice(n, max(1, int(frac * n)), replace=False))
    E, r = nonnegativity_correction(Y, checked, chunk=7)
    C = LowRankCooccurrence(Y, E, r)
    dense = Y @ Y.T + E.toarray() + r
    assert (E.toarray() >= 0).all()
    np.testing.assert_allclose(E.toarray(), E.toarray().T, rtol=0, atol=0)
    # non-negative on the checked rows and columns, to rounding of the entries (|entries| ~ 1/n²)
    tiny = 1e-14 * np.abs(dense).max()
    assert dense[checked].min() >= -tiny and dense[:, checked].min() >= -tiny
    assert abs(dense.sum() - 1.0) < 1e-12 and abs(C.total() - 1.0) < 1e-12
    E_ref, r_ref = dense_correction(Y, checked)
    np.testing.assert_allclose(r, r_ref, rtol=1e-9, atol=1e-18)
    np.testing.assert_allclose(E.toarray(), E_ref, rtol=0, atol=1e-12 * np.abs(dense).max())


def test_operator_equals_the_dense_matrix():
    Y = random_factor(3, 30, 3)
    E, r = nonnegativity_correction(Y, np.arange(0, 30, 3))
    C = LowRankCooccurrence(Y, E, r)
    dense = Y @ Y.T + E.toarray() + r
    X = np.random.default_rng(1).standard_normal((30, 4))
    np.testing.assert_allclose(C.matmat(X), dense @ X, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(C.rmatmat(X.T), X.T @ dense, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(C.row_sums(), dense.sum(axis=1), rtol=1e-13, atol=1e-15)  # rows sum to ~0.1-1
    np.testing.assert_allclose(C.rows(np.array([4, 0, 7])), dense[[4, 0, 7]], rtol=1e-13, atol=1e-18)


def noisy_cooccurrence(seed: int, n: int = 60, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A separable C = BABᵀ plus symmetric noise (so ENN has negatives to correct), summing to 1."""
    rng = np.random.default_rng(seed)
    B = separable_topics(n, k, rng)
    A = dirichlet_topic_topic(np.full(k, 0.3))
    noise = rng.standard_normal((n, n)) * 0.3 / n**2
    C = B @ A @ B.T + 0.5 * (noise + noise.T)
    return C / C.sum(), B


def dense_enn(C: np.ndarray, k: int, l: int, iterations: int) -> np.ndarray:
    """ENN written densely: PSD_K by eigh, the correction on the l largest-norm rows, the shift, repeated."""
    w, V = np.linalg.eigh(C)
    Y = factor(w[::-1][:k], V[:, ::-1][:, :k])
    for _ in range(iterations):
        checked = np.sort(np.argsort(-np.einsum("ij,ij->i", Y, Y), kind="stable")[:l])
        E, r = dense_correction(Y, checked)
        w, V = np.linalg.eigh(Y @ Y.T + E + r)
        Y = factor(w[::-1][:k], V[:, ::-1][:, :k])
    return Y


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(8, 40), k=st.integers(1, 4), touched=st.integers(0, 6),
       zero_column=st.booleans())
def test_range_eigenpairs_equal_eigh_of_the_dense_matrix(seed, n, k, touched, zero_column):
    rng = np.random.default_rng(seed)
    Y = random_factor(seed, n, k)
    if zero_column:
        Y[:, -1] = 0.0  # a clipped eigenvalue: the basis must drop the dependent column
    rows = rng.choice(n, touched, replace=False)
    cols = rng.choice(n, touched)
    v = rng.random(touched) / n**2
    E = sps.coo_array((np.r_[v, v], (np.r_[rows, cols], np.r_[cols, rows])), shape=(n, n)).tocsr()
    E.sum_duplicates()
    C = LowRankCooccurrence(Y, E, -0.1 / n**2)
    dense = Y @ Y.T + E.toarray() + C.r
    w, V = np.linalg.eigh(dense)
    w, V = w[::-1], V[:, ::-1]
    eig = range_eigenpairs(C, k, max_dim=n + k + 1)
    scale = np.abs(w).max()
    # exact up to rounding: eigenvalues and the residual against the dense matrix at 1e-12 of λ₁
    np.testing.assert_allclose(eig.values, w[:k], rtol=0, atol=1e-12 * scale)
    residual = np.linalg.norm(dense @ eig.vectors - eig.vectors * eig.values, axis=0).max() / scale
    assert residual < 1e-12 and eig.residual < 1e-12
    np.testing.assert_allclose(eig.vectors.T @ eig.vectors, np.eye(k), rtol=0, atol=1e-12)
    # a basis above the cap is refused, not truncated
    touched_words = np.unique(E.indices).size
    assert range_eigenpairs(C, k, max_dim=k + touched_words) is None
    assert range_eigenpairs(C, k, max_dim=k + 1 + touched_words) is not None


@pytest.mark.parametrize("route", ["exact", "iterative"])
def test_enn_matches_a_dense_enn_and_law_a_dense_law(route, monkeypatch):
    """Both PSD steps (exact on the range, or the warm iterative solve) give the dense ENN's iterates."""
    if route == "iterative":
        monkeypatch.setattr(enn, "range_eigenpairs", lambda C, k, max_dim: None)
    else:
        monkeypatch.setattr(enn, "_exact_dim_cap", lambda n, k, max_bytes: n + k + 1)
    C, _ = noisy_cooccurrence(0)
    n, k, l, iterations = C.shape[0], 4, 25, 6
    start = top_eigenpairs(lambda V: C @ V, n, k, tol=1e-12)
    rect, eig, trace, n_iter = enn_rectify(start, k, iterations=iterations, tol=None, eig_tol=1e-12, l=l)
    assert n_iter == iterations and len(trace.relative_change) == iterations
    assert trace.correction_nnz[0] > 0, "the noise must give ENN negative entries to correct"
    Y_ref = dense_enn(C, k, l, iterations)
    np.testing.assert_allclose(rect.Y @ rect.Y.T, Y_ref @ Y_ref.T, rtol=0, atol=1e-8 * np.abs(Y_ref @ Y_ref.T).max())
    # The final C: non-negative on the checked rows, sums to 1.
    dense = rect.Y @ rect.Y.T + rect.E.toarray() + rect.r
    checked = np.sort(np.argsort(-np.einsum("ij,ij->i", rect.Y, rect.Y), kind="stable")[:l])
    assert dense[checked].min() >= -1e-14 * dense.max()
    assert abs(dense.sum() - 1.0) < 1e-12
    # LAW against the same algebra done densely: Z = Qᵀ C̄ᵀ, anchors by scipy's pivoted QR, B by the dense rows.
    Z, p = law_coordinates(rect)
    np.testing.assert_allclose(p, dense.sum(axis=1), rtol=1e-12)
    Q, _ = np.linalg.qr(rect.Y)
    Z_ref = Q.T @ (dense / p[:, None]).T
    Z_ref[:, p <= 0] = 0.0  # words whose row sum went negative: never anchors, zero weights (documented)
    np.testing.assert_allclose(np.abs(Z), np.abs(Z_ref), rtol=0, atol=1e-8 * np.abs(Z_ref).max())
    anchors, _ = law_anchors(Z, p, k)
    _, _, piv = sla.qr(Z_ref, pivoting=True, mode="economic")
    np.testing.assert_array_equal(np.sort(anchors), np.sort(piv[:k]))
    weights, _, _ = law_weights(Z, Z[:, anchors])
    ref, _, _ = recover_weights(Z_ref[:, anchors].T @ Z_ref[:, anchors], Z_ref.T @ Z_ref[:, anchors],
                                np.einsum("ij,ij->j", Z_ref, Z_ref))
    np.testing.assert_allclose(weights, ref, rtol=0, atol=1e-8)


def test_enn_stops_once_its_change_is_below_what_can_be_measured():
    """Without a tol ENN runs until the relative change reaches CHANGE_FLOOR (1e-7), not to the cap."""
    C, _ = noisy_cooccurrence(3)
    start = top_eigenpairs(lambda V: C @ V, C.shape[0], 4, tol=1e-12)
    rect, _, trace, n_iter = enn_rectify(start, 4, iterations=3000, tol=None, eig_tol=1e-12, l=25)
    assert enn.CHANGE_FLOOR == 1e-7
    assert n_iter < 3000 and trace.relative_change[-1] <= 1e-7 and min(trace.relative_change[:-1]) > 1e-7
    assert rect.E.nnz > 0  # it was the change, not an empty correction, that stopped it


def test_enn_within_a_memory_budget_too_small_for_its_eigensolve_names_the_figures():
    C, _ = noisy_cooccurrence(0)
    start = top_eigenpairs(lambda V: C @ V, C.shape[0], 4, tol=1e-12)
    n = C.shape[0]
    # too little for the correction itself
    with pytest.raises(InsufficientMemoryError, match=r"ENN cycle 1: the correction has \d+ non-zeros .* GiB"):
        enn_rectify(start, 4, iterations=3, tol=None, l=25, max_bytes=1)
    # the correction (332 non-zeros on 39 words in cycle 1) fits, but neither the iterative eigensolve nor an
    # exact one on a basis of K + 1 + 39 > 40 columns does
    budget = enn.enn_min_memory(n, 4, 0) + 24 * n * 40
    assert enn._exact_dim_cap(n, 4, budget) == 40 and enn.enn_memory(n, 4) > budget
    with pytest.raises(InsufficientMemoryError, match=r"ENN cycle 1: the correction touches 39 words.* GiB"):
        enn_rectify(start, 4, iterations=3, tol=None, l=25, max_bytes=budget)
    # a budget that holds the iterative solve runs it
    rect, *_ = enn_rectify(start, 4, iterations=3, tol=None, l=25, max_bytes=enn.enn_memory(C.shape[0], 4))
    assert rect.E.nnz > 0


def test_law_anchors_equal_pivoted_qr_on_the_dense_cbar_of_a_low_rank_matrix():
    rng = np.random.default_rng(5)
    n, k = 80, 6
    Y = np.abs(rng.standard_normal((n, k))) / n
    Y /= np.sqrt((Y.sum(axis=0) ** 2).sum())  # Σ YYᵀ = 1
    rect = LowRankCooccurrence(Y, sps.csr_array((n, n)), 0.0)
    Z, p = law_coordinates(rect)
    C = Y @ Y.T
    Cbar = C / C.sum(axis=1, keepdims=True)
    _, _, piv = sla.qr(Cbar.T, pivoting=True)
    anchors, _ = law_anchors(Z, p, k)
    np.testing.assert_array_equal(anchors, piv[:k])


def test_separable_low_rank_operator_gives_exact_anchors_b_and_a():
    rng = np.random.default_rng(11)
    n, k = 200, 5
    B = separable_topics(n, k, rng)
    A = dirichlet_topic_topic(rng.uniform(0.2, 1.0, k))
    # C = BABᵀ only as an operator: nothing N×N is formed.
    start = top_eigenpairs(lambda V: B @ (A @ (B.T @ V)), n, k, tol=1e-13)
    rect, _, trace, n_iter = enn_rectify(start, k, iterations=30, tol=None, eig_tol=1e-13)
    assert max(trace.correction_sum) < 1e-15  # C is already non-negative: nothing to correct,
    assert n_iter == 1  # so ENN stops after its first cycle
    Z, p = law_coordinates(rect)
    anchors, _ = law_anchors(Z, p, k)
    assert sorted(anchors) == list(range(k))  # separable_topics: word j is topic j's only anchor
    weights, _, _ = law_weights(Z, Z[:, anchors])
    B_hat = topic_word(weights, p)
    order = list(anchors)  # anchor word j is topic j
    np.testing.assert_allclose(B_hat, B[:, order], rtol=0, atol=1e-8)
    A_hat, _ = topic_topic(rect.rows(anchors)[:, anchors], B_hat, anchors)
    np.testing.assert_allclose(A_hat, A[np.ix_(order, order)], rtol=0, atol=1e-8)


def test_correction_without_negatives_is_empty_and_keeps_the_sum():
    Y = np.full((10, 1), 0.1)  # YYᵀ = 0.01 everywhere, sums to 1
    E, r = nonnegativity_correction(Y, np.arange(10))
    assert E.nnz == 0 and abs(r) < 1e-18


def test_enn_stops_on_its_tolerance():
    C, _ = noisy_cooccurrence(2)
    start = top_eigenpairs(lambda V: C @ V, C.shape[0], 4, tol=1e-12)
    _, _, trace, n_iter = enn_rectify(start, 4, iterations=50, tol=1e-3, eig_tol=1e-12)
    assert n_iter < 50 and trace.relative_change[-1] <= 1e-3 and all(d > 1e-3 for d in trace.relative_change[:-1])


@pytest.mark.parametrize("l", [1, 10, 60])
def test_any_number_of_checked_rows(l):
    C, _ = noisy_cooccurrence(4)
    start = top_eigenpairs(lambda V: C @ V, C.shape[0], 4, tol=1e-12)
    rect, _, _, _ = enn_rectify(start, 4, iterations=2, tol=None, l=l)
    assert abs(rect.total() - 1.0) < 1e-12


@pytest.mark.parametrize("with_correction", [False, True])
def test_low_rank_partials_equal_the_dense_partials(with_correction):
    from jsmf_dask.kernels.metrics import fit_partials, low_rank_partials

    C, B_true = noisy_cooccurrence(7, n=50, k=4)
    n, k = C.shape[0], 4
    start = top_eigenpairs(lambda V: C @ V, n, k, tol=1e-12)
    rect, eig, _, _ = enn_rectify(start, k, iterations=3, tol=None, l=20)
    if with_correction:  # an ENN model: U = [eigenvectors, 1], s = [λ⁺, r], E
        U, s, E = np.hstack([eig.vectors, np.ones((n, 1))]), np.append(np.maximum(eig.values, 0), rect.r), rect.E
        dense = rect.Y @ rect.Y.T + rect.E.toarray() + rect.r
    else:  # a compressed store's rank-K C
        U, s, E = start.vectors, start.values, None
        dense = (start.vectors * start.values) @ start.vectors.T
    Z, p = law_coordinates(rect)
    anchors, _ = law_anchors(Z, p, k)
    W, _, _ = law_weights(Z, Z[:, anchors])
    W[anchors] = np.eye(k)
    B = topic_word(W, p)
    A, _ = topic_topic(rect.rows(anchors)[:, anchors], B, anchors)
    p_dense = dense.sum(axis=1)
    Cbar_S = dense[anchors] / np.where(p_dense[anchors] > 0, p_dense[anchors], 1.0)[:, None]
    ref = fit_partials(dense, B, B @ A, W, Cbar_S)
    got, p_low = low_rank_partials(U, s, E, B, A, W, anchors)
    np.testing.assert_allclose(p_low, p_dense, rtol=1e-10, atol=1e-16)
    for name in ("recovery_sum", "total", "sq", "cross"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-8, err_msg=name)
    assert got.n_rows == ref.n_rows == n


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 60), k=st.integers(1, 6), shift=st.floats(-0.05, 0.05),
       chunk=st.integers(1, 70), clip=st.booleans())
@example(seed=1, n=28, k=1, shift=-0.0480287185658733, chunk=1, clip=True)  # all but one entry clipped
def test_an_ap_iterate_in_low_rank_form_equals_its_dense_clip(seed, n, k, shift, chunk, clip):
    """``max(L, 0)/s`` as ``YYᵀ + E + r·11ᵀ`` (what the model store keeps for AP) equals the dense clip to
    rounding, E holds exactly the clipped entries, and the exact row norms match the dense ones."""
    from jsmf_dask.kernels.lowrank import from_iterate
    from jsmf_dask.kernels.ap import LowRankIterate, clipped_entries

    rng = np.random.default_rng(seed)
    k = min(k, n)
    Y = np.linalg.qr(rng.standard_normal((n, k)))[0]
    iterate = LowRankIterate(Y, rng.uniform(0.0, 1.0, k), shift, clip=clip)
    dense = iterate.block(slice(0, n), slice(0, n))
    scale = abs(float(dense.sum())) or 1.0  # a model's scale is its positive sum
    whole = clipped_entries(iterate, chunk=chunk)
    halves = [clipped_entries(iterate, rows, chunk=chunk) for rows in ((0, n // 2), (n // 2, n))]
    split = [np.concatenate(parts) for parts in zip(*halves, strict=True)]  # row blocks partition the entries
    np.testing.assert_array_equal(whole[0], split[0])
    np.testing.assert_array_equal(whole[1], split[1])
    np.testing.assert_allclose(whole[2], split[2], rtol=1e-13)  # other GEMM shapes: rounding only
    i, j, v = whole
    assert (i <= j).all() and (v > 0).all()
    raw = (Y * iterate.lam) @ Y.T + shift
    assert len(i) == (int((np.triu(raw) < 0).sum()) if clip else 0)
    rect = from_iterate(iterate, scale, whole)
    C = rect.Y @ rect.Y.T + rect.E.toarray() + rect.r
    tol = 1e-13 * np.abs(raw).max() / scale  # L + max(−L, 0) cancels to rounding of L's entries
    np.testing.assert_allclose(C, dense / scale, rtol=0, atol=tol)
    # the norms come by algebra on the factors: rounding relative to the factors' size, not to C's (which can be
    # ~0 where the clip removes nearly everything: 1e-18 against true norms of 1e-34 was seen)
    factors = n * (np.abs(raw).max() / scale) ** 2
    norms2 = rect.row_norms2()
    assert (norms2 >= 0).all()  # sums of squares, whatever the rounding (-3.5e-18 was seen against 2e-35)
    np.testing.assert_allclose(norms2, (C * C).sum(axis=1), rtol=1e-10, atol=1e-12 * max((C * C).sum(), factors))
    if clip and dense.sum() > 0:  # scale None: the iterate's own sum, by algebra on the factors and E
        own = from_iterate(iterate, None, whole)
        # that sum, (1ᵀY)Λ(Yᵀ1) + c·n² + ΣE, cancels terms of size T down to the (possibly tiny) positive sum:
        # summed n at a time, its rounding is at most n·eps·T, which every entry carries relative to the sum
        # (T/sum was 8,000 at n 28 with all but one entry clipped: 1.0e-12 relative, inside this bound)
        ones = Y.sum(axis=0)
        T = abs(float((ones * iterate.lam) @ ones)) + abs(shift) * n * n + float(whole[2].sum() * 2)
        cancel = n * np.finfo(float).eps * T / dense.sum() * dense.max() / dense.sum()
        np.testing.assert_allclose(own.Y @ own.Y.T + own.E.toarray() + own.r, dense / dense.sum(), rtol=0,
                                   atol=1e-13 * np.abs(raw).max() / dense.sum() + cancel)


def test_a_row_the_clip_emptied_sums_to_exactly_zero():
    """A word that co-occurs with nothing (zero row of Y) is all clip in the low-rank form: L + max(−L, 0)
    cancels to rounding there, and row_sums reports 0, not the ±1e-19 that dividing by would blow up."""
    from jsmf_dask.kernels.lowrank import from_iterate
    from jsmf_dask.kernels.ap import LowRankIterate, clipped_entries

    rng = np.random.default_rng(3)
    Y = np.linalg.qr(rng.standard_normal((40, 4)))[0]
    Y[7] = 1e-18 * rng.standard_normal(4)  # zero but for an eigensolver's rounding
    iterate = LowRankIterate(Y, np.array([0.9, 0.5, 0.2, 0.1]), -1e-3)
    dense = iterate.block(slice(0, 40), slice(0, 40))
    rect = from_iterate(iterate, float(dense.sum()), clipped_entries(iterate))
    p = rect.row_sums()
    assert p[7] == 0.0
    np.testing.assert_allclose(np.delete(p, 7), np.delete(dense.sum(axis=1), 7) / dense.sum(), rtol=1e-12)
