"""The co-occurrence store ``<root>/cooc.zarr`` (Zarr v3), layout in :data:`COOCCURRENCE_LAYOUT`.

Arrays are pre-created by the driver and written by tasks through region
writes, one task per chunk (tile) and its mirror: no lock, no two writers in a
chunk, and a rewrite of a tile is idempotent. ``write_empty_chunks`` is on, so
a written zero tile exists on disk like any other.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec

from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.damage import DAMAGE, check_complete, reading, rewrite_hint
from jsmf_dask.io.fs import check_committed, get_fs, is_local, join
from jsmf_dask.io.schema import COOCCURRENCE_LAYOUT, SCHEMA_VERSION
from jsmf_dask.parameters import DEFAULT_WEIGHTING, WEIGHTINGS

__all__ = [
    "cooc_path",
    "zarr_store",
    "read_group",
    "create_cooccurrence",
    "write_compressed",
    "write_tile",
    "write_array",
    "checksummed",
    "CHECKSUM",
    "CooccurrenceStore",
    "open_cooccurrence",
    "stored_heldout_fraction",
    "stored_validation_fraction",
    "stored_weighting",
    "weighting_of",
    "read_tile",
    "read_entries",
    "read_checked_C",
    "read_checked_columns",
    "sharing_C",
    "check_entries",
    "stored_eigenpairs",
]

_ARRAY_CONFIG = {"write_empty_chunks": True}
#: ``C``'s codecs: none. A dense float64 matrix gains little from any compressor (1.06× by zstd level 1, 1.14× by
#: LZ4 after byte shuffling, on lda-3k's C), and every one costs more than the bytes it saves: the whole C of
#: lda-3k (N = 4,956, 2048² tiles) written uncompressed in 0.10 s and read in 0.09 s, against 0.29 and 0.13–0.49 s
#: with LZ4 (session 17; the benchmarks README, issue 24). Stores written with a codec read as before (the
#: codec is in the array's metadata).
C_CODEC = None
#: ``D2``'s: small counts; bit shuffling then LZ4 compresses them 5.5× (zstd level 1: 4.1×), 4× faster.
D2_CODEC = BloscCodec(cname="lz4", clevel=5, shuffle="bitshuffle")
#: Every chunk this project writes ends with its CRC-32C (zarr's ``crc32c`` codec, after any compressor): a chunk
#: changed after it was written (a bit flipped on a disk or in a copy) fails its read (a StoreError, by
#: :func:`~jsmf_dask.io.damage.reading`) instead of giving wrong numbers. Stores written before have no checksum
#: and read as before (the codecs are in each array's metadata). Its cost (``pipelines/benchmarks/checksums.py``):
#: a 763 MiB C written in 0.46–0.60 s instead of 0.35–0.42, read in 0.51–0.77 s instead of 0.43–1.03.
CHECKSUM = Crc32cCodec()


def checksummed(compressor=None) -> list:
    """An array's bytes-to-bytes codecs: ``compressor`` (if any), then :data:`CHECKSUM`."""
    return [compressor, CHECKSUM] if compressor is not None else [CHECKSUM]


_REQUIRED_ATTRS = (
    "schema_version", "n_words", "tile_size", "n_docs", "n_docs_skipped", "n_tokens",
    "entry_sum", "vocab_hash", "corpus_manifest",
)
_NUMBER = (int, float)
#: The JSON type of each attribute the stages read (:data:`COOCCURRENCE_LAYOUT` says what each means).
_ATTR_TYPES = {
    "schema_version": int, "n_words": int, "tile_size": int, "n_docs": int, "n_docs_skipped": dict, "n_tokens": int,
    "entry_sum": _NUMBER, "vocab_hash": str, "corpus_manifest": list, "updates": list, "heldout_fraction": _NUMBER,
    "n_docs_heldout": int, "validation_fraction": _NUMBER, "n_docs_validation": int, "form": str, "rank": int,
    "eig_residual": _NUMBER, "eig_tol": _NUMBER, "n_passes": int, "versions": dict, "weighting": str,
}


def cooc_path(root: str) -> str:
    """``<root>/cooc.zarr``."""
    return join(root, "cooc.zarr")


def zarr_store(url: str, *, read_only: bool = False) -> zarr.abc.store.Store:
    """A Zarr store for a local path (LocalStore) or an fsspec URL (FsspecStore)."""
    if is_local(url):
        return zarr.storage.LocalStore(get_fs(url)[1], read_only=read_only)
    return zarr.storage.FsspecStore.from_url(url, read_only=read_only)


def read_group(url: str) -> zarr.Group:
    """The Zarr group at ``url``, opened read-only; damaged metadata is a StoreError (:func:`reading`)."""
    with reading(url):
        return zarr.open_group(zarr_store(url, read_only=True), mode="r")


def create_cooccurrence(url: str, n_words: int, tile_size: int, *, codoc: bool = True) -> None:
    """Create the empty group and arrays ``C``, ``D1`` (and ``D2``) at ``url``."""
    group = zarr.open_group(zarr_store(url), mode="w-", zarr_format=3)
    tile = (tile_size, tile_size)
    group.create_array(
        "C", shape=(n_words, n_words), chunks=tile, dtype="float64",
        compressors=checksummed(C_CODEC), fill_value=0.0, config=_ARRAY_CONFIG,
    )
    group.create_array(
        "D1", shape=(n_words,), chunks=(tile_size,), dtype="int64",
        compressors=checksummed(ZstdCodec(level=1)), fill_value=0, config=_ARRAY_CONFIG,
    )
    if codoc:
        group.create_array(
            "D2", shape=(n_words, n_words), chunks=tile, dtype="int32",
            compressors=checksummed(D2_CODEC), fill_value=0, config=_ARRAY_CONFIG,
        )


def write_compressed(url: str, values: np.ndarray, vectors: np.ndarray, tile_size: int) -> None:
    """Create the compressed group at ``url``: the top-R eigenpairs of ``C`` (``eigenvalues``, ``eigenvectors``)
    and an empty ``D1``."""
    group = zarr.open_group(zarr_store(url), mode="w-", zarr_format=3)
    n, rank = vectors.shape
    write_array(url, "eigenvalues", np.asarray(values, dtype=np.float64))
    arr = group.create_array("eigenvectors", shape=(n, rank), chunks=(min(n, max(tile_size, 1)), rank),
                             dtype="float64", compressors=checksummed(ZstdCodec(level=1)), config=_ARRAY_CONFIG)
    arr[...] = vectors
    group.create_array("D1", shape=(n,), chunks=(min(n, max(tile_size, 1)),), dtype="int64",
                       compressors=checksummed(ZstdCodec(level=1)), fill_value=0, config=_ARRAY_CONFIG)


def write_array(url: str, name: str, values: np.ndarray) -> None:
    """Write a small array (whole) into the group at ``url``: zstd, checksummed, every chunk written."""
    group = zarr.open_group(zarr_store(url), mode="a")
    arr = group.create_array(name, shape=values.shape, dtype=values.dtype,
                             compressors=checksummed(ZstdCodec(level=1)), config=_ARRAY_CONFIG, overwrite=True)
    arr[...] = values


def write_tile(
    url: str,
    rows: tuple[int, int],
    cols: tuple[int, int],
    cooc: np.ndarray,
    codoc: np.ndarray | None,
) -> None:
    """Write tile ``C[rows, cols]`` and its mirror ``C[cols, rows]`` (and the same for ``D2``)."""
    group = zarr.open_group(zarr_store(url), mode="r+")
    r0, r1 = rows
    c0, c1 = cols
    pairs = [("C", cooc)] + ([("D2", codoc)] if codoc is not None else [])
    for name, tile in pairs:
        arr = group[name].with_config(_ARRAY_CONFIG)  # the config is not stored with the array
        arr[r0:r1, c0:c1] = tile
        if (r0, r1) != (c0, c1):
            arr[c0:c1, r0:r1] = tile.T


@dataclass(frozen=True)
class CooccurrenceStore:
    """An opened, validated ``cooc.zarr``.

    Attributes
    ----------
    url : str
    attrs : dict
        The group attributes (:data:`COOCCURRENCE_LAYOUT` ``attrs``).
    group : zarr.Group
    """

    url: str
    attrs: dict[str, Any]
    group: zarr.Group

    @property
    def n_words(self) -> int:
        return int(self.attrs["n_words"])

    @property
    def compressed(self) -> bool:
        """True for a compressed store (top-R eigenpairs of ``C``, no N×N array)."""
        return self.attrs.get("form", "dense") == "compressed"

    @property
    def rank(self) -> int | None:
        """R, the eigenpairs a compressed store holds (None for a dense store)."""
        return int(self.attrs["rank"]) if self.compressed else None

    @property
    def C(self) -> zarr.Array:
        """The co-occurrence matrix (Zarr array; slice it to read)."""
        if self.compressed:
            raise StoreError(f"{self.url}: a compressed store (rank {self.rank}) has no N x N C; this step needs "
                             "the dense store (`jsmf cooccur --overwrite` without --rank)")
        return self.group["C"]

    def eigenpairs(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` stored eigenvalues and eigenvectors of ``C`` (compressed store)."""
        with reading(self.url, "eigenvectors"):
            return self.group["eigenvalues"][:k], self.group["eigenvectors"][:, :k]

    @property
    def D1(self) -> np.ndarray:
        """Each word's document frequency (read from the store at each access)."""
        return self.read("D1")

    def has(self, name: str) -> bool:
        """Whether the store holds the array ``name`` (``D2``, ``doc_hashes``)."""
        with reading(self.url, name):
            return name in self.group

    def read(self, name: str) -> np.ndarray:
        """The whole (small) array ``name`` of the store: ``D1``, ``doc_hashes``, ``row_sums``."""
        with reading(self.url, name):
            array = self.group[name]
        check_complete(self.url, name, array)
        with reading(self.url, name):
            return array[...]

    @property
    def D2(self) -> zarr.Array:
        if not self.has("D2"):
            raise StoreError(f"{self.url}: no D2 array (built with codoc=False)")
        return self.group["D2"]


def open_cooccurrence(url: str) -> CooccurrenceStore:
    """Open ``url`` and check it against the layout.

    Parameters
    ----------
    url : str
        The store, ``<root>/cooc.zarr`` (local path or fsspec URL).

    Returns
    -------
    CooccurrenceStore

    Raises
    ------
    StoreError
        Missing store, wrong ``schema_version``, missing attribute or array, or
        an array of the wrong dtype or shape; the message names the field.
    """
    fs, path = get_fs(url)
    if not fs.exists(path):
        raise StoreError(f"{url}: co-occurrence store does not exist; run `jsmf cooccur` first")
    check_committed(url)
    try:
        group = zarr.open_group(zarr_store(url, read_only=True), mode="r")
        attrs = dict(group.attrs)
    except (*DAMAGE, FileNotFoundError) as err:
        raise StoreError(f"{url}: not a Zarr group: {type(err).__name__}: {err}; {rewrite_hint(url)}") from err
    for key in _REQUIRED_ATTRS:
        if key not in attrs:
            raise StoreError(f"{url}: attribute {key!r} is missing; the store is incomplete or not a cooc store")
    for key, kind in _ATTR_TYPES.items():
        value = attrs.get(key)
        if key in attrs and (not isinstance(value, kind) or isinstance(value, bool)
                             or (kind is int and key in ("n_words", "tile_size") and value < 1)
                             or (key == "weighting" and value not in WEIGHTINGS)):
            raise StoreError(f"{url}: attribute {key!r} is {value!r}; expected "
                             f"{COOCCURRENCE_LAYOUT['attrs'][key]}; {rewrite_hint(url)}")
    if attrs["schema_version"] != SCHEMA_VERSION:
        raise StoreError(
            f"{url}: attribute 'schema_version' is {attrs['schema_version']!r}; expected {SCHEMA_VERSION}"
        )
    n = int(attrs["n_words"])
    form = attrs.get("form", "dense")
    if form == "compressed":
        rank = int(attrs.get("rank", 0))
        expected = (("eigenvectors", "float64", (n, rank)), ("eigenvalues", "float64", (rank,)), ("D1", "int64", (n,)))
    elif form == "dense":
        expected = (("C", "float64", (n, n)), ("D1", "int64", (n,)))
    else:
        raise StoreError(f"{url}: attribute 'form' is {form!r}; expected 'dense' or 'compressed'")
    for name, dtype, shape in expected:
        with reading(url, name):
            if name not in group:
                raise StoreError(f"{url}: array {name!r} is missing")
            arr = group[name]
        if str(arr.dtype) != dtype or tuple(arr.shape) != shape:
            raise StoreError(
                f"{url}: array {name!r} is {arr.dtype} {tuple(arr.shape)}; expected {dtype} {shape}"
            )
        check_complete(url, name, arr)
    with reading(url, "D2"):
        codoc = group["D2"] if "D2" in group else None
    if codoc is not None:
        check_complete(url, "D2", codoc)
    return CooccurrenceStore(url, attrs, group)


def weighting_of(attrs: dict) -> str:
    """How the co-occurrence store of ``attrs`` weighed each document in ``C``
    (:data:`~jsmf_dask.parameters.WEIGHTINGS`; a store written before session 51 has no attribute: once)."""
    return attrs.get("weighting", "documents")


def stored_weighting(root: str) -> str:
    """:func:`weighting_of` ``<root>/cooc.zarr`` (:data:`~jsmf_dask.parameters.DEFAULT_WEIGHTING` when there is no
    store): what a model's ``A`` formed from documents weighs them by, as its ``C`` did."""
    value = _stored_attr(root, "weighting", DEFAULT_WEIGHTING, "documents")
    if value not in WEIGHTINGS:
        raise StoreError(f"{cooc_path(root)}: attribute 'weighting' is {value!r}; expected "
                         f"{COOCCURRENCE_LAYOUT['attrs']['weighting']}; {rewrite_hint(cooc_path(root))}")
    return value


def _stored_attr(root: str, key: str, no_store, no_attr):
    url = cooc_path(root)
    fs, path = get_fs(url)
    if not fs.exists(path):
        return no_store
    with reading(url):
        return read_group(url).attrs.get(key, no_attr)


def _stored_fraction(root: str, key: str) -> float:
    return float(_stored_attr(root, key, 0.0, 0.0))


def stored_heldout_fraction(root: str) -> float:
    """The held-out fraction ``<root>/cooc.zarr`` was built with (0 when it has none or does not exist)."""
    return _stored_fraction(root, "heldout_fraction")


def stored_validation_fraction(root: str) -> float:
    """The validation fraction ``<root>/cooc.zarr`` left out (0 when it has none or does not exist)."""
    return _stored_fraction(root, "validation_fraction")


def read_tile(url: str, name: str, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    """Rows ``[r0, r1)`` × columns ``[c0, c1)`` of the store's array ``name`` (dense)."""
    with reading(url, name):
        return read_group(url)[name][rows[0] : rows[1], cols[0] : cols[1]]


def read_entries(url: str, name: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The entries ``rows`` × ``cols`` (index arrays, an outer product) of the store's array ``name``."""
    with reading(url, name):
        return read_group(url)[name].oindex[rows, cols]


def check_entries(cooc_url: str, finite_rows: np.ndarray, row_min: np.ndarray) -> None:
    """Raise :class:`~jsmf_dask.exceptions.StoreError` naming the first row of C with a NaN or infinite
    entry, else the row of its most negative entry; ``finite_rows`` and ``row_min`` are per row of C."""
    if not np.all(finite_rows):
        row = int(np.flatnonzero(~np.asarray(finite_rows, dtype=bool))[0])
        raise StoreError(f"{cooc_url}: C has NaN or infinite entries (first in row {row}); rebuild it with `jsmf cooccur`")
    if np.min(row_min) < 0:
        row = int(np.argmin(row_min))
        raise StoreError(f"{cooc_url}: C has negative entries (row {row}: {row_min[row]:.3g}); expected C >= 0")


#: url → [C or None, lock]: the C that :func:`read_checked_C` shares inside :func:`sharing_C`.
_SHARED_C: dict[str, list] = {}


@contextlib.contextmanager
def sharing_C(cooc_url: str) -> Iterator[None]:
    """Inside this block, :func:`read_checked_C` of ``cooc_url`` in this process reads and checks C once and
    hands every caller that one array, read-only.

    For a driver that fits many models of one C on threads (``choose-k``):
    otherwise each fit reads the 8N² bytes again (0.2–0.6 s at N = 5,000) and
    fits running side by side hold a copy each. Tasks in other processes read
    as usual. The array is dropped at the end of the block.
    """
    entry = _SHARED_C.setdefault(cooc_url, [None, threading.Lock()])
    try:
        yield
    finally:
        if _SHARED_C.get(cooc_url) is entry:
            del _SHARED_C[cooc_url]


def read_checked_C(cooc_url: str) -> np.ndarray:
    """The store's dense C, checked as :func:`check_entries` does (two passes over C in memory; the rows are
    looked at only when something is wrong). Inside :func:`sharing_C`, the one shared read-only array."""
    shared = _SHARED_C.get(cooc_url)
    if shared is None:
        return _read_checked_C(cooc_url)
    with shared[1]:
        if shared[0] is None:
            C = _read_checked_C(cooc_url)
            C.flags.writeable = False
            shared[0] = C
        return shared[0]


def _read_checked_C(cooc_url: str) -> np.ndarray:
    with reading(cooc_url, "C"):
        C = read_group(cooc_url)["C"][...]
    lo, hi = float(C.min(initial=0.0)), float(C.max(initial=0.0))  # NaN propagates to both
    if not (np.isfinite(lo) and np.isfinite(hi) and lo >= 0):
        check_entries(cooc_url, np.isfinite(C).all(axis=1), C.min(axis=1))
    return C


def read_checked_columns(cooc_url: str, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Columns ``columns`` of the store's dense C (N × len(columns)) and C's row sums (N), read block of rows by
    block and checked as :func:`read_checked_C` checks C: memory O(N · len(columns)) besides one block.

    Parameters
    ----------
    cooc_url : str
    columns : ndarray of int
        Sorted column indices.
    """
    with reading(cooc_url, "C"):
        C = read_group(cooc_url)["C"]
    n = C.shape[0]
    step = max(1, C.chunks[0])
    slab, sums = np.empty((n, columns.size)), np.empty(n)
    finite, row_min = np.empty(n, dtype=bool), np.empty(n)
    for r0 in range(0, n, step):
        with reading(cooc_url, "C"):
            rows = C[r0 : r0 + step, :]
        finite[r0 : r0 + step] = np.isfinite(rows).all(axis=1)
        row_min[r0 : r0 + step] = rows.min(axis=1, initial=0.0)
        sums[r0 : r0 + step] = rows.sum(axis=1)
        slab[r0 : r0 + step] = rows[:, columns]
    check_entries(cooc_url, finite, row_min)
    return slab, sums


def stored_eigenpairs(cooc_url: str, k: int) -> tuple[np.ndarray, np.ndarray, float] | None:
    """A compressed store's top ``k`` eigenpairs of C and their residual; None for a dense store."""
    group = read_group(cooc_url)
    if group.attrs.get("form", "dense") != "compressed":
        return None
    with reading(cooc_url, "eigenvectors"):
        return group["eigenvalues"][:k], group["eigenvectors"][:, :k], float(group.attrs["eig_residual"])
