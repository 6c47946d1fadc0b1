"""Stage markers: what a committed stage was computed from, so a rerun can skip it.

A marker ``<root>/_run/<stage>.json`` is written (atomically) right after the
stage's output is committed. It holds the stage's *fingerprint*: a hash of its
parameters and of its inputs (the input files' contents for ``ingest``, the
upstream stages' fingerprints otherwise). A crash between the commit and the
marker leaves a committed output without a matching marker, so the rerun redoes
that stage: the run is never left half old, half new.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from typing import Any

from jsmf_dask.io.fs import get_fs, join, write_file

__all__ = ["fingerprint", "input_digest", "marker_path", "read_marker", "write_marker"]


def fingerprint(*parts: Any) -> str:
    """sha256 of the parts as canonical JSON."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def input_digest(url: str) -> list[tuple[str, int, str]]:
    """``(path, bytes, sha256)`` of a file, or of every file under a directory (sorted)."""
    fs, path = get_fs(url)
    paths = sorted(fs.find(path)) if fs.isdir(path) else [path]
    out = []
    for p in paths:
        h = hashlib.sha256()
        with fs.open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        out.append((p, int(fs.size(p)), h.hexdigest()))
    return out


def marker_path(root: str, stage: str) -> str:
    """``<root>/_run/<stage>.json``."""
    return join(root, "_run", f"{stage}.json")


def read_marker(root: str, stage: str) -> dict[str, Any] | None:
    """The stage's marker, or None when there is none (or it is unreadable)."""
    fs, path = get_fs(marker_path(root, stage))
    if not fs.exists(path):
        return None
    try:
        with fs.open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_marker(root: str, stage: str, fp: str, params: dict[str, Any]) -> None:
    """Record that ``stage`` committed its output from fingerprint ``fp``."""
    body = {"stage": stage, "fingerprint": fp, "params": params,
            "committed": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    write_file(marker_path(root, stage), json.dumps(body, indent=2, default=str), root=root)
