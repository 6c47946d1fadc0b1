"""Graph builder that writes a documents × words count matrix as corpus shards: one task per block of rows."""

from __future__ import annotations

import dask
import numpy as np
import pyarrow as pa
import scipy.sparse as sps
from dask.base import tokenize

from jsmf_dask.exceptions import InputError
from jsmf_dask.io.fs import join
from jsmf_dask.io.parquet import shard_name, write_shard

__all__ = ["count_rows", "matrix_shard_tasks"]


def count_rows(block, first_row: int) -> sps.csr_array:
    """A block of rows of a count matrix as CSR ``int64``, checked: finite, non-negative, whole numbers.

    Raises
    ------
    InputError
        Naming the first offending row (``first_row`` + its index in the block) and column.
    """
    X = sps.csr_array(block) if sps.issparse(block) else sps.csr_array(np.asarray(block))
    if X.ndim != 2:
        raise InputError(f"X: expected a 2-D documents x words matrix, got a block of {X.ndim} dimensions")
    X.sum_duplicates()
    values = X.data
    bad = ~np.isfinite(values) if values.dtype.kind == "f" else np.zeros(values.shape, bool)
    what = "finite"
    if not bad.any():
        bad, what = values < 0, "non-negative"
    if not bad.any() and values.dtype.kind == "f":
        bad, what = values != np.round(values), "whole numbers (word counts)"
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        row = int(np.searchsorted(X.indptr, at, side="right") - 1)
        raise InputError(f"X: row {first_row + row}, column {int(X.indices[at])}: {values[at].item()!r}; "
                         f"counts must be {what}")
    X = sps.csr_array(X, dtype=np.int64)
    X.eliminate_zeros()
    return X


def _write_rows(block, first_row: int, n_words: int, url: str, row_group_size: int) -> tuple:
    X = count_rows(block, first_row)
    if X.shape[1] != n_words:
        raise InputError(f"X: a block of rows has {X.shape[1]} columns; expected {n_words}")
    if X.data.size and X.data.max() > np.iinfo(np.int32).max:
        raise InputError(f"X: a count above {np.iinfo(np.int32).max} in rows {first_row}-{first_row + X.shape[0] - 1}")
    offsets = pa.array(X.indptr.astype(np.int32))
    table = pa.table({
        "doc_id": pa.array([str(first_row + i) for i in range(X.shape[0])], pa.string()),
        "word_ids": pa.ListArray.from_arrays(offsets, pa.array(X.indices.astype(np.int32))),
        "counts": pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(np.int32))),
    })
    write_shard(table, url, n_words=n_words, row_group_size=row_group_size)
    df = np.bincount(X.indices, minlength=n_words).astype(np.int64)
    tf = np.bincount(X.indices, weights=X.data, minlength=n_words).astype(np.int64)
    return X.shape[0], df, tf


def matrix_shard_tasks(blocks: list, first_rows: list[int], n_words: int, out_dir: str,
                       row_group_size: int) -> list[dask.delayed]:
    """One delayed task per block of rows: check it (:func:`count_rows`), write ``out_dir/part-NNNNN.parquet``
    (document ids are the global row numbers ``"0"``, ``"1"``, …) and return ``(n_docs, df, tf)``.

    ``blocks`` may be in-memory arrays (numpy or scipy sparse) or delayed
    blocks of a Dask array: then only one block is in a worker's memory at a time.
    """
    token = tokenize(first_rows, n_words, out_dir, row_group_size)
    return [
        dask.delayed(_write_rows, pure=True)(block, first, n_words, join(out_dir, shard_name(i)), row_group_size,
                                             dask_key_name=f"matrix-shard-{token}-{i}")
        for i, (block, first) in enumerate(zip(blocks, first_rows))
    ]
