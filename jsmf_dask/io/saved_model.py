"""A saved estimator (``RectifiedAnchorWords.save``): one directory, a Zarr v3 group and its vocabulary.

Layout of ``<path>/``: ``arrays.zarr``, a group of arrays (``B`` N×K, ``A``, ``anchors`` and
whatever else the estimator keeps: ``alpha``, ``spectral_B``, …; nested names
such as ``trace/refine/seconds`` are subgroups), its attrs (``kind`` =
:data:`SAVED_MODEL_KIND`, ``schema_version``, the estimator's parameters and
fitted scalars, the library versions) and ``vocab.parquet`` (``word_id``,
``word``: the columns the model was fitted on, in order). Written into a
staging directory and renamed into place, so a reader sees all of it or none.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any

import numpy as np
import pyarrow as pa
import zarr

from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.damage import check_complete, reading
from jsmf_dask.io.fs import check_committed, get_fs, join, parent_url, staged_output
from jsmf_dask.io.model_store import write_arrays
from jsmf_dask.io.parquet import read_parquet, write_parquet
from jsmf_dask.io.provenance import library_versions
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.zarr_store import read_group, zarr_store

__all__ = ["SAVED_MODEL_KIND", "is_saved_model", "write_saved_model", "read_saved_model"]

SAVED_MODEL_KIND = "jsmf_dask.RectifiedAnchorWords"
_ARRAYS = "arrays.zarr"
_VOCAB = "vocab.parquet"


def is_saved_model(url: str) -> bool:
    """Whether ``url`` holds a saved estimator (its group's ``kind`` attribute)."""
    fs, path = get_fs(join(url, _ARRAYS, "zarr.json"))
    if not fs.exists(path):
        return False
    arrays_url = join(url, _ARRAYS)
    with reading(arrays_url):
        return read_group(arrays_url).attrs.get("kind") == SAVED_MODEL_KIND


def write_saved_model(url: str, arrays: dict[str, np.ndarray], attrs: dict[str, Any], words: list[str], *,
                      overwrite: bool = False) -> str:
    """Write a saved estimator at ``url`` (a directory; its parent is created if missing).

    Raises
    ------
    StoreError
        If ``url`` exists and ``overwrite`` is False.
    """
    url = os.fspath(url).rstrip("/")
    with staged_output(url, root=parent_url(url), overwrite=overwrite) as tmp:  # creates the parent too
        group_url = join(tmp, _ARRAYS)
        zarr.open_group(zarr_store(group_url), mode="w", zarr_format=3)
        write_arrays(group_url, arrays)
        full = {"kind": SAVED_MODEL_KIND, "schema_version": SCHEMA_VERSION, **attrs,
                "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "versions": library_versions()}
        zarr.open_group(zarr_store(group_url), mode="r+").attrs.update(full)
        table = pa.table({"word_id": pa.array(np.arange(len(words), dtype=np.int32)),
                          "word": pa.array(words, pa.string())})
        write_parquet(join(tmp, _VOCAB), table)
    return url


def read_saved_model(url: str) -> tuple[dict[str, np.ndarray], dict[str, Any], list[str]]:
    """``(arrays, attrs, words)`` of the saved estimator at ``url`` (nested arrays by their path).

    Raises
    ------
    StoreError
        If it is missing, incomplete, of another kind or another schema version.
    """
    url = os.fspath(url).rstrip("/")
    if not is_saved_model(url):
        raise StoreError(f"{url}: not a saved RectifiedAnchorWords (RectifiedAnchorWords.save writes one)")
    check_committed(url)
    arrays_url = join(url, _ARRAYS)
    group = read_group(arrays_url)
    with reading(arrays_url):
        attrs = dict(group.attrs)
    if attrs.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(f"{url}: attribute 'schema_version' is {attrs.get('schema_version')!r}; "
                         f"expected {SCHEMA_VERSION}")
    arrays = _nested(arrays_url, group)
    vocab = join(url, _VOCAB)
    fs, path = get_fs(vocab)
    if not fs.exists(path):
        raise StoreError(f"{url}: {_VOCAB} is missing; the saved model is incomplete")
    words = read_parquet(vocab).column("word").to_pylist()
    return arrays, attrs, words


def _nested(url: str, group: zarr.Group, prefix: str = "") -> dict[str, np.ndarray]:
    """Every array under ``group`` (the store ``url``'s, at ``prefix``) by its path, read whole."""
    with reading(url, prefix.rstrip("/") or None):
        arrays, groups = list(group.arrays()), list(group.groups())
    found = {}
    for path, array in arrays:
        check_complete(url, prefix + path, array)
        with reading(url, prefix + path):
            found[prefix + path] = array[...]
    for sub_path, sub in groups:
        found |= _nested(url, sub, f"{prefix}{sub_path}/")
    return found
