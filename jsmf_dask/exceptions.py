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


class RankDeficientError(JSMFError):
    """The co-occurrence matrix has fewer linearly independent candidate anchor rows than topics asked for.

    Attributes
    ----------
    rank : int
        The candidate rows found independent (C's numerical rank among the words allowed as anchors).
    n_topics : int
        The K asked for.
    """

    def __init__(self, rank: int, n_topics: int):
        self.rank, self.n_topics = rank, n_topics
        super().__init__(
            f"the co-occurrence matrix has numerical rank {rank} after rectification among the words allowed as "
            f"anchors: only {rank} linearly independent candidate rows, so it cannot give {n_topics} anchors; "
            f"this corpus supports at most {rank} topics (ask for fewer topics, or lower min_anchor_df)")

    def __reduce__(self):  # raised inside a task: rebuilt from its fields on the client
        return type(self), (self.rank, self.n_topics)


class ClusterError(JSMFError):
    """The Dask scheduler named by the user cannot be reached."""


class InsufficientMemoryError(JSMFError, MemoryError):
    """A step needs more memory than the worker running it may use (the message gives both figures)."""


class ConvergenceWarning(UserWarning):
    """An iterative step stopped before its tolerance (the model's attrs record which, and how far)."""
