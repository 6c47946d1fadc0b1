"""The run configuration of ``jsmf run CONFIG.toml``: every stage of one run, validated up front.

A config names the run root and cluster, then one table per stage::

    root = "runs/nips"                 # local path or fsspec URL (relative: to the config's folder)
    scheduler = "tcp://host:8786"      # optional: an address, local, threads or synchronous; default: auto (by size)
    workers = 2                        # optional, LocalCluster only

    [ingest]
    inputs = ["data/nipstxt.tar.xz"]   # relative paths: to the config's folder
    vocab_size = 5000

    [cooccur]
    tile_size = 2048                   # or rank = 100: the compressed store (large vocabularies)

    [[fit]]                            # one table per model
    topics = 20
    rectifier = "ap"

    [[refine]]                         # one table per refined model
    model = "k20-ap"
    sweeps = 8

    [evaluate]                         # present (even empty): run it
    [report]
    [infer]
    model = "k20-ap"

Every key is checked against the tables below; an error names the file, the
table and the key, and what was expected.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsmf_dask._validation import name_problem
from jsmf_dask.parameters import TOPICS_VOCAB_SIZE, stage_parameters
from jsmf_dask.exceptions import InvalidParameterError, JSMFError

__all__ = ["ConfigError", "RunConfig", "load_run_config", "topics_config", "STAGES", "TABLE_ARRAYS"]

STAGES = ("ingest", "cooccur", "fit", "refine", "evaluate", "report", "infer")
TABLE_ARRAYS = ("fit", "refine")  # stages given as arrays of tables, one per model


class ConfigError(JSMFError):
    """A run configuration that cannot be used as written."""


_STR, _INT, _FLOAT, _BOOL = (str,), (int,), (int, float), (bool,)
_KINDS = {"int": _INT, "count": _STR + _INT, "float": _FLOAT, "choice": _STR, "prior": _STR + _FLOAT,
          "priors": _STR + _FLOAT + (list,), "str": _STR}


def _table_specs(stage: str) -> dict[str, tuple[tuple[type, ...], bool]]:
    """The config keys of ``stage``'s entries in :data:`~jsmf_dask.parameters.PARAMETERS`: type and whether required."""
    return {p.config_key: (_KINDS[p.kind], p.required) for p in stage_parameters(stage)}


_FRACTION = (_FLOAT, False)
_TOP = {"root": (_STR, True), "scheduler": (_STR, False), "workers": (_INT, False), "memory_limit": (_STR, False)}
_SPECS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "ingest": {
        "inputs": ((list,), True), "format": (_STR, False), "vocab": (_STR, False), "doc_ids": (_STR, False),
        "text_column": (_STR, False), "id_column": (_STR, False), "stopwords": (_STR + _BOOL, False),
        **_table_specs("ingest"), "delimiter": (_STR, False), "docs_per_shard": (_INT, False),
        "row_group_size": (_INT, False), "append": (_BOOL, False), "encoding": (_STR, False),
        "labels": (_STR, False), "strip": (_STR, False), "header": (_BOOL, False),
    },
    "cooccur": {**_table_specs("cooccur"), "tile_size": (_INT, False), "codoc": (_BOOL, False),
                "batch_nnz": (_INT, False), "update": (_BOOL, False)},
    # fit's and refine's algorithm parameters come from the parameter table (their values are checked
    # against it when the stage runs); the keys below are the rest
    "fit": {**_table_specs("fit"), "name": (_STR, False), "warm_start": (_STR, False)},
    "refine": {**_table_specs("refine"), "model": (_STR, True), "name": (_STR, False), "heldout": _FRACTION},
    "evaluate": {"models": ((list,), False), "heldout": _FRACTION, "sampled_fold_in": (_BOOL, False)},
    "report": {"model": (_STR, False), "baseline": (_STR, False)},
    "infer": {"model": (_STR, False)},
}
_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list"}
#: Keys whose values name models (strings, or a list of them): each must be a safe name (``NAME_RULE``).
_NAME_KEYS = {"fit": ("name", "warm_start"), "refine": ("model", "name"), "evaluate": ("models",),
              "report": ("model", "baseline"), "infer": ("model",)}


@dataclass
class RunConfig:
    """A validated run configuration (paths resolved against the config's folder)."""

    path: str
    root: str
    scheduler: str | None = None
    workers: int | None = None
    memory_limit: str | None = None
    stages: dict[str, Any] = field(default_factory=dict)
    #: The stages the file gives as arrays of tables (``[[fit]]``); a single ``[fit]`` table is allowed too.
    arrays: tuple[str, ...] = TABLE_ARRAYS

    def stage(self, name: str) -> Any:
        """The stage's table (a list of tables for ``fit`` and ``refine``), or None when the config leaves it out."""
        return self.stages.get(name)

    def table(self, name: str) -> str:
        """How the file names the stage's table: ``[[fit]]`` or ``[fit]``."""
        return f"[[{name}]]" if name in self.arrays else f"[{name}]"


def _check(where: str, table: dict, spec: dict, names: tuple[str, ...] = ()) -> None:
    for key, value in table.items():
        if key not in spec:
            raise ConfigError(f"{where}: unknown key {key!r}; expected one of {sorted(spec)}")
        types, _ = spec[key]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            expected = " or ".join(_NAMES[t] for t in types)
            raise ConfigError(f"{where}: key {key!r} must be {expected}; got {value!r}")
        if key in names:
            for item in value if isinstance(value, list) else [value]:
                problem = name_problem(item)
                if problem is not None:
                    raise ConfigError(f"{where}: key {key!r} is not a valid name: {problem}; got {item!r}")
    for key, (_, required) in spec.items():
        if required and key not in table:
            raise ConfigError(f"{where}: missing required key {key!r}")


def _check_values(where: str, stage: str, table: dict) -> None:
    """The ranges and choices of the parameter table for ``stage``'s keys, before anything runs."""
    params = {p.config_key: p for p in stage_parameters(stage)}
    for key, value in table.items():
        if key in params:
            try:
                params[key].check(value, where, name=key)
            except InvalidParameterError as err:
                raise ConfigError(str(err)) from None


def _resolve(base: Path, value: str) -> str:
    if "://" in value or os.path.isabs(value):
        return value
    return str((base / value).resolve())


def load_run_config(path: str | os.PathLike) -> RunConfig:
    """Read and validate ``path`` (TOML).

    Raises
    ------
    ConfigError
        Naming the file, the table and the key.
    """
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    top = {k: v for k, v in raw.items() if k not in STAGES}
    _check(f"{path}", top, _TOP)
    base = path.resolve().parent
    stages: dict[str, Any] = {}
    for name in STAGES:
        if name not in raw:
            continue
        value = raw[name]
        tables = value if name in TABLE_ARRAYS and isinstance(value, list) else [value]
        for i, table in enumerate(tables):
            where = f"{path}: [{name}]" if name not in TABLE_ARRAYS or not isinstance(value, list) \
                else f"{path}: [[{name}]] #{i + 1}"
            if not isinstance(table, dict):
                raise ConfigError(f"{where}: must be a table")
            _check(where, table, _SPECS[name], _NAME_KEYS.get(name, ()))
            _check_values(where, name, table)
        if name == "ingest":
            inputs = value["inputs"]
            if not inputs or not all(isinstance(x, str) for x in inputs):
                raise ConfigError(f"{path}: [ingest]: key 'inputs' must be a non-empty list of paths")
            value = dict(value, inputs=[_resolve(base, x) for x in inputs])
            for key in ("vocab", "doc_ids", "labels"):
                if key in value:
                    value[key] = _resolve(base, value[key])
            if isinstance(value.get("stopwords"), str) and value["stopwords"] != "english":  # a file
                value["stopwords"] = _resolve(base, value["stopwords"])
        stages[name] = [dict(t) for t in tables] if name in TABLE_ARRAYS else dict(value)
    if not stages:
        raise ConfigError(f"{path}: no stage tables; expected some of {list(STAGES)}")
    if "workers" in top and top["workers"] < 1:
        raise ConfigError(f"{path}: key 'workers' must be >= 1; got {top['workers']}")
    return RunConfig(str(path), _resolve(base, top["root"]), top.get("scheduler"), top.get("workers"),
                     top.get("memory_limit"), stages, tuple(n for n in TABLE_ARRAYS if isinstance(raw.get(n), list)))


def topics_config(inputs: list[str], root: str, n_topics: int, *, ingest: dict | None = None,
                  heldout: float | None = None, validation: float = 0.05, iterations: int | None = None,
                  anchor_words: int | str | None = None, start: str | None = None, scheduler: str | None = None,
                  workers: int | None = None, memory_limit: str | None = None) -> RunConfig:
    """The run of ``jsmf topics``: ingest → cooccur → fit (AP) → refine (the default CVB0), on one root.

    The same stages and stores as the four commands (and as a config file with
    these tables), so it resumes like ``jsmf run``: a stage whose inputs and
    parameters are unchanged is skipped. The vocabulary keeps
    :data:`~jsmf_dask.parameters.TOPICS_VOCAB_SIZE` words unless ``ingest``
    says otherwise; ``validation`` (5%) of the documents stop refine when they
    stop improving; the fit runs the cycles and the anchor vocabulary of a fit refine follows (``anchor_words``:
    ``'auto'`` unless given; at least the vocabulary's size: every word); refine's runs start as ``start`` says
    (refine's own default unless given). C is counted without ``D2`` (nothing on
    the route reads it; ``evaluate``'s coherence counts its top words' co-document frequencies from the same
    documents instead, the same numbers): 0.15 s of 3.9 at 3k documents.
    """
    tables: dict[str, Any] = {
        "ingest": {"vocab_size": TOPICS_VOCAB_SIZE, **(ingest or {}), "inputs": [os.fspath(u) for u in inputs]},
        "cooccur": {"validation": validation, "codoc": False, **({"heldout": heldout} if heldout else {})},
        "fit": [{"topics": n_topics, **({"iterations": iterations} if iterations else {}),
                 **({"anchor_words": anchor_words} if anchor_words is not None else {})}],
        "refine": [{"model": f"k{n_topics}-ap", **({"start": start} if start else {})}],
    }
    for name in ("ingest", "cooccur"):
        _check(f"jsmf topics: [{name}]", tables[name], _SPECS[name])
    return RunConfig("jsmf topics", os.fspath(root), scheduler, workers, memory_limit, tables)
