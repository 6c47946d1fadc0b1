"""Document completion (the field's perplexity) of held-out documents, as pure numpy.

* :func:`split_tokens`: each held-out document's tokens are put in a random
  order seeded by its id's hash; the first half is observed, the rest scored.
* :func:`completion_log_likelihood`: ``θ`` inferred on the observed half
  under fixed topics ``B`` (the VB E-step with ``B`` as the topic–word
  matrix and the model's document prior ``α``), then
  ``Σ log Σ_k θ_k B_wk`` over the scored tokens.

Which documents are held out is :mod:`jsmf_dask.kernels.doc_split`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels.doc_split import splitmix64
from jsmf_dask.kernels.variational import e_step

__all__ = ["split_tokens", "document_completion", "completion_log_likelihood", "PROBABILITY_FLOOR"]

PROBABILITY_FLOOR = 1e-12  # a scored word no topic can produce (it never occurred in training) scores this


def split_tokens(X: sps.csr_array, hashes: np.ndarray) -> tuple[sps.csr_array, sps.csr_array]:
    """Split each document's tokens into an observed half (``⌊n/2⌋`` tokens) and a scored half.

    The order of a document's tokens is drawn from its hash alone, so the
    split is the same whichever block the document is read in.
    """
    X = sps.csr_array(X)
    X.sort_indices()
    n_docs, n_words = X.shape
    counts = X.data.astype(np.int64)
    tok_word = np.repeat(X.indices.astype(np.int64), counts)
    tok_doc = np.repeat(np.repeat(np.arange(n_docs), np.diff(X.indptr)), counts)
    lengths = np.bincount(tok_doc, minlength=n_docs)
    start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    position = np.arange(tok_doc.size) - start[tok_doc]
    with np.errstate(over="ignore"):
        key = splitmix64(hashes[tok_doc] + splitmix64(position.astype(np.uint64) + np.uint64(1)))
    order = np.lexsort((key, tok_doc))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size) - start[tok_doc[order]]
    observed = rank < (lengths // 2)[tok_doc]

    def matrix(sel: np.ndarray) -> sps.csr_array:
        m = sps.coo_array((np.ones(int(sel.sum())), (tok_doc[sel], tok_word[sel])), shape=(n_docs, n_words))
        return sps.csr_array(m)

    return matrix(observed), matrix(~observed)


def document_completion(observed, scored, B: np.ndarray, alpha: np.ndarray, *,
                        max_iter: int = 200, tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray, int]:
    """Each document's log likelihood of its scored tokens given ``θ`` inferred from its observed ones.

    Parameters
    ----------
    observed, scored : sparse matrix, shape (D, N)
        Token counts of each document's two halves (:func:`split_tokens`).
    B : ndarray, shape (N, K)
        Topics (columns sum to 1).
    alpha : ndarray, shape (K,)
        The document–topic prior used to infer ``θ``.

    Returns
    -------
    log_likelihood : ndarray, shape (D,)
        ``Σ_w scored_dw log max(θ_d · B_w, PROBABILITY_FLOOR)`` per document.
    n_tokens : ndarray, shape (D,)
        Scored tokens per document.
    n_floored : int
        Scored tokens whose probability was below the floor (words no topic produces).
    """
    gamma = e_step(observed, B, alpha, max_iter=max_iter, tol=tol).gamma
    theta = gamma / gamma.sum(axis=1, keepdims=True)
    S = sps.coo_array(scored)
    p = np.einsum("ij,ij->i", theta[S.row], B[S.col])
    floored = p < PROBABILITY_FLOOR
    n_docs = scored.shape[0]
    ll = np.bincount(S.row, weights=S.data * np.log(np.maximum(p, PROBABILITY_FLOOR)), minlength=n_docs)
    n_tok = np.bincount(S.row, weights=S.data, minlength=n_docs)
    return ll, n_tok, int(S.data[floored].sum())


def completion_log_likelihood(observed, scored, B: np.ndarray, alpha: np.ndarray, *,
                              max_iter: int = 200, tol: float = 1e-6) -> tuple[float, int, int]:
    """Log likelihood of the scored tokens given ``θ`` inferred from the observed ones, summed over documents.

    Returns
    -------
    log_likelihood : float
        ``Σ_d Σ_w scored_dw log max(θ_d · B_w, PROBABILITY_FLOOR)`` (:func:`document_completion`'s sum).
    n_tokens : int
        Scored tokens.
    n_floored : int
        Scored tokens whose probability was below the floor (words no topic produces).
    """
    ll, n_tok, n_floored = document_completion(observed, scored, B, alpha, max_iter=max_iter, tol=tol)
    return float(ll.sum()), int(round(n_tok.sum())), n_floored
