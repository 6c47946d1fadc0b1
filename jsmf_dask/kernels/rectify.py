"""Rectification of the co-occurrence matrix (paper §3 and appendix).

In the literature ``C`` is the empirical co-occurrence; rectification pushes
it toward the set of matrices a topic model can produce: rank-K positive
semidefinite (PSD), normalised (entries sum to 1, NOR) and non-negative (NN).

* Alternating projection (AP): PSD → NOR → NN, repeated.
* Diagonal completion (DC): replace only the diagonal so that ``C`` is
  consistent with a rank-K matrix whose off-diagonal entries are the data.

The PSD projection needs the top-K *algebraic* eigenpairs. They come from
:func:`top_eigenpairs`, a warm-started block solver that takes the operator as a
``matmat`` callable, so that the same code serves a dense ``C`` in memory and
an operator applied tile by tile elsewhere.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import scipy.linalg as sla
import scipy.linalg.blas  # noqa: F401  (sla.blas.dsymm)
import scipy.sparse as sps
import scipy.sparse.linalg as spla

__all__ = [
    "Eigenpairs",
    "top_eigenpairs",
    "block_size",
    "cold_start_memory",
    "APTrace",
    "LowRankIterate",
    "APOperator",
    "DenseAP",
    "clipped_entries",
    "symmetric_from_upper",
    "alternating_projection",
    "diagonal_completion",
]


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


def _orthonormal_columns(X: np.ndarray, *, keep_all: bool = False) -> np.ndarray:
    """``Q`` of a thin QR of ``X``: orthonormal columns, the first ``j`` spanning ``X``'s first ``j``.

    For a well-conditioned block (Cholesky pivots of ``XᵀX`` within 1e-6 of
    the largest, in the square root) Cholesky QR, twice: for the tall, thin
    blocks of the eigensolver two products with a b×b triangle — N = 5,000,
    b = 30: 1 ms, where ``numpy.linalg.qr`` took 12 ms (forming Q), 3 of the
    15 s of an AP fit. Otherwise Householder QR, which drops the directions
    whose pivot is below 1e-14 of the largest (a residual block nearly inside
    the span it was orthogonalised against) unless ``keep_all``.
    """
    Q = X
    for _ in range(2):
        try:
            R = np.linalg.cholesky(Q.T @ Q).T
        except np.linalg.LinAlgError:
            break
        pivots = np.diag(R)
        if not pivots.min() > 1e-6 * pivots.max():
            break
        Q = Q @ sla.solve_triangular(R, np.eye(R.shape[0]), check_finite=False)  # Q R⁻¹: one GEMM
    else:
        return Q
    Q, tri = np.linalg.qr(X)
    if keep_all:
        return Q
    pivots = np.abs(np.diag(tri))
    return Q[:, pivots > 1e-14 * max(float(pivots.max(initial=0.0)), np.finfo(float).tiny)]


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
                Z = _orthonormal_columns(Z)
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
        Q = _orthonormal_columns(R)
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
    # Small problems, or LOBPCG did not get there: ARPACK (Lanczos), warm-started.
    v0 = X[:, 0] if X0 is not None else None
    ncv = min(n, max(2 * k + 1, 20))
    try:
        theta, V = spla.eigsh(op, k=min(k, n - 1), which="LA", v0=v0, tol=tol * 1e-3, ncv=ncv)
    except spla.ArpackNoConvergence as err:  # pragma: no cover - take what converged
        theta, V = err.eigenvalues, err.eigenvectors
    order = np.argsort(theta)[::-1]
    theta, V = theta[order], V[:, order]
    CV = counted(V)
    return Eigenpairs(theta[:k], V[:, :k], _residual(theta, V, CV, len(theta)), calls, None)


def _residual(theta: np.ndarray, V: np.ndarray, CV: np.ndarray, k: int) -> float:
    scale = max(abs(theta[0]), np.finfo(float).tiny)
    R = CV[:, :k] - V[:, :k] * theta[:k]
    return float(np.linalg.norm(R, axis=0).max() / scale)


@dataclass
class APTrace:
    """Per-iteration diagnostics of alternating projection (paper §3).

    Lists indexed by iteration t (the iterate C_t after the t-th PSD → NOR → NN
    cycle): ``delta`` ‖C_t − C_{t−1}‖_F and ``relative_change`` the same over ‖C_t‖_F (what ``tol`` is
    compared with); ``dist_psd``, ``dist_normalized``,
    ``dist_nonnegative`` the Frobenius distances of C_t to PSD_K, to {ΣC = 1}
    and of the normalised iterate to {C ≥ 0} (before the clip that makes C_t); ``eig_residual`` the eigensolver's relative residual of
    the t-th PSD step; ``n_matmat`` its operator applications; ``seconds``
    the cycle's wall time.
    """

    delta: list[float] = field(default_factory=list)
    relative_change: list[float] = field(default_factory=list)
    dist_psd: list[float] = field(default_factory=list)
    dist_normalized: list[float] = field(default_factory=list)
    dist_nonnegative: list[float] = field(default_factory=list)
    eig_residual: list[float] = field(default_factory=list)
    n_matmat: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def as_arrays(self) -> dict[str, np.ndarray]:
        """Each list as a float64 array."""
        return {k: np.asarray(v, dtype=np.float64) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class LowRankIterate:
    """An AP iterate in compressed form: ``C_t = max(Y diag(lam) Yᵀ + c, 0)``.

    After a PSD projection (``Y`` orthonormal N×K, ``lam`` ≥ 0) and the
    normalisation ``c = (1 − Σ YΛYᵀ)/N²``, the non-negative projection is the
    elementwise clip; storing ``(Y, lam, c)`` takes O(NK) instead of O(N²).
    With ``clip=False`` it is the rank-K matrix ``Y diag(lam) Yᵀ + c`` itself.
    """

    Y: np.ndarray
    lam: np.ndarray
    c: float
    clip: bool = True

    @classmethod
    def normalized(cls, Y: np.ndarray, lam: np.ndarray) -> LowRankIterate:
        s = Y.sum(axis=0)
        n = Y.shape[0]
        return cls(Y, lam, (1.0 - float((s * lam) @ s)) / (n * n))

    @functools.cached_property
    def factors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(left, right)`` with ``Y diag(lam) Yᵀ + c = left @ right``: ``left = [YΛ, c·1]`` (N×(K+1)) and
        ``right = [Yᵀ; 1ᵀ]``; formed once per iterate (an AP cycle asks for them five times) and not pickled."""
        n = self.Y.shape[0]
        return (np.hstack([self.Y * self.lam, np.full((n, 1), self.c)]), np.vstack([self.Y.T, np.ones((1, n))]))

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "factors"}

    def block(self, rows: slice, cols: slice) -> np.ndarray:
        """Rows ``rows`` × columns ``cols`` of ``C_t`` (dense)."""
        X = (self.Y[rows] * self.lam) @ self.Y[cols].T
        X += self.c
        return np.maximum(X, 0.0, out=X) if self.clip else X


class Comparison(NamedTuple):
    """What one pass over a new AP iterate ``C_cur = max(L, 0)`` measures.

    ``delta`` ‖C_cur − C_prev‖_F; ``total`` Σ C_cur; ``norm`` ‖C_cur‖_F;
    ``CV`` C_cur @ V (None without V); ``below_zero`` ‖min(L, 0)‖_F, the
    distance of the normalised iterate L to {C ≥ 0} before the clip.
    """

    delta: float
    total: float
    norm: float
    CV: np.ndarray | None
    below_zero: float


class APOperator(Protocol):
    """How the AP loop touches ``C``: the original matrix (``None``) or an iterate.

    ``cold_start`` is how the first eigensolve starts (:func:`top_eigenpairs`'
    ``cold``): 'auto' for a C in memory, 'lobpcg' where products travel in blocks.
    """

    cold_start: str

    def matmat(self, iterate: LowRankIterate | None, V: np.ndarray) -> np.ndarray:
        """``C_t @ V``."""

    def frobenius(self, iterate: LowRankIterate | None) -> float:
        """``‖C_t‖_F``."""

    def compare(
        self, previous: LowRankIterate | None, current: LowRankIterate, V: np.ndarray | None = None
    ) -> Comparison:
        """One pass over ``C_cur`` (see :class:`Comparison`).

        ``V`` is the next eigensolve's warm block, so its product comes with
        the pass that forms the new iterate; None when ``V`` is None.
        """


#: Bytes of one row chunk of the clip's scan (the chunk's part of ``L`` and its mask). A chunk that stays in
#: cache between the product and the comparison: on the NIPS papers (N = 5,000, K = 20) a scan took 17.8 ms
#: with 4 MB chunks (93 rows), 23.5 ms with 16 MB and 24.9 ms with 1 MB (late cycles; 25.8 against 35.7 ms
#: in the second cycle, which clips 7 times as many entries).
CLIP_CHUNK_BYTES = 4 << 20


def clipped_entries(iterate: LowRankIterate, rows: tuple[int, int] | None = None, *,
                    chunk: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries ``i ≤ j`` of ``max(−L, 0)``, ``L = Y diag(λ) Yᵀ + c``, that are non-zero: ``(i, j, value)``.

    An AP iterate ``max(L, 0)`` is ``L + max(−L, 0)``, low rank plus this
    sparse part (on the NIPS papers 3% of the entries after the first cycle,
    0.5% after 150). ``rows`` limits the scan to rows ``[r0, r1)`` (a task's
    share); every row ``i`` is compared with the columns ``j ≥ i`` only, in
    chunks of ``chunk`` rows (default: about 4 MB of a chunk): O(N·K) memory
    besides the chunk and the result. The entries come in row-major order. An
    iterate without the clip has none.
    """
    n = iterate.Y.shape[0]
    r0, r1 = (0, n) if rows is None else rows
    empty = np.zeros(0, dtype=np.int64)
    if not iterate.clip or r1 <= r0:
        return empty, empty, np.zeros(0)
    chunk = chunk or max(1, CLIP_CHUNK_BYTES // (9 * max(n - r0, 1)))
    scaled = iterate.Y * iterate.lam
    Yt = np.ascontiguousarray(iterate.Y.T)
    size = min(chunk, r1 - r0) * (n - r0)
    buffer, mask = np.empty(size), np.empty(size, dtype=bool)  # reused: a fresh chunk per step costs page faults
    out_i, out_j, out_v = [], [], []
    for c0 in range(r0, r1, chunk):
        m, w = min(chunk, r1 - c0), n - c0
        L = np.matmul(scaled[c0 : c0 + m], Yt[:, c0:], out=buffer[: m * w].reshape(m, w))  # without c
        flat = np.flatnonzero(np.less(L, -iterate.c, out=mask[: m * w].reshape(m, w)))
        i, j = np.divmod(flat, w)
        keep = j >= i  # within the chunk's own columns, the lower triangle belongs to the rows above
        out_i.append(i[keep] + c0)
        out_j.append(j[keep] + c0)
        out_v.append(-(buffer[flat[keep]] + iterate.c))
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_v)


def symmetric_from_upper(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, n: int) -> sps.csr_array:
    """The symmetric N×N CSR matrix whose entries ``i ≤ j`` are ``(rows, cols, values)``."""
    off = rows != cols
    E = sps.coo_array((np.concatenate([values, values[off]]),
                       (np.concatenate([rows, cols[off]]), np.concatenate([cols, rows[off]]))), shape=(n, n)).tocsr()
    E.sum_duplicates()
    return E


def _mirror_upper(X: np.ndarray, step: int) -> None:
    """Fill the lower part of ``X`` from its upper part, for ``X`` formed by row chunks of ``step`` rows
    (diagonal blocks whole, blocks right of them valid)."""
    n = X.shape[0]
    for r0 in range(0, n, step):
        r1 = min(r0 + step, n)
        X[r1:, r0:r1] = X[r0:r1, r1:].T


@dataclass(frozen=True)
class _UpperSparse:
    """A symmetric sparse ``E = U + Uᵀ − diag(d)`` kept as its upper triangle ``U`` (CSR, diagonal ``d``
    included).

    What an AP cycle does with its clip: products, sums, norms, differences
    and inner products, each on the upper triangle alone. Built straight from
    :func:`clipped_entries`' row-major entries (0.1–0.5 ms on the NIPS papers,
    where mirroring them into a symmetric CSR took 2–33 ms); products cost what
    the symmetric matrix's do.
    """

    U: sps.csr_array
    d: np.ndarray

    @classmethod
    def from_upper(cls, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, n: int) -> _UpperSparse:
        """From entries ``i ≤ j``, each once, in row-major order."""
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        U = sps.csr_array((values, cols, indptr), shape=(n, n))
        d = np.zeros(n)
        on = rows == cols
        d[rows[on]] = values[on]
        return cls(U, d)

    @property
    def nnz(self) -> int:
        """Non-zeros of ``E``."""
        return 2 * self.U.nnz - int(np.count_nonzero(self.d))

    def __matmul__(self, V: np.ndarray) -> np.ndarray:
        out = self.U @ V
        out += self.U.T @ V
        out -= (self.d if V.ndim == 1 else self.d[:, None]) * V
        return out

    def __sub__(self, other: _UpperSparse) -> _UpperSparse:
        return _UpperSparse((self.U - other.U).tocsr(), self.d - other.d)

    def sum(self) -> float:
        """``Σ_ij E_ij``."""
        return 2.0 * float(self.U.data.sum()) - float(self.d.sum())

    def sumsq(self) -> float:
        """``‖E‖_F²``."""
        return 2.0 * float(self.U.data @ self.U.data) - float(self.d @ self.d)

    def inner(self, iterate: LowRankIterate) -> float:
        """``⟨L, E⟩ = Σ_ij L_ij E_ij`` for the ``L`` of ``iterate``: O(nnz(U)·K), no gathers."""
        left, right = iterate.factors
        diagonal = np.einsum("ik,ki->i", left, right)
        return 2.0 * float(np.einsum("ij,ij->", left, self.U @ right.T)) - float(self.d @ diagonal)


@dataclass(frozen=True)
class _Clipped:
    """An iterate ``max(L, 0) = L + E``: ``E``, its entries ``i ≤ j`` (``upper``: rows, columns, values) and
    ``‖max(L, 0)‖_F²``."""

    iterate: LowRankIterate
    E: _UpperSparse
    upper: tuple[np.ndarray, np.ndarray, np.ndarray]
    norm2: float


class DenseAP:
    """:class:`APOperator` for a ``C`` held in memory (the single-task path).

    ``C`` is touched only by the first eigensolve and the first comparison.
    Every later iterate ``max(L, 0)`` with ``L = YΛYᵀ + c·11ᵀ`` is kept
    factored, as ``L + E`` with ``E = max(−L, 0)`` sparse (3% of the entries
    on the NIPS papers after one cycle, 0.5% after 150): memory C plus
    O(N·K + nnz E) plus one row chunk, where the dense iterates took two more
    N×N buffers. A cycle's only O(N²) work is the scan that finds ``E``
    (:func:`clipped_entries`: ``L`` formed chunk by chunk over the upper part,
    O(N²K/2) flops, nothing kept); products with an iterate cost
    O(NK·b + nnz(E)·b), and the change between iterates, their sums and norms
    are exact algebra on the factors and on ``E``.

    Where the clip is not sparse (over :attr:`DENSE_FRACTION` of the entries:
    of the first iterate, estimated on sampled rows — 8.4% on the 395 Reuters
    documents at K = 20, where NIPS clips 3% and an LDA corpus of 300,000
    documents at K = 100 none — or of any later one: on MovieLens, K = 20, the
    share grows from 2.5% to 69% in eight cycles), a sparse ``E`` would cost more than dense products, and the
    iterates are kept dense instead, in one N×N buffer that each cycle
    overwrites chunk by chunk after measuring the change against it (the
    upper part only; products by ``dsymm``). Either way the memory is C plus
    one N×N array at most.

    Parameters
    ----------
    C : ndarray, shape (N, N)
        Symmetric; not modified.
    chunk_rows : int, optional
        Rows per chunk of the scan (default: about 4 MB of a chunk).
    """

    cold_start = "auto"
    #: Share of clipped entries above which the iterates are kept dense.
    DENSE_FRACTION = 0.05
    _SAMPLE_ROWS = 256

    def __init__(self, C: np.ndarray, *, chunk_rows: int | None = None):
        self.C = C
        self._chunk = chunk_rows
        self._norm_C: float | None = None
        self._last: _Clipped | None = None
        self.dense_mode: bool | None = None  # decided at the first comparison
        self._buffer: np.ndarray | None = None  # dense mode: the last iterate (its upper part; whole if _full)
        self._buffer_key: LowRankIterate | None = None
        self._full = False
        self._dense_norm2 = 0.0

    def _clip_fraction(self, iterate: LowRankIterate) -> float:
        """The share of ``L``'s entries below zero, on evenly spaced sample rows."""
        n = self.C.shape[0]
        rows = np.unique(np.linspace(0, n - 1, min(n, self._SAMPLE_ROWS)).astype(np.int64))
        L = (iterate.Y[rows] * iterate.lam) @ iterate.Y.T
        return float(np.mean(L < -iterate.c)) if iterate.clip else 0.0

    def _is_buffered(self, iterate: LowRankIterate | None) -> bool:
        return bool(self.dense_mode) and iterate is not None and iterate is self._buffer_key

    def _clipped(self, iterate: LowRankIterate) -> _Clipped:
        if self._last is not None and self._last.iterate is iterate:
            return self._last
        upper = clipped_entries(iterate, chunk=self._chunk)
        E = _UpperSparse.from_upper(*upper, self.C.shape[0])
        left, right = iterate.factors
        # ‖L + E‖² = ‖L‖² − ‖E‖², as E = −L on its support; ‖left @ right‖² = Σ (leftᵀleft) ∘ (right rightᵀ)
        norm2 = float(np.sum((left.T @ left) * (right @ right.T))) - E.sumsq()
        return _Clipped(iterate, E, upper, max(norm2, 0.0))

    def dense(self, iterate: LowRankIterate | None) -> np.ndarray:
        """The dense form of ``iterate`` (``C`` itself for None; in dense mode the buffer itself)."""
        if iterate is None:
            return self.C
        if self._is_buffered(iterate):
            if not self._full:
                step = self._chunk or max(1, CLIP_CHUNK_BYTES // (9 * max(self.C.shape[0], 1)))
                _mirror_upper(self._buffer, step)
                self._full = True
            return self._buffer
        n = self.C.shape[0]
        return iterate.block(slice(0, n), slice(0, n))

    def matmat(self, iterate, V):
        if iterate is None:
            return self.C @ V
        if self._is_buffered(iterate):
            if self._full:
                return self._buffer @ V
            return sla.blas.dsymm(1.0, self._buffer.T, V, lower=1)  # the upper part, as its transpose's lower
        left, right = iterate.factors
        return left @ (right @ V) + self._clipped(iterate).E @ V

    def frobenius(self, iterate):
        if self._is_buffered(iterate):
            return float(np.sqrt(self._dense_norm2))
        if iterate is not None:
            return float(np.sqrt(self._clipped(iterate).norm2))
        if self._norm_C is None:
            self._norm_C = float(np.linalg.norm(self.C))
        return self._norm_C

    def compare(self, previous, current, V=None):
        n = self.C.shape[0]
        if self.dense_mode is None:
            self.dense_mode = self._clip_fraction(current) > self.DENSE_FRACTION
        if not self.dense_mode:
            now = self._clipped(current)
            if now.E.nnz > self.DENSE_FRACTION * n * n:  # the clip spread (MovieLens: 2.5% → 69% in 8 cycles)
                self.dense_mode, self._last = True, None
        if self.dense_mode:
            return self._compare_dense(previous, current, V)
        E = now.E
        left, right = current.factors
        total = float((left @ right.sum(axis=1)).sum()) + float(E.sum())
        if previous is None:
            # ‖C − (L + E)‖² = ‖C‖² − 2⟨C, L⟩ − 2⟨C, E⟩ + ‖L + E‖²
            i, j, v = now.upper
            on_E = float(self.C[i, j] @ np.where(i == j, v, 2.0 * v))
            inner = float(np.einsum("ij,ij->", self.C @ right.T, left)) + on_E
            diff2 = self.frobenius(None) ** 2 - 2.0 * inner + now.norm2
        else:
            diff2 = _change2(self._clipped(previous), now)
        self._last = now
        CV = None if V is None else left @ (right @ V) + E @ V
        return Comparison(float(np.sqrt(max(diff2, 0.0))), total, float(np.sqrt(now.norm2)), CV,
                          float(np.sqrt(E.sumsq())))

    def _compare_dense(self, previous, current, V):
        """One pass over row chunks: form ``max(L, 0)``'s upper part, measure it against the previous iterate
        (C, the buffer it is about to overwrite, or a factored iterate formed chunk by chunk) and write it
        into the buffer."""
        n = self.C.shape[0]
        if self._buffer is None:
            self._buffer = np.empty_like(self.C)
        step = self._chunk or max(1, CLIP_CHUNK_BYTES // (9 * max(n, 1)))
        scratch = np.empty(min(step, n) * n)
        left, right = current.factors
        total = float((left @ right.sum(axis=1)).sum())  # ΣL; the clipped mass is added below
        diff2 = norm2 = below2 = 0.0

        def twice_off_diagonal(X: np.ndarray, m: int) -> float:  # Σ over the upper part, counting off-diagonal twice
            return 2.0 * float(np.einsum("ij,ij->", X, X)) - float(np.einsum("ij,ij->", X[:, :m], X[:, :m]))

        for r0 in range(0, n, step):
            r1 = min(r0 + step, n)
            m, w = r1 - r0, n - r0
            new = np.matmul(left[r0:r1], right[:, r0:], out=scratch[: m * w].reshape(m, w))
            if current.clip:
                clipped = np.minimum(new, 0.0)
                below2 += twice_off_diagonal(clipped, m)
                total -= 2.0 * float(clipped.sum()) - float(clipped[:, :m].sum())
                np.maximum(new, 0.0, out=new)
            norm2 += twice_off_diagonal(new, m)
            upper = self._buffer[r0:r1, r0:]
            if previous is None:
                before = self.C[r0:r1, r0:]
            elif self._is_buffered(previous):
                before = upper
            else:  # the factored iterate of the cycle the clip spread
                before = previous.block(slice(r0, r1), slice(r0, n))
            diff = before - new
            diff2 += twice_off_diagonal(diff, m)
            upper[...] = new
        self._buffer_key, self._full, self._dense_norm2 = current, False, max(norm2, 0.0)
        CV = None if V is None else self.matmat(current, V)
        return Comparison(float(np.sqrt(max(diff2, 0.0))), total, float(np.sqrt(max(norm2, 0.0))), CV,
                          float(np.sqrt(below2)))


def _change2(previous: _Clipped, current: _Clipped) -> float:
    """``‖(L₁ + E₁) − (L₀ + E₀)‖_F²`` for two factored iterates, without forming either.

    With ``Z = [Y₀, 1] = Y₁S + F`` (``F ⟂ Y₁``, two Gram–Schmidt passes),
    ``L₁ − L₀ = Y₁AY₁ᵀ + Y₁BFᵀ + FBᵀY₁ᵀ + F diag(γ) Fᵀ`` with
    ``A = Λ₁ − S_Y Λ₀ S_Yᵀ + (c₁ − c₀) s sᵀ``, ``B = [−S_Y Λ₀, (c₁ − c₀) s]`` and
    ``γ = [−λ₀, c₁ − c₀]``; its squared norm is ``‖A‖² + 2 tr(B G Bᵀ) +
    Σ γᵢγⱼGᵢⱼ²`` with ``G = FᵀF``: K×K algebra after O(NK²) products, and no
    difference of two large N×N norms (``A`` is a difference of small matrices,
    accurate to rounding of ``‖L‖``, whatever the change). The cross term
    ``⟨L₁ − L₀, D⟩`` with ``D = E₁ − E₀`` needs the L's only on ``D``'s support;
    its error is rounding of ``‖L‖·‖D‖``, so the relative error of the change
    is about ε‖L‖/‖change‖ (measured: 1e-9 at a relative change of 1e-8).
    """
    one, zero = current.iterate, previous.iterate
    n = one.Y.shape[0]
    Z = np.hstack([zero.Y, np.ones((n, 1))])
    S = one.Y.T @ Z
    F = Z - one.Y @ S
    again = one.Y.T @ F
    F -= one.Y @ again
    S += again
    SY, s, dc = S[:, :-1], S[:, -1], one.c - zero.c
    A = np.diag(one.lam) - (SY * zero.lam) @ SY.T + dc * np.outer(s, s)
    B = np.hstack([-(SY * zero.lam), dc * s[:, None]])
    gamma = np.append(-zero.lam, dc)
    G = F.T @ F
    low_rank = float(np.sum(A * A)) + 2.0 * float(np.sum((B @ G) * B)) + float(np.sum(np.outer(gamma, gamma) * G * G))
    D = current.E - previous.E
    return low_rank + 2.0 * (D.inner(one) - D.inner(zero)) + D.sumsq()


def alternating_projection(
    op: APOperator,
    n: int,
    k: int,
    *,
    iterations: int = 150,
    tol: float | None = None,
    eig_tol: float = 1e-6,
    start: Eigenpairs | None = None,
    rng: np.random.Generator | None = None,
    on_cycle: Callable[[int, int, float, float], None] | None = None,
) -> tuple[LowRankIterate, Eigenpairs, APTrace, int]:
    """Alternating projection PSD_K → NOR → NN (paper §3), on any :class:`APOperator`.

    Parameters
    ----------
    op : APOperator
        :class:`DenseAP` for a dense ``C``, or a tiled operator.
    n, k : int
        N words, K topics.
    iterations : int, default=150
        Maximum number of cycles.
    tol : float, optional
        Stop when ``‖C_t − C_{t−1}‖_F ≤ tol · ‖C_t‖_F``.
    eig_tol : float, default=1e-6
        Relative eigen-residual asked of every PSD step.
    start : Eigenpairs, optional
        Warm start for the first eigensolve (e.g. a previous fit's ``Y``).
    rng : numpy.random.Generator, optional
    on_cycle : callable, optional
        Called after each cycle with ``(cycle, iterations, relative change,
        seconds of the cycle)`` (progress reports).

    Returns
    -------
    iterate : LowRankIterate
        The last NN iterate ``C_T`` (sums to 1 up to the clip).
    eig : Eigenpairs
        Top-K eigenpairs of ``C_T`` itself (its PSD projection, and the final
        eigenvalues).
    trace : APTrace
    n_iter : int
    """
    rng = np.random.default_rng(0) if rng is None else rng
    trace = APTrace()
    iterate: LowRankIterate | None = None
    norm_prev = op.frobenius(None)
    warm = None if start is None else (start.basis if start.basis is not None else start.vectors)
    warm_product = None
    eig = None
    n_iter = 0
    for t in range(iterations + 1):
        started = time.perf_counter()
        eig = top_eigenpairs(lambda V, it=iterate: op.matmat(it, V), n, k, X0=warm, CX0=warm_product,
                             tol=eig_tol, rng=rng, cold=op.cold_start)
        warm = eig.basis if eig.basis is not None else eig.vectors
        lam = np.maximum(eig.values, 0.0)
        # ‖X − YΛ⁺Yᵀ‖² = ‖X‖² − 2 Σ λ λ⁺ + Σ λ⁺²  (Y orthonormal eigenvectors of X)
        if iterate is not None:
            sq = norm_prev**2 - 2 * float(eig.values @ lam) + float(lam @ lam)
            trace.dist_psd.append(float(np.sqrt(max(sq, 0.0))))
        if t == iterations or (tol is not None and t > 0 and trace.delta[-1] <= tol * norm_prev):
            break
        current = LowRankIterate.normalized(eig.vectors, lam)
        delta, total, norm_prev, warm_product, below_zero = op.compare(iterate, current, warm)
        trace.delta.append(delta)
        trace.relative_change.append(delta / norm_prev if norm_prev > 0 else 0.0)
        trace.dist_normalized.append(abs(1.0 - total) / n)
        trace.dist_nonnegative.append(below_zero)
        trace.eig_residual.append(eig.residual)
        trace.n_matmat.append(eig.n_matmat)
        trace.seconds.append(time.perf_counter() - started)
        if on_cycle is not None:
            on_cycle(t + 1, iterations, trace.relative_change[-1], trace.seconds[-1])
        iterate = current
        n_iter = t + 1
    return iterate, eig, trace, n_iter


def diagonal_completion(
    C: np.ndarray, k: int, *, permutations: int = 30, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Diagonal completion (DC, paper appendix): fill the diagonal from the off-diagonal rank-K structure.

    For a random split of the words into halves S1, S2, the off-diagonal block
    ``G = C[S1, S2]`` has no diagonal entries; its top-K left (right) singular
    vectors ``U`` span the columns of ``C[S1, S1]`` (``C[S2, S2]``) if ``C`` has
    rank K. The diagonal entry ``x_j`` that puts column j of the diagonal block
    in that span, by least squares, is ``u_jᵀ Uᵀ f⁰_j / (1 − ‖u_j‖²)`` where
    ``f⁰_j`` is the column with its diagonal zeroed and ``u_j`` row j of ``U``.
    Each entry is the median over ``permutations`` random splits, clipped at 0;
    the result is divided by its sum.

    Parameters
    ----------
    C : ndarray, shape (N, N)
    k : int
    permutations : int, default=30
    rng : numpy.random.Generator, optional

    Returns
    -------
    ndarray, shape (N, N)
        ``C`` with its diagonal replaced, summing to 1.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    n = C.shape[0]
    estimates = np.empty((permutations, n))
    for p in range(permutations):
        perm = rng.permutation(n)
        s1, s2 = np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])
        G = C[np.ix_(s1, s2)]
        kk = min(k, min(G.shape) - 1)
        if kk < min(G.shape) - 1:
            U, _, Vt = spla.svds(G, k=kk, random_state=int(rng.integers(2**31)))
        else:
            U, _, Vt = np.linalg.svd(G, full_matrices=False)
        for idx, basis in ((s1, U[:, :kk]), (s2, Vt[:kk].T)):
            F = C[np.ix_(idx, idx)].copy()
            np.fill_diagonal(F, 0.0)
            P = basis.T @ F  # K × |idx|
            num = np.einsum("ij,ji->i", basis, P)
            den = 1.0 - np.einsum("ij,ij->i", basis, basis)
            estimates[p, idx] = num / np.maximum(den, 1e-12)
    out = C.copy()
    np.fill_diagonal(out, np.maximum(np.median(estimates, axis=0), 0.0))
    return out / out.sum()
