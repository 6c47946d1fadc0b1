"""Parameter validation: one wording for every public function and the CLI."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from jsmf_dask.exceptions import InvalidParameterError

__all__ = ["check_int", "check_option", "check_heldout"]


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




def check_heldout(value: Any, owner: str) -> float:
    """The held-out fraction as a float: 0 for None, else it must be in (0, 0.5]."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 0.5:
        raise InvalidParameterError(
            f"The 'heldout' parameter of {owner} must be a float in (0, 0.5] or None. Got {value!r} instead."
        )
    return float(value)
