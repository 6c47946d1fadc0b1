"""Readers of raw input: UCI bag of words, raw text, ratings and baskets.

Each source is split into *partitions* (picklable descriptions of a piece of
input: a file, a row group, a batch of text files, a ratings bucket). Reading
a partition yields *raw blocks*: Arrow tables with columns ``doc_id``
(string), ``terms`` (list of source term ids, int32 for UCI or strings) and
``counts`` (list<int32>, > 0, terms unique within a document). Memory is
bounded by the block size, whatever the input's size. Malformed input raises
:class:`~jsmf_dask.exceptions.InputError` naming the file, line or row, the
field and what was expected.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import tarfile
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from jsmf_dask.exceptions import InputError
from jsmf_dask.io.fs import get_fs, join
from jsmf_dask.kernels.tokenize import count_tokens

__all__ = [
    "ReadSummary",
    "TextOptions",
    "RatingsColumns",
    "UCIPartition",
    "TextTablePartition",
    "TextFilesPartition",
    "TarballPartition",
    "RatingsBucketPartition",
    "BasketsPartition",
    "read_uci_vocabulary",
    "uci_partitions",
    "text_partitions",
    "ratings_buckets",
    "baskets_partitions",
    "partition_ratings_file",
]

_INT = re.compile(r"^-?[0-9]+$")
_NUMBER = r"^\s*-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$"


@dataclass
class ReadSummary:
    """What a partition's reader saw besides its documents.

    Attributes
    ----------
    n_docs : int
        Documents read, including empty ones (M for the idf).
    n_empty : int
        Documents with no term at all (they never reach a block).
    n_ignored : int
        Input records ignored by rule (for ratings: those worth 0 copies).
    """

    n_docs: int = 0
    n_empty: int = 0
    n_ignored: int = 0


def _open_text(url: str):
    fs, path = get_fs(url)
    if not fs.exists(path):
        raise InputError(f"{url}: no such file")
    return fs.open(path, "rb", compression="infer")


def _string_docs_table(doc_ids: list[str], docs: list[Counter[str]]) -> pa.Table:
    terms = [list(c.keys()) for c in docs]
    counts = [list(c.values()) for c in docs]
    return pa.table(
        {
            "doc_id": pa.array(doc_ids, pa.string()),
            "terms": pa.array(terms, pa.list_(pa.string())),
            "counts": pa.array(counts, pa.list_(pa.int32())),
        }
    )


class _StringBlockBuilder:
    """Accumulates string-term documents and emits blocks of ``block_size``."""

    def __init__(self, block_size: int, summary: ReadSummary):
        self.block_size = block_size
        self.summary = summary
        self.ids: list[str] = []
        self.docs: list[Counter[str]] = []

    def add(self, doc_id: str, counts: Counter[str]) -> pa.Table | None:
        self.summary.n_docs += 1
        if not counts:
            self.summary.n_empty += 1
            return None
        self.ids.append(doc_id)
        self.docs.append(counts)
        if len(self.ids) >= self.block_size:
            return self.flush()
        return None

    def flush(self) -> pa.Table | None:
        if not self.ids:
            return None
        table = _string_docs_table(self.ids, self.docs)
        self.ids, self.docs = [], []
        return table


# --------------------------------------------------------------------- UCI


def read_uci_vocabulary(url: str) -> list[str]:
    """Words of a UCI ``vocab.*.txt`` (line k is word k), checked for blanks and repeats."""
    with _open_text(url) as f:
        text = f.read().decode("utf-8", errors="strict")
    words = text.splitlines()
    seen: dict[str, int] = {}
    for i, w in enumerate(words, start=1):
        w = w.strip()
        if not w:
            raise InputError(f"{url}: line {i}: empty word; expected one word per line")
        if w in seen:
            raise InputError(f"{url}: line {i}: word {w!r} repeats line {seen[w]}; expected unique words")
        seen[w] = i
    return [w.strip() for w in words]


@dataclass(frozen=True)
class UCIPartition:
    """A UCI ``docword`` file (header D, W, NNZ; then ``docID wordID count`` lines).

    Terms are 0-based indices into the vocabulary file of ``n_vocab`` words.
    """

    url: str
    n_vocab: int
    vocab_url: str
    doc_names: tuple[str, ...] | None = None
    block_size: int = 20000
    batch_bytes: int = 1 << 24

    @property
    def source(self) -> str:
        return self.url

    def read(self) -> Iterator[pa.Table]:
        summary = ReadSummary()
        with _open_text(self.url) as f:
            header = [f.readline() for _ in range(3)]
            values = []
            for i, (name, line) in enumerate(zip(("D", "W", "NNZ"), header, strict=True), start=1):
                text = line.decode("utf-8", errors="replace").strip()
                if not _INT.match(text) or int(text) < 0:
                    raise InputError(
                        f"{self.url}: line {i}: header field {name} is {text!r}; expected a non-negative integer"
                    )
                values.append(int(text))
            n_docs, n_vocab, nnz = values
            if n_vocab != self.n_vocab:
                raise InputError(
                    f"{self.url}: line 2: header W={n_vocab} but {self.vocab_url} has {self.n_vocab} words"
                )
            if self.doc_names is not None and len(self.doc_names) != n_docs:
                raise InputError(
                    f"{self.url}: line 1: header D={n_docs} but the document-id file has {len(self.doc_names)} lines"
                )
            yield from self._body(f, n_docs, nnz, summary)
        return summary

    def _body(self, f, n_docs: int, nnz: int, summary: ReadSummary) -> Iterator[pa.Table]:
        bad_row: list[int] = []

        def on_invalid(row) -> str:
            bad_row.append(row.number)
            return "error"

        cols = ["doc", "word", "count"]
        reader_opts = dict(
            read_options=pacsv.ReadOptions(column_names=cols, use_threads=False, block_size=self.batch_bytes),
            parse_options=pacsv.ParseOptions(delimiter=" ", invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in cols}),
        )
        seen_rows = 0
        carry: tuple[np.ndarray, ...] | None = None
        last_doc = 0
        n_seen_docs = 0
        pending: list[pa.Table] = []
        pending_docs = 0
        try:
            reader = pacsv.open_csv(f, **reader_opts)
            for batch in reader:
                arrays = []
                for j, name in enumerate(cols):
                    col = batch.column(j)
                    ok = pc.match_substring_regex(col, r"^-?[0-9]+$").to_numpy(zero_copy_only=False)
                    if not ok.all():
                        r = int(np.flatnonzero(~ok)[0])
                        raise InputError(
                            f"{self.url}: line {4 + seen_rows + r}: field {name} is {col[r].as_py()!r}; "
                            "expected an integer"
                        )
                    arrays.append(pc.cast(col, pa.int64()).to_numpy())
                doc, word, count = arrays
                line = 4 + seen_rows + np.arange(doc.size)
                seen_rows += doc.size
                self._check_ranges(doc, word, count, line, n_docs)
                if carry is not None:
                    doc, word, count, line = (np.concatenate([c, a]) for c, a in zip(carry, (doc, word, count, line), strict=True))
                back = np.flatnonzero(np.diff(np.concatenate([[last_doc], doc])) < 0)
                if back.size:
                    r = int(back[0])
                    prev = last_doc if r == 0 else doc[r - 1]
                    raise InputError(
                        f"{self.url}: line {line[r]}: docID {doc[r]} after docID {prev}; "
                        "expected lines grouped by document in increasing docID order"
                    )
                last_doc = int(doc[-1]) if doc.size else last_doc
                # The last document may continue in the next batch.
                cut = int(np.searchsorted(doc, doc[-1], side="left")) if doc.size else 0
                carry = (doc[cut:], word[cut:], count[cut:], line[cut:])
                if cut:
                    table = self._docs(doc[:cut], word[:cut], count[:cut], line[:cut])
                    n_seen_docs += table.num_rows
                    pending.append(table)
                    pending_docs += table.num_rows
                    while pending_docs >= self.block_size:
                        whole = pa.concat_tables(pending)
                        yield whole.slice(0, self.block_size)
                        pending = [whole.slice(self.block_size)]
                        pending_docs = pending[0].num_rows
        except pa.ArrowInvalid as err:
            where = f"line {3 + bad_row[0]}" if bad_row else "body"
            raise InputError(
                f"{self.url}: {where}: expected three space-separated integers 'docID wordID count' ({err})"
            ) from err
        if carry is not None and carry[0].size:
            table = self._docs(*carry)
            n_seen_docs += table.num_rows
            pending.append(table)
            pending_docs += table.num_rows
        if pending_docs:
            whole = pa.concat_tables(pending)
            for start in range(0, whole.num_rows, self.block_size):
                yield whole.slice(start, self.block_size)
        if seen_rows != nnz:
            raise InputError(
                f"{self.url}: line 3: header NNZ={nnz} but the body has {seen_rows} 'docID wordID count' lines"
            )
        summary.n_docs = n_docs
        summary.n_empty = n_docs - n_seen_docs

    def _check_ranges(self, doc, word, count, line, n_docs) -> None:
        checks = (
            ((doc < 1) | (doc > n_docs), "docID", doc, f"in 1..{n_docs} (header D)"),
            ((word < 1) | (word > self.n_vocab), "wordID", word, f"in 1..{self.n_vocab} (header W)"),
            (count <= 0, "count", count, "> 0"),
        )
        for mask, name, values, expected in checks:
            bad = np.flatnonzero(mask)
            if bad.size:
                r = int(bad[0])
                raise InputError(f"{self.url}: line {line[r]}: {name} is {values[r]}; expected {expected}")

    def _docs(self, doc, word, count, line) -> pa.Table:
        order = np.lexsort((word, doc))
        doc, word, count, line = doc[order], word[order], count[order], line[order]
        dup = np.flatnonzero((np.diff(doc) == 0) & (np.diff(word) == 0))
        if dup.size:
            r = int(dup[0])
            raise InputError(
                f"{self.url}: line {line[r + 1]}: docID {doc[r]} wordID {word[r]} repeats line {line[r]}; "
                "expected each (docID, wordID) once"
            )
        starts = np.flatnonzero(np.concatenate([[True], np.diff(doc) != 0]))
        offsets = np.concatenate([starts, [doc.size]]).astype(np.int32)
        ids = doc[starts]
        if self.doc_names is not None:
            names = [self.doc_names[i - 1] for i in ids]
        else:
            names = [str(i) for i in ids]
        return pa.table(
            {
                "doc_id": pa.array(names, pa.string()),
                "terms": pa.ListArray.from_arrays(pa.array(offsets), pa.array((word - 1).astype(np.int32))),
                "counts": pa.ListArray.from_arrays(pa.array(offsets), pa.array(count.astype(np.int32))),
            }
        )


def uci_partitions(
    docwords: Sequence[str], vocab_url: str, *, doc_ids_url: str | None, block_size: int
) -> tuple[list[UCIPartition], list[str]]:
    """Partitions (one per docword file) and the vocabulary words."""
    words = read_uci_vocabulary(vocab_url)
    names = None
    if doc_ids_url is not None:
        with _open_text(doc_ids_url) as f:
            names = tuple(line.strip() for line in f.read().decode("utf-8").splitlines())
    parts = [
        UCIPartition(u, len(words), vocab_url, names, block_size) for u in docwords
    ]
    return parts, words


# -------------------------------------------------------------------- text


@dataclass(frozen=True)
class TextOptions:
    """How raw text becomes tokens (stop words are removed later, at curation)."""

    min_word_length: int = 3


@dataclass(frozen=True)
class TextTablePartition:
    """A JSONL, CSV or Parquet file (or one Parquet row group) with a text column."""

    url: str
    kind: str  # "jsonl" | "csv" | "parquet"
    text_column: str
    id_column: str | None
    options: TextOptions
    block_size: int
    row_group: int | None = None
    row_offset: int = 0

    @property
    def source(self) -> str:
        return self.url

    def read(self) -> Iterator[pa.Table]:
        summary = ReadSummary()
        builder = _StringBlockBuilder(self.block_size, summary)
        name = posixpath.basename(get_fs(self.url)[1])
        for row, doc_id, text in self._records(name):
            out = builder.add(doc_id, count_tokens(text, min_length=self.options.min_word_length))
            if out is not None:
                yield out
        out = builder.flush()
        if out is not None:
            yield out
        return summary

    def _records(self, name: str) -> Iterator[tuple[int, str, str]]:
        if self.kind == "jsonl":
            yield from self._jsonl(name)
            return
        for start, batch in self._batches():
            cols = batch.schema.names
            for needed in filter(None, (self.text_column, self.id_column)):
                if needed not in cols:
                    raise InputError(
                        f"{self.url}: no column {needed!r} (columns: {cols}); "
                        "pass --text-column/--id-column to name them"
                    )
            texts = batch.column(self.text_column).to_pylist()
            ids = batch.column(self.id_column).to_pylist() if self.id_column else None
            for i, text in enumerate(texts):
                row = start + i + 1
                if text is not None and not isinstance(text, str):
                    raise InputError(f"{self.url}: row {row}: field {self.text_column!r} is not text")
                doc_id = str(ids[i]) if ids is not None and ids[i] is not None else f"{name}:{row}"
                if ids is not None and ids[i] is None:
                    raise InputError(f"{self.url}: row {row}: field {self.id_column!r} is empty")
                yield row, doc_id, text or ""

    def _batches(self) -> Iterator[tuple[int, pa.RecordBatch]]:
        fs, path = get_fs(self.url)
        if not fs.exists(path):
            raise InputError(f"{self.url}: no such file")
        if self.kind == "parquet":
            try:
                with fs.open(path, "rb") as f:
                    table = pq.ParquetFile(f).read_row_group(self.row_group or 0)
            except (pa.ArrowInvalid, OSError) as err:
                raise InputError(f"{self.url}: cannot read as Parquet: {err}") from err
            yield self.row_offset, table
            return
        types = {c: pa.string() for c in filter(None, (self.text_column, self.id_column))}
        start = 0
        try:
            with fs.open(path, "rb", compression="infer") as f:
                reader = pacsv.open_csv(
                    f,
                    read_options=pacsv.ReadOptions(use_threads=False),
                    parse_options=pacsv.ParseOptions(newlines_in_values=True),
                    convert_options=pacsv.ConvertOptions(column_types=types),
                )
                for batch in reader:
                    yield start, batch
                    start += batch.num_rows
        except pa.ArrowInvalid as err:
            raise InputError(f"{self.url}: after data row {start}: not valid CSV: {err}") from err

    def _jsonl(self, name: str) -> Iterator[tuple[int, str, str]]:
        with _open_text(self.url) as f, io.TextIOWrapper(f, encoding="utf-8", errors="replace") as lines:
            for lineno, raw in enumerate(lines, start=1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw)
                except json.JSONDecodeError as err:
                    raise InputError(f"{self.url}: line {lineno}: not valid JSON ({err.msg})") from err
                if not isinstance(record, dict) or self.text_column not in record:
                    raise InputError(
                        f"{self.url}: line {lineno}: no field {self.text_column!r}; "
                        "expected a JSON object per line (pass --text-column to name the field)"
                    )
                text = record[self.text_column]
                if text is not None and not isinstance(text, str):
                    raise InputError(f"{self.url}: line {lineno}: field {self.text_column!r} is not a string")
                if self.id_column:
                    if record.get(self.id_column) is None:
                        raise InputError(f"{self.url}: line {lineno}: no field {self.id_column!r}")
                    doc_id = str(record[self.id_column])
                else:
                    doc_id = f"{name}:{lineno}"
                yield lineno, doc_id, text or ""


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class TextFilesPartition:
    """A batch of plain-text files, one document each; doc_id is the path below the directory."""

    base: str
    relpaths: tuple[str, ...]
    options: TextOptions
    block_size: int

    @property
    def source(self) -> str:
        return self.base

    def read(self) -> Iterator[pa.Table]:
        summary = ReadSummary()
        builder = _StringBlockBuilder(self.block_size, summary)
        fs, _ = get_fs(self.base)
        for rel in self.relpaths:
            url = join(self.base, rel)
            try:
                with fs.open(get_fs(url)[1], "rb") as f:
                    text = _decode(f.read())
            except OSError as err:
                raise InputError(f"{url}: cannot read: {err}") from err
            out = builder.add(rel, count_tokens(text, min_length=self.options.min_word_length))
            if out is not None:
                yield out
        out = builder.flush()
        if out is not None:
            yield out
        return summary


@dataclass(frozen=True)
class TarballPartition:
    """A tar archive (optionally compressed) of text files, one document per regular member."""

    url: str
    options: TextOptions
    block_size: int

    @property
    def source(self) -> str:
        return self.url

    def read(self) -> Iterator[pa.Table]:
        summary = ReadSummary()
        builder = _StringBlockBuilder(self.block_size, summary)
        fs, path = get_fs(self.url)
        if not fs.exists(path):
            raise InputError(f"{self.url}: no such file")
        try:
            with fs.open(path, "rb") as raw, tarfile.open(fileobj=raw, mode="r|*") as tar:
                for member in tar:
                    if not member.isfile():
                        continue
                    data = tar.extractfile(member)
                    text = _decode(data.read()) if data is not None else ""
                    out = builder.add(member.name, count_tokens(text, min_length=self.options.min_word_length))
                    if out is not None:
                        yield out
        except (tarfile.TarError, EOFError, OSError) as err:
            raise InputError(f"{self.url}: not a readable tar archive: {err}") from err
        out = builder.flush()
        if out is not None:
            yield out
        return summary


def text_partitions(
    inputs: Sequence[str],
    *,
    text_column: str,
    id_column: str | None,
    options: TextOptions,
    block_size: int,
    files_per_partition: int = 256,
) -> list:
    """Partitions of raw-text inputs: tables by file (Parquet by row group), directories by batches of files."""
    parts: list = []
    for url in inputs:
        fs, path = get_fs(url)
        if not fs.exists(path):
            raise InputError(f"{url}: no such file or directory")
        lower = path.lower()
        if fs.isdir(path):
            found = sorted(
                posixpath.relpath(p, path)
                for p in fs.find(path)
                if not any(seg.startswith(".") for seg in posixpath.relpath(p, path).split("/"))
            )
            if not found:
                raise InputError(f"{url}: directory holds no files")
            for i in range(0, len(found), files_per_partition):
                parts.append(TextFilesPartition(url, tuple(found[i : i + files_per_partition]), options, block_size))
        elif re.search(r"\.(tar|tgz|tar\.gz|tar\.bz2|tar\.xz)$", lower):
            parts.append(TarballPartition(url, options, block_size))
        elif re.search(r"\.(jsonl|ndjson|json)(\.gz|\.bz2|\.xz)?$", lower):
            parts.append(TextTablePartition(url, "jsonl", text_column, id_column, options, block_size))
        elif re.search(r"\.(csv|tsv)(\.gz|\.bz2|\.xz)?$", lower):
            parts.append(TextTablePartition(url, "csv", text_column, id_column, options, block_size))
        elif lower.endswith(".parquet"):
            try:
                with fs.open(path, "rb") as f:
                    meta = pq.ParquetFile(f).metadata
            except (pa.ArrowInvalid, OSError) as err:
                raise InputError(f"{url}: cannot read as Parquet: {err}") from err
            offset = 0
            for rg in range(meta.num_row_groups):
                parts.append(
                    TextTablePartition(url, "parquet", text_column, id_column, options, block_size, rg, offset)
                )
                offset += meta.row_group(rg).num_rows
        else:
            raise InputError(
                f"{url}: unknown text input; expected a directory, a tar archive, or a "
                ".jsonl/.csv/.parquet file"
            )
    return parts


# ----------------------------------------------------------------- ratings


@dataclass(frozen=True)
class RatingsColumns:
    """Column names of a ratings CSV; None takes the header's first three columns in order."""

    user: str | None = None
    item: str | None = None
    rating: str | None = None


def partition_ratings_file(
    url: str, file_index: int, columns: RatingsColumns, scratch: str, n_buckets: int
) -> list[str]:
    """Stream one ratings CSV into ``n_buckets`` Parquet buckets by hash of the user.

    Each row becomes ``(user, item, copies = round(2 × rating), file, line)``;
    rows worth 0 copies are kept (and counted as ignored later). Returns the
    bucket files written, index ``b`` at position ``b`` (an empty string where
    the bucket got no rows).
    """
    fs, path = get_fs(url)
    if not fs.exists(path):
        raise InputError(f"{url}: no such file")
    writers: dict[int, pq.ParquetWriter] = {}
    files: list[str] = [""] * n_buckets
    out_schema = pa.schema(
        [("user", pa.string()), ("item", pa.string()), ("copies", pa.int32()), ("file", pa.int32()), ("line", pa.int64())]
    )
    start = 0
    try:
        with fs.open(path, "rb", compression="infer") as f:
            reader = pacsv.open_csv(
                f,
                read_options=pacsv.ReadOptions(use_threads=False),
                convert_options=pacsv.ConvertOptions(strings_can_be_null=False),
            )
            names = reader.schema.names
            wanted = [columns.user, columns.item, columns.rating]
            if any(w is None for w in wanted):
                if len(names) < 3:
                    raise InputError(f"{url}: header has {len(names)} columns; expected user, item, rating")
                wanted = [w or names[i] for i, w in enumerate(wanted)]
            for w, role in zip(wanted, ("user", "item", "rating"), strict=True):
                if w not in names:
                    raise InputError(f"{url}: no {role} column {w!r} (columns: {names})")
            for batch in reader:
                user = pc.cast(batch.column(wanted[0]), pa.string())
                item = pc.cast(batch.column(wanted[1]), pa.string())
                rating_text = pc.cast(batch.column(wanted[2]), pa.string())
                line = start + 2 + np.arange(batch.num_rows)
                for col, name in ((user, wanted[0]), (item, wanted[1])):
                    empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(col)), 0).to_numpy(zero_copy_only=False)
                    if empty.any():
                        r = int(np.flatnonzero(empty)[0])
                        raise InputError(f"{url}: line {line[r]}: field {name} is empty")
                ok = pc.match_substring_regex(rating_text, _NUMBER).to_numpy(zero_copy_only=False)
                if not ok.all():
                    r = int(np.flatnonzero(~ok)[0])
                    raise InputError(
                        f"{url}: line {line[r]}: field {wanted[2]} is {rating_text[r].as_py()!r}; expected a number"
                    )
                rating = pc.cast(pc.utf8_trim_whitespace(rating_text), pa.float64()).to_numpy()
                if (rating < 0).any() or not np.isfinite(rating).all():
                    r = int(np.flatnonzero((rating < 0) | ~np.isfinite(rating))[0])
                    raise InputError(f"{url}: line {line[r]}: field {wanted[2]} is {rating[r]}; expected a rating >= 0")
                copies = np.floor(2.0 * rating + 0.5).astype(np.int32)
                table = pa.table(
                    {
                        "user": user,
                        "item": item,
                        "copies": copies,
                        "file": np.full(batch.num_rows, file_index, dtype=np.int32),
                        "line": line,
                    },
                    schema=out_schema,
                )
                bucket = _bucket_of(user, n_buckets)
                for b in np.unique(bucket):
                    if b not in writers:
                        files[b] = join(scratch, f"ratings-{file_index:05d}-{b:05d}.parquet")
                        writers[b] = pq.ParquetWriter(fs.open(get_fs(files[b])[1], "wb"), out_schema)
                    writers[b].write_table(table.filter(pa.array(bucket == b)))
                start += batch.num_rows
    except pa.ArrowInvalid as err:
        raise InputError(f"{url}: after line {start + 1}: not valid CSV: {err}") from err
    finally:
        for w in writers.values():
            w.close()
    return files


def _bucket_of(user: pa.Array, n_buckets: int) -> np.ndarray:
    if n_buckets == 1:
        return np.zeros(len(user), dtype=np.int64)
    enc = pc.dictionary_encode(user)
    dict_bucket = np.array(
        [zlib.crc32(u.encode("utf-8")) % n_buckets for u in enc.dictionary.to_pylist()], dtype=np.int64
    )
    return dict_bucket[enc.indices.to_numpy()]


@dataclass(frozen=True)
class RatingsBucketPartition:
    """All ratings of the users hashed to one bucket: one document per user."""

    files: tuple[str, ...]
    inputs: tuple[str, ...]
    block_size: int

    @property
    def source(self) -> str:
        return ", ".join(self.inputs)

    def read(self) -> Iterator[pa.Table]:
        summary = ReadSummary()
        tables = []
        for url in self.files:
            fs, path = get_fs(url)
            with fs.open(path, "rb") as f:
                tables.append(pq.read_table(f))
        if not tables:
            return summary
        t = pa.concat_tables(tables).sort_by([("user", "ascending"), ("item", "ascending"), ("file", "ascending"), ("line", "ascending")])
        user = t.column("user").to_pylist()
        item = t.column("item").to_pylist()
        copies = t.column("copies").to_numpy()
        file_ = t.column("file").to_numpy()
        line = t.column("line").to_numpy()
        builder = _StringBlockBuilder(self.block_size, summary)
        current: str | None = None
        doc: Counter[str] = Counter()
        for r in range(t.num_rows):
            if r and user[r] == user[r - 1] and item[r] == item[r - 1]:
                raise InputError(
                    f"{self.inputs[file_[r]]}: line {line[r]}: user {user[r]!r} rates item {item[r]!r} again "
                    f"(first at {self.inputs[file_[r - 1]]} line {line[r - 1]}); expected one rating per (user, item)"
                )
            if user[r] != current:
                if current is not None:
                    out = builder.add(current, doc)
                    if out is not None:
                        yield out
                current, doc = user[r], Counter()
            if copies[r] > 0:
                doc[item[r]] = int(copies[r])
            else:
                summary.n_ignored += 1
        if current is not None:
            out = builder.add(current, doc)
            if out is not None:
                yield out
        out = builder.flush()
        if out is not None:
            yield out
        return summary


def ratings_buckets(inputs: Sequence[str]) -> int:
    """Number of hash buckets for ratings inputs: about 256 MB of CSV each."""
    total = 0
    for url in inputs:
        fs, path = get_fs(url)
        if not fs.exists(path):
            raise InputError(f"{url}: no such file")
        total += fs.size(path) or 0
    return 1 + total // (256 << 20)


# ----------------------------------------------------------------- baskets


@dataclass(frozen=True)
class BasketsPartition:
    """A file of baskets or playlists: one basket per line, items separated by ``delimiter``."""

    url: str
    delimiter: str
    block_size: int

    @property
    def source(self) -> str:
        return self.url

    def read(self) -> Iterator[pa.Table]:
        summary = ReadSummary()
        builder = _StringBlockBuilder(self.block_size, summary)
        name = posixpath.basename(get_fs(self.url)[1])
        with _open_text(self.url) as f, io.TextIOWrapper(f, encoding="utf-8", errors="replace") as lines:
            for lineno, raw in enumerate(lines, start=1):
                items = Counter(x.strip() for x in raw.rstrip("\r\n").split(self.delimiter))
                items.pop("", None)
                out = builder.add(f"{name}:{lineno}", items)
                if out is not None:
                    yield out
        out = builder.flush()
        if out is not None:
            yield out
        return summary


def baskets_partitions(inputs: Sequence[str], *, delimiter: str, block_size: int) -> list[BasketsPartition]:
    """One partition per baskets file."""
    parts = []
    for url in inputs:
        fs, path = get_fs(url)
        if not fs.exists(path) or fs.isdir(path):
            raise InputError(f"{url}: no such file")
        parts.append(BasketsPartition(url, delimiter, block_size))
    return parts
