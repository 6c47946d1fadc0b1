"""Computing dask collections with the progress display dask provides."""

from __future__ import annotations

from typing import Any

import dask
from dask.diagnostics import ProgressBar

from jsmf_dask import config

__all__ = ["compute", "active_client"]


def active_client():
    """The :class:`distributed.Client` that graphs will run on, or None when dask runs locally.

    None also when a client exists but ``dask.config`` selects a local scheduler.
    """
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return None
    return client if dask.config.get("scheduler", None) in (None, "dask.distributed") else None


def compute(*collections: Any) -> tuple[Any, ...]:
    """``dask.compute(*collections)`` with a progress bar when ``jsmf.progress`` is on.

    On a distributed client the bar is :func:`distributed.progress`; otherwise
    :class:`dask.diagnostics.ProgressBar`, and the graphs run on the scheduler
    ``dask.config`` names, else on threads. Exceptions raised in tasks
    propagate unchanged.
    """
    show = bool(config.get("progress"))
    client = active_client()
    if client is not None:
        futures = client.compute(list(collections))
        if show:
            from distributed import progress

            progress(futures, notebook=False)
        return tuple(client.gather(futures))
    # Without a client, bags default to processes and delayed to threads, and dask refuses to mix
    # them; one explicit scheduler (threads unless dask.config names another) runs every stage.
    scheduler = dask.config.get("scheduler", None) or "threads"
    if show:
        with ProgressBar(minimum=1.0):
            return dask.compute(*collections, scheduler=scheduler)
    return dask.compute(*collections, scheduler=scheduler)
