"""Graph builders for ingest: raw partitions → staged raw blocks → curated shards.

Two passes over the input, both Dask bags with one element per partition or
block, so memory per task is bounded by the block size:

1. :func:`stage_raw_blocks` reads each partition, writes its raw blocks to a
   scratch directory and returns their term statistics (df, tf) and doc-id
   hashes; :func:`term_statistics` reduces the statistics on the workers.
2. :func:`write_curated_shards` maps each raw block through the curated
   vocabulary, drops short documents and writes the final shard.
"""

from __future__ import annotations

import lzma
import zlib
from dataclasses import dataclass, field

import dask.bag as db
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jsmf_dask.exceptions import InputError
from jsmf_dask.io.fs import join
from jsmf_dask.io.parquet import doc_id_hashes, write_shard
from jsmf_dask.io.parquet import read_parquet
from jsmf_dask.io.scratch import write_table
from jsmf_dask.io.sources import ReadSummary, RatingsColumns, partition_ratings_file

__all__ = [
    "partition_ratings",
    "TermStats",
    "StagedPartition",
    "stage_raw_blocks",
    "term_statistics",
    "staged_files",
    "TermMapping",
    "mapped_entries",
    "ShardResult",
    "write_curated_shards",
]


@dataclass
class TermStats:
    """Document and term frequencies of source terms.

    For integer-term sources (UCI) ``terms`` is None and position ``i`` of
    ``df``/``tf`` is term ``i``; otherwise ``terms`` holds the strings.
    """

    df: np.ndarray
    tf: np.ndarray
    terms: pa.Array | None = None

    @classmethod
    def of_block(cls, table: pa.Table, n_terms: int | None) -> TermStats:
        terms = table.column("terms").combine_chunks()
        flat = terms.flatten()
        counts = table.column("counts").combine_chunks().flatten().to_numpy().astype(np.int64)
        if pa.types.is_integer(flat.type):
            ids = flat.to_numpy()
            return cls(
                np.bincount(ids, minlength=n_terms).astype(np.int64),
                np.bincount(ids, weights=counts, minlength=n_terms).astype(np.int64),
            )
        return cls._grouped(pa.table({"term": flat, "df": np.ones(len(flat), np.int64), "tf": counts}))

    @classmethod
    def _grouped(cls, t: pa.Table) -> TermStats:
        g = t.group_by("term").aggregate([("df", "sum"), ("tf", "sum")])
        return cls(g.column("df_sum").to_numpy(), g.column("tf_sum").to_numpy(), g.column("term").combine_chunks())

    def merge(self, other: TermStats) -> TermStats:
        if self.terms is None:
            return TermStats(self.df + other.df, self.tf + other.tf)
        t = pa.concat_tables(
            [
                pa.table({"term": s.terms, "df": s.df, "tf": s.tf})
                for s in (self, other)
            ]
        )
        return TermStats._grouped(t)


@dataclass
class StagedPartition:
    """What pass 1 learned from one partition.

    Attributes
    ----------
    files : list of (str, int)
        Raw block files written and their document counts.
    summary : ReadSummary
    stats : TermStats or None
        None when the partition held no document.
    hashes : list of ndarray of uint64
        :func:`~jsmf_dask.io.parquet.doc_id_hashes` of each raw block.
    """

    files: list[tuple[str, int]] = field(default_factory=list)
    summary: ReadSummary = field(default_factory=ReadSummary)
    stats: TermStats | None = None
    hashes: list[np.ndarray] = field(default_factory=list)


def _partition_ratings(item, columns: RatingsColumns, scratch: str, n_buckets: int, encoding: str) -> list[str]:
    index, url = item
    return partition_ratings_file(url, index, columns, scratch, n_buckets, encoding)


def partition_ratings(inputs: list[str], columns: RatingsColumns, scratch: str, n_buckets: int,
                      encoding: str = "utf-8") -> db.Bag:
    """Pass 0 for ratings: a bag of bucket-file lists, one per input CSV (users hashed to buckets)."""
    return db.from_sequence(list(enumerate(inputs)), npartitions=max(1, len(inputs))).map(
        _partition_ratings, columns, scratch, n_buckets, encoding
    )


def _stage_partition(indexed, scratch: str, n_terms: int | None) -> StagedPartition:
    index, part = indexed
    out = StagedPartition()
    gen = part.read()
    block = 0
    while True:
        try:
            table = next(gen)
        except StopIteration as stop:
            out.summary = stop.value or ReadSummary()
            break
        except (OSError, EOFError, zlib.error, lzma.LZMAError, UnicodeDecodeError) as err:
            raise InputError(f"{part.source}: cannot read: {err}") from err
        url = join(scratch, f"raw-{index:05d}-{block:05d}.parquet")
        write_table(url, table)
        out.files.append((url, table.num_rows))
        out.hashes.append(doc_id_hashes(table.column("doc_id")))
        stats = TermStats.of_block(table, n_terms)
        out.stats = stats if out.stats is None else out.stats.merge(stats)
        block += 1
    return out


def stage_raw_blocks(partitions: list, scratch: str, n_terms: int | None) -> db.Bag:
    """Pass 1: a bag of :class:`StagedPartition`, one element per input partition.

    Parameters
    ----------
    partitions : list
        Partition objects of :mod:`jsmf_dask.io.sources` (each has ``read()``).
    scratch : str
        Directory (path or URL) for the raw blocks.
    n_terms : int or None
        Number of source terms for integer-term sources, None for strings.
    """
    return db.from_sequence(list(enumerate(partitions)), npartitions=max(1, len(partitions))).map(
        _stage_partition, scratch, n_terms
    )


def _merge_all(items) -> TermStats | None:
    stats = None
    for s in items:
        if s is None:
            continue
        stats = s if stats is None else stats.merge(s)
    return stats


def _stats_of(staged: StagedPartition) -> TermStats | None:
    return staged.stats


def _without_stats(staged: StagedPartition) -> StagedPartition:
    return StagedPartition(staged.files, staged.summary, None, staged.hashes)


def term_statistics(staged: db.Bag) -> db.Item:
    """The corpus-wide :class:`TermStats` of a :func:`stage_raw_blocks` bag, merged on the workers."""
    return staged.map(_stats_of).reduction(_merge_all, _merge_all, split_every=8)


def staged_files(staged: db.Bag) -> db.Bag:
    """The :class:`StagedPartition` elements without their statistics (small: for the driver)."""
    return staged.map(_without_stats)


@dataclass(frozen=True)
class TermMapping:
    """Source term → word_id of the curated vocabulary (dropped terms map to −1).

    Exactly one of ``lookup`` (integer terms) and ``words`` (string terms, in
    word_id order) is set.
    """

    n_words: int
    lookup: np.ndarray | None = None
    words: pa.Array | None = None

    def __call__(self, flat_terms: pa.Array) -> np.ndarray:
        if self.lookup is not None:
            return self.lookup[flat_terms.to_numpy()]
        idx = pc.index_in(flat_terms, value_set=self.words)
        return pc.fill_null(idx, -1).to_numpy().astype(np.int64)


@dataclass
class ShardResult:
    """What pass 2 wrote for one raw block."""

    url: str | None
    n_docs: int
    n_short: int
    n_few_words: int
    n_tokens: int
    df: np.ndarray
    tf: np.ndarray


def mapped_entries(table: pa.Table, mapping: TermMapping) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A raw block's entries as ``(document row, word id or −1, count)`` arrays (:class:`TermMapping`)."""
    terms = table.column("terms").combine_chunks()
    parent = pc.list_parent_indices(terms).to_numpy()
    counts = table.column("counts").combine_chunks().flatten().to_numpy().astype(np.int64)
    return parent, mapping(terms.flatten()), counts


def _write_curated(
    item, mapping: TermMapping, corpus: str, min_doc_tokens: int, min_doc_words: int, row_group_size: int
) -> ShardResult:
    index, raw_url = item
    table = read_parquet(raw_url)
    parent, ids, counts = mapped_entries(table, mapping)
    keep = ids >= 0
    ids, counts, parent = ids[keep], counts[keep], parent[keep]
    # by document, then word: one argsort of a combined key (unique: a document lists a word once) is 5x
    # np.lexsort's time on a block of 9M entries
    order = np.argsort(parent.astype(np.int64) * mapping.n_words + ids)
    ids, counts, parent = ids[order], counts[order], parent[order]
    n_rows = table.num_rows
    tokens = np.bincount(parent, weights=counts, minlength=n_rows).astype(np.int64)
    distinct = np.bincount(parent, minlength=n_rows)
    short = tokens < min_doc_tokens
    few = ~short & (distinct < min_doc_words)
    kept_doc = ~short & ~few
    sel = kept_doc[parent]
    ids, counts, parent = ids[sel], counts[sel], parent[sel]
    n = mapping.n_words
    result = ShardResult(
        url=None,
        n_docs=int(kept_doc.sum()),
        n_short=int(short.sum()),
        n_few_words=int(few.sum()),
        n_tokens=int(counts.sum()),
        df=np.bincount(ids, minlength=n).astype(np.int64),
        tf=np.bincount(ids, weights=counts, minlength=n).astype(np.int64),
    )
    if result.n_docs == 0:
        return result
    offsets = np.concatenate([[0], np.cumsum(distinct[kept_doc])]).astype(np.int32)
    shard = pa.table(
        {
            "doc_id": table.column("doc_id").filter(pa.array(kept_doc)),
            "word_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids.astype(np.int32))),
            "counts": pa.ListArray.from_arrays(pa.array(offsets), pa.array(counts.astype(np.int32))),
        }
    )
    url = join(corpus, f"part-{index:05d}.parquet")
    write_shard(shard, url, n_words=n, row_group_size=row_group_size)
    result.url = url
    return result


def write_curated_shards(
    raw_files: list[str],
    mapping: TermMapping,
    corpus: str,
    *,
    min_doc_tokens: int,
    min_doc_words: int,
    row_group_size: int,
    first_index: int = 0,
) -> db.Bag:
    """Pass 2: a bag of :class:`ShardResult`, one per raw block (shard ``first_index + i`` from raw file ``i``)."""
    items = [(first_index + i, url) for i, url in enumerate(raw_files)]
    return db.from_sequence(items, npartitions=max(1, len(raw_files))).map(
        _write_curated, mapping, corpus, min_doc_tokens, min_doc_words, row_group_size
    )
