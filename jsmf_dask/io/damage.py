"""Damaged stores: what zarr and its codecs raise on a store that is not as it was written, as a
:class:`~jsmf_dask.exceptions.StoreError` naming the store, the array and what writes it again.

An interrupted copy, a full or bad disk or a hand edit can leave a ``zarr.json`` that is not JSON (or not UTF-8)
or has a field missing or mistyped, or a chunk emptied, cut short or overwritten. zarr reports those as
``JSONDecodeError``, ``TypeError`` or a codec's ``ValueError``/``RuntimeError`` from deep inside its reads;
every read of a store goes through :func:`reading` so that the user sees one line instead.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.fs import get_fs, join

__all__ = ["DAMAGE", "reading", "rewrite_hint", "check_complete", "read_json_object"]

#: What zarr and its codecs raise on a damaged store: a ``zarr.json`` that is not JSON, not UTF-8 or has missing or
#: mistyped fields, a chunk truncated or overwritten (the codecs' errors). Caught around store reads only.
DAMAGE = (ValueError, TypeError, KeyError, AttributeError, RuntimeError)


@contextlib.contextmanager
def reading(url: str, what: str | None = None) -> Iterator[None]:
    """Reads of the Zarr store ``url`` (``what``: the array read) inside this block raise
    :class:`~jsmf_dask.exceptions.StoreError` naming the store, not zarr's or a codec's error, when the store is
    damaged (an interrupted copy, a bad disk, a hand edit). Wrap reads only, never work on what was read."""
    try:
        yield
    except StoreError:
        raise
    except DAMAGE as err:
        where = join(url, what) if what else url
        raise StoreError(f"{where}: cannot be read, the store is damaged ({type(err).__name__}: {err}); "
                         f"{rewrite_hint(url)}") from err


def check_complete(url: str, name: str, array) -> None:
    """Raise :class:`~jsmf_dask.exceptions.StoreError` when a chunk of the Zarr ``array`` (``name`` in the store
    ``url``) is missing. This project writes every chunk (``write_empty_chunks``), zeros included; zarr would read a
    missing one as zeros, silently."""
    with reading(url, name):
        stored, total = array.nchunks_initialized, array.nchunks
    if stored < total:
        raise StoreError(f"{join(url, name)}: {total - stored} of its {total} chunks are missing, the store is "
                         f"damaged (a copy cut short?); {rewrite_hint(url)}")


def rewrite_hint(url: str) -> str:
    """What writes the store ``url`` again."""
    parts = url.rstrip("/").rsplit("/", 2)
    if parts[-1] == "cooc.zarr":
        return "build it again with `jsmf cooccur ROOT --overwrite`"
    if len(parts) > 1 and parts[-2] == "model.zarr":
        return "fit or refine the model again with --overwrite, or delete it"
    if parts[-1] == "arrays.zarr":
        return "save the estimator again (RectifiedAnchorWords.save)"
    return "write it again"


def read_json_object(url: str, rewrite: str) -> dict[str, Any]:
    """The JSON object in the file ``url``. A file that is not JSON (or not UTF-8), or holds another kind of value,
    is a :class:`~jsmf_dask.exceptions.StoreError` naming it and saying ``rewrite`` (what writes it again)."""
    fs, path = get_fs(url)
    try:
        with fs.open(path) as f:
            body = json.load(f)
    except ValueError as err:
        raise StoreError(f"{url}: cannot be read, the file is damaged ({type(err).__name__}: {err}); "
                         f"{rewrite}") from err
    if not isinstance(body, dict):
        raise StoreError(f"{url}: holds {type(body).__name__} JSON, not an object; {rewrite}")
    return body
