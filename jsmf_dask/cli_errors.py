"""How the ``jsmf`` command words a failure that is not a :class:`~jsmf_dask.exceptions.JSMFError`: one line.

A lost scheduler, a worker that died under a task, a full disk: each becomes
one ``jsmf: error:`` line saying what happened, what was kept and what to do;
anything else is left to propagate (a bug shows its traceback).
"""

from __future__ import annotations

import argparse
import re

__all__ = ["one_line"]


def one_line(err: BaseException, args: argparse.Namespace) -> str | None:
    """The message for ``err`` raised by ``jsmf <args.command>``, or None when it is not one of these."""
    from jsmf_dask.cluster import killed_worker_message

    message = _lost_scheduler(err, args) or killed_worker_message(
        err, f"a task of `jsmf {args.command}` ({_task_name(err)})")
    if message is None and isinstance(err, OSError):
        message = _no_space(err, args) or str(err)
    return message


def _no_space(err: OSError, args: argparse.Namespace) -> str | None:
    """The one-line message for a full disk (ENOSPC), naming where, the stage and the space left, else None."""
    import errno

    if err.errno != errno.ENOSPC:
        return None
    from jsmf_dask.io.fs import free_bytes

    where = err.filename or getattr(args, "root", None) or "the output"
    free = free_bytes(where) if isinstance(where, str) else None
    left = "" if free is None else f" ({free / 2**20:.1f} MiB free there now)"
    return (f"no space left on the device writing {where}{left} during `jsmf {args.command}`: this stage wrote "
            "nothing (its temporaries were removed); free some space and rerun")


def _lost_scheduler(err: BaseException, args: argparse.Namespace) -> str | None:
    """The one-line message for a scheduler lost mid-command (its connection closed, our futures cancelled with
    it), else None."""
    name = type(err).__name__
    comm = name in ("CommClosedError", "StreamClosedError")
    cancelled = name in ("FutureCancelledError", "FuturesCancelledError", "CancelledError")
    if not (comm or cancelled):
        return None
    why = "its connection closed" if comm or "connection-lost" in str(err) else "our tasks were cancelled"
    where = getattr(args, "scheduler", None) or "the cluster"
    return (f"lost the Dask scheduler ({where}) during `jsmf {args.command}`: {why}. Stages and outputs already "
            "committed are kept and this one wrote nothing; once the scheduler and its workers are back, rerun "
            "the same command to resume")


def _task_name(err: BaseException) -> str:
    """The stage's name for the task of a ``KilledWorker`` (its key without the token)."""
    key = getattr(err, "task", "")
    key = key[0] if isinstance(key, tuple) else key
    return re.sub(r"-[0-9a-f]{32}.*$", "", str(key)) or "unnamed"
