"""Recovery of B (word–topic) and A (topic–topic) from C̄ and the anchors (paper §3).

For each word i the weights ``y_i = p(z = · | w = i)`` solve the
simplex-constrained least squares

    min_y ‖C̄_i − Σ_k y_k C̄_{s_k}‖²   s.t.  y ≥ 0, Σ y = 1,

which depends on C̄ only through the K×K Gram matrix ``G = C̄_S C̄_Sᵀ`` and the
vector ``b_i = C̄_S C̄_iᵀ``: ``f(y) = yᵀGy − 2 bᵢᵀy + ‖C̄_i‖²``. So each word's
problem is K-dimensional once ``C̄ C̄_Sᵀ`` is formed. Bayes' rule then gives
``B_ik ∝ y_ik p(i)`` with ``p(i) = Σ_j C_ij``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from jsmf_dask.kernels._simplex_loop import CAPPED, CONVERGED, FALLBACK, active_set_block

__all__ = [
    "SOLVERS",
    "simplex_least_squares",
    "exponentiated_gradient",
    "recover_weights",
    "topic_word",
    "topic_topic",
    "least_squares_topic_topic",
    "fix_anchor_rows",
    "Recovered",
    "recovered_topics",
]

SOLVERS = ("exact", "eg")


def _solve_kkt(kkt: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """LU solve of the KKT system; least squares when it is (nearly) singular (e.g. repeated anchor rows)."""
    try:
        sol = np.linalg.solve(kkt, rhs)
    except np.linalg.LinAlgError:
        sol = None
    if sol is None or not np.isfinite(sol).all() or \
            np.linalg.norm(kkt @ sol - rhs) > 1e-9 * (np.abs(kkt).max() * np.abs(sol).max() + np.abs(rhs).max()):
        sol = np.linalg.lstsq(kkt, rhs, rcond=None)[0]
    return sol


def simplex_least_squares(
    G: np.ndarray, b: np.ndarray, *, max_iter: int | None = None, return_converged: bool = False
) -> np.ndarray | tuple[np.ndarray, bool]:
    """Exact minimiser of ``yᵀGy − 2bᵀy`` over the simplex, by a primal active-set method.

    The working set starts at the best vertex; each step solves the
    equality-constrained problem on the free variables (KKT system with the
    multiplier of ``Σy = 1``), steps back to feasibility when a variable would
    turn negative, and frees the variable with the most negative multiplier
    otherwise. Terminates at a KKT point, exact to rounding.

    Parameters
    ----------
    G : ndarray, shape (K, K)
        Symmetric positive semidefinite.
    b : ndarray, shape (K,)
    max_iter : int, optional
        Default ``10 K + 50``.
    return_converged : bool, default=False
        Also return whether a KKT point was reached within ``max_iter`` steps.

    Returns
    -------
    y : ndarray, shape (K,)
    converged : bool
        Only with ``return_converged``.
    """
    k = b.shape[0]
    max_iter = 10 * k + 50 if max_iter is None else max_iter
    scale = float(np.abs(G).max() + np.abs(b).max()) or 1.0
    tol = 1e3 * np.finfo(float).eps * k * scale
    j = int(np.argmin(0.5 * np.diag(G) - b))
    y = np.zeros(k)
    y[j] = 1.0
    free = [j]
    for _ in range(max_iter):
        m = len(free)
        kkt = np.zeros((m + 1, m + 1))
        kkt[:m, :m] = G[np.ix_(free, free)]
        kkt[:m, m] = kkt[m, :m] = 1.0
        rhs = np.concatenate([b[free], [1.0]])
        sol = _solve_kkt(kkt, rhs)
        z_free, nu = sol[:m], sol[m]
        if np.all(z_free > 0):
            y = np.zeros(k)
            y[free] = z_free
            mu = G @ y - b + nu
            mu[free] = np.inf
            i = int(np.argmin(mu))
            if mu[i] >= -tol:
                return (y, True) if return_converged else y
            free.append(i)
            continue
        # Step from y toward z until the first free variable reaches zero, and drop it.
        y_free = y[free]
        ratios = np.full(m, np.inf)
        shrink = z_free <= 0
        ratios[shrink] = y_free[shrink] / (y_free[shrink] - z_free[shrink])
        first = int(np.argmin(ratios))
        y_free = y_free + ratios[first] * (z_free - y_free)
        y_free[first] = 0.0
        y[free] = np.maximum(y_free, 0.0)
        free = [f for f, v in zip(free, y_free, strict=True) if v > 0]
        if not free:  # pragma: no cover - numerical corner: restart at the best vertex
            free = [int(np.argmin(0.5 * np.diag(G) - b))]
            y = np.zeros(k)
            y[free[0]] = 1.0
    return (y, False) if return_converged else y


def exponentiated_gradient(
    G: np.ndarray,
    B: np.ndarray,
    *,
    max_iter: int = 2000,
    rel_gap: float = 1e-8,
    norms2: np.ndarray | None = None,
    return_converged: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Exponentiated gradient for many words at once, with a scale-free step and stop.

    The step is ``1/L`` with ``L = 2 max|G_kl|``, the smoothness constant of the
    objective in the ℓ1 norm, so it does not depend on the scale of C̄ (the
    authors' fixed step of 50 does). Each word stops when its Frank–Wolfe
    duality gap, an upper bound on its distance to the optimum, falls below
    ``rel_gap`` times its objective scale ``‖C̄_i‖²``.

    Parameters
    ----------
    G : ndarray, shape (K, K)
    B : ndarray, shape (n, K)
        ``b_i`` as rows.
    max_iter : int, default=2000
    rel_gap : float, default=1e-8
    norms2 : ndarray, shape (n,), optional
        ``‖C̄_i‖²``; default ``max_k b_ik`` (a scale of the same order).
    return_converged : bool, default=False
        Also return which words reached the gap within ``max_iter`` iterations.

    Returns
    -------
    Y : ndarray, shape (n, K)
    converged : ndarray of bool, shape (n,)
        Only with ``return_converged``.
    """
    n, k = B.shape
    scale = np.asarray(norms2 if norms2 is not None else np.abs(B).max(axis=1), dtype=np.float64)
    scale = np.maximum(scale, np.finfo(float).tiny)
    step = 1.0 / (2.0 * max(float(np.abs(G).max()), np.finfo(float).tiny))
    Y = np.full((n, k), 1.0 / k)
    active = np.arange(n)
    for _ in range(max_iter):
        Ya = Y[active]
        grad = 2.0 * (Ya @ G - B[active])
        gap = np.einsum("ij,ij->i", Ya, grad) - grad.min(axis=1)
        done = gap <= rel_gap * scale[active]
        if done.all():
            active = active[:0]
            break
        active, Ya, grad = active[~done], Ya[~done], grad[~done]
        logits = np.log(np.maximum(Ya, 1e-300)) - step * (grad - grad.min(axis=1, keepdims=True))
        logits -= logits.max(axis=1, keepdims=True)
        Ya = np.exp(logits)
        Y[active] = Ya / Ya.sum(axis=1, keepdims=True)
    if return_converged:
        converged = np.ones(n, dtype=bool)
        converged[active] = False  # still above the gap after max_iter iterations (checked before each step)
        return Y, converged
    return Y


def recover_weights(
    G: np.ndarray, B: np.ndarray, norms2: np.ndarray, *, solver: str = "exact"
) -> tuple[np.ndarray, np.ndarray, int]:
    """``p(z | w)`` for a block of words, each word's objective ``‖C̄_i − yᵀC̄_S‖²``, and how many stopped short.

    Parameters
    ----------
    G : ndarray, shape (K, K)
        ``C̄_S C̄_Sᵀ``.
    B : ndarray, shape (n, K)
        ``C̄_i C̄_Sᵀ`` for the block's words.
    norms2 : ndarray, shape (n,)
        ``‖C̄_i‖²``.
    solver : {'exact', 'eg'}, default='exact'
        'exact': :func:`simplex_least_squares`, compiled over the block
        (:mod:`jsmf_dask.kernels._simplex_loop`).

    Returns
    -------
    weights : ndarray, shape (n, K)
    objective : ndarray, shape (n,)
    unconverged : int
        Words whose solver stopped at its iteration cap.
    """
    if solver == "exact":
        G = np.ascontiguousarray(G, dtype=np.float64)
        B = np.ascontiguousarray(B, dtype=np.float64)
        k = G.shape[0]
        Y = np.zeros((B.shape[0], k))
        status = np.zeros(B.shape[0], dtype=np.int64)
        if B.shape[0]:
            active_set_block(G, B, 10 * k + 50, Y, status)
        for i in np.flatnonzero(status == FALLBACK):  # (nearly) singular KKT systems: the least-squares version
            Y[i], ok = simplex_least_squares(G, B[i], return_converged=True)
            status[i] = CONVERGED if ok else CAPPED
        unconverged = int((status == CAPPED).sum())
    elif solver == "eg":
        Y, converged = exponentiated_gradient(G, B, norms2=norms2, return_converged=True)
        unconverged = int((~converged).sum())
    else:
        raise ValueError(f"unknown solver {solver!r}; expected one of {SOLVERS}")
    objective = np.einsum("ij,jk,ik->i", Y, G, Y) - 2 * np.einsum("ij,ij->i", Y, B) + norms2
    return Y, np.maximum(objective, 0.0), unconverged


def topic_word(weights: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Bayes' rule: ``B_ik = y_ik p(i) / Σ_i' y_i'k p(i')`` (columns sum to 1, non-negative).

    Parameters
    ----------
    weights : ndarray, shape (N, K)
        ``p(z = k | w = i)``.
    p : ndarray, shape (N,)
        ``p(w = i)``, the row sums of ``C``. A row of an ε-non-negative ``C``
        (ENN's: entries down to ``−ε``) can sum below zero, for a rare word;
        its ``p(w)`` is taken as 0 (its row of ``B`` 0), not as a negative
        probability (which made such rows of ``B`` negative, down to −5e-7 on
        Reuters after 20 ENN cycles).
    """
    joint = weights * np.maximum(p, 0.0)[:, None]
    mass = joint.sum(axis=0)
    return joint / np.where(mass > 0, mass, 1.0)


def topic_topic(C_SS: np.ndarray, B: np.ndarray, anchors: np.ndarray) -> tuple[np.ndarray, float]:
    """``A = diag(1/B_{s_k,k}) C_SS diag(1/B_{s_k,k})`` divided by its sum (paper §3).

    Returns
    -------
    A : ndarray, shape (K, K)
        Sums to 1; doubly non-negative when ``C_SS`` is. All zero when its sum
        before the division is not positive: the anchors never co-occur
        (unrectified ``C`` of rare anchors), or the anchors' block of an
        ε-non-negative ``C`` sums below zero (ENN after too few cycles).
    raw_sum : float
        ``ΣA`` before the division (1 for an exactly rectified ``C``).
    """
    d = B[anchors, np.arange(len(anchors))]
    A = C_SS / np.outer(d, d)
    raw = float(A.sum())
    if not raw > 0:  # no joint probabilities can be formed (see above)
        return np.zeros_like(A), raw
    return A / raw, raw


def least_squares_topic_topic(BtC: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The Baseline's (Arora et al. 2013) ``A = argmin ‖C − BABᵀ‖_F = B⁺ C B⁺ᵀ``.

    Parameters
    ----------
    BtC : ndarray, shape (K, N)
        ``B⁺ C`` (formed by the caller, tile by tile if need be).
    B : ndarray, shape (N, K)

    Returns
    -------
    ndarray, shape (K, K)
        Typically with negative entries, which is the paper's point (Fig. 3).
    """
    A = BtC @ np.linalg.pinv(B).T
    return 0.5 * (A + A.T)


def fix_anchor_rows(weights: np.ndarray, objective: np.ndarray, anchors: np.ndarray, start: int = 0) -> None:
    """Give each anchor word all of its own topic's weight (objective 0), in place.

    ``weights`` and ``objective`` hold the rows ``[start, start + len(weights))``
    of the words (a task's block); anchors outside them are left alone. An
    anchor's least squares has this solution up to the solver's tolerance;
    fixing it makes ``B``'s anchor entries exact wherever the block boundaries fall.
    """
    for k, s in enumerate(np.asarray(anchors)):
        if start <= s < start + len(weights):
            weights[s - start] = 0.0
            weights[s - start, k] = 1.0
            objective[s - start] = 0.0


@dataclass
class Recovered:
    """B, A and the least-squares A from the recovery weights (:func:`recovered_topics`)."""

    B: np.ndarray
    A: np.ndarray
    A_least_squares: np.ndarray
    weights: np.ndarray
    objective: np.ndarray
    legality: float


def recovered_topics(weights: np.ndarray, objective: np.ndarray, p: np.ndarray, C_SS: np.ndarray,
                     anchors: np.ndarray, pinv_times_C: Callable[[np.ndarray], np.ndarray], *,
                     words: np.ndarray | None = None) -> Recovered:
    """The one place B, A and the least-squares A are formed from every word's recovery weights.

    Parameters
    ----------
    weights : ndarray, shape (N, K)
        ``p(z = k | w = i)`` of every word, anchors already fixed (:func:`fix_anchor_rows`).
    objective : ndarray, shape (N,)
    p : ndarray, shape (N,)
        Row sums of the rectified C.
    C_SS : ndarray, shape (K, K)
        The rectified C's anchor block.
    anchors : ndarray of int, shape (K,)
    pinv_times_C : callable
        ``M ↦ M @ C`` for a K×N ``M`` (``C`` the rectified C, in whatever form
        the caller holds it: in memory, low rank, or tasks over a store).
    words : ndarray of int, optional
        A fit on an anchor vocabulary (:mod:`jsmf_dask.kernels.anchor_words`):
        the least-squares A is that of the vocabulary's block, ``B_F⁺ C_FF
        B_F⁺ᵀ`` with ``B_F`` the rows of B for these words, and
        ``pinv_times_C`` maps a K×n ``M`` to ``M @ C_FF`` (``C_FF`` on C's
        scale: the block's share of C's sum).

    Returns
    -------
    Recovered
        ``legality`` is ``ΣA`` before normalisation (see :func:`topic_topic`).
    """
    B = topic_word(weights, p)
    A, legality = topic_topic(C_SS, B, anchors)
    B_C = B if words is None else B[words]  # the rows of B the C of pinv_times_C spans
    A_ls = least_squares_topic_topic(pinv_times_C(np.linalg.pinv(B_C)), B_C)
    return Recovered(B, A, A_ls, weights, objective, legality)
