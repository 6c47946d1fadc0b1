"""The paper's steps on a ``C`` held in memory: rectify → anchors → B and A.

Pure numpy compositions of the other kernels. The in-task path of
``jsmf fit`` runs :func:`rectify` and :func:`find_anchors` inside one Dask task;
:mod:`jsmf_dask` exposes all three as public functions for matrices that fit in
memory.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from jsmf_dask.kernels.anchors import greedy_anchors
from jsmf_dask.kernels.ap import DenseAP, LowRankIterate, alternating_projection, clipped_entries
from jsmf_dask.kernels.dc import diagonal_completion
from jsmf_dask.kernels.eigen import Eigenpairs, top_eigenpairs
from jsmf_dask.exceptions import ConvergenceWarning
from jsmf_dask.kernels.law import law_weights
from jsmf_dask.kernels.lowrank import LowRankCooccurrence, from_iterate
from jsmf_dask.kernels.recover import Recovered, fix_anchor_rows, recover_weights, recovered_topics

__all__ = ["Rectified", "rectify", "rectify_low_rank", "find_anchors", "anchors_from_rows", "anchors_low_rank",
           "recover", "recover_low_rank"]


@dataclass
class Rectified:
    """Result of :func:`rectify`.

    Attributes
    ----------
    C : ndarray, shape (N, N)
        The rectified co-occurrence, summing to 1.
    eig : Eigenpairs
        Its top-K eigenpairs.
    trace : dict of str to ndarray
        AP's per-iteration diagnostics (empty for DC and none).
    n_iter : int
    iterate : LowRankIterate or None
        AP only: the last iterate in factored form, so that ``C = iterate / scale``
        (``max(YΛYᵀ + c, 0)``, or ``YΛ⁺Yᵀ`` after a last PSD step): what the
        model store keeps instead of the N×N array.
    scale : float
        The sum ``C`` was divided by (DC: the completed matrix's; its off-diagonal
        entries are C's divided by it).
    """

    C: np.ndarray
    eig: Eigenpairs
    trace: dict[str, np.ndarray] = field(default_factory=dict)
    n_iter: int = 0
    iterate: LowRankIterate | None = None
    scale: float = 1.0


def rectify(
    C: np.ndarray,
    n_topics: int,
    *,
    rectifier: str = "ap",
    iterations: int = 150,
    tol: float | None = None,
    end_with: str = "nonnegative",
    eig_tol: float = 1e-6,
    dc_permutations: int = 30,
    rng: np.random.Generator | None = None,
    start: Eigenpairs | None = None,
    on_cycle=None,
) -> Rectified:
    """Rectify ``C`` with AP, DC or nothing (the Baseline).

    Parameters
    ----------
    C : ndarray, shape (N, N)
        Symmetric co-occurrence; not modified.
    n_topics : int
        K.
    rectifier : {'ap', 'dc', 'none'}, default='ap'
    iterations, tol, end_with, eig_tol
        See :func:`jsmf_dask.kernels.ap.alternating_projection`.
    dc_permutations : int, default=30
    rng : numpy.random.Generator, optional
    start : Eigenpairs, optional
        AP's warm start (e.g. the previous fit's ``Y`` when C was updated).
    on_cycle : callable, optional
        AP's progress callback (see :func:`~jsmf_dask.kernels.ap.alternating_projection`).

    Returns
    -------
    Rectified

    Notes
    -----
    BLAS threads are the caller's to set: below N ≈ 10,000 an AP cycle's many small products run several
    times faster on one thread (the stages and the estimator limit them by
    :func:`jsmf_dask.stages.rectify.in_task_blas_threads`; with threadpoolctl,
    ``with threadpool_limits(1, "blas"): rectify(C, K)``).
    """
    rng = np.random.default_rng(0) if rng is None else rng
    n = C.shape[0]
    if rectifier == "ap":
        op, iterate, eig, trace, n_iter = _ap(C, n_topics, iterations, tol, end_with, eig_tol, rng, start, on_cycle)
        out = iterate.block(slice(0, n), slice(0, n)) if end_with == "psd" else op.dense(iterate)
        del op  # drops AP's second buffer before the caller goes on
        scale = float(out.sum())
        out /= scale
        return Rectified(out, eig, trace.as_arrays(), n_iter, iterate, scale)
    if rectifier == "dc":
        out = diagonal_completion(C, n_topics, permutations=dc_permutations, rng=rng)
        # its off-diagonal entries are C's divided by the completed matrix's sum
        off_diagonal = float(C.sum() - np.trace(C))
        scale = off_diagonal / float(out.sum() - np.trace(out)) if off_diagonal > 0 else 1.0
    elif rectifier == "none":
        scale = float(C.sum())
        out = C / scale
    else:
        raise ValueError(f"unknown rectifier {rectifier!r}")
    eig = top_eigenpairs(lambda V: out @ V, n, n_topics, tol=eig_tol, rng=rng, cold="auto")
    return Rectified(out, eig, scale=scale)


def _ap(C, n_topics, iterations, tol, end_with, eig_tol, rng, start, on_cycle):
    """AP on ``C`` in memory: ``(op, iterate, eig, trace, n_iter)``, the iterate after the last PSD step
    (unclipped) with ``end_with='psd'``."""
    op = DenseAP(C)
    iterate, eig, trace, n_iter = alternating_projection(
        op, C.shape[0], n_topics, iterations=iterations, tol=tol, eig_tol=eig_tol, rng=rng, start=start,
        on_cycle=on_cycle,
    )
    if end_with == "psd":
        iterate = LowRankIterate(eig.vectors, np.maximum(eig.values, 0.0), 0.0, clip=False)
    return op, iterate, eig, trace, n_iter


def rectify_low_rank(
    C: np.ndarray,
    n_topics: int,
    *,
    iterations: int = 150,
    tol: float | None = None,
    end_with: str = "nonnegative",
    eig_tol: float = 1e-6,
    rng: np.random.Generator | None = None,
    start: Eigenpairs | None = None,
    on_cycle=None,
) -> tuple[LowRankCooccurrence, Eigenpairs, dict[str, np.ndarray], int]:
    """:func:`rectify` with AP, the result kept in low-rank form: no N×N array besides ``C``.

    The last iterate ``max(L, 0)`` divided by its sum is ``Y Yᵀ + E + r·11ᵀ``
    (:func:`~jsmf_dask.kernels.lowrank.from_iterate`; exact to rounding), what
    the model store keeps anyway. On the NIPS papers (N = 5,000) this saves
    forming the dense rectified C and the anchors' passes over it (0.6 s of a
    10 s fit) and 8N² bytes.

    Returns
    -------
    rectified : LowRankCooccurrence
        The rectified co-occurrence, summing to 1.
    eig : Eigenpairs
        Top-K eigenpairs of the last iterate.
    trace : dict of str to ndarray
        AP's per-iteration diagnostics.
    n_iter : int
    """
    rng = np.random.default_rng(0) if rng is None else rng
    _, iterate, eig, trace, n_iter = _ap(C, n_topics, iterations, tol, end_with, eig_tol, rng, start, on_cycle)
    return from_iterate(iterate, None, clipped_entries(iterate)), eig, trace.as_arrays(), n_iter


def anchors_low_rank(
    rectified: LowRankCooccurrence, n_topics: int, *, candidates: np.ndarray | None = None,
    nonnegative: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`anchors_from_rows` of a low-rank ``C`` (rows, products and row norms by its factors).

    Returns
    -------
    p : ndarray, shape (N,)
        Row sums of ``C``.
    anchors, pivots, Cbar_S, C_SS
        As :func:`anchors_from_rows`.
    """
    p = rectified.row_sums()
    return (p, *anchors_from_rows(n_topics, p, rectified.row_norms2(), rectified.rows,
                                  lambda q: rectified.matmat(q[:, None])[:, 0], candidates=candidates,
                                  nonnegative=nonnegative))


def anchors_from_rows(
    n_topics: int,
    p: np.ndarray,
    row_norms2: np.ndarray,
    rows: Callable[[np.ndarray], np.ndarray],
    product: Callable[[np.ndarray], np.ndarray],
    *,
    candidates: np.ndarray | None = None,
    nonnegative: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Anchor words of a ``C`` seen through its rows and products (low-rank or stored C; see :mod:`.anchors`).

    Parameters
    ----------
    n_topics : int
    p : ndarray, shape (N,)
        Row sums of ``C``.
    row_norms2 : ndarray, shape (N,)
        ``‖C_i‖²``.
    rows : callable
        ``index -> C[index]`` (dense rows).
    product : callable
        ``q -> C q`` for a vector ``q``.
    candidates : ndarray of bool, shape (N,), optional
        Words allowed as anchors; words with an all-zero row never are.
    nonnegative : bool, default=False
        ``C`` is non-negative (AP's result ending with the clip): the anchor rows are clipped at 0.
        In low-rank form AP's clipped entries are ``L + E``, zero only to
        rounding (±1e-17 on entries of 1e-3), which would leave ``A`` with
        entries of -1e-17.

    Returns
    -------
    anchors : ndarray of int64, shape (K,)
    pivots : ndarray, shape (K,)
    Cbar_S : ndarray, shape (K, N)
        The anchors' rows of C̄.
    C_SS : ndarray, shape (K, K)
    """
    safe = np.where(p > 0, p, 1.0)
    usable = p > 0 if candidates is None else (p > 0) & np.asarray(candidates, bool)
    anchors, pivots = greedy_anchors(n_topics, lambda i: rows(np.array([i]))[0] / safe[i],
                                     lambda q: product(q) / safe, row_norms2 / safe**2, candidates=usable)
    Cbar_S = rows(anchors) / safe[anchors][:, None]
    if nonnegative:
        np.maximum(Cbar_S, 0.0, out=Cbar_S)
    return anchors, pivots, Cbar_S, Cbar_S[:, anchors] * p[anchors][:, None]


def find_anchors(
    C: np.ndarray, n_topics: int, *, candidates: np.ndarray | None = None, in_place: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Anchor words of ``C``: greedy pivoted Gram–Schmidt on the rows of C̄ (see :mod:`.anchors`).

    Parameters
    ----------
    C : ndarray, shape (N, N)
    n_topics : int
    candidates : ndarray of bool, shape (N,), optional
        Words allowed as anchors; words with an all-zero row never are.
    in_place : bool, default=False
        Overwrite ``C`` with C̄ (saves N² memory).

    Returns
    -------
    anchors : ndarray of int64, shape (K,)
    pivots : ndarray, shape (K,)
    """
    p = C.sum(axis=1)
    Cbar = C if in_place else C.copy()
    Cbar /= np.where(p > 0, p, 1.0)[:, None]
    norms2 = np.einsum("ij,ij->i", Cbar, Cbar)
    usable = p > 0 if candidates is None else (p > 0) & np.asarray(candidates, bool)
    return greedy_anchors(n_topics, lambda i: Cbar[i], lambda q: Cbar @ q, norms2, candidates=usable)


def recover(C: np.ndarray, anchors: np.ndarray, *, solver: str = "exact") -> Recovered:
    """B by simplex-constrained least squares per word and Bayes' rule; A from ``C_SS`` (paper §3).

    Parameters
    ----------
    C : ndarray, shape (N, N)
        The rectified co-occurrence.
    anchors : ndarray of int, shape (K,)
    solver : {'exact', 'eg'}, default='exact'

    Returns
    -------
    Recovered
    """
    anchors = np.asarray(anchors)
    p = C.sum(axis=1)
    Cbar = C / np.where(p > 0, p, 1.0)[:, None]
    Cbar_S = Cbar[anchors]
    G = Cbar_S @ Cbar_S.T
    solved = recover_weights(G, Cbar @ Cbar_S.T, np.einsum("ij,ij->i", Cbar, Cbar), solver=solver)
    return _recovered(solved, anchors, p, solver, C[np.ix_(anchors, anchors)], lambda M: M @ C)


def _recovered(solved, anchors: np.ndarray, p: np.ndarray, solver: str, C_SS: np.ndarray, left_multiply
               ) -> Recovered:
    """The common end of both recoveries: anchors fixed to their own topic, then :func:`recovered_topics`
    (``left_multiply(M)`` is ``M @ C``)."""
    weights, objective, unconverged = solved
    if unconverged:
        warnings.warn(f"recover: the {solver!r} solver stopped at its iteration cap for {unconverged} of "
                      f"{len(p)} words", ConvergenceWarning, stacklevel=3)
    fix_anchor_rows(weights, objective, anchors)
    return recovered_topics(weights, objective, p, C_SS, anchors, left_multiply)


def recover_low_rank(C: LowRankCooccurrence, Z: np.ndarray, p: np.ndarray, anchors: np.ndarray, *,
                     solver: str = "exact") -> Recovered:
    """:func:`recover` for a low-rank ``C`` (ENN's ``Y Yᵀ + E + r·11ᵀ``): the least squares in LAW's K dimensions.

    Parameters
    ----------
    C : LowRankCooccurrence
    Z, p : ndarray
        :func:`jsmf_dask.kernels.law.law_coordinates` of ``C``.
    anchors : ndarray of int, shape (K,)
    solver : {'exact', 'eg'}, default='exact'

    Returns
    -------
    Recovered
    """
    anchors = np.asarray(anchors)
    solved = law_weights(Z, Z[:, anchors], solver=solver)
    return _recovered(solved, anchors, p, solver, C.rows(anchors)[:, anchors], C.rmatmat)
