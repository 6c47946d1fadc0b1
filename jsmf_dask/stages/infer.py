"""Graph builder for document–topic inference: one task per Parquet row group, each writing its part."""

from __future__ import annotations

import dask
from dask.base import tokenize
import numpy as np
import pyarrow as pa

from jsmf_dask.io.fs import join
from jsmf_dask.io.parquet import Block, read_block, shard_name
from jsmf_dask.io.schema import doc_topics_schema
from jsmf_dask.io.scratch import write_table
from jsmf_dask.kernels.cooccurrence import count_matrix
from jsmf_dask.kernels.infer import document_topics

__all__ = ["block_counts", "doc_topic_tasks"]


def block_counts(table: pa.Table, n_words: int):
    """The documents × words count matrix (CSR) of a corpus table."""
    ids = table.column("word_ids").combine_chunks()
    cnt = table.column("counts").combine_chunks()
    return count_matrix(ids.offsets.to_numpy(), ids.flatten().to_numpy(), cnt.flatten().to_numpy(), n_words)


def _infer_block(block: Block, n_words: int, model: tuple[np.ndarray, np.ndarray], url: str) -> int:
    table = read_block(block, n_words)
    H = block_counts(table, n_words)
    B, alpha = model
    theta = document_topics(B, H, alpha)
    k = B.shape[1]
    out = pa.table(
        [table.column("doc_id"), pa.array(np.asarray(H.sum(axis=1)).ravel().astype(np.int64)),
         pa.FixedSizeListArray.from_arrays(pa.array(theta.ravel()), k)],
        schema=doc_topics_schema(k),
    )
    write_table(url, out)
    return out.num_rows


def doc_topic_tasks(blocks: list[Block], n_words: int, B: np.ndarray, out_dir: str,
                    alpha: np.ndarray) -> list[dask.delayed]:
    """One delayed task per block: infer its documents' topics (:func:`~jsmf_dask.kernels.infer.document_topics`
    under ``B`` and the model's document prior ``alpha``) and write ``out_dir/part-NNNNN.parquet``.

    Parts are numbered in block order, so reading the directory in name order
    gives the corpus's document order. Each returns its number of documents.
    """
    shared = dask.delayed((B, alpha), pure=True)
    token = tokenize(blocks, n_words, shared, out_dir)
    return [
        dask.delayed(_infer_block, pure=True)(block, n_words, shared, join(out_dir, shard_name(i)),
                                               dask_key_name=f"infer-{token}-{i}")
        for i, block in enumerate(blocks)
    ]
