"""The model store ``<root>/model.zarr/<name>`` (Zarr v3 group, one per fitted model).

Arrays: ``anchors`` (K int64), ``B`` (N×K, columns sum to 1), ``A`` (K×K,
sums to 1), ``A_least_squares`` (the Baseline's A, labelled), ``weights``
(p(z|w), N×K), ``p_word`` (N), the rectified C: for AP and ENN models in
low-rank form, ``Y diag(max(eigenvalues, 0)) Yᵀ + E + shift`` (``Y``,
``eigenvalues``, E's upper triangle in ``correction/*``, ``attrs["low_rank"]``),
for the Baseline and DC as a reference to ``cooc.zarr``'s C with the scale it
was divided by and, for DC, the completed diagonal (``rectified_diagonal``,
``attrs["rectified"]``; ``Y`` and ``eigenvalues`` its top-K eigenpairs), checked
against the store's provenance when read; ``trace/*`` (the
rectification trace, one value per iteration). Attrs: every parameter, the library versions, the provenance of
the co-occurrence store and derived figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import zarr

from jsmf_dask.exceptions import StoreError
from jsmf_dask.io.damage import check_complete, reading, rewrite_hint
from jsmf_dask.io.provenance import provenance
from jsmf_dask.io.fs import check_committed, get_fs, join, join_under
from jsmf_dask.io.schema import SCHEMA_VERSION
from jsmf_dask.io.stored_rows import StoredRows
from jsmf_dask.io.zarr_store import cooc_path, read_group, write_array, zarr_store

__all__ = ["low_rank_rectified", "stored_rectified", "model_path", "topics_path", "ensure_model_group",
           "write_arrays", "FittedModel", "open_model", "list_models", "chosen_model"]

SMALL = ("anchors", "B", "A", "A_least_squares", "weights", "p_word", "Y", "eigenvalues", "objective", "alpha",
         "rectified_diagonal", "anchor_words")


_NUMBER = (int, float)
_OR_NONE = type(None)
#: The JSON type of each model attribute the stages read; the first four are read as numbers, never None.
_ATTR_TYPES = {
    "heldout_fraction": _NUMBER, "validation_fraction": _NUMBER, "n_iter": int, "n_words": int,
    "params": (dict, _OR_NONE), "path": (dict, _OR_NONE), "convergence": (list, _OR_NONE),
    "vocab_hash": (str, _OR_NONE), "cooccurrence": (dict, _OR_NONE), "low_rank": (dict, _OR_NONE),
    "rectified": (dict, _OR_NONE),
    "anchor_floor": (dict, _OR_NONE), "anchor_words": (dict, _OR_NONE), "method": (str, _OR_NONE),
    "start": (str, _OR_NONE), "drawn_sweeps": (int, _OR_NONE), "source": (dict, _OR_NONE), "stopped": (str, _OR_NONE),
    "returned_state": (int, _OR_NONE), "averaged_states": (int, _OR_NONE), "eta": (*_NUMBER, _OR_NONE),
    "training": (dict, _OR_NONE), "validation": (dict, _OR_NONE), "heldout": (dict, _OR_NONE),
    "refit": (dict, _OR_NONE), "candidates": (list, _OR_NONE), "warnings": (list, _OR_NONE),
}


def model_path(root: str, name: str) -> str:
    """``<root>/model.zarr/<name>`` (``name`` one safe path component: :func:`~jsmf_dask.io.fs.join_under`)."""
    return join_under(root, "model.zarr", name)


def topics_path(root: str, name: str) -> str:
    """``<root>/topics/<name>.txt`` (``name`` one safe path component: :func:`~jsmf_dask.io.fs.join_under`)."""
    return join_under(root, "topics", f"{name}.txt")


def ensure_model_group(root: str) -> None:
    """Create ``<root>/model.zarr`` (the group that holds the models) if it is missing.

    Two writers may find it missing at once (models committed side by side: choose-k's threads, two
    commands); the one that loses the creation finds the winner's group, which is all it needs.
    """
    url = join(root, "model.zarr")
    with reading(url):
        try:
            zarr.open_group(zarr_store(url), mode="a", zarr_format=3)
        except zarr.errors.ContainsGroupError:
            zarr.open_group(zarr_store(url), mode="r")


def write_arrays(model_url: str, arrays: dict[str, np.ndarray]) -> None:
    """Write a model's small arrays (whole; driver side): :func:`write_array` each."""
    for name, values in arrays.items():
        write_array(model_url, name, np.asarray(values))


@dataclass(frozen=True)
class FittedModel:
    """An opened model group (``root`` the run root it belongs to): small arrays loaded."""

    url: str
    name: str
    attrs: dict[str, Any]
    arrays: dict[str, np.ndarray]
    trace: dict[str, np.ndarray]
    group: zarr.Group
    root: str

    def has(self, name: str) -> bool:
        """Whether the model group holds ``name`` (``correction``: the low-rank form's sparse part)."""
        with reading(self.url, name):
            return name in self.group

    def rectified_C(self) -> np.ndarray:
        """The rectified C as a dense N×N array, whichever form the store keeps (loads N² floats: small N only);
        of a model fitted on an anchor vocabulary, the n×n block of those words (``arrays['anchor_words']``)."""
        if self.has("correction"):
            U, s, (rows, cols, values) = low_rank_rectified(self)
            C = (U * s) @ U.T
            C[rows, cols] += values  # the correction's upper triangle (each entry once), then its mirror
            off = rows != cols
            C[cols[off], rows[off]] += values[off]
            return C
        return stored_rectified(self).rows(slice(None))


def open_model(root: str, name: str) -> FittedModel:
    """Open ``<root>/model.zarr/<name>``.

    Parameters
    ----------
    root : str
        Run root (local path or fsspec URL).
    name : str
        The model's name (``k20-ap``, ``k20-ap-refined``).

    Returns
    -------
    FittedModel
        Its arrays (``B``, ``A``, …), trace and attributes.

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
    group = read_group(url)
    with reading(url):
        attrs = dict(group.attrs)
    if attrs.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(f"{url}: attribute 'schema_version' is {attrs.get('schema_version')!r}; expected {SCHEMA_VERSION}")
    for key, kind in _ATTR_TYPES.items():
        value = attrs.get(key)
        if key in attrs and (not isinstance(value, kind) or isinstance(value, bool)):  # no attribute is a bool
            raise StoreError(f"{url}: attribute {key!r} is {value!r}; expected {_type_names(kind)}; "
                             f"{rewrite_hint(url)}")
    arrays = {k: v for k in SMALL if (v := _read_whole(url, group, k)) is not None}
    if missing := [k for k in ("B", "A") if k not in arrays]:
        raise StoreError(f"{url}: array {missing[0]!r} is missing, the model is incomplete; "
                         f"{rewrite_hint(url)}")
    if broken := [k for k in ("B", "A") if not np.isfinite(arrays[k]).all()]:  # a fit never writes one
        raise StoreError(f"{url}: array {broken[0]!r} has NaN or infinite entries, the store is damaged; "
                         f"{rewrite_hint(url)}")
    with reading(url, "trace"):
        traced = list(group["trace"].array_keys()) if "trace" in group else []
    trace = {k: _read_whole(url, group, f"trace/{k}") for k in traced}
    return FittedModel(url, name, attrs, arrays, trace, group, root)


def _type_names(kind: type | tuple) -> str:
    """``kind`` in JSON's words ('a number or null')."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    kinds = [k for k in kinds if not (k is int and float in kinds)]
    words = {int: "an integer", float: "a number", dict: "an object", list: "a list", str: "a string", _OR_NONE: "null"}
    return " or ".join(words[k] for k in kinds)


def _read_whole(url: str, group: zarr.Group, path: str) -> np.ndarray | None:
    """The whole array ``path`` of the model group, None if it has none (:func:`reading`: damage named)."""
    with reading(url, path):
        if path not in group:
            return None
        array = group[path]
    check_complete(url, path, array)
    with reading(url, path):
        return array[...]


def chosen_model(root: str, name: str | None, *, option: str = "--model") -> str:
    """``name``, or the root's only model when it is None.

    Raises
    ------
    StoreError
        If ``name`` is None and the root holds no model or several (naming them and ``option``, the way to
        choose).
    """
    if name is not None:
        return name
    names = list_models(root)
    if len(names) != 1:
        raise StoreError(f"{root}: choose a model with {option}; fitted models: {names or 'none'}")
    return names[0]


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


def stored_rectified(model: FittedModel) -> StoredRows:
    """A Baseline's or DC model's rectified C: ``cooc.zarr``'s C divided by the recorded scale, DC's diagonal.

    Raises
    ------
    StoreError
        If the model keeps its rectified C in low-rank form (AP, ENN), or the
        co-occurrence store is no longer the one it was fitted on (rebuilt or
        updated since: the model must be refitted).
    """
    rectified = model.attrs.get("rectified")
    if rectified is None:
        raise StoreError(f"{model.url}: the rectified C is kept in low-rank form (an AP or ENN model)")
    url = cooc_path(model.root)
    store_attrs = dict(read_group(url).attrs)
    if provenance(store_attrs) != model.attrs.get("cooccurrence"):
        raise StoreError(
            f"{model.url}: model {model.name!r} keeps its rectified C as a reference to {url}, which has changed "
            "since it was fitted (cooccur --update or a rebuild); refit the model"
        )
    return StoredRows(url, "C", float(rectified["scale"]), model.arrays.get("rectified_diagonal"))


def low_rank_rectified(model: FittedModel) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """An AP or ENN model's rectified C as ``(U, s, upper)`` with ``C = U diag(s) Uᵀ + E``: ``U = [Y, 1]``,
    ``s = [max(eigenvalues, 0), shift]`` and ``upper`` the symmetric ``E``'s stored upper triangle
    ``(rows, cols, values)`` (:func:`~jsmf_dask.kernels.upper_sparse.symmetric_from_upper` makes ``E``)."""
    if not model.has("correction"):
        raise StoreError(f"{model.url}: no low-rank rectified C (a Baseline or DC model: see stored_rectified)")
    Y, values = model.arrays["Y"], model.arrays["eigenvalues"]
    n = Y.shape[0]
    U = np.hstack([Y, np.ones((n, 1))])
    s = np.append(np.maximum(values, 0.0), float(model.attrs["low_rank"]["shift"]))
    with reading(model.url, "correction"):
        g = model.group["correction"]
        parts = {name: g[name] for name in ("rows", "cols", "values")}
    for name, array in parts.items():
        check_complete(model.url, f"correction/{name}", array)
    with reading(model.url, "correction"):
        return U, s, tuple(array[:] for array in parts.values())
