"""A spectral fit on an anchor vocabulary: AP and the anchors on the block of C of the words of highest
tf·idf, every word recovered against those words' columns (numpy only).

Let ``F`` be the ``n`` chosen words (:func:`anchor_vocabulary`). Their block
``C_FF`` is itself a topic model's co-occurrence (``B_F A B_Fᵀ``, ``B_F`` the
rows of B for F), so AP rectifies it and the anchors are picked among F as
usual, at O(n²) instead of O(N²) per cycle. For any word ``i`` (in F or not),
its row restricted to F and divided by its own sum is

    C_iF / Σ_F C_iF = Σ_k ỹ_ik · C̄_{s_k F},   ỹ_ik = p(z = k | i) ρ_k / Σ_l p(z = l | i) ρ_l,

where ``C̄_{s_k F}`` is anchor ``s_k``'s restricted row divided by its own sum
and ``ρ_k = Σ_F C_{s_k j} / Σ_j C_{s_k j}`` the share of the anchor's
co-occurrence that falls in F (the probability that a word co-occurring with
topic k is in F). So the simplex least squares of
:mod:`jsmf_dask.kernels.recover` on the restricted rows gives ``ỹ``, and
``p(z | i) ∝ ỹ_ik / ρ_k`` (:func:`unrestricted_weights`); Bayes' rule with
every word's ``p(i)`` (C's full row sums) then gives B. For the words of F the
rows are the rectified block's; for the others C's own (rare words' rows are
the noise AP cannot separate: measured in the benchmarks README, session 19).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jsmf_dask.kernels.lowrank import LowRankCooccurrence
from jsmf_dask.kernels.vocabulary import select_vocabulary

__all__ = ["anchor_vocabulary", "AnchorColumns", "column_shares", "unrestricted_weights"]


def anchor_vocabulary(df: np.ndarray, tf: np.ndarray, n_docs: int, n: int) -> np.ndarray:
    """The ``n`` words of highest tf·idf (:func:`~jsmf_dask.kernels.vocabulary.select_vocabulary`, the ranking
    ``ingest --vocab-size`` keeps words by: a vocabulary it ranked gives its first ``n`` words), in index order.

    Measured (session 25, the benchmarks README): the ``n`` words in the most documents instead, which include the
    corpus's commonest words, raised the refined models' held-out perplexity on three of the four real corpora
    (Reuters K = 20 +1.9%, NIPS papers K = 50 +0.7%, NIPS bag of words K = 20 +0.9%).

    Parameters
    ----------
    df, tf : ndarray of int, shape (N,)
        Each word's documents and tokens.
    n_docs : int
        The documents they were counted over.
    n : int
    """
    return np.sort(select_vocabulary(df, tf, n_docs, n).kept)


@dataclass(frozen=True)
class AnchorColumns:
    """Every word's row of C restricted to the anchor vocabulary's columns: the rectified block's rows for the
    words of the vocabulary, C's own rows for the others (what recovery solves against, see the module).

    Attributes
    ----------
    block : LowRankCooccurrence
        The rectified ``C_FF`` (n×n, in the vocabulary's order).
    words : ndarray of int, shape (n,)
        The vocabulary ``F``, sorted.
    other_rows : ndarray, shape (N − n, n)
        ``C_iF`` of the other words, in index order.
    n_words : int
        N.
    """

    block: LowRankCooccurrence
    words: np.ndarray
    other_rows: np.ndarray
    n_words: int

    def rows(self, index: np.ndarray) -> np.ndarray:
        """Rows ``index`` (global word indices) restricted to F (dense, len(index) × n); each row's scale is
        its own (recovery divides every row by its sum)."""
        index = np.asarray(index, dtype=np.int64)
        position = np.searchsorted(self.words, index)
        inside = (position < self.words.size) & (self.words[np.minimum(position, self.words.size - 1)] == index)
        out = np.empty((index.size, self.words.size))
        if inside.any():
            out[inside] = self.block.rows(position[inside])
        if (~inside).any():  # the other words' rows are stored in index order: position among them
            out[~inside] = self.other_rows[index[~inside] - position[~inside]]
        return out


def column_shares(columns: np.ndarray, row_sums: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """``ρ_k``: the share of each anchor's row of C that falls in the vocabulary's columns.

    Parameters
    ----------
    columns : ndarray, shape (N, n)
        C's columns of the vocabulary (any common scale with ``row_sums``).
    row_sums : ndarray, shape (N,)
        C's full row sums.
    anchors : ndarray of int, shape (K,)
        Global word indices.
    """
    inside = columns[anchors].sum(axis=1)
    return inside / np.where(row_sums[anchors] > 0, row_sums[anchors], 1.0)


def unrestricted_weights(weights: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """``p(z | i) ∝ ỹ_ik / ρ_k``, rows summing to 1 (see the module).

    Parameters
    ----------
    weights : ndarray, shape (N, K)
        ``ỹ``: the recovery weights against the restricted rows.
    shares : ndarray, shape (K,)
        ``ρ`` (:func:`column_shares`), positive.
    """
    y = weights / shares
    total = y.sum(axis=1, keepdims=True)
    return y / np.where(total > 0, total, 1.0)
