"""Where the graphs run: an existing Dask cluster, or the embedded LocalCluster.

Without an address (argument or ``DASK_SCHEDULER_ADDRESS``) a
:class:`distributed.LocalCluster` of worker processes sized to the machine is
started: one single-threaded worker per core, memory split evenly, BLAS
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
from collections.abc import Iterator

import dask
import psutil

from jsmf_dask.exceptions import ClusterError

__all__ = ["LOCAL_SCHEDULERS", "connect", "start_pending_cluster"]

#: Addresses that select one of dask's single-machine schedulers instead of a cluster.
LOCAL_SCHEDULERS = ("synchronous", "threads")

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
    connect_timeout: float = 10.0,
    lazy: bool = False,
) -> Iterator[object]:
    """Run the enclosed stages on a cluster.

    Parameters
    ----------
    scheduler : str, optional
        A scheduler address (``tcp://host:8786``), ``"synchronous"`` or
        ``"threads"`` for dask's local schedulers, or None for
        ``DASK_SCHEDULER_ADDRESS`` if set and otherwise a new LocalCluster.
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
        fails fast without one (what the CLI does).

    Yields
    ------
    distributed.Client or None
        None for the local schedulers, and for a LocalCluster not started yet
        (``lazy``).
    """

    scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if scheduler in LOCAL_SCHEDULERS:
        with dask.config.set(scheduler=scheduler):
            yield None
        return
    if scheduler is not None:
        client = _client(scheduler, connect_timeout)
        with client, dask.config.set(scheduler="dask.distributed"):
            if on_dashboard is not None and client.dashboard_link:
                on_dashboard(client.dashboard_link)
            yield client
        return
    cluster = _LocalClusterOnDemand(n_workers, memory_limit, on_dashboard if dashboard else None)
    try:
        if lazy:
            # a callable scheduler: the first graph computed starts the cluster
            with dask.config.set(scheduler=cluster.get):
                yield None
        else:
            with dask.config.set(scheduler="dask.distributed"):
                yield cluster.start()
    finally:
        cluster.close()


def start_pending_cluster():
    """Start the LocalCluster of an enclosing ``connect(lazy=True)`` now, and return its client (else None)."""
    getter = dask.config.get("scheduler", None)
    owner = getattr(getter, "__self__", None)
    return owner.start() if isinstance(owner, _LocalClusterOnDemand) else None


def pending_worker_memory() -> int | None:
    """The memory limit of each worker of an enclosing ``connect(lazy=True)`` not started yet (else None)."""
    getter = dask.config.get("scheduler", None)
    owner = getattr(getter, "__self__", None)
    if isinstance(owner, _LocalClusterOnDemand) and owner._client is None:
        return owner.worker_memory_limit()
    return None


class _LocalClusterOnDemand:
    """The embedded LocalCluster, started by :meth:`start` (at once, or by the first graph computed)."""

    def __init__(self, n_workers: int | None, memory_limit, on_dashboard) -> None:
        self.n_workers = n_workers or os.cpu_count() or 1
        self.memory_limit = memory_limit
        self.on_dashboard = on_dashboard
        self._stack = contextlib.ExitStack()
        self._client = None

    def worker_memory_limit(self) -> int:
        """Bytes each worker may use: ``memory_limit``, else 90% of this machine's memory shared out."""
        if self.memory_limit is None:
            return int(psutil.virtual_memory().total * 0.9 / self.n_workers)
        return int(dask.utils.parse_bytes(self.memory_limit)) if isinstance(self.memory_limit, str) \
            else int(self.memory_limit)

    def start(self):
        """Start the cluster and its client (idempotent); returns the client."""
        if self._client is not None:
            return self._client
        from distributed import Client, LocalCluster

        memory_limit = self.worker_memory_limit()
        env = {var: "1" for var in _BLAS_VARS}
        # workers import distributed (which sets its loggers from dask's config) before anything else runs there
        level = logging.getLevelName(logging.getLogger("distributed").getEffectiveLevel())
        env["DASK_LOGGING__DISTRIBUTED"] = level.lower() if isinstance(level, str) else "info"
        # the nannies hand this config to their workers: it must not hold the callable scheduler of lazy mode
        with dask.config.set({"distributed.nanny.pre-spawn-environ": env, "scheduler": "dask.distributed"}):
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
        """A dask scheduler ``get``: starts the cluster, then runs the graph on it."""
        return self.start().get(dsk, keys, **kwargs)

    def close(self) -> None:
        self._stack.close()
        self._client = None
