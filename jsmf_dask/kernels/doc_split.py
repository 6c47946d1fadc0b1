"""Which documents a stage trains on, by a hash of each document's id alone, as pure numpy.

* :func:`heldout_mask`: a document is held out when a hash of its ``doc_id``
  falls below the fraction, so the split depends on the id alone: appending
  documents never moves one across it, and every stage agrees on it.
* :func:`validation_mask`: the documents a fit scores to decide when to stop,
  from the other end of the same hash (never the held-out ones).
* :func:`sample_mask`, :func:`doc_groups`: samples and groups of documents by
  the same hash, remixed (independent of the splits).

How held-out documents are scored is :mod:`jsmf_dask.kernels.heldout`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

__all__ = ["DocumentSplit", "doc_hashes", "heldout_mask", "validation_mask", "sample_mask", "doc_groups",
           "splitmix64"]

_PERSON = b"jsmf-heldout"


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
    return _position(splitmix64(hashes)) < fraction


#: Remixes a document's hash before :func:`doc_groups` takes it modulo the groups, so that the groups are
#: independent of :func:`sample_mask`'s sample (which reads the top bits of the hash mixed once).
_GROUP_SALT = np.uint64(0x6A09E667F3BCC909)


def doc_groups(hashes: np.ndarray, n_groups: int) -> np.ndarray:
    """Each document's group, 0 ≤ g < ``n_groups``, by id alone (:func:`doc_hashes`), about equal in size and
    independent of the splits and of :func:`sample_mask`: the same whichever block a document is read in."""
    if n_groups <= 1:
        return np.zeros(len(hashes), dtype=np.int64)
    return (splitmix64(np.asarray(hashes, dtype=np.uint64) ^ _GROUP_SALT) % np.uint64(n_groups)).astype(np.int64)


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


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic)."""
    x = x.copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x
