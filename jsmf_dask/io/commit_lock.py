"""Who writes (a writer's token), and the lock that serialises the commits of one output's writers.

:func:`commit_lock` is taken by :func:`jsmf_dask.io.fs.staged_output` around its
check-and-swap and by :func:`jsmf_dask.io.fs.recover_interrupted`: ``flock(2)``
on the output's directory on a local root, a lock object created only if absent
beside the output on an object store.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import posixpath
import socket
import time
import uuid
from collections.abc import Iterator

from fsspec.implementations.local import LocalFileSystem

from jsmf_dask.exceptions import StoreError

__all__ = ["commit_lock", "COMMIT_LOCK_STALE_SECONDS", "COMMIT_LOCK_WAIT_SECONDS"]

#: This host in temporaries' names: ``.name.tmp-<token>.<pid>.<host hash>`` (``jsmf_dask.io.fs._stale``).
_HOST = hashlib.blake2b(socket.gethostname().encode(), digest_size=4).hexdigest()


def _writer_token() -> str:
    """A new temporary's token: random, then this writer's pid and host (the pid read now, not at import: a
    forked process is another writer)."""
    return f"{uuid.uuid4().hex[:12]}.{os.getpid()}.{_HOST}"


@contextlib.contextmanager
def commit_lock(fs, parent: str, name: str) -> Iterator[None]:
    """Serialise the commits of the writers of output ``name`` in ``parent`` (their check and their swap), and
    recovery of that output against them.

    Without it two writers replacing one output (two appends) could both find the version they read, and
    the second's swap would discard the first's committed output although the first reported success; and
    on an object store a second writer's recovery could take a commit under way (no sentinel yet) for an
    interrupted one and roll it back. Local roots: ``flock(2)`` on the parent directory itself (no file left
    behind; released by the kernel when a writer dies; where a file system refuses it, some network mounts,
    commits go unserialised and the check before the swap only narrows the window). Object stores:
    :func:`_object_lock`.
    """
    if not isinstance(fs, LocalFileSystem):
        with _object_lock(fs, posixpath.join(parent, f".{name}.lock")):
            yield
        return
    try:
        fd = os.open(fs._strip_protocol(parent), os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


#: An object-store commit lock older than this was left by a writer that died holding it, and is broken. A
#: commit holds its lock for the check and the copy of the output into place (seconds for a model, a minute or
#: two for a C of several GB); writers' clocks may differ by far less than this.
COMMIT_LOCK_STALE_SECONDS = 15 * 60
#: How long a writer waits for another's commit lock: past the stale age, so a dead writer's lock is broken.
COMMIT_LOCK_WAIT_SECONDS = COMMIT_LOCK_STALE_SECONDS + 60


@contextlib.contextmanager
def _object_lock(fs, lock: str) -> Iterator[None]:
    """Hold the lock object ``lock`` on an object store: created only if absent (``pipe_file(mode='create')``:
    S3's ``If-None-Match: *``, GCS's generation precondition; a plain existence check elsewhere), holding the
    writer's token and the time; removed on the way out. A lock older than :data:`COMMIT_LOCK_STALE_SECONDS`
    is broken; after :data:`COMMIT_LOCK_WAIT_SECONDS` of waiting, :class:`StoreError` names it."""
    body = json.dumps({"writer": _writer_token(), "host": socket.gethostname(), "time": time.time()}).encode()
    deadline = time.monotonic() + COMMIT_LOCK_WAIT_SECONDS
    delay = 0.05
    while True:
        try:
            fs.pipe_file(lock, body, mode="create")
            break
        except FileExistsError:
            pass
        held = _lock_age(fs, lock)
        if held is not None and held > COMMIT_LOCK_STALE_SECONDS:
            _remove_lock(fs, lock)  # its writer is gone: taken again by whoever creates it first
            continue
        if time.monotonic() > deadline:
            raise StoreError(
                f"{fs.unstrip_protocol(lock)}: another writer has held this output's commit lock for "
                f"{held or 0:.0f} s (waited {COMMIT_LOCK_WAIT_SECONDS} s); if no command is writing it, remove that "
                "object and rerun")
        time.sleep(delay)
        delay = min(2 * delay, 1.0)
    try:
        yield
    finally:
        _remove_lock(fs, lock)


def _lock_age(fs, lock: str) -> float | None:
    """Seconds since the lock object ``lock`` was taken (its own record of the time), None when it is gone."""
    try:
        fs.invalidate_cache(lock)
        taken = json.loads(fs.cat_file(lock))["time"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):  # not one of ours: judge by the store's time
        try:
            return (_dt.datetime.now(_dt.UTC) - fs.modified(lock).astimezone(_dt.UTC)).total_seconds()
        except (NotImplementedError, OSError, ValueError, AttributeError):
            return None
    return time.time() - float(taken)


def _remove_lock(fs, lock: str) -> None:
    try:
        fs.rm_file(lock)
    except FileNotFoundError:
        pass
    fs.invalidate_cache(lock)
