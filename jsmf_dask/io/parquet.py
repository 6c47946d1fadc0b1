"""The corpus store: Parquet document shards and the vocabulary table.

Layout (``data_schemas/``)::

    <root>/corpus/part-00000.parquet ...   documents (DOCUMENT_SCHEMA), row groups of documents
    <root>/corpus/vocab.parquet            vocabulary (VOCAB_SCHEMA)

Reading goes through :class:`pyarrow.parquet.ParquetFile`, one row group at a time, or a whole small file by
:func:`read_parquet`; never through :mod:`pyarrow.dataset` (``pq.read_table``'s route), whose import pulls
in pandas where it is installed, and whose scanner threads can abort the interpreter at exit
(apache/arrow#34314); every read and write is validated with :mod:`jsmf_dask.io.schema`.
"""

from __future__ import annotations

from collections.abc import Callable

import hashlib
import posixpath
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jsmf_dask.exceptions import CorpusSchemaError, StoreError
from jsmf_dask.io.fs import arrow_fs, check_committed, get_fs, join
from jsmf_dask.io.schema import (
    DOCUMENT_SCHEMA,
    LABELS_SCHEMA,
    VOCAB_SCHEMA,
    check_schema,
    validate_documents,
    validate_vocabulary,
)

__all__ = [
    "Block",
    "write_parquet",
    "read_parquet",
    "read_parquet_dir",
    "row_group_size_for",
    "corpus_nnz",
    "corpus_tokens",
    "corpus_dir",
    "vocab_path",
    "labels_path",
    "write_labels",
    "display_words",
    "shard_name",
    "list_blocks",
    "read_block",
    "write_shard",
    "read_vocabulary",
    "write_vocabulary",
    "vocabulary_hash",
    "doc_id_hashes",
    "repeated_doc_id",
    "file_manifest",
]

VOCAB_FILE = "vocab.parquet"


def corpus_dir(root: str) -> str:
    """``<root>/corpus``."""
    return join(root, "corpus")


def vocab_path(corpus: str) -> str:
    """``<corpus>/vocab.parquet``."""
    return join(corpus, VOCAB_FILE)


LABELS_FILE = "labels.parquet"


def labels_path(corpus: str) -> str:
    """``<corpus>/labels.parquet``: optional display labels of words (item titles for ratings and baskets)."""
    return join(corpus, LABELS_FILE)


#: Every Parquet file this project writes carries a CRC-32 of each page, and every read verifies the ones present
#: (pyarrow's ``write_page_checksum`` / ``page_checksum_verification``): a page changed since it was written (a bit
#: flipped on a disk or in a copy) fails its read instead of giving other counts. Files written before have none
#: and read as before. Cost (``pipelines/benchmarks/checksums.py``): 100k documents' row groups read in 0.057–0.066 s
#: instead of 0.054–0.079, written in 0.280–0.284 s instead of 0.278–0.280.
_VERIFY = {"page_checksum_verification": True}


def write_parquet(url: str, table: pa.Table, *, row_group_size: int | None = None) -> None:
    """``table`` as one Parquet file at ``url`` (a local path or an fsspec URL), its pages checksummed."""
    fs, path = get_fs(url)
    with fs.open(path, "wb") as f:
        pq.write_table(table, f, row_group_size=row_group_size, write_page_checksum=True)


def write_labels(labels: dict[str, str], words: list[str], corpus: str) -> int:
    """Write the labels of the vocabulary's words that have one; returns how many."""
    ids = [i for i, w in enumerate(words) if w in labels]
    table = pa.table({"word_id": pa.array(ids, pa.int32()), "label": pa.array([labels[words[i]] for i in ids],
                                                                             pa.string())}).cast(LABELS_SCHEMA)
    write_parquet(labels_path(corpus), table)
    return len(ids)


def read_parquet(url: str, columns: list[str] | None = None) -> pa.Table:
    """The Parquet file at ``url`` (a local path or an fsspec URL) as one table, ``columns`` only if given.

    Through :class:`pyarrow.parquet.ParquetFile`, not ``pq.read_table``: that goes through
    :mod:`pyarrow.dataset`, whose scanner's threads can outlive the interpreter, which then aborts at exit
    ("terminate called without an active exception", status 134, after all the work succeeded;
    apache/arrow#34314). Measured here: a script that read the vocabulary with ``pq.read_table`` and ended
    exited 134 in 2 of 12 runs (8 of 15 without pandas installed); through ``ParquetFile``, 0 of 15.
    """
    fs, path = get_fs(url)
    with fs.open(path, "rb") as f, pq.ParquetFile(f, **_VERIFY) as parquet:
        return parquet.read(columns=columns)


def display_words(corpus: str, words: list[str]) -> list[str]:
    """``words`` with each labelled word replaced by its label (``labels.parquet``), for showing topics."""
    url = labels_path(corpus)
    fs, path = get_fs(url)
    if not fs.exists(path):
        return list(words)
    table = read_parquet(url)
    shown = list(words)
    for i, label in zip(table.column("word_id").to_pylist(), table.column("label").to_pylist(), strict=True):
        if 0 <= i < len(shown) and label:
            shown[i] = label
    return shown


def shard_name(index: int) -> str:
    """File name of shard ``index``: ``part-00000.parquet``."""
    return f"part-{index:05d}.parquet"


@dataclass(frozen=True)
class Block:
    """One row group of one shard: the unit of parallel work over a corpus.

    Attributes
    ----------
    path : str
        URL or path of the shard.
    row_group : int
        Row group index in the shard.
    row_offset : int
        Row number of the group's first document within the shard.
    n_rows : int
        Documents in the group.
    """

    path: str
    row_group: int
    row_offset: int
    n_rows: int


def _shard_urls(corpus: str) -> list[str]:
    check_committed(corpus)
    fs, path = get_fs(corpus)
    if not fs.exists(path):
        raise StoreError(f"{corpus}: corpus directory does not exist; run `jsmf ingest` first")
    names = sorted(
        posixpath.basename(p)
        for p in fs.ls(path, detail=False)
        if posixpath.basename(p).endswith(".parquet") and posixpath.basename(p) not in (VOCAB_FILE, LABELS_FILE)
    )
    if not names:
        raise StoreError(f"{corpus}: no document shards (*.parquet) found")
    return [join(corpus, n) for n in names]


def list_blocks(corpus: str) -> list[Block]:
    """Every row group of every shard of ``corpus``, schema-checked from the footers.

    Raises
    ------
    StoreError
        If the directory or its shards are missing.
    CorpusSchemaError
        If a shard lacks a column or has one of the wrong type.
    """
    urls = _shard_urls(corpus)
    fs, _ = get_fs(corpus)
    paths = [get_fs(u)[1] for u in urls]
    filesystem = arrow_fs(fs)
    blocks = []
    for url, path in zip(urls, paths, strict=True):
        try:
            with pq.ParquetFile(path, filesystem=filesystem, **_VERIFY) as shard:
                schema, meta = shard.schema_arrow, shard.metadata
        except (pa.ArrowInvalid, OSError) as err:
            raise CorpusSchemaError(f"{url}: cannot read the shard as Parquet: {err}") from err
        check_schema(schema, DOCUMENT_SCHEMA, url)
        offset = 0
        for rg in range(meta.num_row_groups):
            n_rows = meta.row_group(rg).num_rows
            blocks.append(Block(url, rg, offset, n_rows))
            offset += n_rows
    return blocks


def read_parquet_dir(url: str) -> pa.Table:
    """Every ``*.parquet`` file directly in the directory ``url``, in name order, as one table."""
    fs, path = get_fs(url)
    filesystem = arrow_fs(fs)
    tables = []
    for file in sorted(p for p in fs.ls(path, detail=False) if p.endswith(".parquet")):
        with pq.ParquetFile(file, filesystem=filesystem, **_VERIFY) as part:
            tables.append(part.read())
    if not tables:
        raise StoreError(f"{url}: no Parquet files found")
    return pa.concat_tables(tables)


def read_block(block: Block, n_words: int | None) -> pa.Table:
    """Read and validate one row group (columns of :data:`DOCUMENT_SCHEMA`)."""
    fs, path = get_fs(block.path)
    try:
        with pq.ParquetFile(path, filesystem=arrow_fs(fs), **_VERIFY) as shard:
            table = shard.read_row_group(block.row_group, columns=DOCUMENT_SCHEMA.names)
    except (pa.ArrowInvalid, OSError) as err:
        raise CorpusSchemaError(f"{block.path}: row group {block.row_group}: {err}") from err
    check_schema(table.schema, DOCUMENT_SCHEMA, block.path)
    validate_documents(table, n_words, block.path, block.row_offset)
    return table


#: Documents per Parquet row group at most, and the fewest a row group gets when a corpus is split smaller.
ROW_GROUP_SIZE = 10000
ROW_GROUP_SIZE_MIN = 500
#: Row groups a corpus is split into at least (while they keep ``ROW_GROUP_SIZE_MIN`` documents).
MIN_ROW_GROUPS = 8


def row_group_size_for(n_docs: int) -> int:
    """Documents per row group of a corpus of ``n_docs`` documents, when not configured.

    A row group is the unit of parallel work of every later stage (one task per
    row group for cooccur's blocks, refine's sweeps, infer, evaluate): with
    row groups of 10,000 documents a corpus of 3,000 is one task and leaves every
    core but one idle (refine's sweeps at 3k documents: one core of two). So
    ``ROW_GROUP_SIZE`` documents, or fewer so that the corpus has
    ``MIN_ROW_GROUPS`` row groups, but never fewer than ``ROW_GROUP_SIZE_MIN``.
    Results do not depend on it (every stage is exact across row-group sizes).
    """
    return int(min(ROW_GROUP_SIZE, max(ROW_GROUP_SIZE_MIN, -(-int(n_docs) // MIN_ROW_GROUPS))))


def write_shard(table: pa.Table, url: str, *, n_words: int, row_group_size: int) -> None:
    """Validate ``table`` and write it as one shard with row groups of ``row_group_size`` documents."""
    table = table.select(DOCUMENT_SCHEMA.names).cast(DOCUMENT_SCHEMA)
    validate_documents(table, n_words, url)
    write_parquet(url, table, row_group_size=max(1, row_group_size))


def corpus_nnz(corpus: str) -> int:
    """The (document, word) pairs of the stored corpus: non-zeros of its count matrix (``df`` summed)."""
    return int(pc.sum(read_vocabulary(corpus).column("df")).as_py() or 0)


def corpus_tokens(corpus: str) -> int:
    """The tokens of the stored corpus (its vocabulary's ``tf`` column summed)."""
    return int(pc.sum(read_vocabulary(corpus).column("tf")).as_py() or 0)


def read_vocabulary(corpus: str) -> pa.Table:
    """Read and validate ``<corpus>/vocab.parquet``."""
    check_committed(corpus)
    url = vocab_path(corpus)
    fs, path = get_fs(url)
    if not fs.exists(path):
        raise StoreError(f"{url}: vocabulary table does not exist; run `jsmf ingest` first")
    try:
        table = read_parquet(url)
    except (pa.ArrowInvalid, OSError) as err:
        raise CorpusSchemaError(f"{url}: cannot read as Parquet: {err}") from err
    validate_vocabulary(table, url)
    return table.select(VOCAB_SCHEMA.names).cast(VOCAB_SCHEMA)


def write_vocabulary(table: pa.Table, corpus: str) -> None:
    """Validate and write the vocabulary table."""
    url = vocab_path(corpus)
    table = table.select(VOCAB_SCHEMA.names).cast(VOCAB_SCHEMA)
    validate_vocabulary(table, url)
    write_parquet(url, table)


def vocabulary_hash(words: list[str]) -> str:
    """sha256 of the words in word_id order (one per line, UTF-8)."""
    h = hashlib.sha256()
    for w in words:
        h.update(w.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def doc_id_hashes(doc_ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """64-bit hashes of document ids, for corpus-wide uniqueness checks (8 bytes a document)."""
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little")
            for s in doc_ids.to_pylist()
        ),
        dtype=np.uint64,
        count=len(doc_ids),
    )


def repeated_doc_id(hashes: list[np.ndarray], doc_id_at: Callable[[int, int], str]
                    ) -> tuple[tuple[int, int], tuple[int, int], str] | None:
    """The first document id that occurs twice across parts, or None: the one home of the uniqueness check.

    Parameters
    ----------
    hashes : list of ndarray of uint64
        :func:`doc_id_hashes` of each part (a block, a shard, an input file), in order.
    doc_id_at : callable
        ``(part, row) ↦ doc_id``, read only for the two rows whose hashes repeat:
        equal hashes of different ids (a 64-bit collision, vanishingly rare)
        are not a repeat.

    Returns
    -------
    tuple or None
        ``((part_a, row_a), (part_b, row_b), doc_id)``, the first occurrence first.
    """
    if not hashes:
        return None
    allh = np.concatenate(hashes)
    part_of = np.repeat(np.arange(len(hashes)), [h.size for h in hashes])
    row_of = np.concatenate([np.arange(h.size) for h in hashes])
    order = np.argsort(allh, kind="stable")
    sorted_h = allh[order]
    rep = np.flatnonzero(sorted_h[1:] == sorted_h[:-1])
    if rep.size == 0:
        return None
    a, b = order[rep[0]], order[rep[0] + 1]
    first, second = (int(part_of[a]), int(row_of[a])), (int(part_of[b]), int(row_of[b]))
    doc_id = doc_id_at(*first)
    return (first, second, doc_id) if doc_id == doc_id_at(*second) else None


def file_manifest(url: str) -> dict[str, object]:
    """``{path, bytes, rows, sha256}`` of one shard, for the stores' provenance attrs."""
    fs, path = get_fs(url)
    h = hashlib.sha256()
    size = 0
    with fs.open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
            size += len(chunk)
    with fs.open(path, "rb") as f:
        rows = pq.ParquetFile(f).metadata.num_rows
    return {"path": posixpath.basename(path), "bytes": size, "rows": rows, "sha256": h.hexdigest()}
