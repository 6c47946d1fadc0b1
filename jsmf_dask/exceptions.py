"""Exceptions raised by jsmf_dask.

Every error a user can cause derives from :class:`JSMFError`, which the CLI
turns into a one-line message and exit status 1.
"""

from __future__ import annotations

__all__ = [
    "JSMFError",
    "InvalidParameterError",
    "InputError",
    "CorpusSchemaError",
    "StoreError",
    "ClusterError",
    "InsufficientMemoryError",
    "NotFittedError",
    "ConvergenceWarning",
]


class JSMFError(ValueError):
    """Base class of every error caused by input, parameters or stores."""


class InvalidParameterError(JSMFError, TypeError):
    """A parameter has a value outside its allowed set or range."""


class InputError(JSMFError):
    """Raw input (a docword file, a ratings CSV, text files) is malformed.

    The message names the file, the line or row, the field and what was
    expected.
    """


class CorpusSchemaError(JSMFError):
    """A corpus shard or vocabulary table does not follow ``data_schemas/``."""


class StoreError(JSMFError):
    """A store (corpus, co-occurrence) is missing, incomplete or inconsistent."""


class ClusterError(JSMFError):
    """The Dask scheduler named by the user cannot be reached."""


class InsufficientMemoryError(JSMFError, MemoryError):
    """A step needs more memory than the worker running it may use (the message gives both figures)."""


class NotFittedError(JSMFError, AttributeError):
    """An estimator was used before ``fit``."""


class ConvergenceWarning(UserWarning):
    """An iterative step stopped before its tolerance (the model's attrs record which, and how far)."""
