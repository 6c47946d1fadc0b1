"""Files a task writes for another task or for the runner: arrays, sparse matrices, Parquet tables.

The stages' scratch state (``refine``'s per-block document state, ``cooccur``'s
block slices, ``ingest``'s raw blocks) and their per-block outputs
(``doc_topics`` parts) go through these, so the stages themselves open no
file. Every path is an fsspec URL; a rewrite of the same file by a task that
runs twice writes the same bytes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import scipy.sparse as sps

from jsmf_dask.io.fs import get_fs
from jsmf_dask.io.parquet import write_parquet

__all__ = ["save_array", "load_array", "save_sparse", "load_sparse", "write_table"]


def save_array(url: str, values: np.ndarray) -> None:
    """``values`` as one ``.npy`` file."""
    fs, path = get_fs(url)
    with fs.open(path, "wb") as f:
        np.save(f, values)


def load_array(url: str) -> np.ndarray:
    """The array :func:`save_array` wrote (no pickles)."""
    fs, path = get_fs(url)
    with fs.open(path, "rb") as f:
        return np.load(f, allow_pickle=False)


def save_sparse(url: str, m: sps.csr_array) -> None:
    """A CSR matrix as one ``.npz`` file of its buffers."""
    fs, path = get_fs(url)
    with fs.open(path, "wb") as f:
        np.savez(f, data=m.data, indices=m.indices, indptr=m.indptr, shape=np.array(m.shape))


def load_sparse(url: str) -> sps.csr_array:
    """The matrix :func:`save_sparse` wrote."""
    fs, path = get_fs(url)
    with fs.open(path, "rb") as f:
        z = np.load(f, allow_pickle=False)
        return sps.csr_array((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))


def write_table(url: str, table: pa.Table) -> None:
    """``table`` as one Parquet file (:func:`~jsmf_dask.io.parquet.write_parquet`: pages checksummed)."""
    write_parquet(url, table)
