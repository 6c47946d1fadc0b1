"""Alternating projection (AP, paper §3 and appendix) of the co-occurrence matrix, with the iterate factored.

Rectification pushes the empirical ``C`` toward the matrices a topic model can
produce: rank-K positive semidefinite (PSD), normalised (entries sum to 1,
NOR) and non-negative (NN). AP repeats PSD → NOR → NN. Each iterate is kept
as a :class:`LowRankIterate` (``max(Y Λ Yᵀ + c, 0)``) and touched through an
:class:`APOperator`: :class:`DenseAP` for a ``C`` in memory here, the tiled
operator of :mod:`jsmf_dask.stages.tiled_ap` for a ``C`` read tile by tile.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import scipy.linalg as sla
import scipy.linalg.blas  # noqa: F401  (sla.blas.dsymm)

from jsmf_dask.kernels.eigen import Eigenpairs, top_eigenpairs
from jsmf_dask.kernels.upper_sparse import UpperSparse, mirror_upper

__all__ = ["APTrace", "LowRankIterate", "Comparison", "APOperator", "DenseAP", "clipped_entries",
           "alternating_projection", "CLIP_CHUNK_BYTES"]


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


@dataclass(frozen=True)
class _Clipped:
    """An iterate ``max(L, 0) = L + E``: ``E``, its entries ``i ≤ j`` (``upper``: rows, columns, values) and
    ``‖max(L, 0)‖_F²``."""

    iterate: LowRankIterate
    E: UpperSparse
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
        E = UpperSparse.from_upper(*upper, self.C.shape[0])
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
                mirror_upper(self._buffer, step)
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
    return low_rank + 2.0 * (D.inner(one.factors) - D.inner(zero.factors)) + D.sumsq()


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
