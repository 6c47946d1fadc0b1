"""Baskets or playlists: one basket per line, items separated by a delimiter."""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


from jsmf_dask.exceptions import InputError
from jsmf_dask.io.fs import get_fs
from jsmf_dask.io.sources._common import StringSource, ReadSummary, open_input, text_lines

__all__ = ["BasketsPartition", "baskets_partitions"]

@dataclass(frozen=True)
class BasketsPartition(StringSource):
    """A file of baskets or playlists: one basket per line, items separated by ``delimiter``."""

    url: str
    delimiter: str
    block_size: int
    encoding: str = "utf-8"

    @property
    def source(self) -> str:
        return self.url

    def _docs(self, summary: ReadSummary) -> Iterator[tuple[str, Counter[str]]]:
        name = posixpath.basename(get_fs(self.url)[1])
        with open_input(self.url) as f:
            for lineno, raw in text_lines(f, self.url, self.encoding):
                items = Counter(x.strip() for x in raw.rstrip("\r\n").split(self.delimiter))
                items.pop("", None)
                yield f"{name}:{lineno}", items


def baskets_partitions(inputs: Sequence[str], *, delimiter: str, block_size: int,
                       encoding: str = "utf-8") -> list[BasketsPartition]:
    """One partition per baskets file."""
    parts = []
    for url in inputs:
        fs, path = get_fs(url)
        if not fs.exists(path) or fs.isdir(path):
            raise InputError(f"{url}: no such file")
        parts.append(BasketsPartition(url, delimiter, block_size, encoding))
    return parts
