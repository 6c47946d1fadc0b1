"""File-system access through fsspec, and atomic commit of stage outputs.

A stage writes its output under a hidden temporary name beside the final one
(``<root>/.cooc.zarr.tmp-<id>``) and :func:`staged_output` renames it into
place only when the whole stage succeeded; on error the temporary is removed,
so a root never holds a half-written output.

Object stores have no rename: there the commit copies the objects into place
and writes a sentinel object (``_jsmf_committed``) last; readers refuse an
output without it (:func:`check_committed`), and the next write of the same
output restores the previous one from its ``.old-*`` copy.

Of two writers of one output, exactly one commits: their commits (the check
that nothing appeared meanwhile, and the swap) are serialised by a lock per
output — ``flock(2)`` on the parent directory of a local root, and on an
object store a lock object ``.<name>.lock`` beside the output, created only if
absent (a conditional write: S3's ``If-None-Match``), removed after the commit,
and broken when a dead writer left it (:data:`COMMIT_LOCK_STALE_SECONDS`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import os
import posixpath
import re
import shutil
from collections.abc import Callable, Iterator

import fsspec
import psutil
import pyarrow.fs as pafs
from fsspec.implementations.local import LocalFileSystem

from jsmf_dask._validation import name_problem
from jsmf_dask.io.commit_lock import _HOST, _writer_token, commit_lock
from jsmf_dask.exceptions import StoreError

__all__ = ["get_fs", "total_bytes", "arrow_fs", "join", "join_under", "check_under", "is_local", "staged_output", "refuse_existing",
           "remove", "write_file", "check_committed", "recover_interrupted", "COMMITTED"]

#: The object written last into a committed output on an object store.
COMMITTED = "_jsmf_committed"


def get_fs(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and the path inside it for a local path or fsspec URL."""
    fs, path = fsspec.core.url_to_fs(os.fspath(url))
    return fs, path


def arrow_fs(fs: fsspec.AbstractFileSystem) -> pafs.FileSystem:
    """The pyarrow filesystem for an fsspec one (pyarrow's own for local files)."""
    if isinstance(fs, LocalFileSystem):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))


def total_bytes(urls) -> int:
    """The bytes of the files and directory trees named by ``urls`` (0 for what does not exist)."""
    total = 0
    for url in urls:
        fs, path = get_fs(url)
        if fs.exists(path):
            total += int(fs.du(path, total=True)) if fs.isdir(path) else int(fs.size(path) or 0)
    return total


def is_local(url: str) -> bool:
    """True when ``url`` is on the local file system."""
    return isinstance(get_fs(url)[0], LocalFileSystem)


def join(root: str, *parts: str) -> str:
    """Join path components onto a local path or URL."""
    root = os.fspath(root)
    if "://" in root:
        return posixpath.join(root.rstrip("/"), *parts)
    return posixpath.join(root, *parts)


def _resolved(url: str) -> tuple[str, str]:
    """``(protocol, path)`` with ``.``, ``..`` and repeated separators resolved; local paths also through
    symbolic links (as far as they exist), so a link inside a root that points out of it is seen as outside."""
    fs, path = get_fs(url)
    if isinstance(fs, LocalFileSystem):
        return "file", os.path.realpath(path)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol, posixpath.normpath("/" + path.lstrip("/"))


def parent_url(url: str) -> str:
    """The directory ``url`` lies in (``"."`` for a bare name): the root a staged output outside any run root
    is checked against (:func:`staged_output`)."""
    url = os.fspath(url).rstrip("/")
    return url.rsplit("/", 1)[0] if "/" in url else "."


def make_dir(url: str) -> None:
    """Create the directory ``url`` (and its parents) if missing."""
    fs, path = get_fs(url)
    fs.makedirs(path, exist_ok=True)


def check_under(root: str, url: str) -> str:
    """``url`` itself, after checking that it lies strictly inside the run root ``root``.

    Every write and removal of this module checks its target here first, so
    that no name or path, however it was built, can write or delete outside
    the root (a local path is compared after resolving symbolic links; a URL
    after resolving ``.`` and ``..``, and must be on the root's store).

    Raises
    ------
    StoreError
        If ``url`` is the root itself or lies outside it.
    """
    root, url = os.fspath(root), os.fspath(url)
    (root_protocol, root_path), (protocol, path) = _resolved(root), _resolved(url)
    inside = protocol == root_protocol and path != root_path and \
        posixpath.commonpath([root_path, path]) == root_path
    if not inside:
        raise StoreError(f"{url}: refusing to write or remove outside the run root {root}")
    return url


def join_under(root: str, *parts: str) -> str:
    """``root/part/…``: each part one safe path component (see :func:`jsmf_dask._validation.name_problem`),
    the result checked by :func:`check_under`."""
    for part in parts:
        problem = name_problem(part)
        if problem is not None:
            raise StoreError(f"{root}: {part!r} cannot name an output under the run root: {problem}")
    return check_under(root, join(root, *parts))


def remove(url: str, *, root: str) -> None:
    """Remove a file or directory tree inside the run root ``root`` if it exists (:func:`check_under`)."""
    check_under(root, url)
    fs, path = get_fs(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def write_file(url: str, data: bytes | str, *, root: str) -> None:
    """Write a whole file inside the run root ``root`` atomically: into ``<url>.tmp``, then renamed over
    ``url`` (parents created; :func:`check_under` first)."""
    check_under(root, url)
    fs, path = get_fs(url)
    parent = path.rsplit("/", 1)[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp"
    with fs.open(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    fs.mv(tmp, path)
    if not isinstance(fs, LocalFileSystem):
        fs.invalidate_cache(parent)


def refuse_existing(final: str, *, overwrite: bool = False) -> None:
    """:class:`StoreError` when ``final`` exists and ``overwrite`` is False.

    Stages call it before any work, so that an existing output is refused at
    once; :func:`staged_output` checks again when it commits.
    """
    final = os.fspath(final)
    fs, path = get_fs(final)
    if not overwrite and fs.exists(path):
        raise StoreError(f"{final} already exists; pass overwrite=True to replace it")


def free_bytes(url: str) -> int | None:
    """Free bytes of the local file system holding ``url`` (its nearest existing folder); None for a URL."""
    fs, path = get_fs(url)
    if not isinstance(fs, LocalFileSystem):
        return None
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return shutil.disk_usage(path).free


def check_free_space(url: str, need: int, what: str) -> None:
    """:class:`StoreError` before any work when the local file system holding ``url`` has less than ``need``
    bytes free (``what`` says what needs them); object stores are not checked."""
    free = free_bytes(url)
    if free is not None and free < need:
        raise StoreError(f"{url}: {what} needs up to {need / 2**30:.2f} GiB, and its file system has "
                         f"{free / 2**30:.2f} GiB free; free some space or choose another root")


@contextlib.contextmanager
def staged_output(final: str, *, root: str, overwrite: bool = False,
                  unchanged: Callable[[], bool] | None = None) -> Iterator[str]:
    """Yield a temporary location for ``final``; rename it into place on success.

    Parameters
    ----------
    final : str
        Path or URL of the committed output (a directory).
    root : str
        The run root ``final`` must lie inside (:func:`check_under`): the
        output and whatever ``overwrite`` replaces never lie outside it.
    overwrite : bool, default=False
        Replace an existing ``final``; otherwise an existing one is an error
        raised before any work is done.
    unchanged : callable, optional
        For an output built from the one it replaces (``cooccur --update``):
        called at the commit, False when ``final`` is no longer the version
        this writer read (another writer committed since), which discards
        this output like a lost race; also when the writer fails, whose reads
        of ``final`` may have been torn by that commit: then the failure is
        reported as that race.

    A run killed before the rename leaves only a hidden ``.name.tmp-*``; one
    killed between moving the old output aside and renaming the new one in
    leaves ``.name.old-*``. The next staged write of the same output restores
    the old one in the second case and removes such leftovers in both.

    Yields
    ------
    str
        The temporary location to write to (an empty directory).

    Raises
    ------
    StoreError
        If ``final`` exists and ``overwrite`` is False, or lies outside ``root``;
        also at the commit, if another writer committed ``final`` while this
        one worked (without ``overwrite``): then this output is discarded and
        theirs stays. The commits of one output's writers are serialised
        (:func:`~jsmf_dask.io.commit_lock.commit_lock`: local and object-store roots), so of two
        concurrent writers exactly one commits, and one that replaces what it
        read (``unchanged``) never discards a commit made after its read. An
        object store without conditional writes (plain fsspec file systems)
        gets the lock by an existence check: the window is narrowed, not closed.
    """
    final = check_under(root, os.fspath(final))
    fs, path = get_fs(final)
    recover_interrupted(final)
    refuse_existing(final, overwrite=overwrite)
    parent, name = posixpath.split(path.rstrip("/"))
    token = _writer_token()
    tmp_path = posixpath.join(parent, f".{name}.tmp-{token}")
    tmp_url = _same_scheme(final, tmp_path)
    _IN_PROGRESS.add(token)  # recovery by another thread of this process leaves it alone
    try:
        created_parent = not fs.exists(parent)
        fs.makedirs(tmp_path, exist_ok=False)
        try:
            yield tmp_url
        except BaseException as err:
            if fs.exists(tmp_path):
                fs.rm(tmp_path, recursive=True)
            if created_parent and fs.exists(parent) and not fs.ls(parent):
                fs.rm(parent, recursive=True)
            if isinstance(err, Exception) and unchanged is not None and not _holds(unchanged):
                # what it read was replaced under it (its reads torn): the race it lost, not a fault of its own
                raise StoreError(_raced(final)) from err
            raise
        old_path = posixpath.join(parent, f".{name}.old-{token}")
        try:
            with commit_lock(fs, parent, name):
                _commit(fs, path, tmp_path, old_path, final, overwrite=overwrite, unchanged=unchanged)
        except BaseException as err:
            if fs.exists(tmp_path):  # whatever went wrong, this run's output does not stay half-committed
                fs.rm(tmp_path, recursive=True)
            if isinstance(err, _Raced):
                raise StoreError(_raced(err.final)) from None
            raise
        if fs.exists(old_path):
            fs.rm(old_path, recursive=True)
    finally:
        _IN_PROGRESS.discard(token)


def _holds(check: Callable[[], bool]) -> bool:
    """``check()``, False if it cannot be made (what it reads is gone, or torn, itself)."""
    try:
        return bool(check())
    except Exception:
        return False


def _raced(final: str) -> str:
    """What a writer that lost the race for ``final`` says (:func:`staged_output`)."""
    return (f"{final} was committed by another writer while this command ran; this run's output was discarded "
            "(nothing of it is in place): rerun it to build on theirs (an update, an append), or pass "
            "overwrite=True to replace theirs")


def _commit(fs, path: str, tmp_path: str, old_path: str, final: str, *, overwrite: bool,
            unchanged: Callable[[], bool] | None) -> None:
    """Swap the staged ``tmp_path`` in as ``path`` (the old one moved aside to ``old_path``); raise
    :class:`_Raced` when another writer committed first in a way this one must not replace."""
    if unchanged is not None and not unchanged():
        raise _Raced(final)
    if fs.exists(path):
        if not overwrite:  # another writer committed it since this one started (it was refused before)
            raise _Raced(final)
        try:
            _move_tree(fs, path, old_path)
        except FileNotFoundError:  # another writer moved it aside first: its commit is under way
            raise _Raced(final) from None
    try:
        _move_tree(fs, tmp_path, path)
    except FileExistsError:  # another writer's commit landed between the move aside and this rename
        if fs.exists(old_path):
            fs.rm(old_path, recursive=True)
        raise _Raced(final) from None


class _Raced(Exception):
    def __init__(self, final: str) -> None:
        super().__init__(final)
        self.final = final


def _move_tree(fs, src: str, dst: str) -> None:
    """Rename a directory: one atomic rename on a local file system. On an object store, which has no
    renames: copy every object, write the sentinel into ``dst`` last, then delete ``src`` starting with its
    sentinel, so that at any moment at most one of them carries it and that one is complete."""
    if isinstance(fs, LocalFileSystem):
        try:  # rename(2): atomic, and refused when another writer's non-empty dst is there already
            os.rename(fs._strip_protocol(src), fs._strip_protocol(dst))
        except OSError as err:
            if err.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise FileExistsError(dst) from err
            raise
        return
    fs.invalidate_cache()
    for f in fs.find(src):
        if posixpath.basename(f) != COMMITTED:
            fs.copy(f, posixpath.join(dst, posixpath.relpath(f, src)))
    fs.pipe(posixpath.join(dst, COMMITTED), b"")
    if fs.exists(posixpath.join(src, COMMITTED)):
        fs.rm(posixpath.join(src, COMMITTED))
    fs.rm(src, recursive=True)
    fs.invalidate_cache()


def check_committed(url: str) -> None:
    """Raise :class:`StoreError` if ``url`` is an object-store output whose commit was interrupted."""
    fs, path = get_fs(url)
    if isinstance(fs, LocalFileSystem) or not fs.exists(path):
        return
    if not fs.exists(posixpath.join(path, COMMITTED)):
        raise StoreError(f"{url}: incomplete: writing it was interrupted; rerun the stage that writes it "
                         "(the previous version is restored then)")


#: What separates an output's name from a temporary's token (the name may hold dashes: ``.k20-ap.tmp-<token>``).
_TEMPORARY = re.compile(r"\.(?:tmp|old)-")
#: Tokens of the temporaries this process is writing now (several threads may each write one output).
_IN_PROGRESS: set[str] = set()


#: A temporary of a writer on another host counts as abandoned once it is this old (its process cannot be asked).
STALE_AFTER_SECONDS = 24 * 3600


def _stale(fs, path: str) -> bool:
    """Whether the temporary ``path`` (``.name.tmp-<token>.<pid>.<host>`` or ``.old-…``) was left by a writer that is
    gone: this process, one of this host whose process no longer exists, or one of another host older than
    :data:`STALE_AFTER_SECONDS`. Names without a writer (older versions) are stale."""
    parts = posixpath.basename(path).rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return True
    pid, host = int(parts[1]), parts[2]
    if host == _HOST:
        if pid == os.getpid():  # this process's: stale unless one of its threads is writing it now
            return _TEMPORARY.split(posixpath.basename(path), maxsplit=1)[-1] not in _IN_PROGRESS
        return not psutil.pid_exists(pid)
    try:
        age = _dt.datetime.now(_dt.UTC) - fs.modified(path).astimezone(_dt.UTC)
    except (NotImplementedError, OSError, ValueError, AttributeError):
        return False
    return age.total_seconds() > STALE_AFTER_SECONDS


def recover_interrupted(url: str) -> None:
    """Undo what a killed commit of ``url`` left.

    Local: restore ``.name.old-*`` if the rename into place did not happen.
    Object store: if ``url`` lacks its sentinel, remove it and restore the
    complete ``.old-*`` copy if there is one. Then remove stale ``.name.tmp-*``
    and ``.name.old-*`` siblings. Only what writers that are gone left
    (:func:`_stale`): a concurrent writer's temporaries are its own.
    """
    fs, path = get_fs(url)
    path = path.rstrip("/")
    parent, name = posixpath.split(path)
    if not fs.exists(parent):
        return
    with commit_lock(fs, parent, name):  # not while another writer of this output commits
        fs.invalidate_cache()
        siblings = [p.rstrip("/") for p in fs.ls(parent, detail=False)]
        siblings = [p for p in siblings if not posixpath.basename(p).startswith(f".{name}.") or _stale(fs, p)]
        olds = sorted(p for p in siblings if posixpath.basename(p).startswith(f".{name}.old-"))
        if isinstance(fs, LocalFileSystem):
            if olds and not fs.exists(path):
                _move_tree(fs, olds[0], path)
                olds = olds[1:]
        elif fs.exists(path) and not fs.exists(posixpath.join(path, COMMITTED)):
            fs.rm(path, recursive=True)
            complete = [o for o in olds if fs.exists(posixpath.join(o, COMMITTED))]
            if complete:
                _move_tree(fs, complete[0], path)
                olds.remove(complete[0])
        for p in olds + [p for p in siblings if posixpath.basename(p).startswith(f".{name}.tmp-")]:
            if fs.exists(p):
                fs.rm(p, recursive=True)
        fs.invalidate_cache()


def _same_scheme(reference: str, path: str) -> str:
    if "://" in reference:
        scheme = reference.split("://", 1)[0]
        return f"{scheme}://{path}"
    return path
