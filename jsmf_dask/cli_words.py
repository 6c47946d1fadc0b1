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


#: How a library message names a parameter: ``The 'n_topics' parameter of fit``; a switch ``overwrite=True``; a
#: value ``path='tiled'``; a number ``min_anchor_df=10``.
_PARAMETER = re.compile(r"The '(\w+)' parameter of (\w+)")
_SWITCH = re.compile(r"\b([a-z_]+)=True\b")
_QUOTED = re.compile(r"\b([a-z_]+)='([\w.+-]+)'")
_NUMBER = re.compile(r"\b([a-z][a-z_]*)=(\d[\w.]*)")


def _reword(message: str, parameter, switch, quoted, number) -> str:
    """``message`` with each of the four forms above replaced by its function of the match."""
    for pattern, new in ((_PARAMETER, parameter), (_SWITCH, switch), (_QUOTED, quoted), (_NUMBER, number)):
        message = pattern.sub(new, message)
    return message


def cli_words(message: str) -> str:
    """A library message in the CLI's words: parameters become the flags that set them.

    ``The 'n_topics' parameter of fit`` → ``--topics``; ``overwrite=True`` →
    ``--overwrite``; ``path='tiled'`` → ``--path tiled``; ``min_anchor_df=10`` →
    ``--min-anchor-df 10``.
    """
    def value(match: re.Match) -> str:
        return f"{_flag(match[1])} {match[2]}"

    return _reword(message, lambda m: _flag(m[1]), lambda m: _flag(m[1]), value, value)


#: Python parameters whose key in a run config is not their name (``n_topics`` → ``topics``).
_CONFIG_KEYS = {p.name: p.config_key for p in PARAMETERS}


def config_words(message: str, config: RunConfig) -> str:
    """A library message in a run config's words: parameters become the keys that set them.

    ``The 'n_topics' parameter of fit`` → ``CONFIG: [[fit]] key 'topics'``;
    ``method='cvb0'`` → ``method = "cvb0"``; ``drawn_sweeps=0`` → ``drawn_sweeps = 0``.
    """
    from jsmf_dask.pipeline.run_config import STAGES

    def key(name: str) -> str:
        return _CONFIG_KEYS.get(name, name)

    def table_key(match: re.Match) -> str:
        name, stage = match.groups()
        if stage not in STAGES:
            return match.group(0)
        return f"{config.path}: {config.table(stage)} key {key(name)!r}"

    return _reword(message, table_key, lambda m: f"{key(m[1])} = true", lambda m: f'{key(m[1])} = "{m[2]}"',
                   lambda m: f"{key(m[1])} = {m[2]}")


def user_words(message: str, args: argparse.Namespace) -> str:
    """A library message in the words the user set the parameters with: a config's keys for `jsmf run`, flags else."""
    if args.command != "run":
        return cli_words(message)
    config = getattr(args, "run_config", None)  # None: the config did not load, and the error is its own words
    return message if config is None else config_words(message, config)
