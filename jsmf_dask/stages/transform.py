"""Graph builder of ``transform``: topic weights of new documents, one task per block of raw input documents."""

from __future__ import annotations

from dataclasses import dataclass

import dask
import numpy as np
import pyarrow as pa
import scipy.sparse as sps
from dask.base import tokenize

from jsmf_dask.io.fs import join
from jsmf_dask.io.parquet import shard_name
from jsmf_dask.io.schema import doc_topics_schema
from jsmf_dask.io.parquet import read_parquet
from jsmf_dask.io.scratch import write_table
from jsmf_dask.kernels.infer import document_topics
from jsmf_dask.stages.ingest import TermMapping, mapped_entries

__all__ = ["TransformedBlock", "transform_tasks"]


@dataclass(frozen=True)
class TransformedBlock:
    """What one task wrote: documents, tokens in and out of the vocabulary, and the documents with none in it."""

    n_docs: int
    n_tokens: int
    n_unknown: int
    empty_doc_ids: tuple[str, ...]


def _transform_block(raw_url: str, mapping: TermMapping, model: tuple[np.ndarray, np.ndarray],
                     out_url: str) -> TransformedBlock:
    table = read_parquet(raw_url)
    parent, ids, counts = mapped_entries(table, mapping)
    known = ids >= 0
    n_rows = table.num_rows
    kept = np.bincount(parent[known], weights=counts[known], minlength=n_rows).astype(np.int64)
    unknown = np.bincount(parent[~known], weights=counts[~known], minlength=n_rows).astype(np.int64)
    X = sps.csr_array((counts[known], (parent[known], ids[known])), shape=(n_rows, mapping.n_words))
    B, alpha = model
    theta = document_topics(B, X, alpha)  # a document without a known token: the prior's mean
    out = pa.table([table.column("doc_id"), pa.array(kept), pa.array(unknown),
                    pa.FixedSizeListArray.from_arrays(pa.array(theta.ravel()), B.shape[1])],
                   schema=doc_topics_schema(B.shape[1], new_documents=True))
    write_table(out_url, out)
    empty = table.column("doc_id").filter(pa.array(kept == 0)).to_pylist()
    return TransformedBlock(n_rows, int(kept.sum()), int(unknown.sum()), tuple(empty))


def transform_tasks(raw_files: list[str], mapping: TermMapping, B: np.ndarray, alpha: np.ndarray,
                    out_dir: str) -> list[dask.delayed]:
    """One delayed task per raw block (:func:`~jsmf_dask.stages.ingest.stage_raw_blocks`' files): map its terms
    to the model's words (``mapping``; the others are counted as unknown), infer each document's topics under
    ``B`` (and ``alpha``: :func:`~jsmf_dask.kernels.infer.document_topics`) and write
    ``out_dir/part-NNNNN.parquet``. Each returns a :class:`TransformedBlock`."""
    shared = dask.delayed((B, alpha), pure=True)
    token = tokenize(raw_files, mapping, shared, out_dir)
    return [dask.delayed(_transform_block, pure=True)(url, mapping, shared, join(out_dir, shard_name(i)),
                                                       dask_key_name=f"transform-{token}-{i}")
            for i, url in enumerate(raw_files)]
