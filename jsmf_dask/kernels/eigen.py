"""Top-K algebraic eigenpairs of a symmetric operator given as a ``matmat`` callable (numpy/scipy only).

:func:`top_eigenpairs` is a warm-started block solver: a block Krylov cold
start (or LOBPCG where products travel in blocks), then Rayleigh–Ritz
refinement of the previous solve's block. The operator is a callable, so the
same code serves a dense ``C`` in memory, an AP iterate in factored form, an
operator applied tile by tile over a Zarr store (``stages``) and the
compressed co-occurrence (``cooccur --rank``). Used by AP's PSD step
(:mod:`jsmf_dask.kernels.ap`), ENN (:mod:`jsmf_dask.kernels.enn`), the
compressed ``cooccur`` and the estimator.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as spla

__all__ = ["Eigenpairs", "top_eigenpairs", "block_size", "start_block", "cold_start_memory", "KRYLOV_MAX_BLOCKS"]


@dataclass
class Eigenpairs:
    """Top-K algebraic eigenpairs of a symmetric operator.

    Attributes
    ----------
    values : ndarray, shape (K,)
        Descending.
    vectors : ndarray, shape (N, K)
        Orthonormal columns.
    residual : float
        ``max_j ‖C v_j − λ_j v_j‖ / |λ_1|``.
    n_matmat : int
        Operator applications used (vectors, not blocks).
    basis : ndarray, shape (N, b), optional
        An orthonormal block to warm-start the next solve: the span of
        ``C`` times the whole Ritz block (K vectors and the oversampling), so
        that across AP iterations each solve also takes one step of subspace
        iteration.
    """

    values: np.ndarray
    vectors: np.ndarray
    residual: float
    n_matmat: int
    basis: np.ndarray | None = None


def _rayleigh_ritz(X: np.ndarray, CX: np.ndarray, H: np.ndarray | None = None, keep: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ritz values (descending) and vectors of ``C`` on the span of the orthonormal ``X``, and ``C`` times
    them; the leading ``keep`` only (default all). ``H = Xᵀ C X`` when the caller has it."""
    H = X.T @ CX if H is None else H
    theta, W = sla.eigh(0.5 * (H + H.T))
    order = np.argsort(theta)[::-1][:keep]
    theta, W = theta[order], W[:, order]
    return theta, X @ W, CX @ W


def _orthonormal_columns(X: np.ndarray, *, keep_all: bool = False, floor: float = 0.0) -> np.ndarray:
    """``Q`` of a thin QR of ``X``: orthonormal columns, the first ``j`` spanning ``X``'s first ``j``.

    For a well-conditioned block (Cholesky pivots of ``XᵀX`` within 1e-6 of
    the largest, in the square root; 1e-4 where directions may be dropped)
    Cholesky QR, twice: for the tall, thin
    blocks of the eigensolver two products with a b×b triangle — N = 5,000,
    b = 30: 1 ms, where ``numpy.linalg.qr`` took 12 ms (forming Q), 3 of the
    15 s of an AP fit. Otherwise Householder QR, which drops the directions
    whose pivot is below 1e-14 of the largest (a residual block nearly inside
    the span it was orthogonalised against) unless ``keep_all``; where that
    keeps more directions than ``R``'s singular values above the same bound
    count (a nearly dependent column inflates the pivots after it), ``Q``
    times ``R``'s leading left singular vectors, which span ``X``'s dominant
    directions but no longer nest column by column. (The Gram matrix cannot
    tell a direction from round-off: after a pivot ``p`` relative to the
    largest, the round-off of ``XᵀX`` makes pivots of about ``√(ε/p)``, 1.5e-6
    after 7.9e-6 was seen; from a block that may hold round-off, Cholesky QR
    takes only pivots above 1e-4, a hundred times the ``√(ε/1e-4)`` they can
    make; fitting the NIPS papers at K 20 and 50, all but one or two of the
    167 blocks were above 1e-3.)

    ``floor`` is an absolute size below which a direction is dropped too (not
    under ``keep_all``): a block orthogonalised against a basis that already
    holds it is round-off, well conditioned on its own, and normalising it
    would give columns far from orthogonal to that basis (see
    :data:`BREAKDOWN`).
    """
    Q = X
    for sweep in range(2):
        try:
            R = np.linalg.cholesky(Q.T @ Q).T
        except np.linalg.LinAlgError:
            break
        pivots = np.diag(R)
        if sweep == 0 and not keep_all and not pivots.max() > floor:
            return X[:, :0]
        if not pivots.min() > max((1e-6 if keep_all else 1e-4) * pivots.max(), 0.0 if keep_all or sweep else floor):
            break
        Q = Q @ sla.solve_triangular(R, np.eye(R.shape[0]), check_finite=False)  # Q R⁻¹: one GEMM
    else:
        return Q
    Q, tri = np.linalg.qr(X)
    if keep_all:
        return Q
    pivots = np.abs(np.diag(tri))
    kept = pivots > max(1e-14 * max(float(pivots.max(initial=0.0)), np.finfo(float).tiny), floor)
    # Without column pivoting R's diagonal overstates the rank after a nearly dependent column: its
    # round-off, divided by that column's small pivot, can pass the floor (a direction of round-off, not
    # orthogonal to what X was orthogonalised against). R's singular values count the directions; where
    # the diagonal keeps more, the leading left singular vectors of X are kept instead.
    U, sv, _ = np.linalg.svd(tri)
    rank = int(np.count_nonzero(sv > max(1e-14 * max(float(sv.max(initial=0.0)), np.finfo(float).tiny), floor)))
    return Q[:, kept] if np.count_nonzero(kept) <= rank else Q @ U[:, :rank]


#: The share of its products below which a new block of the basis is round-off. A new block (a Krylov block, or the
#: residuals of a warm block) whose columns, once orthogonalised against the basis, are this much shorter than the
#: products they came from lies in the basis: an invariant subspace (a C of lower rank than the block, as an AP
#: iterate of a small corpus can be), or vectors converged to round-off. Normalised, such round-off made Ritz values
#: up to 170 times C's largest on a 400-word plain-LDA corpus (K = 5), and every solve of the fit fell through to
#: ARPACK (1,000+ products each). Round-off is about 1e-16 times a few N; the tolerances asked of a solve are 1e-6
#: (AP) down to 1e-10, so a direction this short cannot move a residual that has to reach them.
BREAKDOWN = 1e-12


def start_block(pairs: Eigenpairs) -> np.ndarray:
    """The orthonormal block that warm-starts a fit's first eigensolve, from a cold solve's ``pairs``: its whole
    block of Ritz vectors (the top K first, then the oversampling; a fit at K takes the first
    :func:`block_size` of them, and its first solve is then a warm refinement instead of a
    cold one) where the solver kept it (block Krylov, LOBPCG), else the K eigenvectors (ARPACK)."""
    return pairs.vectors if pairs.basis is None else pairs.basis


def block_size(k: int, n: int) -> int:
    """The eigensolver's block: K plus an oversampling of ``max(5, K // 2)``, at most N."""
    return min(n, k + max(5, k // 2))


#: Blocks a block Krylov basis grows to before it restarts from its leading Ritz vectors (see :func:`_block_krylov`):
#: on the NIPS papers (K = 20, blocks of 30) the first solve converges at the tenth block.
KRYLOV_MAX_BLOCKS = 12


def cold_start_memory(n: int, k: int) -> int:
    """Bytes a cold start of :func:`top_eigenpairs` with ``cold='auto'`` keeps besides the matrix: the block
    Krylov basis and its products (at most N²/4 numbers), or LOBPCG's few blocks where that is too small."""
    b = block_size(k, n)
    blocks = min(KRYLOV_MAX_BLOCKS, n // (8 * b))
    width = b * blocks if blocks >= 3 else 3 * b
    return 8 * (2 * n * width + width * width)


def _block_krylov(
    counted: Callable[[np.ndarray], np.ndarray], X: np.ndarray, k: int, tol: float, max_blocks: int,
    basis_blocks: int = KRYLOV_MAX_BLOCKS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Block Krylov from the orthonormal block ``X`` (n×b): its ``b`` leading Ritz pairs, ``C`` times them and
    the top ``k``'s relative residual.

    The basis ``[X, CX, C²X, …]`` grows by one block of products at a time,
    orthogonalised twice against the whole basis; the Rayleigh–Ritz matrix
    ``H = Qᵀ C Q`` grows by the new block's column, which is also the first
    pass of the next block's orthogonalisation. From the third block on, every
    block is followed by a check of the top ``k`` residuals against ``tol``.
    A basis of ``basis_blocks`` blocks restarts from its ``b`` leading Ritz
    vectors (whose products it has). Every product is a block: a
    GEMM for a matrix in memory, 4.7 times cheaper per vector than ARPACK's
    matrix-vector products on the NIPS papers (N = 5,000; 30 columns: 72 ms
    against 30 × 11 ms). Stops after ``max_blocks`` blocks of products, converged
    or not.
    """
    n, b = X.shape
    width = b * basis_blocks
    Q, CQ, H = np.empty((n, width)), np.empty((n, width)), np.empty((width, width))
    V, CV = X, counted(X)
    blocks = 1
    while True:
        Q[:, :b], CQ[:, :b] = V, CV
        H[:b, :b] = V.T @ CV
        lo, m = 0, b
        while True:
            grown = False
            if m + b <= width and blocks < max_blocks:
                Z = CQ[:, lo:m] - Q[:, :m] @ H[:m, lo:m]
                Z -= Q[:, :m] @ (Q[:, :m].T @ Z)
                Z = _orthonormal_columns(Z, floor=BREAKDOWN * _longest(CQ[:, lo:m]))
                if Z.shape[1]:
                    lo, m = m, m + Z.shape[1]
                    Q[:, lo:m], CQ[:, lo:m] = Z, counted(Z)
                    blocks += 1
                    H[:m, lo:m] = Q[:, :m].T @ CQ[:, lo:m]
                    H[lo:m, :lo] = H[:lo, lo:m].T
                    grown = True
                    if m < 3 * b:
                        continue
            theta, V, CV = _rayleigh_ritz(Q[:, :m], CQ[:, :m], H[:m, :m], keep=b)
            residual = _residual(theta, V, CV, k)
            if residual <= tol or blocks >= max_blocks or (not grown and m + b <= width):
                return theta, V, CV, residual  # converged, out of products, or an invariant subspace
            if not grown:
                break  # the basis is full: restart from the Ritz vectors


def _warm_refine(
    counted: Callable[[np.ndarray], np.ndarray], X: np.ndarray, CX: np.ndarray, k: int, tol: float, steps: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Rayleigh–Ritz on a warm block, then block steepest-descent steps until the top ``k`` converge.

    Each step adds the (orthogonalised) residual block to the basis, so it
    costs one block of operator applications; from a block that spans the
    previous iterate's eigenvectors (AP's warm start) one or two steps suffice.
    """
    b = X.shape[1]
    theta, V, CV = _rayleigh_ritz(X, CX)
    residual = _residual(theta, V, CV, k)
    for _ in range(steps):
        if residual <= tol:
            break
        R = CV - V * theta
        R -= V @ (V.T @ R)
        R -= V @ (V.T @ R)
        Q = _orthonormal_columns(R, floor=BREAKDOWN * _longest(CV))
        if Q.shape[1] == 0:
            break
        # Rayleigh–Ritz on [V, Q] by blocks: VᵀCV = diag(θ) (V are Ritz vectors), VᵀCQ = (CV)ᵀQ
        CQ = counted(Q)
        VtCQ = CV.T @ Q
        H = np.block([[np.diag(theta), VtCQ], [VtCQ.T, Q.T @ CQ]])
        w, W = sla.eigh(0.5 * (H + H.T))
        order = np.argsort(w)[::-1][:b]
        theta, top, rest = w[order], W[: V.shape[1], order], W[V.shape[1] :, order]
        V, CV = V @ top + Q @ rest, CV @ top + CQ @ rest
        residual = _residual(theta, V, CV, k)
    return theta, V, CV, residual


def top_eigenpairs(
    matmat: Callable[[np.ndarray], np.ndarray],
    n: int,
    k: int,
    *,
    X0: np.ndarray | None = None,
    CX0: np.ndarray | None = None,
    tol: float = 1e-6,
    max_iter: int = 200,
    check_every: int = 10,
    rng: np.random.Generator | None = None,
    cold: str = "lobpcg",
) -> Eigenpairs:
    """Top-``k`` algebraic eigenpairs of a symmetric ``n×n`` operator.

    The block has :func:`block_size` vectors. With a warm start ``X0`` (the
    previous solve's :attr:`Eigenpairs.basis`, as across AP iterations) it is
    refined by Rayleigh–Ritz and residual steps, one block of operator
    applications each, and ``CX0 = C @ X0``, when the caller already has it,
    saves the first. A cold start runs block LOBPCG, or with ``cold='auto'``
    block Krylov (from ``X0``'s vectors and random ones when there are fewer
    than a block of them). If these or the warm refinement stall, ARPACK
    (``eigsh``) on the same operator finishes the job. Converged means
    the top ``k`` relative residuals are below ``tol``.

    Parameters
    ----------
    matmat : callable
        ``X -> C @ X`` for an ``(n, b)`` array.
    n, k : int
    X0 : ndarray, shape (n, b'), optional
        Orthonormal columns.
    CX0 : ndarray, shape (n, b'), optional
        ``C @ X0``.
    tol : float, default=1e-6
        Target of ``max_j ‖C v_j − λ_j v_j‖ / |λ_1|``.
    max_iter : int, default=200
    check_every : int, default=10
        LOBPCG iterations between checks of the true relative residual (each
        check costs one block of operator applications). A smaller value suits
        an operator whose every application is expensive (a pass over a
        corpus): LOBPCG's own stopping test is absolute, scaled by an estimate
        of λ₁ that the first check corrects.
    rng : numpy.random.Generator, optional
        For the random part of a start block.
    cold : {'lobpcg', 'auto'}, default='lobpcg'
        The cold start: block LOBPCG for an operator whose every application
        is expensive, so that vectors should travel in few blocks (a pass over
        a corpus, C in tiles). 'auto', for a matrix in memory: block Krylov
        (:func:`_block_krylov`), whose basis of up to
        :data:`KRYLOV_MAX_BLOCKS` blocks and their products are kept (at most
        N²/4 numbers; LOBPCG where fewer than three blocks fit). Measured on a
        dense C with BLAS on one thread: the NIPS papers, N = 5,000, K = 20
        (blocks of 30): block Krylov 1.0–1.2 s and 300 products, ARPACK (its
        earlier choice, a vector at a time) 1.6 s and 141; an LDA corpus, N =
        15,000, K = 100 (150 vectors, two threads): block Krylov 7.9 s and 750
        products, LOBPCG 17–18 s and 1,748 (ARPACK: 147 s). Either way the
        whole block's Ritz vectors are :attr:`Eigenpairs.basis`, to
        warm-start the next solve.

    Returns
    -------
    Eigenpairs
    """
    if cold not in ("lobpcg", "auto"):
        raise ValueError(f"cold must be 'lobpcg' or 'auto'; got {cold!r}")
    rng = np.random.default_rng(0) if rng is None else rng
    b = block_size(k, n)
    calls = 0

    def counted(Y: np.ndarray) -> np.ndarray:
        nonlocal calls
        calls += Y.shape[1] if Y.ndim == 2 else 1
        return matmat(Y if Y.ndim == 2 else Y[:, None]).reshape(Y.shape)

    if X0 is not None and X0.shape[1] >= b and n > 5 * b:
        X, CX = X0[:, :b], (CX0[:, :b] if CX0 is not None else None)
        if CX is None:
            CX = counted(X)
        else:
            calls += b
        theta, V, CV, residual = _warm_refine(counted, X, CX, k, tol, steps=max(1, max_iter // 10))
        if residual <= tol:
            return Eigenpairs(theta[:k], V[:, :k], residual, calls, _orthonormal_columns(CV, keep_all=True))
        X = V
    else:
        X = rng.standard_normal((n, b))
        if X0 is not None:
            m = min(b, X0.shape[1])
            X[:, :m] = X0[:, :m]
        X, _ = np.linalg.qr(X)

    op = spla.LinearOperator((n, n), matvec=counted, matmat=counted, dtype=np.float64)
    residual = np.inf
    basis_blocks = min(KRYLOV_MAX_BLOCKS, n // (8 * b))  # the basis and its products: at most N²/4 numbers
    if cold == "auto" and n > 5 * b and basis_blocks >= 3:
        theta, V, CV, residual = _block_krylov(counted, X, k, tol, max_iter, basis_blocks)
        if residual <= tol:
            return Eigenpairs(theta[:k], V[:, :k], residual, calls, V)
        X = V
    elif n > 5 * b:
        # lobpcg's tol is absolute: scale it by the dominant eigenvalue of the start block.
        CX = counted(X)
        scale = float(np.abs(np.linalg.eigvalsh(0.5 * (X.T @ CX + CX.T @ X))).max()) or 1.0
        # Short rounds, each checked against the true relative residual (the start block's scale
        # underestimates λ₁, which would make lobpcg's own test far stricter than asked).
        for _ in range(max(4, max_iter // check_every)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, X = spla.lobpcg(op, X, largest=True, tol=0.3 * tol * scale, maxiter=check_every)
            X, _ = np.linalg.qr(X)
            CX = counted(X)
            theta, V, CV = _rayleigh_ritz(X, CX)
            residual = _residual(theta, V, CV, k)
            if residual <= tol:
                return Eigenpairs(theta[:k], V[:, :k], residual, calls, V)
            scale = max(scale, abs(float(theta[0])))
            X = V
    # Small problems, or LOBPCG did not get there: ARPACK (Lanczos), started from the block's first vector
    # (warm, or drawn from ``rng``): never from ARPACK's own random start, which differs from run to run.
    v0 = X[:, 0]
    ncv = min(n, max(2 * k + 1, 20))
    try:
        theta, V = spla.eigsh(op, k=min(k, n - 1), which="LA", v0=v0, tol=tol * 1e-3, ncv=ncv)
    except spla.ArpackNoConvergence as err:  # pragma: no cover - take what converged
        theta, V = err.eigenvalues, err.eigenvectors
    order = np.argsort(theta)[::-1]
    theta, V = theta[order], V[:, order]
    CV = counted(V)
    return Eigenpairs(theta[:k], V[:, :k], _residual(theta, V, CV, len(theta)), calls, None)


def _longest(X: np.ndarray) -> float:
    """The largest column norm of ``X``."""
    return float(np.sqrt(np.einsum("ij,ij->j", X, X).max(initial=0.0)))


def _residual(theta: np.ndarray, V: np.ndarray, CV: np.ndarray, k: int) -> float:
    scale = max(abs(theta[0]), np.finfo(float).tiny)
    R = CV[:, :k] - V[:, :k] * theta[:k]
    return float(np.linalg.norm(R, axis=0).max() / scale)
