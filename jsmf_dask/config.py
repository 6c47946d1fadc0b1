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


def get(key: str, value: Any = None) -> Any:
    """``value`` if given, else ``dask.config.get("jsmf." + key)``."""
    if value is not None:
        return value
    return dask.config.get(f"jsmf.{key}")
