"""ENN: ε-non-negative rectification of a low-rank co-occurrence (Lee, Cho, Dong, Mimno & Bindel, ICML 2021).

Nothing here holds an N×N array. The rectified co-occurrence is kept as

    C = Y Yᵀ + E + r·11ᵀ

with ``Y`` N×K, ``E`` sparse, symmetric and non-negative, and ``r`` a scalar
(:class:`~jsmf_dask.kernels.lowrank.LowRankCooccurrence`).

* **ENN** (ε-non-negative rectification, :func:`enn_rectify`): from the top-K
  eigenpairs of the empirical ``C``, each cycle checks ``Y Yᵀ + r`` for
  negative entries on the rows of the ``l`` largest-norm words (and, by
  symmetry, their columns), puts their negatives into ``E``, chooses ``r`` so
  that the entries sum to 1, and replaces ``Y`` by the rank-K PSD projection
  of ``Y Yᵀ + E + r·11ᵀ`` (a warm-started eigensolve of an O(NK + nnz E)
  operator). It is AP (PSD → NOR → NN) with the NN step restricted to where
  the mass is.

Each PSD step is exact while ``E`` touches few words (:func:`range_eigenpairs`:
``C`` lives in the span of ``Y``, ``1`` and those words' unit vectors), otherwise
a warm-started iterative solve.

Memory: ``Y``, the eigensolver's working set and one chunk of the
non-negativity check (``chunk × l``) — O(N·K + nnz(E) + l·chunk); see
:func:`enn_memory` (iterative solves) and :func:`enn_min_memory` (exact ones).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sps

from jsmf_dask.exceptions import InsufficientMemoryError
from jsmf_dask.kernels.eigen import Eigenpairs, block_size, top_eigenpairs
from jsmf_dask.kernels.upper_sparse import symmetric_from_upper
from jsmf_dask.kernels.lowrank import LowRankCooccurrence, factor

__all__ = ["ENNTrace", "checked_rows", "enn_memory", "enn_min_memory", "nonnegativity_correction",
           "range_eigenpairs", "enn_rectify", "CHANGE_FLOOR", "CHECK_CHUNK", "CORRECTION_BYTES"]


@dataclass
class ENNTrace:
    """Per-cycle diagnostics of :func:`enn_rectify`.

    ``relative_change`` ‖Y_tY_tᵀ − Y_{t−1}Y_{t−1}ᵀ‖_F / ‖Y_tY_tᵀ‖_F (the quantity ``tol``
    is compared with, as in AP's trace); ``correction_sum``
    ΣE and ``correction_nnz`` its non-zeros (the negative mass the check found
    on the rows of ``Y_{t−1}``); ``shift`` r; ``eig_residual`` and ``n_matmat``
    of the cycle's eigensolve; ``seconds`` its wall time.
    """

    relative_change: list[float] = field(default_factory=list)
    correction_sum: list[float] = field(default_factory=list)
    correction_nnz: list[float] = field(default_factory=list)
    shift: list[float] = field(default_factory=list)
    eig_residual: list[float] = field(default_factory=list)
    n_matmat: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def as_arrays(self) -> dict[str, np.ndarray]:
        """Each list as a float64 array."""
        return {k: np.asarray(v, dtype=np.float64) for k, v in self.__dict__.items()}


def checked_rows(k: int, n: int) -> int:
    """``l``, the words whose rows (and columns) ENN checks: ``min(N, 10K + 1000)``, the authors' choice."""
    return min(n, 10 * k + 1000)


#: Rows of ``Y`` multiplied at once in the non-negativity check.
CHECK_CHUNK = 4096


def enn_memory(n_words: int, n_topics: int) -> int:
    """Bytes ENN and LAW may need in one task, with the iterative eigensolve (the worst case).

    ``Y``, ``Z`` and the iterative solver's working set (measured at about 16
    blocks of :func:`block_size` columns: LOBPCG's blocks and the Rayleigh–Ritz
    products), one chunk of the non-negativity check and 32 MB of slack. The
    sparse ``E`` comes on top (16 bytes a non-zero). Measured at N = 100,000,
    K = 100: 1.73 GiB above the interpreter (estimate 1.94 GiB).
    """
    b = block_size(n_topics, n_words)
    return 8 * n_words * (3 * n_topics + 16 * b) + _check_bytes(n_words, n_topics) + (32 << 20)


def enn_min_memory(n_words: int, n_topics: int, dim: int | None = None) -> int:
    """Bytes ENN and LAW need when every eigensolve is exact (:func:`range_eigenpairs`) with a basis of ``dim``.

    ``dim`` defaults to ``K + 1`` (a correction that touches no word). Per
    basis column: the basis, ``C`` times it and the Ritz vectors; plus ``Y``,
    ``Z``, the warm block, one check chunk and 32 MB. Measured at N = 100,000,
    K = 100 (correction on 38 words): 0.61 GiB above the interpreter (estimate
    0.69 GiB).
    """
    dim = n_topics + 1 if dim is None else dim
    b = block_size(n_topics, n_words)
    return 8 * n_words * (3 * n_topics + b + 3 * dim) + _check_bytes(n_words, n_topics) + (32 << 20)


#: Bytes per non-zero of the correction ``E`` at its peak: the candidates' COO triplets and the CSR copy.
CORRECTION_BYTES = 40


def _check_bytes(n_words: int, n_topics: int) -> int:
    return 8 * min(CHECK_CHUNK, n_words) * checked_rows(n_topics, n_words)


def _exact_dim_cap(n: int, k: int, max_bytes: int | None) -> int:
    """Largest basis for the exact eigensolve: 4 blocks (cheaper than the iterative solve), or, when the
    iterative solve does not fit ``max_bytes``, whatever the budget allows."""
    cap = 4 * block_size(k, n)
    if max_bytes is not None and enn_memory(n, k) > max_bytes:
        fixed = enn_min_memory(n, k, 0)
        cap = max(cap, int((max_bytes - fixed) // (24 * n)))
    return cap


def nonnegativity_correction(Y: np.ndarray, checked: np.ndarray, *, total: float = 1.0,
                             shift_hint: float | None = None,
                             chunk: int = CHECK_CHUNK) -> tuple[sps.csr_array, float]:
    """``E`` and ``r`` such that ``Y Yᵀ + E + r·11ᵀ`` is ≥ 0 on the checked rows and columns and sums to ``total``.

    ``E_ij = max(−(Y Yᵀ)_ij − r, 0)`` for ``i`` or ``j`` in ``checked`` (zero
    elsewhere) and ``r`` solves ``ΣE(r) + r N² = total − Σ Y Yᵀ``, a piecewise
    linear, increasing equation solved exactly by Newton steps over the
    candidate entries.

    Parameters
    ----------
    Y : ndarray, shape (N, K)
    checked : ndarray of int, shape (l,)
        Distinct word indices.
    total : float, default=1.0
    shift_hint : float, optional
        An estimate of ``r`` (the previous ENN cycle's). Entries above
        ``−r`` cannot enter ``E``, so the check gathers those below
        ``max(0, −2·hint)`` and multiplies ``Y`` once; without a hint, or when
        ``r`` falls below twice the hint, it multiplies again with a wider
        threshold. The result does not depend on the hint.
    chunk : int
        Rows of ``Y`` multiplied by ``Y[checked]ᵀ`` at once.

    Returns
    -------
    E : scipy.sparse.csr_array, shape (N, N)
    r : float
    """
    n = Y.shape[0]
    checked = np.asarray(checked, dtype=np.int64)
    s = Y.sum(axis=0)
    target = total - float(s @ s)
    r = target / n**2  # the shift without a correction; any correction only lowers it
    threshold = max(0.0, -r, -2.0 * shift_hint if shift_hint is not None else 0.0)
    Yc = np.ascontiguousarray(Y[checked].T)
    is_checked = np.zeros(n, dtype=bool)
    is_checked[checked] = True
    product = np.empty((min(chunk, n), checked.size))  # reused: a fresh chunk per step costs page faults
    below = np.empty(product.shape, dtype=bool)
    while True:
        rows, cols, vals = [], [], []
        for r0 in range(0, n, chunk):
            m = min(chunk, n - r0)
            X = np.matmul(Y[r0 : r0 + m], Yc, out=product[:m])  # (m, l): entries (i, checked[j])
            flat = np.flatnonzero(np.less(X, threshold, out=below[:m]))  # (5x faster than a 2-D nonzero)
            i, j = np.divmod(flat, X.shape[1])
            # Entries with both ends checked appear twice (as (i, j) and (j, i)); keep i's copy only
            # when i is unchecked or i <= j, so each unordered pair is listed once.
            gi, gj = i + r0, checked[j]
            keep = ~is_checked[gi] | (gi <= gj)
            rows.append(gi[keep])
            cols.append(gj[keep])
            vals.append(X.ravel()[flat[keep]])
        gi, gj, v = (np.concatenate(x) for x in (rows, cols, vals))
        weight = np.where(gi == gj, 1.0, 2.0)  # an off-diagonal pair is two entries of E
        # Solve f(r) = Σ w·max(−v − r, 0) + r N² − target = 0 (f increasing, piecewise linear).
        r_new = r
        for _ in range(100):
            active = v + r_new < 0
            slope = n**2 - float(weight[active].sum())
            f = float((weight[active] * (-v[active] - r_new)).sum()) + r_new * n**2 - target
            step = f / slope
            r_new -= step
            if abs(step) <= 1e-15 * max(abs(r_new), 1e-300):
                break
        if -r_new <= threshold:
            r = r_new
            break
        threshold = -2 * r_new  # r fell below what the candidates cover: gather more
    active = v + r < 0
    return symmetric_from_upper(gi[active], gj[active], -v[active] - r, n), float(r)


def range_eigenpairs(C: LowRankCooccurrence, k: int, max_dim: int) -> Eigenpairs | None:
    """The top-``k`` eigenpairs of ``C`` exactly, by Rayleigh–Ritz on a basis of its range, or None.

    ``C = Y Yᵀ + E + r·11ᵀ`` maps every vector into the span of ``Y``, ``1``
    and the unit vectors ``e_i`` of the rows ``R`` that ``E`` touches; ``C``
    is zero on the orthogonal complement. With ``W`` an orthonormal basis of
    that span (the ``e_i`` and a basis of ``[Y, 1]`` with the rows ``R``
    zeroed), ``C = W (WᵀCW) Wᵀ``, so the eigenpairs of the small matrix
    ``WᵀCW`` give those of ``C`` to rounding — no iteration, no tolerance. This
    is how ENN's cycles run once the correction is sparse (at N = 100,000 it
    touches a few dozen words). Returns None when the basis would have more
    than ``max_dim`` columns.

    ``residual`` is that of the small eigenproblem, ``n_matmat`` the basis size.
    """
    touched = np.unique(C.E.indices) if C.E.nnz else np.zeros(0, dtype=np.int64)
    n, K = C.Y.shape
    if K + 1 + touched.size > max_dim:
        return None
    M = np.column_stack([C.Y, np.ones(n)])
    M[touched] = 0.0
    Q, T, _ = sla.qr(M, mode="economic", pivoting=True)
    diag = np.abs(np.diag(T))
    rank = int((diag > 1e-12 * max(float(diag[0]) if diag.size else 0.0, np.finfo(float).tiny)).sum())
    Q = Q[:, :rank]  # zero on the rows R: orthogonal to every e_i, i in R
    m = touched.size
    CQ = C.matmat(Q)
    CE = C.Y @ C.Y[touched].T + C.E[:, touched].toarray() + C.r if m else np.zeros((n, 0))  # C e_R
    H = np.empty((m + rank, m + rank))
    H[:m, :m] = CE[touched]
    H[m:, :m] = Q.T @ CE
    H[:m, m:] = H[m:, :m].T
    H[m:, m:] = Q.T @ CQ
    H = 0.5 * (H + H.T)
    theta, U = sla.eigh(H)
    order = np.argsort(theta)[::-1]
    theta, U = theta[order], U[:, order]
    d = m + rank
    residual = float(np.linalg.norm(H @ U[:, :k] - U[:, :k] * theta[:k], axis=0).max()
                     / max(float(np.abs(theta).max()) if d else 0.0, np.finfo(float).tiny))
    b = min(block_size(k, n), n)
    V = np.zeros((n, b))
    V[:, : min(b, d)] = Q @ U[m:, :b]
    V[touched, : min(b, d)] += U[:m, :b]
    values = np.zeros(k)
    values[: min(k, d)] = theta[:k]
    # C is zero off its range: where fewer than k eigenvalues of the range are positive, the top k
    # continue with 0 and vectors orthogonal to the range.
    zeros = np.flatnonzero((values < 0) | (np.arange(k) >= d)) if d < n else np.zeros(0, dtype=np.int64)
    if zeros.size:
        X = np.random.default_rng(0).standard_normal((n, zeros.size))
        for _ in range(2):
            X[touched] = 0.0
            X -= Q @ (Q.T @ X)
        V[:, zeros] = np.linalg.qr(X)[0]
        values[zeros] = 0.0
        order = np.argsort(-values, kind="stable")
        values, V[:, :k] = values[order], V[:, :k][:, order]
    return Eigenpairs(values, V[:, :k], residual, d, V[:, : max(k, min(b, d))])


#: The smallest relative change of ``Y Yᵀ`` that :func:`_relative_change` resolves. It is computed from
#: K×K Gram matrices (``‖A‖² + ‖B‖² − 2⟨A, B⟩``), so rounding leaves about √ε ≈ 1e-8 of noise; at
#: 1e-7 the figure is good to ~1%. ENN stops there whatever ``tol``: at N = 100,000, K = 100 the change
#: fell by half each cycle to 2e-8 at cycle 11, then read 0 or 5e-8 for 139 more cycles that changed
#: nothing measurable (7.4 minutes).
CHANGE_FLOOR = 1e-7


def _relative_change(Y_new: np.ndarray, Y_old: np.ndarray) -> float:
    """``‖Y_new Y_newᵀ − Y_old Y_oldᵀ‖_F / ‖Y_new Y_newᵀ‖_F`` in O(NK²)."""
    a = np.linalg.norm(Y_new.T @ Y_new) ** 2
    b = np.linalg.norm(Y_old.T @ Y_old) ** 2
    c = np.linalg.norm(Y_new.T @ Y_old) ** 2
    return float(np.sqrt(max(a + b - 2 * c, 0.0) / a)) if a > 0 else 0.0


def _largest_rows(Y: np.ndarray, l: int) -> np.ndarray:
    norms = np.einsum("ij,ij->i", Y, Y)
    if l >= Y.shape[0]:
        return np.arange(Y.shape[0])
    return np.sort(np.argpartition(-norms, l - 1)[:l])


def enn_rectify(
    start: Eigenpairs,
    k: int,
    *,
    iterations: int = 150,
    tol: float | None = 1e-6,
    eig_tol: float = 1e-6,
    l: int | None = None,
    rng: np.random.Generator | None = None,
    max_bytes: int | None = None,
    on_cycle: Callable[[int, int, float, float], None] | None = None,
) -> tuple[LowRankCooccurrence, Eigenpairs, ENNTrace, int]:
    """ε-non-negative rectification (see the module docstring).

    Parameters
    ----------
    start : Eigenpairs
        Top-K eigenpairs of the empirical co-occurrence ``C`` (sums to 1).
    k : int
        K topics.
    iterations : int, default=150
        Maximum number of cycles.
    tol : float or None, default=1e-6
        Stop when the relative change of ``Y Yᵀ`` falls to ``tol``. ENN also
        stops when the change falls below what can be measured
        (:data:`CHANGE_FLOOR`, 1e-7, whatever ``tol``), and (after at least one
        cycle) when the check finds no negative entry: the iterate is then PSD
        (rank K), normalised and non-negative where checked, and further cycles
        only re-solve the same eigenproblem.
    eig_tol : float, default=1e-6
        Relative eigen-residual of every PSD step.
    l : int, optional
        Words checked for non-negativity (default :func:`checked_rows`).
    rng : numpy.random.Generator, optional
    max_bytes : int, optional
        Memory the cycles may use. Each PSD step is exact
        (:func:`range_eigenpairs`) while the correction touches few words;
        otherwise a warm iterative solve (:func:`enn_memory`). When that does
        not fit ``max_bytes``, the exact solve takes whatever basis the budget
        allows, and beyond it an :class:`~jsmf_dask.exceptions.InsufficientMemoryError`
        names the figures; so does a correction whose non-zeros
        (:data:`CORRECTION_BYTES` each) do not fit.
    on_cycle : callable, optional
        ``(cycle, iterations, relative change, seconds)`` after each cycle.

    Returns
    -------
    rectified : LowRankCooccurrence
        ``Y`` of the last PSD projection with the ``E`` and ``r`` of its own
        check: non-negative on the checked rows and columns, summing to 1.
    eig : Eigenpairs
        The last PSD step's eigenpairs.
    trace : ENNTrace
    n_iter : int
    """
    rng = np.random.default_rng(0) if rng is None else rng
    n = start.vectors.shape[0]
    l = checked_rows(k, n) if l is None else min(int(l), n)
    Y = factor(start.values[:k], start.vectors[:, :k])
    eig = start
    warm = start.basis if start.basis is not None else start.vectors
    max_dim = _exact_dim_cap(n, k, max_bytes)
    trace = ENNTrace()
    n_iter = 0
    final = None
    r = None
    for t in range(iterations):
        started = time.perf_counter()
        E, r = nonnegativity_correction(Y, _largest_rows(Y, l), shift_hint=r)
        if t > 0 and E.nnz == 0:  # nothing negative left where checked: PSD, NOR and NN hold together
            final = (E, r)
            break
        if max_bytes is not None and CORRECTION_BYTES * E.nnz + enn_min_memory(n, k) > max_bytes:
            raise InsufficientMemoryError(
                f"ENN cycle {t + 1}: the correction has {E.nnz} non-zeros (about "
                f"{CORRECTION_BYTES * E.nnz / 2**30:.2f} GiB while it is built, on top of "
                f"{enn_min_memory(n, k) / 2**30:.2f} GiB for N = {n}, K = {k}), more than the "
                f"{max_bytes / 2**30:.2f} GiB the task may use; give the workers more memory"
            )
        op = LowRankCooccurrence(Y, E, r)
        eig = range_eigenpairs(op, k, max_dim=max_dim)
        if eig is None:
            if max_bytes is not None and enn_memory(n, k) > max_bytes:
                touched = np.unique(E.indices).size
                raise InsufficientMemoryError(
                    f"ENN cycle {t + 1}: the correction touches {touched} words, too many for the exact "
                    f"eigensolve in {max_bytes / 2**30:.2f} GiB, and the iterative one needs about "
                    f"{enn_memory(n, k) / 2**30:.2f} GiB (N = {n}, K = {k}); give the workers more memory"
                )
            eig = top_eigenpairs(op.matmat, n, k, X0=warm, tol=eig_tol, rng=rng)
        warm = eig.basis if eig.basis is not None else eig.vectors
        Y_new = factor(eig.values, eig.vectors)
        delta = _relative_change(Y_new, Y)
        Y = Y_new
        trace.relative_change.append(delta)
        trace.correction_sum.append(float(E.sum()))
        trace.correction_nnz.append(float(E.nnz))
        trace.shift.append(r)
        trace.eig_residual.append(eig.residual)
        trace.n_matmat.append(eig.n_matmat)
        trace.seconds.append(time.perf_counter() - started)
        n_iter = t + 1
        if on_cycle is not None:
            on_cycle(n_iter, iterations, delta, trace.seconds[-1])
        if delta <= max(tol or 0.0, CHANGE_FLOOR):
            break
    E, r = final if final is not None else nonnegativity_correction(Y, _largest_rows(Y, l), shift_hint=r)
    return LowRankCooccurrence(Y, E, r), eig, trace, n_iter
