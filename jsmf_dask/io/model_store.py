"""The model store ``<root>/model.zarr/<name>`` (Zarr v3 group, one per fitted model).

Arrays: ``anchors`` (K int64), ``B`` (N×K, columns sum to 1), ``A`` (K×K,
sums to 1), ``A_least_squares`` (the Baseline's A, labelled), ``weights``
(p(z|w), N×K), ``p_word`` (N), the rectified C: for AP and ENN models in
low-rank form, ``Y diag(max(eigenvalues, 0)) Yᵀ + E + shift`` (``Y``,
``eigenvalues``, E's upper triangle in ``correction/*``, ``attrs["low_rank"]``),
for the Baseline and DC dense as ``C_rect`` (tiled like ``cooc.zarr``, with
``Y`` and ``eigenvalues`` its top-K eigenpairs); ``trace/*`` (the
rectification trace, one value per iteration). Attrs: every parameter, the library versions, the provenance of
the co-occurrence store and derived figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sps
import zarr
from zarr.codecs import ZstdCodec

from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.fs import check_committed, get_fs, join
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.zarr_store import zarr_store
from jsmf_dask.kernels.rectify import symmetric_from_upper

__all__ = ["low_rank_rectified", "model_path", "topics_path", "ensure_model_group", "create_model", "write_array", "FittedModel", "open_model", "list_models"]

_CONFIG = {"write_empty_chunks": True}
SMALL = ("anchors", "B", "A", "A_least_squares", "weights", "p_word", "Y", "eigenvalues", "objective", "alpha")


def model_path(root: str, name: str) -> str:
    """``<root>/model.zarr/<name>``."""
    return join(root, "model.zarr", name)


def topics_path(root: str, name: str) -> str:
    """``<root>/topics/<name>.txt``."""
    return join(root, "topics", f"{name}.txt")


def ensure_model_group(root: str) -> None:
    """Create ``<root>/model.zarr`` (the group that holds the models) if it is missing."""
    zarr.open_group(zarr_store(join(root, "model.zarr")), mode="a", zarr_format=3)


def create_model(url: str, n_words: int, tile_size: int) -> None:
    """Create the model group at ``url`` with the tiled ``C_rect`` array pre-created."""
    group = zarr.open_group(zarr_store(url), mode="a", zarr_format=3)
    group.create_array(
        "C_rect", shape=(n_words, n_words), chunks=(tile_size, tile_size), dtype="float64",
        compressors=ZstdCodec(level=1), fill_value=0.0, config=_CONFIG,
    )


def write_array(url: str, name: str, values: np.ndarray) -> None:
    """Write a small array (whole) into the model group at ``url``."""
    group = zarr.open_group(zarr_store(url), mode="a")
    arr = group.create_array(name, shape=values.shape, dtype=values.dtype, compressors=ZstdCodec(level=1),
                             config=_CONFIG, overwrite=True)
    arr[...] = values


@dataclass(frozen=True)
class FittedModel:
    """An opened model group: small arrays loaded, ``C_rect`` left on disk."""

    url: str
    name: str
    attrs: dict[str, Any]
    arrays: dict[str, np.ndarray]
    trace: dict[str, np.ndarray]
    group: zarr.Group

    def rectified_C(self) -> np.ndarray:
        """The rectified C as a dense N×N array, whichever form the store keeps (loads N² floats: small N only)."""
        if "C_rect" in self.group:
            return self.group["C_rect"][...]
        U, s, E = low_rank_rectified(self)
        return (U * s) @ U.T + E.toarray()


def open_model(root: str, name: str) -> FittedModel:
    """Open ``<root>/model.zarr/<name>``.

    Raises
    ------
    StoreError
        If it is missing or incomplete.
    """
    url = model_path(root, name)
    fs, path = get_fs(url)
    if not fs.exists(path):
        raise StoreError(f"{url}: no such model; fitted models: {list_models(root) or 'none'}")
    check_committed(url)
    group = zarr.open_group(zarr_store(url, read_only=True), mode="r")
    attrs = dict(group.attrs)
    if attrs.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(f"{url}: attribute 'schema_version' is {attrs.get('schema_version')!r}; expected {SCHEMA_VERSION}")
    arrays = {k: group[k][...] for k in SMALL if k in group}
    trace = {k: group["trace"][k][...] for k in group["trace"].array_keys()} if "trace" in group else {}
    return FittedModel(url, name, attrs, arrays, trace, group)


def list_models(root: str) -> list[str]:
    """Names of the models under ``<root>/model.zarr``."""
    fs, path = get_fs(join(root, "model.zarr"))
    if not fs.exists(path):
        return []
    return sorted(
        p.rstrip("/").rsplit("/", 1)[-1]
        for p in fs.ls(path, detail=False)
        if fs.isdir(p) and not p.rstrip("/").rsplit("/", 1)[-1].startswith(".") and fs.exists(f"{p}/zarr.json")
    )


def low_rank_rectified(model: FittedModel) -> tuple[np.ndarray, np.ndarray, sps.csr_array]:
    """An AP or ENN model's rectified C as ``(U, s, E)`` with ``C = U diag(s) Uᵀ + E``: ``U = [Y, 1]``,
    ``s = [max(eigenvalues, 0), shift]`` and ``E`` rebuilt symmetric from its stored upper triangle."""
    if "correction" not in model.group:
        raise StoreError(f"{model.url}: no low-rank rectified C (a Baseline or DC model: see C_rect)")
    Y, values = model.arrays["Y"], model.arrays["eigenvalues"]
    n = Y.shape[0]
    g = model.group["correction"]
    E = symmetric_from_upper(g["rows"][:], g["cols"][:], g["values"][:], n)
    U = np.hstack([Y, np.ones((n, 1))])
    s = np.append(np.maximum(values, 0.0), float(model.attrs["low_rank"]["shift"]))
    return U, s, E
