"""The unbiased co-occurrence estimator of the paper (eq. 1), block by block.

For a document m with count vector ``h`` (``H_m`` in the paper) and
``n = sum(h) >= 2`` tokens, the contribution is

    C_m = (h hᵀ − diag h) / (n (n − 1)),

whose entries sum to 1. The corpus ``C`` is ``Σ_m w_m C_m / Σ_m w_m``, each
document weighed by :data:`~jsmf_dask.parameters.WEIGHTINGS`: ``'documents'`` (``w_m = 1``, the
paper's eq. 1) or ``'tokens'`` (``w_m = n_m``). Under LDA every ``C_m`` has
the expectation ``B A_m Bᵀ`` (``A_m`` the joint distribution of the topics of
two distinct tokens of m), so either weighing gives ``C = B A Bᵀ`` with the
same topics ``B``; they differ in ``A`` (each document's pairs counted once,
or by its tokens) and in which documents ``C`` listens to. With ``'tokens'``
the row sums of ``C`` are exactly the corpus's word frequencies (``Σ_m h_m /
Σ_m n_m``) and a document weighs what its tokens weigh in the likelihood
``refine``, ``evaluate`` and every sampler see; with ``'documents'`` a corpus
of a few very long documents among many short ones (change logs, user
ratings) gets a ``C`` in which the long ones are a sliver, and anchor words
drawn from them make topics the spectral model gives almost no weight (the
benchmarks README, session 51).

With ``H̃ = diag(√(w_m / (n_m(n_m−1)))) H`` a block of documents contributes
``H̃ᵀH̃`` off the diagonal and, on the diagonal,
``Σ_m w_m h_i (h_i − 1) / (n_m (n_m − 1))``, computed exactly here (forming it as
``(H̃ᵀH̃)_ii − d_i`` would cancel to rounding noise and leave tiny negative
entries). The corpus ``C`` is the sum over blocks divided by its entry sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from jsmf_dask.kernels._cooccurrence_loop import accumulate_tile
from jsmf_dask.parameters import WEIGHTINGS

__all__ = [
    "document_weights",
    "count_matrix",
    "BlockTotals",
    "block_contribution",
    "tile_products",
    "mirror_upper",
    "gram_product",
]


def document_weights(n_tokens: np.ndarray, weighting: str) -> np.ndarray:
    """Each document's weight ``w_m`` in ``C`` (float64) under ``weighting`` (one of
    :data:`~jsmf_dask.parameters.WEIGHTINGS`)."""
    if weighting == "documents":
        return np.ones(len(n_tokens))
    if weighting == "tokens":
        return np.asarray(n_tokens, dtype=np.float64)
    raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")


def count_matrix(
    offsets: np.ndarray, word_ids: np.ndarray, counts: np.ndarray, n_words: int
) -> sp.csr_array:
    """The documents × words count matrix ``H`` of a block, from list-column buffers.

    Parameters
    ----------
    offsets : ndarray of int, shape (n_docs + 1,)
        Start of each document in ``word_ids``/``counts``.
    word_ids, counts : ndarray of int32
        Flattened, sorted ids and positive counts (already validated).
    n_words : int
        N, the number of columns.
    """
    n_docs = offsets.shape[0] - 1
    indptr = np.asarray(offsets, dtype=np.int64) - int(offsets[0])
    return sp.csr_array(
        (np.asarray(counts, dtype=np.int64), np.asarray(word_ids, dtype=np.int32), indptr),
        shape=(n_docs, n_words),
    )


@dataclass
class BlockTotals:
    """Per-word sums and counts of one or more blocks of documents (they add up over blocks).

    Attributes
    ----------
    diagonal : ndarray of float64, shape (N,)
        ``Σ_m w_m h_i (h_i − 1) / (n_m (n_m − 1))``.
    doc_freq : ndarray of int64, shape (N,)
        Counted documents containing each word (``D1``).
    entry_sum : float
        Sum of the unnormalised contribution: ``Σ_m w_m`` over the counted documents (their number, or their
        tokens), up to rounding.
    n_docs : int
        Documents counted (``n_m >= 2``).
    n_short : int
        Documents skipped because they have fewer than 2 tokens.
    n_tokens : int
        Tokens of the counted documents.
    squares : ndarray of float64, shape (N,)
        ``Σ_m H̃_mi²``, the diagonal of ``H̃ᵀH̃`` (so that ``C`` times a vector is
        ``H̃ᵀ(H̃x) + (diagonal − squares)·x`` without forming ``C``).
    n_validation : int
        Validation documents left out (counted by the caller that filtered them).
    """

    diagonal: np.ndarray
    doc_freq: np.ndarray
    entry_sum: float
    n_docs: int
    n_short: int
    n_tokens: int
    squares: np.ndarray
    n_validation: int = 0

    def __add__(self, other: BlockTotals) -> BlockTotals:
        return BlockTotals(
            self.diagonal + other.diagonal,
            self.doc_freq + other.doc_freq,
            self.entry_sum + other.entry_sum,
            self.n_docs + other.n_docs,
            self.n_short + other.n_short,
            self.n_tokens + other.n_tokens,
            self.squares + other.squares,
            self.n_validation + other.n_validation,
        )


def block_contribution(H: sp.csr_array, edges: np.ndarray, weighting: str = "documents",
                       ) -> tuple[list[sp.csr_array], BlockTotals]:
    """Scale a block's counts to ``H̃`` and split it by word block.

    Parameters
    ----------
    H : scipy.sparse.csr_array, shape (n_docs, N)
        Integer counts (``count_matrix``).
    edges : ndarray of int, shape (n_blocks + 1,)
        Word-block boundaries, ``edges[0] == 0`` and ``edges[-1] == N``.
    weighting : {'documents', 'tokens'}, default='documents'
        Each document's weight (:func:`document_weights`).

    Returns
    -------
    slices : list of scipy.sparse.csr_array
        ``H̃[:, I]`` for each word block ``I`` (rows are the counted documents).
    totals : BlockTotals
    """
    n = np.asarray(H.sum(axis=1)).ravel().astype(np.int64)
    used = n >= 2
    Hu = H[np.flatnonzero(used)] if not used.all() else H
    nu = n[used].astype(np.float64)
    pair_count = nu * (nu - 1.0) / document_weights(nu, weighting)  # n(n−1)/w
    # H̃ = diag(√(w/(n(n−1)))) H
    row_of = np.repeat(np.arange(Hu.shape[0]), np.diff(Hu.indptr))
    h = Hu.data.astype(np.float64)
    scaled = h / np.sqrt(pair_count)[row_of]
    Ht = sp.csr_array((scaled, Hu.indices, Hu.indptr), shape=Hu.shape)
    n_words = H.shape[1]
    diagonal = np.bincount(
        Hu.indices, weights=h * (h - 1.0) / pair_count[row_of], minlength=n_words
    )
    doc_freq = np.bincount(Hu.indices, minlength=n_words).astype(np.int64)
    row_sums = np.asarray(Ht.sum(axis=1)).ravel()
    entry_sum = float(np.dot(row_sums, row_sums) - np.dot(scaled, scaled) + diagonal.sum())
    Hc = Ht.tocsc()
    slices = [
        sp.csr_array(Hc[:, int(edges[b]) : int(edges[b + 1])]) for b in range(len(edges) - 1)
    ]
    return slices, BlockTotals(
        diagonal=diagonal,
        doc_freq=doc_freq,
        entry_sum=entry_sum,
        n_docs=int(used.sum()),
        n_short=int((~used).sum()),
        n_tokens=int(n[used].sum()),
        squares=np.bincount(Hu.indices, weights=scaled * scaled, minlength=n_words),
    )


def tile_products(
    left: sp.csr_array, right: sp.csr_array, *, codoc: bool = True,
    out: tuple[np.ndarray, np.ndarray | None] | None = None, upper: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``H̃[:, I]ᵀ H̃[:, J]`` and the co-document counts for one tile (``upper``: a diagonal tile, ``left`` =
    ``right``, of which only the entries on and above the diagonal are computed).

    Computed document by document straight into the dense tile (the compiled
    :func:`~jsmf_dask.kernels._cooccurrence_loop.accumulate_tile`): on 100k
    documents of 180 distinct words and N = 5,000, scipy's sparse product with
    its output-size pass and densification took 2.6 times as long.

    Parameters
    ----------
    left, right : scipy.sparse.csr_array
        ``H̃[:, I]`` and ``H̃[:, J]`` over the same documents.
    codoc : bool, default=True
        Also return ``1[H̃[:, I] > 0]ᵀ 1[H̃[:, J] > 0]`` (int64).
    out : (ndarray, ndarray or None), optional
        Tiles to add to (float64 ``(|I|, |J|)`` and, with ``codoc``, int64) instead of new zeros.

    Returns
    -------
    cooc : ndarray of float64, shape (|I|, |J|)
    codoc_counts : ndarray of int64 or None
    """
    if out is None:
        out = (np.zeros((left.shape[1], right.shape[1])),
               np.zeros((left.shape[1], right.shape[1]), dtype=np.int64) if codoc else None)
    cooc, counts = out
    lt, right = sp.csr_array(left).T.tocsr(), sp.csr_array(right)
    right.sort_indices()
    accumulate_tile(lt.indptr.astype(np.int64), lt.indices.astype(np.int64), lt.data.astype(np.float64),
                    right.indptr.astype(np.int64), right.indices.astype(np.int64), right.data.astype(np.float64),
                    cooc, counts if codoc else np.zeros((1, 1), dtype=np.int64), codoc, upper)
    return cooc, (counts if codoc else None)


def mirror_upper(tile: np.ndarray, *, block: int = 256) -> np.ndarray:
    """Copy the strict upper triangle of the square ``tile`` onto its lower one, in place (exact symmetry).

    By ``block × block`` squares, each copied from its transposed twin, so that
    both reads and writes stay within a few cache lines: 6 ms for a 2048² tile,
    where NumPy's fancy indexing by ``tril_indices`` took 21 ms.
    """
    n = tile.shape[0]
    for i in range(0, n, block):
        i1 = min(i + block, n)
        for j in range(0, i, block):
            tile[i:i1, j : j + block] = tile[j : j + block, i:i1].T
        square = tile[i:i1, i:i1]
        below = np.tril_indices(i1 - i, -1)
        square[below] = square.T[below]
    return tile


def gram_product(Ht: sp.csr_array, V: np.ndarray) -> np.ndarray:
    """``H̃ᵀ (H̃ V)`` for a block's scaled counts (the off-diagonal part of ``C V``, unnormalised)."""
    return np.asarray(Ht.T @ (Ht @ V))
