"""Held-out documents and document completion (the field's perplexity), as pure numpy.

* :func:`heldout_mask`: a document is held out when a hash of its ``doc_id``
  falls below the fraction, so the split depends on the id alone: appending
  documents never moves one across it, and every stage agrees on it.
* :func:`validation_mask`: the documents a fit scores to decide when to stop,
  from the other end of the same hash (never the held-out ones).
* :func:`split_tokens`: each held-out document's tokens are put in a random
  order seeded by the same hash; the first half is observed, the rest scored.
* :func:`completion_log_likelihood`: ``θ`` inferred on the observed half
  under fixed topics ``B`` (the VB E-step with ``B`` as the topic–word
  matrix and the model's document prior ``α``), then
  ``Σ log Σ_k θ_k B_wk`` over the scored tokens.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sps

from jsmf_dask.kernels.variational import e_step

__all__ = ["DocumentSplit", "doc_hashes", "heldout_mask", "validation_mask", "sample_mask", "doc_groups", "split_tokens", "document_completion", "completion_log_likelihood", "PROBABILITY_FLOOR"]

_PERSON = b"jsmf-heldout"
PROBABILITY_FLOOR = 1e-12  # a scored word no topic can produce (it never occurred in training) scores this


def doc_hashes(doc_ids) -> np.ndarray:
    """64-bit hashes of document ids (blake2b, personalised for the split), as uint64."""
    ids = doc_ids.to_pylist() if hasattr(doc_ids, "to_pylist") else list(doc_ids)
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8, person=_PERSON).digest(), "little")
         for s in ids),
        dtype=np.uint64, count=len(ids),
    )


def _position(hashes: np.ndarray) -> np.ndarray:
    """Document hashes as numbers in [0, 1) (their top 53 bits)."""
    return (hashes >> np.uint64(11)).astype(np.float64) * 2.0**-53


def heldout_mask(doc_ids, fraction: float) -> np.ndarray:
    """True for the documents held out: those whose hash, as a number in [0, 1), is below ``fraction``."""
    return DocumentSplit(heldout=fraction).masks(doc_ids)[0]


def validation_mask(doc_ids, fraction: float) -> np.ndarray:
    """True for validation documents: those whose hash, as a number in [0, 1), is at or above ``1 − fraction``.

    The same hash as :func:`heldout_mask` from the other end of [0, 1): the two
    sets are disjoint whenever the two fractions sum to less than 1, so the
    documents a fit uses to choose when to stop are never the ones it is
    evaluated on.
    """
    return DocumentSplit(validation=fraction).masks(doc_ids)[1]


def sample_mask(hashes: np.ndarray, fraction: float) -> np.ndarray:
    """True for a sample of about ``fraction`` of the documents of ``hashes`` (:func:`doc_hashes`), by id
    alone and independent of the held-out and validation splits (the same hash, remixed)."""
    if fraction >= 1:
        return np.ones(len(hashes), dtype=bool)
    return _position(_mix(hashes)) < fraction


#: Remixes a document's hash before :func:`doc_groups` takes it modulo the groups, so that the groups are
#: independent of :func:`sample_mask`'s sample (which reads the top bits of the hash mixed once).
_GROUP_SALT = np.uint64(0x6A09E667F3BCC909)


def doc_groups(hashes: np.ndarray, n_groups: int) -> np.ndarray:
    """Each document's group, 0 ≤ g < ``n_groups``, by id alone (:func:`doc_hashes`), about equal in size and
    independent of the splits and of :func:`sample_mask`: the same whichever block a document is read in."""
    if n_groups <= 1:
        return np.zeros(len(hashes), dtype=np.int64)
    return (_mix(np.asarray(hashes, dtype=np.uint64) ^ _GROUP_SALT) % np.uint64(n_groups)).astype(np.int64)


@dataclass(frozen=True)
class DocumentSplit:
    """Which documents a stage leaves out of training: held-out (evaluation) and validation fractions."""

    heldout: float = 0.0
    validation: float = 0.0

    def masks(self, doc_ids=None, *, hashes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(held_out, validation)`` boolean masks (disjoint) of ``doc_ids``, or of their ``hashes``
        (:func:`doc_hashes`) when the caller has them already."""
        hashes = doc_hashes(doc_ids) if hashes is None else hashes
        position = _position(hashes)
        held = position < self.heldout if self.heldout > 0 else np.zeros(len(hashes), dtype=bool)
        valid = position >= 1.0 - self.validation if self.validation > 0 else np.zeros(len(hashes), dtype=bool)
        return held, valid

    def training(self, doc_ids) -> np.ndarray:
        """True for the documents that are neither held out nor validation."""
        held, valid = self.masks(doc_ids)
        return ~(held | valid)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic)."""
    x = x.copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


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
        key = _mix(hashes[tok_doc] + _mix(position.astype(np.uint64) + np.uint64(1)))
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
