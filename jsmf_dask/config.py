"""The ``jsmf`` namespace of :mod:`dask.config` (execution tuning, not algorithm parameters)."""

from __future__ import annotations

import os
from typing import Any

import dask.config
import yaml

__all__ = ["get"]

_FILE = os.path.join(os.path.dirname(__file__), "jsmf.yaml")

with open(_FILE) as _f:
    _DEFAULTS = yaml.safe_load(_f)

dask.config.update_defaults(_DEFAULTS)


def _default(key: str) -> Any:
    node: Any = _DEFAULTS["jsmf"]
    for part in key.split("."):
        node = node[part]
    return node


def get(key: str, value: Any = None) -> Any:
    """``value`` if given, else ``dask.config.get("jsmf." + key)``, else the shipped default.

    The last fallback keeps the defaults of ``jsmf.yaml`` in force when the
    ``jsmf`` namespace was created by a ``dask.config.set({"jsmf.…": …})``
    entered *before* this module was imported: leaving that context deletes
    the whole namespace, defaults included.
    """
    if value is not None:
        return value
    return dask.config.get(f"jsmf.{key}", default=_default(key))
