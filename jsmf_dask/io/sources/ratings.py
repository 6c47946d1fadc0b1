"""Ratings (user, item, rating): one document per user with round(2 × rating) copies of each item.

Users are hash-partitioned into buckets first (streaming each CSV once), so a
user's ratings may be spread over the input in any order and memory stays
bounded by a bucket.
"""

from __future__ import annotations

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
from jsmf_dask.io.parquet import read_parquet
from jsmf_dask.io.sources._common import StringSource, NUMBER_PATTERN, ReadSummary

__all__ = ["RatingsColumns", "partition_ratings_file", "RatingsBucketPartition", "ratings_buckets"]

#: The largest rating read: each becomes ``round(2 × rating)`` copies of its item, counted in int32.
MAX_RATING = (2**31 - 2) // 2


@dataclass(frozen=True)
class RatingsColumns:
    """Column names of a ratings CSV; None takes the header's first three columns in order."""

    user: str | None = None
    item: str | None = None
    rating: str | None = None


def partition_ratings_file(
    url: str, file_index: int, columns: RatingsColumns, scratch: str, n_buckets: int, encoding: str = "utf-8"
) -> list[str]:
    """Stream one ratings CSV (text in ``encoding``) into ``n_buckets`` Parquet buckets by hash of the user.

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
                read_options=pacsv.ReadOptions(use_threads=False, encoding=encoding),
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
                if names.count(w) > 1:
                    raise InputError(f"{url}: line 1: the header names {names.count(w)} columns {w!r}, the {role} "
                                     f"column (columns: {names}); which one is meant is not known: rename one of them")
            for batch in reader:
                # a column read as numbers holds an empty field as null: as text, it is the empty string
                user, item, rating_text = (pc.fill_null(pc.cast(batch.column(w), pa.string()), "") for w in wanted)
                line = start + 2 + np.arange(batch.num_rows)
                for col, name in ((user, wanted[0]), (item, wanted[1])):
                    empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(col)), 0).to_numpy(zero_copy_only=False)
                    if empty.any():
                        r = int(np.flatnonzero(empty)[0])
                        raise InputError(f"{url}: line {line[r]}: field {name} is empty")
                ok = pc.match_substring_regex(rating_text, NUMBER_PATTERN).to_numpy(zero_copy_only=False)
                if not ok.all():
                    r = int(np.flatnonzero(~ok)[0])
                    raise InputError(
                        f"{url}: line {line[r]}: field {wanted[2]} is {rating_text[r].as_py()!r}; expected a number"
                    )
                rating = pc.cast(pc.utf8_trim_whitespace(rating_text), pa.float64()).to_numpy()
                bad = (rating < 0) | ~np.isfinite(rating) | (rating > MAX_RATING)
                if bad.any():
                    r = int(np.flatnonzero(bad)[0])
                    raise InputError(f"{url}: line {line[r]}: field {wanted[2]} is {rating[r]}; expected a rating >= 0"
                                     + (f" and at most {MAX_RATING:.0f} (is {wanted[2]!r} the rating column?)"
                                        if rating[r] > MAX_RATING else ""))
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
        if "utf8" in str(err).lower():
            raise InputError(f"{url}: after line {start + 1}: not valid {encoding} text ({err}); pass --encoding "
                             "(e.g. latin-1) if the file is in another encoding") from err
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
class RatingsBucketPartition(StringSource):
    """All ratings of the users hashed to one bucket: one document per user."""

    files: tuple[str, ...]
    inputs: tuple[str, ...]
    block_size: int

    @property
    def source(self) -> str:
        return ", ".join(self.inputs)

    def _docs(self, summary: ReadSummary) -> Iterator[tuple[str, Counter[str]]]:
        tables = [read_parquet(url) for url in self.files]
        if not tables:
            return
        order = [("user", "ascending"), ("item", "ascending"), ("file", "ascending"), ("line", "ascending")]
        t = pa.concat_tables(tables).sort_by(order)
        user = t.column("user").to_pylist()
        item = t.column("item").to_pylist()
        copies = t.column("copies").to_numpy()
        file_ = t.column("file").to_numpy()
        line = t.column("line").to_numpy()
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
                    yield current, doc
                current, doc = user[r], Counter()
            if copies[r] > 0:
                doc[item[r]] = int(copies[r])
            else:
                summary.n_ignored += 1
        if current is not None:
            yield current, doc


def ratings_buckets(inputs: Sequence[str]) -> int:
    """Number of hash buckets for ratings inputs: about 256 MB of CSV each."""
    total = 0
    for url in inputs:
        fs, path = get_fs(url)
        if not fs.exists(path):
            raise InputError(f"{url}: no such file")
        total += fs.size(path) or 0
    return 1 + total // (256 << 20)


