"""Shared pieces of the input readers: read summaries, opening files, string-term blocks."""

from __future__ import annotations

import codecs
import io
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from jsmf_dask.exceptions import InputError
from jsmf_dask.io.fs import get_fs

__all__ = ["ReadSummary", "open_input", "string_blocks", "StringSource", "INT_PATTERN", "NUMBER_PATTERN"]

INT_PATTERN = re.compile(r"^-?[0-9]+$")
NUMBER_PATTERN = r"^\s*-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$"


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


def _wide(encoding: str) -> bool:
    """UTF-16/32 text has NUL bytes and no byte-level line breaks."""
    return codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))


def _undecodable(where: str, encoding: str, err: UnicodeDecodeError) -> InputError:
    return InputError(
        f"{where}: byte {err.start}: not valid {encoding} ({err.reason}); pass --encoding (encoding=...) "
        "with the file's encoding, e.g. latin-1"
    )


def decode_text(data: bytes, where: str, encoding: str = "utf-8") -> str:
    """``data`` as text, strictly: binary data (NUL bytes) and undecodable bytes are :class:`InputError`.

    The one decoding policy of every text source (raw text files, tar
    members, JSONL, baskets); ``where`` names the file in the message.
    """
    nul = -1 if _wide(encoding) else data.find(b"\x00")
    if nul >= 0:
        raise InputError(f"{where}: binary data (NUL byte at {nul}); expected a text file")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise _undecodable(where, encoding, err) from None


def text_lines(binary, where: str, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a binary stream decoded under :func:`decode_text`'s policy."""
    if _wide(encoding):
        reader = io.TextIOWrapper(binary, encoding=encoding, errors="strict")
        lineno = 0
        try:
            for lineno, line in enumerate(reader, start=1):
                yield lineno, line
        except UnicodeDecodeError as err:
            raise InputError(f"{where}: after line {lineno}: not valid {encoding} ({err.reason})") from None
        return
    for lineno, raw in enumerate(binary, start=1):
        yield lineno, decode_text(raw, f"{where}: line {lineno}", encoding)


def open_input(url: str):
    """Open an input file for binary reading, decompressing by its extension; InputError if missing."""
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


def string_blocks(
    docs: Iterable[tuple[str, Counter[str]]], block_size: int, summary: ReadSummary
) -> Iterator[pa.Table]:
    """Group ``(doc_id, term counts)`` pairs into raw blocks of ``block_size`` documents.

    Every document is counted in ``summary``; empty ones are counted as such and dropped.
    """
    ids: list[str] = []
    batch: list[Counter[str]] = []
    for doc_id, counts in docs:
        summary.n_docs += 1
        if not counts:
            summary.n_empty += 1
            continue
        ids.append(doc_id)
        batch.append(counts)
        if len(ids) >= block_size:
            yield _string_docs_table(ids, batch)
            ids, batch = [], []
    if ids:
        yield _string_docs_table(ids, batch)


class StringSource:
    """Base of the partitions whose documents are ``(doc_id, term counts)`` pairs from ``_docs``.

    Subclasses are frozen dataclasses with a ``block_size`` field and a
    ``_docs(summary)`` generator; ``read()`` groups the documents into raw
    blocks and returns the :class:`ReadSummary`.
    """

    block_size: int

    def _docs(self, summary: ReadSummary) -> Iterator[tuple[str, Counter[str]]]:
        raise NotImplementedError

    def read(self) -> Iterator[pa.Table]:
        summary = ReadSummary()
        yield from string_blocks(self._docs(summary), self.block_size, summary)
        return summary
