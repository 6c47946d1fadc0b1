"""``ingest_matrix``: a documents × words count matrix (numpy, scipy sparse or Dask) → ``<root>/corpus``.

The estimator's way into the stages (:meth:`jsmf_dask.RectifiedAnchorWords.fit`):
the matrix is written as the corpus ``ingest`` would write from raw input, without
curation (every column is a word, every row a document, ids ``"0"``, ``"1"``, …),
one shard per block of rows, so a Dask array larger than memory streams
through the workers one block at a time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import scipy.sparse as sps

from jsmf_dask import _progress, config
from jsmf_dask.exceptions import InputError
from jsmf_dask.io.fs import staged_output
from jsmf_dask.io.parquet import corpus_dir, row_group_size_for, write_vocabulary
from jsmf_dask.stages.matrix import count_rows, matrix_shard_tasks

__all__ = ["MatrixCorpus", "ingest_matrix", "is_dask_array", "matrix_words"]


@dataclass(frozen=True)
class MatrixCorpus:
    """What :func:`ingest_matrix` wrote: documents, words, tokens, each word's document and term frequency."""

    path: str
    n_docs: int
    n_words: int
    n_tokens: int
    doc_freq: np.ndarray
    term_freq: np.ndarray


def is_dask_array(X) -> bool:
    """Whether ``X`` is a :class:`dask.array.Array` (without importing dask.array for other inputs)."""
    return type(X).__module__.startswith("dask.array")


def matrix_words(n_words: int) -> list[str]:
    """The words of a matrix without feature names: ``w0``, ``w1``, … (zero-padded to one width)."""
    width = len(str(max(n_words - 1, 0)))
    return [f"w{i:0{width}d}" for i in range(n_words)]


def ingest_matrix(root: str, X, *, words: list[str] | None = None, rows_per_shard: int | None = None,
                  overwrite: bool = False) -> MatrixCorpus:
    """Write the count matrix ``X`` as ``<root>/corpus``.

    Parameters
    ----------
    root : str
        Run root (local path or fsspec URL; created if missing).
    X : ndarray, sparse matrix or dask.array.Array, shape (n_docs, n_words)
        Word counts: finite, non-negative whole numbers (any dtype). A Dask
        array is written one block of rows per task (its column chunks are
        merged first); in-memory input in blocks of ``rows_per_shard`` rows.
    words : list of str, optional
        The columns' words (default :func:`matrix_words`).
    rows_per_shard : int, optional
        Rows per shard of in-memory input (``jsmf.ingest.docs-per-shard``).
    overwrite : bool, default=False
        Replace an existing corpus.

    Returns
    -------
    MatrixCorpus

    Raises
    ------
    InputError
        If a value is not a count (naming its row and column) or ``words`` does not match the columns.
    """
    root = os.fspath(root)
    if len(getattr(X, "shape", ())) != 2:
        raise InputError(f"X: expected a 2-D documents x words matrix; got shape {getattr(X, 'shape', None)}")
    n_docs, n_words = (int(n) for n in X.shape)
    words = matrix_words(n_words) if words is None else [str(w) for w in words]
    if len(words) != n_words or len(set(words)) != n_words:
        raise InputError(f"X: {n_words} columns need {n_words} distinct words; got {len(words)} "
                         f"({len(set(words))} distinct)")
    blocks, first_rows = _row_blocks(X, rows_per_shard or int(config.get("ingest.docs-per-shard")))
    row_group_size = config.get("ingest.row-group-size") or row_group_size_for(n_docs)
    with staged_output(corpus_dir(root), root=root, overwrite=overwrite) as tmp:  # creates the root too
        parts = _progress.compute(*matrix_shard_tasks(blocks, first_rows, n_words, tmp, row_group_size))
        df = np.sum([p[1] for p in parts], axis=0) if parts else np.zeros(n_words, np.int64)
        tf = np.sum([p[2] for p in parts], axis=0) if parts else np.zeros(n_words, np.int64)
        write_vocabulary(pa.table({"word_id": np.arange(n_words, dtype=np.int32), "word": pa.array(words, pa.string()),
                                   "df": df.astype(np.int64), "tf": tf.astype(np.int64)}), tmp)
    return MatrixCorpus(corpus_dir(root), sum(p[0] for p in parts), n_words, int(tf.sum()), df, tf)


def _row_blocks(X, rows: int) -> tuple[list, list[int]]:
    """``X`` cut into blocks of whole rows (delayed blocks of a Dask array), with each block's first row."""
    if is_dask_array(X):
        X = X.rechunk({1: -1}) if X.numblocks[1] > 1 else X
        starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(int).tolist()
        return list(X.to_delayed().ravel()), starts
    if not sps.issparse(X):
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise InputError(f"X: expected numbers (word counts); got dtype {X.dtype}")
    else:
        X = sps.csr_array(X)
    starts = list(range(0, X.shape[0], max(1, rows)))
    # in memory already: check the whole matrix here, so a bad value is reported before any task runs
    count_rows(X, 0)
    return [X[a:a + rows] for a in starts], starts
