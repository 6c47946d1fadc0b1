"""Parameter validation: one wording for every public function and the CLI."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from jsmf_dask.exceptions import InvalidParameterError

__all__ = ["check_int", "check_option", "check_heldout", "check_name", "check_validation", "name_problem",
           "check_topics_for_vocabulary", "NAME_RULE"]

#: What a user-given name (a model, an output) may be: one path component that is safe on every file system
#: and object store, whatever code later joins it to a path.
NAME_RULE = ("1 to 128 characters from the letters A-Z and a-z, the digits, '.', '_', '-' and '+', starting with "
             "a letter or a digit (one path component: no '/', no '..')")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def check_int(
    value: Any,
    name: str,
    owner: str,
    *,
    low: int | None = None,
    high: int | None = None,
    allow_none: bool = False,
) -> None:
    """Raise :class:`InvalidParameterError` unless ``value`` is an int in ``[low, high]``.

    The message reads like scikit-learn's: ``The 'vocab_size' parameter of
    ingest must be an int in the range [1, inf). Got 0 instead.``
    """
    if value is None and allow_none:
        return
    ok = isinstance(value, int) and not isinstance(value, bool)
    if ok and low is not None and value < low:
        ok = False
    if ok and high is not None and value > high:
        ok = False
    if not ok:
        lo = "-inf" if low is None else str(low)
        hi = "inf" if high is None else str(high)
        close = "]" if high is not None else ")"
        opening = "[" if low is not None else "("
        none = " or None" if allow_none else ""
        raise InvalidParameterError(
            f"The {name!r} parameter of {owner} must be an int in the range "
            f"{opening}{lo}, {hi}{close}{none}. Got {value!r} instead."
        )


def check_option(value: Any, name: str, owner: str, options: Collection[Any]) -> None:
    """Raise :class:`InvalidParameterError` unless ``value`` is one of ``options``."""
    if value not in options:
        shown = "{" + ", ".join(repr(o) for o in options) + "}"
        raise InvalidParameterError(
            f"The {name!r} parameter of {owner} must be a str among {shown}. Got {value!r} instead."
        )


def name_problem(value: Any) -> str | None:
    """None when ``value`` is a valid name (see :data:`NAME_RULE`), else what is wrong with it."""
    if not isinstance(value, str):
        return f"expected a str, got {type(value).__name__}"
    if _NAME.fullmatch(value) is None:
        return f"a name must be {NAME_RULE}"
    return None


def check_name(value: Any, name: str, owner: str, *, allow_none: bool = False) -> None:
    """Raise :class:`InvalidParameterError` unless ``value`` is a valid name (see :data:`NAME_RULE`).

    Every user-given name that becomes part of a path (model names, output
    names) is checked here, before any work is done.
    """
    if value is None and allow_none:
        return
    problem = name_problem(value)
    if problem is not None:
        raise InvalidParameterError(f"The {name!r} parameter of {owner} is not a valid name: {problem}. "
                                    f"Got {value!r} instead.")


def check_validation(value: Any, heldout: float, owner: str) -> float:
    """The validation fraction as a float: 0 for None, else in (0, 0.5] and leaving training documents
    beside the held-out fraction ``heldout``."""
    if value is None or value == 0:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 0.5:
        raise InvalidParameterError(
            f"The 'validation' parameter of {owner} must be a float in [0, 0.5] or None. Got {value!r} instead."
        )
    if heldout + value >= 1:
        raise InvalidParameterError(f"The 'validation' parameter of {owner} ({value}) and the held-out fraction "
                                    f"({heldout}) leave no training documents.")
    return float(value)


def check_heldout(value: Any, owner: str) -> float:
    """The held-out fraction as a float: 0 for None, else it must be in (0, 0.5]."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 0.5:
        raise InvalidParameterError(
            f"The 'heldout' parameter of {owner} must be a float in (0, 0.5] or None. Got {value!r} instead."
        )
    return float(value)


def check_topics_for_vocabulary(n_topics: int, n_words: int) -> None:
    """K topics need K anchor words and one more word: ``n_topics`` in [2, N − 1] for a vocabulary of N."""
    if n_topics >= n_words:
        raise InvalidParameterError(
            f"The 'n_topics' parameter of fit must be an int in the range [2, {n_words - 1}] for a vocabulary of "
            f"{n_words} words. Got {n_topics} instead."
        )
