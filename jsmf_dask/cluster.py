"""Where the graphs run: an existing Dask cluster, threads in this process, or the embedded LocalCluster.

Without an address (argument or ``DASK_SCHEDULER_ADDRESS``) the engine is
chosen by the work's size (:func:`choose_engine`, called by each stage once it
knows its input): small work runs on threads in the calling process (no
cluster to start, nothing pickled), large work on a
:class:`distributed.LocalCluster` of worker processes sized to the machine:
one single-threaded worker per core, memory split evenly, BLAS
threads limited to 1 inside workers (set in the nanny's pre-spawn
environment, so the limit is in place before numpy loads). The workers log at
the level of the ``distributed`` logger of the calling process, and leave the
report of a failed task to the client that receives its exception (and
say nothing of heartbeats lost while the cluster shuts down).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import dask
import psutil

from jsmf_dask._heartbeat import Heartbeat
from jsmf_dask.exceptions import ClusterError
from jsmf_dask.parameters import CONNECT_TIMEOUT, WORKER_TIMEOUT

__all__ = ["LOCAL_SCHEDULERS", "Work", "choose_engine", "connect", "start_pending_cluster", "total_memory", "killed_worker_message",
           "pending_worker_memory", "THREADS_MAX_TOKENS", "THREADS_MAX_INPUT_BYTES"]

#: Addresses that select one of dask's single-machine schedulers instead of a cluster.
LOCAL_SCHEDULERS = ("synchronous", "threads")

#: Work below both limits runs on threads in this process; above either, on the LocalCluster. Measured
#: by ``pipelines/benchmarks/small.py`` (the crossover of the two engines, stage by stage: see its README).
THREADS_MAX_TOKENS = 20_000_000
THREADS_MAX_INPUT_BYTES = 200_000_000


@dataclass(frozen=True)
class Work:
    """The size of what a stage is about to process: its corpus's tokens, or (``ingest``) its input's bytes."""

    tokens: int | None = None
    input_bytes: int | None = None

    def small(self) -> bool:
        """Whether threads in this process beat starting a LocalCluster for it."""
        return (self.tokens is None or self.tokens <= THREADS_MAX_TOKENS) and \
            (self.input_bytes is None or self.input_bytes <= THREADS_MAX_INPUT_BYTES)

    def describe(self) -> str:
        if self.tokens is not None:
            return f"{self.tokens / 1e6:.3g}M tokens, {'at most' if self.small() else 'over'} " \
                   f"{THREADS_MAX_TOKENS / 1e6:g}M"
        return f"{(self.input_bytes or 0) / 1e6:.3g} MB of input, {'at most' if self.small() else 'over'} " \
               f"{THREADS_MAX_INPUT_BYTES / 1e6:g} MB"


def choose_engine(work: Work) -> str | None:
    """Inside ``connect()`` with the automatic engine: run on threads or start the LocalCluster, by ``work``.

    The first call decides for the rest of the ``connect`` block (one engine,
    at most one cluster, for every stage of a run); later calls and calls
    outside an automatic ``connect`` do nothing. Returns the one line that says
    which engine and why, the first time (else None).
    """
    owner = _pending_owner()
    if owner is None or not owner.auto or owner.decided is not None:
        return None
    return owner.decide(work)

_BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def _client(scheduler: str, timeout: float):
    """A :class:`distributed.Client` of ``scheduler``, or :class:`ClusterError` within ``timeout`` seconds.

    ``Client(timeout=…)`` bounds the TCP connection but not every step after
    it: a port that accepts connections and never speaks Dask (an HTTP server)
    would hang it. The handshake therefore runs in a helper thread that is
    abandoned (and its client closed) when it does not finish in time.
    """
    from distributed import Client

    outcome: dict[str, object] = {}

    def attempt() -> None:
        try:
            client = Client(scheduler, timeout=timeout)
        except Exception as err:  # noqa: BLE001 - reported to the caller below
            outcome["error"] = err
            return
        if outcome.setdefault("client", client) is not client:  # pragma: no cover - lost the race
            client.close()

    thread = threading.Thread(target=attempt, name="jsmf-connect", daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    if "client" not in outcome:
        outcome["client"] = None  # a late success closes its own client
        err = outcome.get("error") or f"no Dask handshake within {timeout:g} s (is it a Dask scheduler?)"
        raise ClusterError(f"cannot reach the Dask scheduler at {scheduler!r}: {err}")
    return outcome["client"]


@contextlib.contextmanager
def connect(
    scheduler: str | None = None,
    *,
    n_workers: int | None = None,
    memory_limit: str | int | None = None,
    dashboard: bool = True,
    on_dashboard=None,
    connect_timeout: float = CONNECT_TIMEOUT,
    lazy: bool = False,
    on_engine: Callable[[str], None] | None = None,
    wait_for_workers: int = 1,
    worker_timeout: float | None = None,
    heartbeat_timeout: float | None = None,
    on_hung: Callable[[str], None] | None = None,
) -> Iterator[object]:
    """Run the enclosed stages on a cluster.

    Parameters
    ----------
    scheduler : str, optional
        A scheduler address (``tcp://host:8786``); ``"synchronous"`` or
        ``"threads"`` for dask's local schedulers; ``"local"`` for the
        LocalCluster whatever the size; ``"auto"`` or None for
        ``DASK_SCHEDULER_ADDRESS`` if set, else the engine the work's size
        calls for (:func:`choose_engine`; the LocalCluster if a graph runs
        before any stage said its size, or if ``n_workers`` or
        ``memory_limit`` is given).
    n_workers : int, optional
        LocalCluster worker processes (default: one per core).
    memory_limit : str or int, optional
        LocalCluster memory per worker (default: total memory / workers).
    dashboard : bool, default=True
        Report the LocalCluster's dashboard (served on a free loopback port) through ``on_dashboard``.
    on_dashboard : callable, optional
        Called with the dashboard link once the cluster is up.
    connect_timeout : float, default=10
        Seconds to wait for an existing scheduler.
    lazy : bool, default=False
        Start the LocalCluster only when the first graph is computed, so that
        whatever the enclosed code checks first (paths, stores, parameters)
        fails fast without one (what the CLI does). Implied by the automatic
        engine.
    on_engine : callable, optional
        Called with the automatic choice's one-line reason when it is made,
        and with the line saying what it waits for while an existing
        scheduler has fewer than ``wait_for_workers`` workers.
    wait_for_workers : int, default=1
        With an existing scheduler: wait until this many workers have
        registered before the enclosed stages run (workers of a batch queue
        or an autoscaler arrive after the driver).
    worker_timeout : float, optional
        Seconds to wait for them (default :data:`~jsmf_dask.parameters.WORKER_TIMEOUT`), then
        :class:`~jsmf_dask.exceptions.ClusterError`.
    heartbeat_timeout : float, optional
        With an existing scheduler: ask it every few seconds whether it
        answers (from a watchdog thread); one that stops answering for this
        many seconds (frozen, its host unreachable) interrupts the enclosed
        stages with :class:`~jsmf_dask.exceptions.ClusterError` (it
        interrupts the main thread: meant for the command line, which sets
        :data:`~jsmf_dask.parameters.HEARTBEAT_TIMEOUT`). None: no watchdog.
    on_hung : callable, optional
        With ``heartbeat_timeout``: the last resort of a process that must end.
        Called from the watchdog with the give-up message (the one of the
        :class:`~jsmf_dask.exceptions.ClusterError` raised) when the process
        is still running :data:`~jsmf_dask._heartbeat.HUNG_AFTER` seconds after the watchdog
        interrupted it (something still waits on the frozen scheduler); it
        should end the process (the command line says the message if it has
        not said it yet and calls ``os._exit(1)``).

    Yields
    ------
    distributed.Client or None
        None for the local schedulers, and for a LocalCluster not started yet
        (``lazy``).
    """

    if scheduler in (None, "auto"):
        scheduler = os.environ.get("DASK_SCHEDULER_ADDRESS") or None
        if scheduler is None and (n_workers is not None or memory_limit is not None):
            scheduler = "local"  # the LocalCluster's own options ask for it
    automatic = scheduler is None
    if scheduler == "local":
        scheduler = None
    lazy = lazy or automatic
    if scheduler in LOCAL_SCHEDULERS:
        with dask.config.set(scheduler=scheduler):
            yield None
        return
    if scheduler is not None:
        client = _client(scheduler, connect_timeout)
        with client, dask.config.set(scheduler="dask.distributed"):
            if on_dashboard is not None and client.dashboard_link:
                on_dashboard(client.dashboard_link)
            await_workers(client, wait_for_workers, WORKER_TIMEOUT if worker_timeout is None else worker_timeout,
                          on_engine)
            gave_up = (f"the Dask scheduler at {scheduler} stopped answering for {heartbeat_timeout or 0:g} s (frozen "
                       "or unreachable; --heartbeat-timeout): gave up. Stages and outputs already committed are kept "
                       "and this one wrote nothing; once the scheduler answers again, rerun the same command to resume")
            watchdog = Heartbeat(client, heartbeat_timeout, gave_up, on_hung) if heartbeat_timeout else None
            try:
                yield client
            except KeyboardInterrupt:
                if watchdog is None or not watchdog.frozen:
                    raise
                with contextlib.suppress(Exception):
                    client.close(timeout=2)
                raise ClusterError(gave_up) from None
            finally:
                if watchdog is not None:
                    watchdog.stop()
        return
    cluster = _LocalClusterOnDemand(n_workers, memory_limit, on_dashboard if dashboard else None,
                                    auto=automatic, on_engine=on_engine)
    # the cluster closes inside the block that set the scheduler: its client's own setting of it (made when it
    # started, within the block) is undone first, and the block's last, to what it was before
    with dask.config.set(scheduler=_OnDemandScheduler(cluster) if lazy else "dask.distributed"):
        try:
            yield None if lazy else cluster.start()
        finally:
            cluster.close()


def registered_workers(client, attempts: int = 3) -> dict:
    """The scheduler's workers now: ``{address: info}`` (info has ``memory_limit``, ``nthreads``).

    Asks the scheduler itself, not ``Client.scheduler_info``: that returns the client's shared cache, which its
    periodic refresh rewrites without any worker (and which a failed query leaves as it was), so it can read as
    "every worker left" while they are all there. A query that fails with a connection error is retried
    ``attempts`` times, then raised as :class:`ClusterError`.
    """
    for attempt in range(attempts):
        try:
            return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])
        except OSError as err:
            failure = err
            if attempt + 1 < attempts:
                time.sleep(0.5 * 2**attempt)
    raise ClusterError(f"the scheduler at {client.scheduler.address} did not answer which workers it has "
                       f"({attempts} attempts; the last: {failure}): check that it is running and reachable, then "
                       "rerun (committed stages are kept)")


def total_memory(client) -> int:
    """Memory the graphs can hold: the workers' memory limits summed (a worker without one counts as this
    machine's memory), or this process's available memory when ``client`` is None (dask's local schedulers)."""
    if client is None:
        return int(psutil.virtual_memory().available)
    workers = registered_workers(client)
    return int(sum(info.get("memory_limit") or psutil.virtual_memory().total for info in workers.values()))


def killed_worker_message(err: BaseException, what: str, *, need: int | None = None,
                          advice: str = "give a worker more memory (--memory-limit, or fewer --workers on one "
                                        "machine)") -> str | None:
    """The one-line account of a task whose workers all died running it (distributed's ``KilledWorker``), else
    None: what the task was and needs, the worker it last killed and its memory limit, and what to change.

    A worker that dies under one task, time after time, has most often run out of memory (its nanny ends it at
    95% of its limit): a pool that shrank mid-run, or a task larger than its plan.
    """
    if type(err).__name__ != "KilledWorker":
        return None
    attempts = getattr(err, "allowed_failures", 0) + 1
    last = getattr(err, "last_worker", None)
    address = getattr(last, "address", "a worker")
    limit = getattr(last, "memory_limit", None)
    needs = f" (it needs about {need / 2**30:.2f} GiB)" if need else ""
    limit_text = f", memory limit {limit / 2**30:.2f} GiB" if limit else ""
    times = "once" if attempts == 1 else f"{attempts} times, on as many workers"
    return (f"{what}{needs} ended the worker running it {times} (the last {address}{limit_text}): a worker "
            f"dying under one task is most often its memory running out; {advice}, then rerun: committed stages "
            "are kept and this one wrote nothing")


def await_workers(client, n: int, timeout: float, on_wait: Callable[[str], None] | None = None) -> None:
    """Return once ``n`` workers have registered with ``client``'s scheduler; after ``timeout`` seconds raise
    :class:`ClusterError` naming the scheduler and how many came. Says what it waits for through ``on_wait``."""
    have = len(registered_workers(client))
    if have >= n:
        return
    address = client.scheduler.address
    if on_wait is not None:
        on_wait(f"waiting for {n} worker(s) to register with {address} ({have} so far; at most {timeout:g} s, "
                "--wait-for-workers/--worker-timeout)")
    try:
        client.wait_for_workers(n_workers=n, timeout=timeout)
    except TimeoutError:
        have = len(registered_workers(client))
        raise ClusterError(
            f"only {have} of {n} worker(s) registered with the scheduler at {address} within {timeout:g} s: start "
            f"workers (`dask worker {address}`), or wait longer with --worker-timeout") from None


def _missing_here(paths: list[str]) -> list[str]:
    """Of ``paths``, those this process cannot see (run on each worker by :func:`check_worker_paths`)."""
    return [p for p in paths if not os.path.exists(p)]


def check_worker_paths(client, paths: list[str]) -> None:
    """Raise :class:`ClusterError` unless every worker of ``client`` sees every local path of ``paths``.

    Each worker stats the paths itself (``Client.run``, no task), so a root or
    input that exists only on the driver's machine is named, with the first
    worker that cannot see it, before any work. URLs are not checked (fsspec
    reaches them the same way from everywhere).
    """
    local = sorted({os.path.abspath(p) for p in paths if p and "://" not in p})
    if not local:
        return
    missing = {w: m for w, m in client.run(_missing_here, local).items() if m}
    if missing:
        worker, gone = sorted(missing.items())[0]
        others = f" (and {len(missing) - 1} more worker(s))" if len(missing) > 1 else ""
        raise ClusterError(
            f"worker {worker}{others} cannot see {gone[0]} (no such file or directory on that worker): the run "
            "root and the inputs must be on storage every worker mounts at the same path, or object-store URLs "
            "(deploy/README.md)")


class _OnDemandScheduler:
    """The dask scheduler of ``connect(lazy=True)``: a ``get`` that starts the LocalCluster on the first graph.

    A nanny hands the command's dask config to each worker it starts or restarts (a worker that died, most
    often under its memory limit), so this pickles, as the ``'dask.distributed'`` those workers use.
    """

    def __init__(self, cluster: _LocalClusterOnDemand) -> None:
        self.cluster = cluster

    def __call__(self, dsk, keys, **kwargs):
        return self.cluster.get(dsk, keys, **kwargs)

    def __reduce__(self):
        return str, ("dask.distributed",)


def _pending_owner() -> _LocalClusterOnDemand | None:
    """The LocalCluster-on-demand of an enclosing ``connect(lazy=True)``, if any."""
    scheduler = dask.config.get("scheduler", None)
    return scheduler.cluster if isinstance(scheduler, _OnDemandScheduler) else None


def start_pending_cluster():
    """Start the LocalCluster of an enclosing ``connect(lazy=True)`` now, and return its client.

    None outside such a block, and when the automatic engine chose threads.
    """
    owner = _pending_owner()
    return owner.start() if owner is not None and owner.decided != "threads" else None


def pending_worker_memory() -> int | None:
    """The memory limit of each worker of an enclosing ``connect(lazy=True)`` not started yet (else None)."""
    owner = _pending_owner()
    if owner is not None and owner._client is None and owner.decided != "threads":
        return owner.worker_memory_limit()
    return None


class _LocalClusterOnDemand:
    """The embedded LocalCluster, started by :meth:`start` (at once, or by the first graph computed)."""

    def __init__(self, n_workers: int | None, memory_limit, on_dashboard, *, auto: bool = False,
                 on_engine: Callable[[str], None] | None = None) -> None:
        self.n_workers = n_workers or os.cpu_count() or 1
        self.memory_limit = memory_limit
        self.on_dashboard = on_dashboard
        self.auto = auto
        self.on_engine = on_engine
        self.decided: str | None = None  # 'threads' or 'local' once the automatic choice is made
        self._stack = contextlib.ExitStack()
        self._client = None

    def decide(self, work: Work) -> str:
        """Choose threads or the LocalCluster for ``work`` (see :func:`choose_engine`); return the reason."""
        if work.small():
            self.decided = "threads"
            line = f"engine: threads in this process ({work.describe()}; --scheduler local for worker processes)"
        else:
            self.decided = "local"
            line = (f"engine: LocalCluster of {self.n_workers} worker processes ({work.describe()}; "
                    f"--scheduler threads to stay in this process)")
        logging.getLogger("jsmf_dask").info(line)
        if self.on_engine is not None:
            self.on_engine(line)
        return line

    def worker_memory_limit(self) -> int:
        """Bytes each worker may use: ``memory_limit``, else 90% of this machine's memory shared out."""
        if self.memory_limit is None:
            return int(psutil.virtual_memory().total * 0.9 / self.n_workers)
        return int(dask.utils.parse_bytes(self.memory_limit)) if isinstance(self.memory_limit, str) \
            else int(self.memory_limit)

    def start(self):
        """Start the cluster and its client (idempotent); returns the client (None when threads were chosen)."""
        if self.decided == "threads":
            return None
        if self._client is not None:
            return self._client
        from distributed import Client, LocalCluster

        memory_limit = self.worker_memory_limit()
        env = {var: "1" for var in _BLAS_VARS}
        # workers import distributed (which sets its loggers from dask's config) before anything else runs there
        level = logging.getLevelName(logging.getLogger("distributed").getEffectiveLevel())
        env["DASK_LOGGING__DISTRIBUTED"] = level.lower() if isinstance(level, str) else "info"
        with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
            cluster = self._stack.enter_context(LocalCluster(
                n_workers=self.n_workers,
                threads_per_worker=1,
                processes=True,
                memory_limit=memory_limit,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",  # a free loopback port (None would mean the default :8787)
            ))
        client = self._stack.enter_context(Client(cluster))
        if logging.getLogger("distributed").getEffectiveLevel() > logging.INFO:
            from jsmf_dask._worker_plugins import QuietWorkerLog

            client.register_plugin(QuietWorkerLog())  # a plugin: restarted workers get it too
        if self.on_dashboard is not None:
            self.on_dashboard(client.dashboard_link)
        self._client = client
        return client

    def get(self, dsk, keys, **kwargs):
        """A dask scheduler ``get``: on threads if they were chosen, else on the cluster (started now)."""
        if self.decided == "threads":
            from dask.threaded import get

            return get(dsk, keys, **kwargs)
        return self.start().get(dsk, keys, **kwargs)

    def close(self) -> None:
        self._stack.close()
        self._client = None
