"""How the ``jsmf`` command words a library message: in the words the user set the parameters with.

The library names its parameters as the Python API does (``The 'n_topics'
parameter of fit``, ``method='cvb0'``); a command's user set them by flags
(``--topics``, ``--method cvb0``), a ``jsmf run`` user by a config's keys
(``[[fit]] key 'topics'``, ``method = "cvb0"``).
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from jsmf_dask.parameters import PARAMETERS

if TYPE_CHECKING:
    from jsmf_dask.pipeline.run_config import RunConfig

__all__ = ["cli_words", "config_words", "user_words"]


#: Python parameters whose CLI flag is not ``--`` + the name with dashes (the table's own flags, and these).
_FLAGS = {p.name: p.cli_flag for p in PARAMETERS} | {"n_docs": "--docs", "n_words": "--vocab", "models": "--model",
                                                    "inputs": "INPUT", "root": "ROOT"}


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def cli_words(message: str) -> str:
    """A library message in the CLI's words: parameters become the flags that set them.

    ``The 'n_topics' parameter of fit`` → ``--topics``; ``overwrite=True`` →
    ``--overwrite``; ``path='tiled'`` → ``--path tiled``; ``min_anchor_df=10`` →
    ``--min-anchor-df 10``.
    """
    message = re.sub(r"The '(\w+)' parameter of \w+", lambda m: _flag(m.group(1)), message)
    message = re.sub(r"\b([a-z_]+)=True\b", lambda m: _flag(m.group(1)), message)
    message = re.sub(r"\b([a-z_]+)='([\w.+-]+)'", lambda m: f"{_flag(m.group(1))} {m.group(2)}", message)
    return re.sub(r"\b([a-z][a-z_]*)=(\d[\w.]*)", lambda m: f"{_flag(m.group(1))} {m.group(2)}", message)


#: Python parameters whose key in a run config is not their name (``n_topics`` → ``topics``).
_CONFIG_KEYS = {p.name: p.config_key for p in PARAMETERS}


def config_words(message: str, config: RunConfig) -> str:
    """A library message in a run config's words: parameters become the keys that set them.

    ``The 'n_topics' parameter of fit`` → ``CONFIG: [[fit]] key 'topics'``;
    ``method='cvb0'`` → ``method = "cvb0"``; ``drawn_sweeps=0`` → ``drawn_sweeps = 0``.
    """
    from jsmf_dask.pipeline.run_config import STAGES

    def table_key(match: re.Match) -> str:
        name, stage = match.groups()
        if stage not in STAGES:
            return match.group(0)
        return f"{config.path}: {config.table(stage)} key {_CONFIG_KEYS.get(name, name)!r}"

    message = re.sub(r"The '(\w+)' parameter of (\w+)", table_key, message)
    message = re.sub(r"\b([a-z_]+)=True\b", lambda m: f"{_CONFIG_KEYS.get(m[1], m[1])} = true", message)
    message = re.sub(r"\b([a-z_]+)='([\w.+-]+)'", lambda m: f'{_CONFIG_KEYS.get(m[1], m[1])} = "{m[2]}"', message)
    return re.sub(r"\b([a-z][a-z_]*)=(\d[\w.]*)", lambda m: f"{_CONFIG_KEYS.get(m[1], m[1])} = {m[2]}", message)


def user_words(message: str, args: argparse.Namespace) -> str:
    """A library message in the words the user set the parameters with: a config's keys for `jsmf run`, flags else."""
    if args.command != "run":
        return cli_words(message)
    config = getattr(args, "run_config", None)  # None: the config did not load, and the error is its own words
    return message if config is None else config_words(message, config)
