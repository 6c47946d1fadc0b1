"""What a store records of where it came from: library versions, and a model's co-occurrence store."""

from __future__ import annotations

import importlib.metadata

__all__ = ["library_versions", "provenance", "PROVENANCE"]

#: The co-occurrence store's attrs a model records, to tell later whether the store changed under it.
PROVENANCE = ("n_docs", "n_tokens", "entry_sum", "corpus_manifest")


def library_versions() -> dict[str, str]:
    """Versions of this package and the libraries whose behaviour the stores depend on."""
    out = {}
    for name in ("jsmf_dask", "dask", "distributed", "zarr", "pyarrow", "numpy", "scipy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def provenance(store_attrs: dict) -> dict:
    """What a model records of the co-occurrence store it was fitted on (:data:`PROVENANCE` and the form)."""
    return {k: store_attrs[k] for k in PROVENANCE} | {"form": store_attrs.get("form", "dense")}
