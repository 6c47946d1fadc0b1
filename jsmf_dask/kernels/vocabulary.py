"""Vocabulary curation by tf·idf, as in the paper's experiments.

The authors' ``readBows.m`` ranks words by ``tf * log(floor(M / df))`` (so a
word in more than half of the documents scores 0) and keeps the top N.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["VocabularySelection", "select_vocabulary", "tfidf_scores"]


def tfidf_scores(df: np.ndarray, tf: np.ndarray, n_docs: int) -> np.ndarray:
    """``tf * log(floor(M / df))``, and 0 for words with ``df == 0``.

    Parameters
    ----------
    df, tf : ndarray of int, shape (W,)
        Document and term frequencies.
    n_docs : int
        M, the number of documents the frequencies were counted over.

    Returns
    -------
    ndarray of float64, shape (W,)
    """
    df = np.asarray(df, dtype=np.float64)
    tf = np.asarray(tf, dtype=np.float64)
    scores = np.zeros(df.shape, dtype=np.float64)
    present = df > 0
    scores[present] = tf[present] * np.log(np.floor(n_docs / df[present]))
    return scores


@dataclass(frozen=True)
class VocabularySelection:
    """Result of :func:`select_vocabulary`.

    Attributes
    ----------
    kept : ndarray of int64
        Indices of the kept words, best score first (this order becomes word_id).
    n_stopwords : int
        Words present in the corpus and removed as stop words.
    n_absent : int
        Words with no occurrence, removed.
    n_beyond_size : int
        Words removed because they ranked below the top ``vocab_size``.
    """

    kept: np.ndarray
    n_stopwords: int
    n_absent: int
    n_beyond_size: int


def select_vocabulary(
    df: np.ndarray,
    tf: np.ndarray,
    n_docs: int,
    vocab_size: int | None,
    *,
    is_stopword: np.ndarray | None = None,
    tiebreak: np.ndarray | None = None,
) -> VocabularySelection:
    """Rank words by tf·idf and keep the top ``vocab_size``.

    Stop words and absent words (``df == 0``) are removed first. Ties in score
    are broken by higher tf, then by ``tiebreak`` (for example the word's rank
    in lexical order), so the result is deterministic.

    Parameters
    ----------
    df, tf : ndarray of int, shape (W,)
        Document and term frequencies.
    n_docs : int
        M, the number of documents.
    vocab_size : int or None
        How many words to keep; None keeps every eligible word.
    is_stopword : ndarray of bool, shape (W,), optional
    tiebreak : ndarray, shape (W,), optional
        Last sort key; defaults to the index.

    Returns
    -------
    VocabularySelection
    """
    df = np.asarray(df)
    tf = np.asarray(tf)
    w = df.shape[0]
    stop = np.zeros(w, dtype=bool) if is_stopword is None else np.asarray(is_stopword, dtype=bool)
    absent = df <= 0
    eligible = ~stop & ~absent
    scores = tfidf_scores(df, tf, n_docs)
    key3 = np.arange(w) if tiebreak is None else np.asarray(tiebreak)
    idx = np.flatnonzero(eligible)
    order = np.lexsort((key3[idx], -tf[idx], -scores[idx]))
    ranked = idx[order]
    kept = ranked if vocab_size is None else ranked[:vocab_size]
    return VocabularySelection(
        kept=kept.astype(np.int64),
        n_stopwords=int(np.count_nonzero(stop & ~absent)),
        n_absent=int(np.count_nonzero(absent)),
        n_beyond_size=int(ranked.size - kept.size),
    )
