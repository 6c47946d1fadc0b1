"""The paper's six measures of a topic model (§4), as pure functions.

Symbols: ``C`` the co-occurrence matrix (N×N, sums to 1), ``C̄`` its rows
divided by their sums, ``B`` (N×K, columns sum to 1) the topics, ``A`` (K×K)
the topic–topic matrix, ``W`` (N×K) the recovery weights ``p(z = k | x = i)``,
``S`` the anchor words, ``D1``/``D2`` document and co-document frequencies.

The measures that touch N×N data come as per-row-block partials
(:func:`fit_partials`) that a caller sums over blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps
from jsmf_dask.kernels.lowrank import row_sums

__all__ = [
    "COHERENCE_EPSILON",
    "FitPartials",
    "fit_partials",
    "low_rank_partials",
    "recovery",
    "approximation",
    "dominancy",
    "specificity",
    "word_topic_entropy",
    "top_words",
    "topic_changes",
    "dissimilarity",
    "coherence",
    "npmi_coherence",
    "match_topics",
    "matched_errors",
]

COHERENCE_EPSILON = 0.01


@dataclass
class FitPartials:
    """Sums over a block of rows of ``C``, from which recovery and approximation follow.

    Attributes
    ----------
    recovery_sum : float
        ``Σ_i ‖C̄_i − W_i C̄_S‖₂`` over the block's rows (NaN without anchors).
    n_rows : int
    total : float
        ``Σ C`` over the block.
    sq : float
        ``Σ C²``.
    cross : float
        ``Σ C ∘ (B A Bᵀ)``.
    """

    recovery_sum: float
    n_rows: int
    total: float
    sq: float
    cross: float

    def __add__(self, other: FitPartials) -> FitPartials:
        return FitPartials(self.recovery_sum + other.recovery_sum, self.n_rows + other.n_rows,
                           self.total + other.total, self.sq + other.sq, self.cross + other.cross)


def fit_partials(
    C_rows: np.ndarray,
    B_rows: np.ndarray,
    BA: np.ndarray,
    W_rows: np.ndarray | None = None,
    Cbar_S: np.ndarray | None = None,
) -> FitPartials:
    """Partial sums of recovery and approximation over a block of rows of ``C``.

    Parameters
    ----------
    C_rows : ndarray, shape (r, N)
        Rows of ``C`` (any overall scale: approximation divides by ``ΣC``).
    B_rows : ndarray, shape (r, K)
        The same rows of ``B``.
    BA : ndarray, shape (N, K)
        ``B A`` (so that ``(B A Bᵀ)_rows = B_rows (BA)ᵀ``).
    W_rows : ndarray, shape (r, K), optional
        ``p(z | x)`` of the block's words; with ``Cbar_S``, for recovery.
    Cbar_S : ndarray, shape (K, N), optional
        The anchors' rows of ``C̄`` of the same ``C``.
    """
    model_rows = B_rows @ BA.T
    rec = np.nan
    if W_rows is not None and Cbar_S is not None:
        p = C_rows.sum(axis=1)
        Cbar = C_rows / np.where(p > 0, p, 1.0)[:, None]
        rec = float(np.linalg.norm(Cbar - W_rows @ Cbar_S, axis=1).sum())
    return FitPartials(rec, C_rows.shape[0], float(C_rows.sum()), float(np.vdot(C_rows, C_rows)),
                       float(np.vdot(C_rows, model_rows)))


def low_rank_partials(
    U: np.ndarray,
    s: np.ndarray,
    E: sps.csr_array | None,
    B: np.ndarray,
    A: np.ndarray,
    W: np.ndarray | None = None,
    anchors: np.ndarray | None = None,
) -> tuple[FitPartials, np.ndarray]:
    """:func:`fit_partials` over every row of ``C = U diag(s) Uᵀ + E`` by exact algebra, with no N×N array.

    For the compressed store (``U`` its eigenvectors, ``s`` its eigenvalues,
    no ``E``) and for AP and ENN models (``U = [Y, 1]``, ``s = [λ⁺, r]``, ``E`` the
    correction). Each row's recovery residual ``‖u_iᵀ C‖`` with
    ``u_i = e_i/p_i − Σ_k w_ik e_{s_k}/p_{s_k}`` is ``‖U S Uᵀu_i + E u_i‖``,
    expanded in O(N·q² + nnz(E)·(q + K)) for ``q`` columns of ``U``. Rows with
    ``p_i <= 0`` are left unnormalised, as :func:`fit_partials` does.

    Returns
    -------
    partials : FitPartials
    p : ndarray, shape (N,)
        Row sums of ``C``.
    """
    n = U.shape[0]
    E = sps.csr_array((n, n)) if E is None else sps.csr_array(E)
    p = row_sums(U, s, E)
    G = U.T @ U
    SGS = s[:, None] * G * s[None, :]
    coo = E.tocoo()
    sq = float(np.sum(SGS * G))  # ‖U S Uᵀ‖² = trace(S G S G)
    sq += 2.0 * float(np.einsum("i,ij,ij->", coo.data, U[coo.row] * s, U[coo.col])) + float(coo.data @ coo.data)
    BtU = B.T @ U
    BtCB = (BtU * s) @ BtU.T + B.T @ (E @ B)
    cross = float(np.sum(A * BtCB))  # trace(A BᵀCB) with BᵀCB symmetric
    rec = np.nan
    if W is not None and anchors is not None:
        anchors = np.asarray(anchors)
        inv = 1.0 / np.where(p > 0, p, 1.0)
        Ubar = U * inv[:, None]
        T = Ubar - W @ Ubar[anchors]  # rows: Uᵀu_i
        EU = E @ U
        EUbar = EU * inv[:, None]
        R = EUbar - W @ EUbar[anchors]  # rows: UᵀE u_i
        omega = W * inv[anchors][None, :]
        E_S = E[:, anchors].toarray()  # N×K
        EE_S = np.asarray(E @ E_S)  # (E E)[:, S]
        e_norm2 = np.asarray(E.multiply(E).sum(axis=1)).ravel()
        eu2 = (inv**2 * e_norm2 - 2.0 * inv * np.einsum("ik,ik->i", omega, EE_S)
               + np.einsum("ik,kl,il->i", omega, E_S.T @ E_S, omega))
        rows2 = np.einsum("iq,qr,ir->i", T, SGS, T) + 2.0 * np.einsum("iq,iq->i", T * s, R) + eu2
        rec = float(np.sqrt(np.maximum(rows2, 0.0)).sum())
    return FitPartials(rec, n, float(p.sum()), sq, cross), p


def recovery(parts: FitPartials) -> float:
    """``(1/N) Σ_i ‖C̄_i − Σ_k p(z=k|x=i) C̄_{s_k}‖₂`` from the summed partials."""
    return parts.recovery_sum / parts.n_rows


def approximation(parts: FitPartials, B: np.ndarray, A: np.ndarray) -> float:
    """``‖C/ΣC − B A Bᵀ‖_F`` from the summed partials (``‖BABᵀ‖²`` is formed in K×K)."""
    G = B.T @ B
    model_sq = float(np.trace(A @ G @ A.T @ G))
    s = parts.total
    sq = parts.sq / s**2 - 2.0 * parts.cross / s + model_sq
    return float(np.sqrt(max(sq, 0.0)))


def dominancy(A: np.ndarray) -> tuple[float, str | None]:
    """``(1/K) Σ_k A_kk / Σ_l A_kl``: how much of each topic's co-occurrence is with itself.

    Returns
    -------
    value : float
        NaN when a row of ``A`` sums to zero.
    reason : str or None
        Why the value is NaN: an anchor whose row of ``C_SS`` is zero (it never
        co-occurs with the other anchors; the paper's footnote).
    """
    rows = A.sum(axis=1)
    zero = np.flatnonzero(rows == 0)
    if zero.size:
        return float("nan"), (f"the rows of C_SS (and A) of topics {zero.tolist()} are zero: their anchor words "
                              "never co-occur with any anchor, so A_kk / Σ_l A_kl is 0/0")
    return float(np.mean(np.diag(A) / rows)), None


def specificity(B: np.ndarray, p: np.ndarray) -> float:
    """``(1/K) Σ_k KL(B_·k ‖ p(X))`` in bits; ``p`` floored at machine epsilon, ``0 log 0 = 0``."""
    ref = np.maximum(p / p.sum(), np.finfo(float).eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(B > 0, B * np.log2(B / ref[:, None]), 0.0)
    return float(terms.sum(axis=0).mean())


def word_topic_entropy(B: np.ndarray, share: np.ndarray, p: np.ndarray) -> float:
    """``Σ_w p(w) H(p(· | w))`` in bits, ``p`` normalised: over how many topics (``2^H``) a word's tokens spread,
    weighted by the word frequencies ``p``.

    Not one of the paper's measures. ``p(k | w) ∝ B_wk share_k``, ``share`` being each topic's share of the
    tokens (:func:`~jsmf_dask.kernels.variational.topic_shares`); words no topic holds are left out. Topics that
    share their words score high, topics that split them between each other low: the difference specificity
    sees between CVB0's topics and a Gibbs chain's (the benchmarks README, session 44).
    """
    joint = np.clip(np.asarray(B, dtype=np.float64), 0.0, None) * np.asarray(share, dtype=np.float64)[None, :]
    held = joint.sum(axis=1)
    kept = held > 0
    cond = joint[kept] / held[kept, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(cond > 0, cond * np.log2(cond), 0.0).sum(axis=1)
    weight = np.asarray(p, dtype=np.float64)[kept]
    return float(weight @ entropy / weight.sum())


def top_words(B: np.ndarray, n: int = 20) -> np.ndarray:
    """Each topic's ``n`` most probable words, most probable first (K×n; ties by word id)."""
    n = min(n, B.shape[0])
    return np.argsort(-B, axis=0, kind="stable")[:n].T


def topic_changes(before: np.ndarray, after: np.ndarray, n: int = 10) -> list[tuple[list[int], list[int]]]:
    """Per topic k: the words in ``after``'s top ``n`` but not ``before``'s, and those it lost (by rank)."""
    old, new = top_words(before, n), top_words(after, n)
    return [([int(w) for w in b if w not in set(a)], [int(w) for w in a if w not in set(b)])
            for a, b in zip(old, new, strict=True)]


def dissimilarity(top: np.ndarray) -> float:
    """Mean over topics of how many of its top words are in no other topic's top words.

    Parameters
    ----------
    top : ndarray, shape (K, n)
        From :func:`top_words`.
    """
    k = top.shape[0]
    counts = np.zeros(k)
    for t in range(k):
        others = np.setdiff1d(np.arange(k), [t])
        seen = np.unique(top[others]) if others.size else np.empty(0, dtype=top.dtype)
        counts[t] = np.count_nonzero(~np.isin(top[t], seen))
    return float(counts.mean())


def coherence(top: np.ndarray, D1: np.ndarray, D2_top: np.ndarray, *, form: str = "paper") -> float:
    """Mean topic coherence from document and co-document frequencies.

    ``form='paper'`` (§4): ``Σ_{x₁ ≠ x₂ ∈ top(k)} log((D2(x₁, x₂) + ε) / D1(x₂))``
    over all ordered pairs. ``form='mimno'`` (Mimno et al. 2011, as in the
    authors' code): pairs ``i < j`` by rank only, with ``D1`` of the
    higher-ranked word ``x_i``, about half as large. ε = 0.01. Words in no
    document count as in one (their ``D1`` would make the log infinite).

    Parameters
    ----------
    top : ndarray, shape (K, n)
    D1 : ndarray, shape (N,)
    D2_top : ndarray, shape (K, n, n)
        ``D2[top[k]][:, top[k]]`` for each topic.
    form : {'paper', 'mimno'}
    """
    k, n = top.shape
    d1 = np.maximum(D1[top].astype(np.float64), 1.0)  # (K, n)
    # L[k, a, b] = log((D2(x_a, x_b) + ε) / D1(x_b))
    L = np.log((D2_top + COHERENCE_EPSILON) / d1[:, None, :])
    if form == "paper":
        mask = ~np.eye(n, dtype=bool)
    elif form == "mimno":
        # pair (x_j, x_i) with i < j: row a = j (lower rank), column b = i (higher rank)
        mask = np.tril(np.ones((n, n), dtype=bool), k=-1)
    else:
        raise ValueError(f"unknown coherence form {form!r}; expected 'paper' or 'mimno'")
    return float(L[:, mask].sum(axis=1).mean())


def npmi_coherence(top: np.ndarray, D1: np.ndarray, D2_top: np.ndarray, n_docs: int) -> float:
    """Mean normalised pointwise mutual information of each topic's top-word pairs (Bouma 2009; Lau et al. 2014).

    For words ``x ≠ y`` of a topic's top words, with document probabilities
    ``P(x) = D1(x)/M`` and ``P(x, y) = D2(x, y)/M``:
    ``NPMI = log(P(x, y) / (P(x) P(y))) / −log P(x, y)``, in [−1, 1]; a pair in
    no common document scores −1, a pair in every document of both words'
    (and in all ``M``) 0. Averaged over the unordered pairs of a topic, then
    over topics.

    Parameters
    ----------
    top : ndarray, shape (K, n)
    D1 : ndarray, shape (N,)
    D2_top : ndarray, shape (K, n, n)
        ``D2[top[k]][:, top[k]]`` for each topic.
    n_docs : int
        ``M``, the documents ``D1`` and ``D2`` were counted over.
    """
    k, n = top.shape
    if n < 2:
        return float("nan")
    p1 = np.maximum(D1[top].astype(np.float64), 1.0) / n_docs  # (K, n)
    p12 = np.asarray(D2_top, dtype=np.float64) / n_docs
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(p12 / (p1[:, :, None] * p1[:, None, :]))
        npmi = np.where(p12 >= 1.0, 0.0, pmi / -np.log(p12))  # P(x, y) = 1: both in every document, independent
    npmi = np.where(p12 > 0, npmi, -1.0)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    return float(npmi[:, upper].mean(axis=1).mean())


def match_topics(B: np.ndarray, B_true: np.ndarray) -> np.ndarray:
    """The permutation of fitted topics that best matches the true ones (min total L1, Hungarian).

    Returns
    -------
    ndarray of int, shape (K,)
        ``perm[k]`` is the fitted topic matched to true topic ``k``.
    """
    k = B_true.shape[1]
    cost = np.stack([np.abs(B_true[:, [t]] - B).sum(axis=0) for t in range(k)])
    from scipy.optimize import linear_sum_assignment  # 80 ms of imports, for this one use

    rows, cols = linear_sum_assignment(cost)
    return cols[np.argsort(rows)]


def matched_errors(B: np.ndarray, A: np.ndarray, B_true: np.ndarray, A_true: np.ndarray) -> tuple[float, float]:
    """Errors after optimal column matching: B's mean L1 over topics, and A's total L1 (both in [0, 2])."""
    perm = match_topics(B, B_true)
    b_err = float(np.abs(B[:, perm] - B_true).sum(axis=0).mean())
    a_err = float(np.abs(A[np.ix_(perm, perm)] - A_true).sum())
    return b_err, a_err
