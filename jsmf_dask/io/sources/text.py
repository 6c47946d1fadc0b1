"""Raw text: JSONL, CSV or Parquet with a text column; a directory or tar archive of text files."""

from __future__ import annotations

import json
import posixpath
import re
import tarfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from jsmf_dask.exceptions import InputError
from jsmf_dask.io.fs import get_fs, join
from jsmf_dask.io.sources._common import ReadSummary, StringSource, decode_text, open_input, text_lines
from jsmf_dask.io.sources.tokenize import count_tokens, strip_email

__all__ = ["TextOptions", "TextTablePartition", "TextFilesPartition", "TarballPartition", "text_partitions"]

@dataclass(frozen=True)
class TextOptions:
    """How raw text becomes tokens (stop words are removed later, at curation)."""

    min_word_length: int = 3
    encoding: str = "utf-8"
    strip: str | None = None  # "email": headers, quoted replies and signatures removed first
    header: bool = True  # CSV/TSV: False: the first line is data; columns are named "1", "2", ...
    delimiter: str | None = None  # CSV/TSV field separator; None: tab for .tsv, else comma

    def count(self, text: str) -> Counter[str]:
        """Token counts of one document."""
        if self.strip == "email":
            text = strip_email(text)
        return count_tokens(text, min_length=self.min_word_length)


@dataclass(frozen=True)
class TextTablePartition(StringSource):
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

    def _docs(self, summary: ReadSummary) -> Iterator[tuple[str, Counter[str]]]:
        name = posixpath.basename(get_fs(self.url)[1])
        for _, doc_id, text in self._records(name):
            yield doc_id, self.options.count(text)

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
        header = self.options.header
        # headerless: pyarrow names the columns f0, f1, ...; they are given (and shown) as "1", "2", ...
        types = {(c if header or not c.isdigit() else f"f{int(c) - 1}"): pa.string()
                 for c in filter(None, (self.text_column, self.id_column))}
        start = 0
        try:
            with fs.open(path, "rb", compression="infer") as f:
                reader = pacsv.open_csv(
                    f,
                    read_options=pacsv.ReadOptions(use_threads=False, encoding=self.options.encoding,
                                                   autogenerate_column_names=not header),
                    # .tsv: tab-separated (a text column full of commas must not be split on them)
                    parse_options=pacsv.ParseOptions(newlines_in_values=True,
                                                     delimiter=self.options.delimiter or _delimiter(self.url)),
                    convert_options=pacsv.ConvertOptions(column_types=types),
                )
                for batch in reader:
                    if not header:
                        batch = pa.RecordBatch.from_arrays(batch.columns,
                                                           names=[str(i + 1) for i in range(batch.num_columns)])
                    yield start, batch
                    start += batch.num_rows
        except pa.ArrowInvalid as err:
            raise InputError(f"{self.url}: after data row {start}: not valid CSV: {err}") from err

    def _jsonl(self, name: str) -> Iterator[tuple[int, str, str]]:
        with open_input(self.url) as f:
            for lineno, raw in text_lines(f, self.url, self.options.encoding):
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


@dataclass(frozen=True)
class TextFilesPartition(StringSource):
    """A batch of plain-text files, one document each; doc_id is the path below the directory."""

    base: str
    relpaths: tuple[str, ...]
    options: TextOptions
    block_size: int

    @property
    def source(self) -> str:
        return self.base

    def _docs(self, summary: ReadSummary) -> Iterator[tuple[str, Counter[str]]]:
        fs, _ = get_fs(self.base)
        for rel in self.relpaths:
            url = join(self.base, rel)
            try:
                with fs.open(get_fs(url)[1], "rb") as f:
                    text = decode_text(f.read(), url, self.options.encoding)
            except OSError as err:
                raise InputError(f"{url}: cannot read: {err}") from err
            yield rel, self.options.count(text)


@dataclass(frozen=True)
class TarballPartition(StringSource):
    """A tar archive (optionally compressed) of text files, one document per regular member."""

    url: str
    options: TextOptions
    block_size: int

    @property
    def source(self) -> str:
        return self.url

    def _docs(self, summary: ReadSummary) -> Iterator[tuple[str, Counter[str]]]:
        fs, path = get_fs(self.url)
        if not fs.exists(path):
            raise InputError(f"{self.url}: no such file")
        try:
            with fs.open(path, "rb") as raw, tarfile.open(fileobj=raw, mode="r|*") as tar:
                for member in tar:
                    if not member.isfile():
                        continue
                    data = tar.extractfile(member)
                    text = decode_text(data.read(), f"{self.url}: member {member.name}", self.options.encoding) \
                        if data is not None else ""
                    yield member.name, self.options.count(text)
        except (tarfile.TarError, EOFError, OSError) as err:
            raise InputError(f"{self.url}: not a readable tar archive: {err}") from err


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


def _delimiter(url: str) -> str:
    """A text table's field separator by its name: tab for ``.tsv`` (optionally compressed), else comma."""
    return "\t" if re.search(r"\.tsv(\.gz|\.bz2|\.xz)?$", url.lower()) else ","
