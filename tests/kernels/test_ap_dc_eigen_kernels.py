"""Rectification kernels: each projection's defining property, AP against a plain dense reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jsmf_dask.kernels.ap import DenseAP, LowRankIterate, alternating_projection
from jsmf_dask.kernels.dc import diagonal_completion
from jsmf_dask.kernels.eigen import top_eigenpairs
from jsmf_dask.kernels.synthetic import dirichlet_topic_topic, sample_corpus, separable_topics
from tests.conftest import examples


def noisy_cooccurrence(n: int, k: int, seed: int, docs: int = 400) -> np.ndarray:
    """An empirical C (full rank, not PSD) from a small sampled corpus."""
    rng = np.random.default_rng(seed)
    B = separable_topics(n, k, rng, concentration=0.2)
    corpus = sample_corpus(B, np.full(k, 0.3), docs, 30, rng)
    H = np.zeros((docs, n))  # a row per document: its counts h, C = Σ_d (h hᵀ − diag h) / (m (m − 1))
    for i, d in enumerate(corpus.documents()):
        H[i, list(d)] = list(d.values())
    m = H.sum(axis=1, keepdims=True)
    C = (H / np.sqrt(m * (m - 1))).T @ (H / np.sqrt(m * (m - 1))) - np.diag((H / (m * (m - 1))).sum(axis=0))
    return C / C.sum()


# A plain dense AP, written here from the paper with numpy.linalg.eigh, as the reference.
def reference_ap(C: np.ndarray, k: int, iterations: int) -> np.ndarray:
    X = C.copy()
    n = X.shape[0]
    for _ in range(iterations):
        w, V = np.linalg.eigh(X)
        w, V = w[-k:], V[:, -k:]
        X = (V * np.maximum(w, 0)) @ V.T          # PSD_K
        X = X + (1 - X.sum()) / n**2              # NOR
        X = np.maximum(X, 0)                      # NN
    return X / X.sum()


@pytest.mark.parametrize(("cold", "n"), [("lobpcg", 120), ("auto", 120), ("auto", 400)])
def test_top_eigenpairs_against_eigh(cold, n):
    C = noisy_cooccurrence(n, 6, seed=1)
    w, V = np.linalg.eigh(C)
    eig = top_eigenpairs(lambda X: C @ X, n, 6, tol=1e-10, cold=cold)
    np.testing.assert_allclose(eig.values, w[::-1][:6], rtol=1e-9)
    assert eig.residual < 1e-10
    if cold == "auto":  # the basis for the next solve: the whole block (11 vectors), spanning the top 6
        assert eig.basis.shape == (n, 11)
        np.testing.assert_allclose(np.linalg.svd(eig.basis.T @ V[:, ::-1][:, :6], compute_uv=False), 1.0, atol=1e-8)
    # eigenvectors up to sign
    overlap = np.abs(np.sum(eig.vectors * V[:, ::-1][:, :6], axis=0))
    np.testing.assert_allclose(overlap, 1.0, atol=1e-8)


@pytest.mark.parametrize(("k", "krylov"), [(6, True), (40, False)])
def test_auto_cold_start_is_block_krylov_where_its_basis_fits(k, krylov, monkeypatch):
    """'auto': block Krylov where three blocks of the basis and their products fit in N²/4 numbers (K = 6:
    blocks of 11, N = 400), LOBPCG otherwise (K = 40: blocks of 60)."""
    import scipy.sparse.linalg as spla

    from jsmf_dask.kernels import eigen

    assert (400 // (8 * eigen.block_size(k, 400)) >= 3) == krylov
    C = noisy_cooccurrence(400, 8, seed=2)
    calls = []
    block_krylov, lobpcg = eigen._block_krylov, spla.lobpcg
    monkeypatch.setattr(eigen, "_block_krylov", lambda *a, **kw: calls.append("krylov") or block_krylov(*a, **kw))
    monkeypatch.setattr(spla, "lobpcg", lambda *a, **kw: calls.append("lobpcg") or lobpcg(*a, **kw))
    eig = top_eigenpairs(lambda X: C @ X, 400, k, tol=1e-8, cold="auto")
    assert set(calls) == ({"krylov"} if krylov else {"lobpcg"})
    w = np.linalg.eigvalsh(C)[::-1][:k]
    np.testing.assert_allclose(eig.values, w, rtol=0, atol=1e-7 * w[0])


def test_cold_start_memory_bounds_what_the_block_krylov_start_allocates():
    """The basis, its products and H (cold_start_memory) are what a cold start keeps besides C, measured with
    tracemalloc (numpy reports its buffers there), with room for a few N×b temporaries."""
    import tracemalloc

    from jsmf_dask.kernels.eigen import block_size, cold_start_memory

    n, k = 3000, 6
    C = noisy_cooccurrence(n, 8, seed=3, docs=300)
    b = block_size(k, n)
    assert cold_start_memory(n, k) == 8 * (2 * n * 12 * b + (12 * b) ** 2) <= 2 * n * n
    tracemalloc.start()
    try:
        top_eigenpairs(lambda X: C @ X, n, k, tol=1e-8, cold="auto")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0.9 * cold_start_memory(n, k) <= peak <= cold_start_memory(n, k) + 16 * 8 * n * b


def test_block_krylov_restarts_and_stops_at_its_cap():
    """A basis of three blocks must restart (from its Ritz vectors) to converge; a cap of two blocks stops
    with what it has, above the tolerance."""
    from jsmf_dask.kernels.eigen import _block_krylov

    C = noisy_cooccurrence(400, 8, seed=2)
    w = np.linalg.eigvalsh(C)[::-1]
    X = np.linalg.qr(np.random.default_rng(0).standard_normal((400, 8)))[0]
    products = []

    def counted(V):
        products.append(V.shape[1])
        return C @ V

    theta, V, CV, residual = _block_krylov(counted, X, 5, 1e-10, 200, basis_blocks=3)
    assert residual <= 1e-10 and len(products) > 3
    np.testing.assert_allclose(theta[:5], w[:5], rtol=1e-9)
    np.testing.assert_allclose(CV, C @ V, atol=1e-13)
    np.testing.assert_allclose(V.T @ V, np.eye(8), atol=1e-12)
    products.clear()
    *_, residual = _block_krylov(counted, X, 5, 1e-10, 2, basis_blocks=3)
    assert len(products) == 2 and residual > 1e-10


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 10_000), rank=st.integers(1, 8), scale=st.floats(-8, 2))
@example(seed=3686, rank=4, scale=0.0)  # a nearly dependent column in the first new block (found at 3,000 examples)
def test_an_operator_of_lower_rank_than_the_block_is_solved_by_its_own_krylov_space(seed, rank, scale):
    """C of rank r below the block (K = 5: 10 vectors; as an AP iterate of a small corpus can be): the Krylov
    space is invariant after one block of products, and the cold start and a warm restart from its answer
    return C's exact eigenpairs from that space, in at most three blocks of products, instead of normalising
    round-off into the basis (whose Ritz values were then up to 170× C's largest, and every solve went on to
    ARPACK: 1,000+ products)."""
    rng = np.random.default_rng(seed)
    n, k = 400, 5
    Y = np.linalg.qr(rng.standard_normal((n, rank)))[0]
    lam = np.sort(rng.uniform(0.1, 1.0, rank))[::-1] * 10.0**scale
    C = (Y * lam) @ Y.T
    w = np.zeros(k)
    w[: min(rank, k)] = lam[:k]
    cold = top_eigenpairs(lambda X: C @ X, n, k, tol=1e-6, cold="auto", rng=rng)
    assert cold.basis is not None and cold.n_matmat <= 3 * 10  # no fall back to ARPACK
    np.testing.assert_allclose(cold.values, w, rtol=0, atol=1e-9 * lam[0])
    assert cold.residual <= 1e-6
    warm = top_eigenpairs(lambda X: C @ X, n, k, X0=cold.basis, tol=1e-6, cold="auto", rng=rng)
    assert warm.basis is not None and warm.n_matmat <= 3 * 10
    np.testing.assert_allclose(warm.values, w, rtol=0, atol=1e-9 * lam[0])


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 5))
def test_projection_properties(seed, k):
    rng = np.random.default_rng(seed)
    n = 30
    M = rng.standard_normal((n, n))
    X = (M + M.T) / 2
    eig = top_eigenpairs(lambda V: X @ V, n, k, tol=1e-12, rng=rng)
    lam = np.maximum(eig.values, 0)
    # PSD_K: at most k positive eigenvalues, none negative (to rounding), idempotent
    P = (eig.vectors * lam) @ eig.vectors.T
    wP = np.linalg.eigvalsh(P)
    scale = np.abs(wP).max() or 1.0
    assert (wP > 1e-10 * scale).sum() <= k and wP.min() > -1e-10 * scale
    again = top_eigenpairs(lambda V: P @ V, n, k, tol=1e-12, rng=rng)
    np.testing.assert_allclose((again.vectors * np.maximum(again.values, 0)) @ again.vectors.T, P,
                               atol=1e-9 * scale)
    # NOR: the normalised iterate before the clip sums to exactly 1 (to rounding)
    it = LowRankIterate.normalized(eig.vectors, lam)
    unclipped = LowRankIterate(it.Y, it.lam, it.c, clip=False).block(slice(0, n), slice(0, n))
    assert abs(unclipped.sum() - 1.0) < 1e-10 * max(1.0, np.abs(unclipped).sum())
    # NN: the clipped iterate is >= 0 and clipping it again changes nothing
    clipped = it.block(slice(0, n), slice(0, n))
    assert clipped.min() >= 0
    np.testing.assert_array_equal(np.maximum(clipped, 0), clipped)


def in_mode(op: DenseAP, mode: str) -> DenseAP:
    """``op`` with its iterates kept factored (``sparse``) or in the dense buffer, whatever the clip's share."""
    op.dense_mode = mode == "dense"
    if mode == "sparse":
        op.DENSE_FRACTION = 1.0  # never switch
    return op


@pytest.mark.parametrize("mode", ["sparse", "dense"])
@pytest.mark.parametrize("chunk_rows", [None, 37])  # one chunk, and many (upper part + mirror)
def test_ap_matches_plain_dense_reference_n500(chunk_rows, mode):
    C = noisy_cooccurrence(500, 8, seed=7, docs=600)
    op = in_mode(DenseAP(C, chunk_rows=chunk_rows), mode)
    iterate, eig, trace, n_iter = alternating_projection(op, 500, 8, iterations=12, eig_tol=1e-11)
    np.testing.assert_allclose(op.dense(iterate), iterate.block(slice(0, 500), slice(0, 500)), rtol=0, atol=1e-15)
    X = iterate.block(slice(0, 500), slice(0, 500))
    X /= X.sum()
    R = reference_ap(C, 8, 12)
    # Eigen-residuals of 1e-11 per step leave differences far below 1e-8 of the largest entry.
    np.testing.assert_allclose(X, R, rtol=0, atol=1e-8 * R.max())
    assert n_iter == 12 and len(trace.delta) == 12 and len(trace.dist_psd) == 12


def test_ap_result_in_all_three_sets_and_trace_converges():
    C = noisy_cooccurrence(200, 5, seed=3)
    op = DenseAP(C)
    iterate, eig, trace, _ = alternating_projection(op, 200, 5, iterations=150)
    X = op.dense(iterate) / op.dense(iterate).sum()
    assert X.min() >= 0                                   # NN exactly
    assert abs(X.sum() - 1) < 1e-12                       # NOR to rounding
    w = np.linalg.eigvalsh(X)
    # close to PSD_K: the mass outside the top K eigenvalues is small relative to the whole
    assert np.abs(w[:-5]).sum() < 0.02 * np.abs(w).sum()
    # AP converges sublinearly: over 150 cycles the distance to PSD_K falls ~10x (measured 8.0e-6 -> 7.5e-7)
    # and monotonically, and the steps ~25,000x (1.7e-3 -> 6.4e-8).
    assert trace.dist_psd[-1] < 0.2 * trace.dist_psd[0]
    assert np.all(np.diff(trace.dist_psd) <= 1e-12)
    assert trace.delta[-1] < 1e-3 * trace.delta[0]
    assert max(trace.eig_residual) <= 1e-6                # every PSD step to the stated accuracy
    # The NN clip adds back mass, so the iterate is only near {ΣC = 1}; that distance shrinks too.
    assert trace.dist_normalized[-1] < 0.5 * trace.dist_normalized[0]
    assert trace.dist_normalized[-1] * 200 < 1e-4   # |1 − ΣC_T| (measured 2.6e-5)


def test_ap_tolerance_stops_early():
    C = noisy_cooccurrence(150, 4, seed=5)
    _, _, trace, n_iter = alternating_projection(DenseAP(C), 150, 4, iterations=150, tol=1e-4)
    assert n_iter < 150
    assert trace.delta[-1] <= 1e-4 * np.linalg.norm(C) * 10
    # the recorded relative change is what the stop compared: ‖C_t − C_{t−1}‖_F / ‖C_t‖_F, dense here
    assert trace.relative_change[-1] <= 1e-4 < min(trace.relative_change[:-1])


@pytest.mark.parametrize("mode", ["sparse", "dense"])
def test_ap_relative_change_is_the_step_over_the_new_iterate(mode):
    C = noisy_cooccurrence(120, 4, seed=2)
    iterates = []
    op = in_mode(DenseAP(C), mode)
    last = []  # the iterate each cycle compared
    compare = op.compare
    op.compare = lambda previous, current, V=None: last.append(current) or compare(previous, current, V)
    _, _, trace, n_iter = alternating_projection(
        op, 120, 4, iterations=4, eig_tol=1e-12,
        on_cycle=lambda *_: iterates.append(last[-1].block(slice(0, 120), slice(0, 120))))  # C_t after cycle t
    dense = [C] + iterates
    want = [np.linalg.norm(b - a) / np.linalg.norm(b) for a, b in zip(dense, dense[1:], strict=False)]
    np.testing.assert_allclose(trace.relative_change, want, rtol=1e-10)
    np.testing.assert_allclose(trace.delta, [np.linalg.norm(b - a) for a, b in zip(dense, dense[1:], strict=False)],
                               rtol=1e-10)


@pytest.mark.parametrize("chunk_rows", [None, 7, 64])
def test_dense_mode_equals_dense_formulas(chunk_rows):
    """Dense mode (one buffer overwritten in place): the same measures, and the mode follows the clip's share."""
    rng = np.random.default_rng(5)
    n, k = 130, 6
    Y, _ = np.linalg.qr(rng.standard_normal((n, k)))
    C = rng.random((n, n))
    C = C + C.T
    V = rng.standard_normal((n, 9))
    first = LowRankIterate.normalized(Y, rng.random(k))
    second = LowRankIterate.normalized(np.linalg.qr(Y + 1e-3 * rng.standard_normal((n, k)))[0], first.lam)
    op = DenseAP(C, chunk_rows=chunk_rows)
    results = [op.compare(None, first, V), op.compare(first, second, V)]
    assert op.dense_mode  # a random L clips about half its entries: far above DENSE_FRACTION
    X0, X1, X2 = C, first.block(slice(0, n), slice(0, n)), second.block(slice(0, n), slice(0, n))
    for (delta, total, norm, CV, below), before, X, it in zip(results, (X0, X1), (X1, X2), (first, second),
                                                              strict=True):
        L = LowRankIterate(it.Y, it.lam, it.c, clip=False).block(slice(0, n), slice(0, n))
        assert delta == pytest.approx(np.linalg.norm(X - before), rel=1e-12)
        assert total == pytest.approx(X.sum(), rel=1e-12)
        assert norm == pytest.approx(np.linalg.norm(X), rel=1e-12)
        assert below == pytest.approx(np.linalg.norm(np.minimum(L, 0)), rel=1e-12)
        np.testing.assert_allclose(CV, X @ V, rtol=0, atol=1e-13 * np.abs(X @ V).max())
    assert op.frobenius(second) == pytest.approx(np.linalg.norm(X2), rel=1e-12)
    np.testing.assert_allclose(op.dense(second), X2, rtol=0, atol=1e-15)
    # the clip spreading after a factored start: the cycle it passes DENSE_FRACTION switches to the buffer,
    # measured against the factored previous iterate formed chunk by chunk
    spread = DenseAP(C, chunk_rows=chunk_rows)
    spread.dense_mode = False
    delta, total, norm, CV, below = spread.compare(first, second, V)  # first: factored, not yet buffered
    assert spread.dense_mode
    assert delta == pytest.approx(np.linalg.norm(X2 - X1), rel=1e-12)
    assert total == pytest.approx(X2.sum(), rel=1e-12) and norm == pytest.approx(np.linalg.norm(X2), rel=1e-12)
    np.testing.assert_allclose(CV, X2 @ V, rtol=0, atol=1e-13 * np.abs(X2 @ V).max())
    # a clip of a fraction of a percent (a real corpus's) keeps the factored form
    mild = DenseAP(noisy_cooccurrence(200, 5, seed=3))
    eig = top_eigenpairs(lambda X: mild.C @ X, 200, 5, tol=1e-10)
    mild.compare(None, LowRankIterate.normalized(eig.vectors, np.maximum(eig.values, 0)))
    assert mild.dense_mode is False


@pytest.mark.parametrize("k", [3, 6])
def test_diagonal_completion_recovers_an_exact_low_rank_diagonal(k):
    rng = np.random.default_rng(k)
    B = separable_topics(80, k, rng, concentration=0.5)
    A = dirichlet_topic_topic(np.full(k, 0.5))
    C = B @ A @ B.T
    damaged = C.copy()
    np.fill_diagonal(damaged, rng.random(80) * C.max())
    out = diagonal_completion(damaged, k, permutations=5, rng=rng)
    np.testing.assert_allclose(out, C / C.sum(), rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("chunk_rows", [None, 7, 64])
def test_factored_iterates_equal_dense_formulas(chunk_rows):
    """The factored AP iterate max(L, 0) = L + E: sums, norms, the change from C and from the previous
    iterate, products, all by algebra on the factors and E, equal the dense formulas on a random L
    with many clipped entries (rounding only: 1e-12 relative)."""
    rng = np.random.default_rng(4)
    n, k = 130, 6
    Y, _ = np.linalg.qr(rng.standard_normal((n, k)))
    current = LowRankIterate.normalized(Y, rng.random(k))  # a random rank-6 L: many negative entries to clip
    C = rng.random((n, n))
    C = C + C.T
    V = rng.standard_normal((n, 9))
    op = in_mode(DenseAP(C, chunk_rows=chunk_rows), "sparse")
    delta, total, norm, CV, below_zero = op.compare(None, current, V)
    X = current.block(slice(0, n), slice(0, n))
    L = LowRankIterate(Y, current.lam, current.c, clip=False).block(slice(0, n), slice(0, n))
    assert (L < 0).mean() > 0.1
    assert below_zero == pytest.approx(np.linalg.norm(np.minimum(L, 0)), rel=1e-12)  # measured before the clip
    assert delta == pytest.approx(np.linalg.norm(X - C), rel=1e-12)
    assert total == pytest.approx(X.sum(), rel=1e-12)
    assert norm == pytest.approx(np.linalg.norm(X), rel=1e-12)
    np.testing.assert_allclose(CV, X @ V, rtol=0, atol=1e-13 * np.abs(X @ V).max())
    np.testing.assert_allclose(op.matmat(current, V), X @ V, rtol=0, atol=1e-13 * np.abs(X @ V).max())
    np.testing.assert_array_equal(op.dense(current) >= 0, True)
    np.testing.assert_allclose(op.dense(current), X, rtol=0, atol=1e-15)
    assert op.frobenius(current) == pytest.approx(np.linalg.norm(X), rel=1e-12)

    def nearby(step: float) -> LowRankIterate:  # a small rotation of Y, other λ and c
        return LowRankIterate.normalized(np.linalg.qr(Y + step * rng.standard_normal((n, k)))[0],
                                         current.lam * (1 + step * rng.random(k)))

    # A change of 1e-8 of the norms, where a difference of two large norms would have lost every digit
    # (measured: the change computed as −‖E₁‖² − ‖E₀‖² − ⟨L₁, E₀⟩ − ⟨L₀, E₁⟩ was 74% off there).
    tiny = nearby(1e-9)
    alone = in_mode(DenseAP(C, chunk_rows=chunk_rows), "sparse")
    alone.compare(None, current)
    X2 = tiny.block(slice(0, n), slice(0, n))
    assert alone.compare(current, tiny)[0] == pytest.approx(np.linalg.norm(X2 - X), rel=1e-7)
    # the next cycle: a nearby iterate against this one
    following = nearby(1e-3)
    delta, total, norm, CV, below_zero = op.compare(current, following, V)
    X2 = following.block(slice(0, n), slice(0, n))
    L2 = LowRankIterate(following.Y, following.lam, following.c, clip=False).block(slice(0, n), slice(0, n))
    assert 0 < (np.minimum(L2, 0) != np.minimum(L, 0)).sum()  # the clipped set moved
    assert delta == pytest.approx(np.linalg.norm(X2 - X), rel=1e-9)
    assert total == pytest.approx(X2.sum(), rel=1e-12)
    assert norm == pytest.approx(np.linalg.norm(X2), rel=1e-12)
    assert below_zero == pytest.approx(np.linalg.norm(np.minimum(L2, 0)), rel=1e-12)
    np.testing.assert_allclose(CV, X2 @ V, rtol=0, atol=1e-13 * np.abs(X2 @ V).max())


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(8, 80), b=st.integers(1, 8), dependent=st.integers(0, 3),
       log_scale=st.floats(-12, 3), decay=st.sampled_from([0.0, 3.0, 9.0]))
def test_orthonormal_columns_is_the_q_of_a_thin_qr(seed, n, b, dependent, log_scale, decay):
    """The eigensolver's orthonormalisation (Cholesky QR twice, Householder for an ill-conditioned block)
    is Householder's Q up to column signs — the first j columns span X's first j, which a warm start
    cut to its leading columns relies on — and drops a column that is a combination of the others
    (kept, with the block's width, under ``keep_all``)."""
    from jsmf_dask.kernels.eigen import _orthonormal_columns

    rng = np.random.default_rng(seed)
    b = min(b, n // 2)
    X = rng.standard_normal((n, b)) * np.logspace(0, -decay, b) * 10.0**log_scale  # graded columns, any scale
    if dependent:
        X = np.hstack([X, X @ rng.standard_normal((b, dependent))])
    Q = _orthonormal_columns(X)
    assert Q.shape == (n, b)  # exactly the independent directions
    reference = np.linalg.qr(X[:, :b])[0]
    # Q = reference · diag(±1): the same nested spans (to the conditioning of X's leading columns)
    np.testing.assert_allclose(np.abs(reference.T @ Q), np.eye(b), rtol=0, atol=1e-6)
    np.testing.assert_allclose(Q.T @ Q, np.eye(b), rtol=0, atol=1e-13)
    kept = _orthonormal_columns(X, keep_all=True)
    assert kept.shape == X.shape
    np.testing.assert_allclose(kept.T @ kept, np.eye(X.shape[1]), rtol=0, atol=1e-12)


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(20, 200), rank=st.integers(2, 6), extra=st.integers(1, 6),
       weak=st.floats(-8, -3))
@example(seed=4, n=81, rank=2, extra=4, weak=-5.125)  # a pivot of 1.4e-6 kept: 1.2e-9 off the span
def test_a_nearly_dependent_column_does_not_let_round_off_through(seed, n, rank, extra, weak):
    """A block of rank r whose r-th column is nearly a combination of the ones before it (10^weak of its length
    outside them), then ``extra`` columns in its span, as a Krylov block of an operator of rank r comes out: R's
    pivots after the weak column are round-off divided by its small pivot and can pass the floor, and so can the
    Gram matrix's (Cholesky QR's) above 1e-6; the directions kept are the block's r, orthonormal and inside its span
    to rounding, by either route (until session 49 a normalised round-off direction was kept beside them)."""
    from jsmf_dask.kernels.eigen import BREAKDOWN, _orthonormal_columns

    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((n, rank)))[0]
    mix = rng.standard_normal((rank, rank))
    mix[:, -1] = mix[:, :-1] @ rng.standard_normal(rank - 1) + 10.0**weak * mix[:, -1]
    X = U @ np.hstack([mix, rng.standard_normal((rank, extra))])
    noise = 1e-17 * rng.standard_normal(X.shape)  # the round-off of a block formed by products
    X += noise
    longest = float(np.linalg.norm(X, axis=0).max())
    Q = _orthonormal_columns(X, floor=BREAKDOWN * longest)
    assert Q.shape == (n, rank)
    np.testing.assert_allclose(Q.T @ Q, np.eye(rank), rtol=0, atol=1e-12)
    # inside the span up to the noise and the rounding of the QR (n·eps·‖X‖), divided by the smallest size a kept
    # direction had: the r-th singular value (Q times R's singular vectors; Wedin's bound) or, where the pivots
    # counted r directions and Q's own columns are kept, the smallest of those pivots (1.4e-6 after the weak
    # column of seed 4: 1.2e-9 off the span)
    pivots = np.abs(np.diag(np.linalg.qr(X)[1]))
    smallest = min(np.linalg.svd(X, compute_uv=False)[rank - 1], pivots[pivots > BREAKDOWN * longest].min())
    error = np.linalg.norm(noise, 2) + n * np.finfo(float).eps * np.linalg.norm(X, 2)
    np.testing.assert_allclose(np.linalg.norm(Q - U @ (U.T @ Q), axis=0), 0.0, atol=10 * error / smallest)
