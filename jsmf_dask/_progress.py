"""Computing dask collections with the progress display dask provides, and progress from inside a task.

A long task (the in-task AP loop) reports its progress with :func:`report`;
the driver receives it inside :func:`listen`. On a distributed cluster the
messages travel as worker events (``Worker.log_event`` → ``Client.subscribe_topic``);
with dask's local schedulers the task runs in the driver's process and the
listener is called directly. Messages carry a channel name of the run, so two
drivers on one scheduler never see each other's progress.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from timeit import default_timer
from typing import Any

import dask
from dask.diagnostics import ProgressBar

from jsmf_dask import config

__all__ = ["compute", "persist", "active_client", "report", "listen", "data_in_graph"]

_TOPIC = "jsmf-progress"
_listeners: dict[str, Callable[[dict], None]] = {}  # channel -> callback, in this process
_subscriptions: dict[int, int] = {}  # id(client) -> channels listening through it (one topic handler each)
_lock = threading.Lock()


def active_client():
    """The :class:`distributed.Client` that graphs will run on, or None when dask runs locally.

    None also when a client exists but ``dask.config`` selects a local
    scheduler. Inside ``connect(lazy=True)`` this starts the LocalCluster.
    """
    from jsmf_dask.cluster import start_pending_cluster

    pending = start_pending_cluster()
    if pending is not None:
        return pending
    if "distributed" not in sys.modules:  # no client can exist (and importing it costs 0.2 s)
        return None
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
    ``dask.config`` names, else on threads. Either bar is drawn on stderr, so
    stdout carries results only. Exceptions raised in tasks propagate unchanged.
    """
    show = bool(config.get("progress"))
    client = active_client()
    if client is not None:
        futures = client.compute(list(collections))
        if show:
            from distributed import progress

            # distributed's text bar writes to sys.stdout; it blocks until the futures finish
            with contextlib.redirect_stdout(sys.stderr):
                progress(futures, notebook=False)
        return tuple(client.gather(futures))
    # Without a client, bags default to processes and delayed to threads, and dask refuses to mix
    # them; one explicit scheduler (threads unless dask.config names another) runs every stage.
    scheduler = dask.config.get("scheduler", None) or "threads"
    if show:
        with _ProgressBar(minimum=1.0, out=sys.stderr):
            return dask.compute(*collections, scheduler=scheduler)
    return dask.compute(*collections, scheduler=scheduler)


def persist(*collections: Any) -> tuple[Any, ...]:
    """``dask.persist(*collections)`` on the scheduler :func:`compute` would use (no progress bar: what is
    persisted is an input of the computations that follow, whose bars show)."""
    client = active_client()
    if client is not None:
        return tuple(client.persist(list(collections)))
    return dask.persist(*collections, scheduler=dask.config.get("scheduler", None) or "threads")


class _ProgressBar(ProgressBar):
    """dask's text bar, whose drawing thread stops as soon as the computation ends.

    dask's thread sleeps ``dt`` (0.1 s) between draws and the computation
    waits for it to wake before returning: 50 ms on average added to every
    ``compute``, 0.5 s over the sixteen of a small ``jsmf topics`` run. Here
    it waits on an event that the end of the computation sets.
    """

    def _start(self, dsk):
        self._ended = threading.Event()
        super()._start(dsk)

    def _timer_func(self):
        while self._running:
            elapsed = default_timer() - self._start_time
            if elapsed > self._minimum:
                self._update_bar(elapsed)
            self._ended.wait(self._dt)

    def _finish(self, dsk, state, errored):
        self._running = False
        self._ended.set()
        super()._finish(dsk, state, errored)


def report(channel: str, message: dict) -> None:
    """Send ``message`` from inside a task to the driver listening on ``channel`` (see :func:`listen`)."""
    try:
        if "distributed" not in sys.modules:  # then this is no distributed worker
            raise ValueError
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not in a distributed worker: the driver's own process
        listener = _listeners.get(channel)
        if listener is not None:
            listener(message)
        return
    worker.log_event(_TOPIC, {"channel": channel, **message})


def _dispatch(event) -> None:
    """The client's one handler of the progress topic: each message to its channel's listener."""
    _, message = event
    listener = _listeners.get(message.get("channel"))
    if listener is not None:
        listener({k: v for k, v in message.items() if k != "channel"})


@contextlib.contextmanager
def listen(channel: str, callback: Callable[[dict], None]) -> Iterator[None]:
    """Call ``callback(message)`` for every :func:`report` on ``channel`` while the block runs.

    Several channels may listen at once through one client (concurrent fits
    from one driver): the client subscribes to the topic once and drops the
    subscription when its last channel stops listening.
    """
    client = active_client()
    with _lock:
        _listeners[channel] = callback
        if client is not None:
            _subscriptions[id(client)] = _subscriptions.get(id(client), 0) + 1
            if _subscriptions[id(client)] == 1:
                client.subscribe_topic(_TOPIC, _dispatch)
    try:
        yield
    finally:
        with _lock:
            _listeners.pop(channel, None)
            if client is not None:
                _subscriptions[id(client)] -= 1
                if _subscriptions[id(client)] == 0:
                    del _subscriptions[id(client)]
                    client.unsubscribe_topic(_TOPIC)


@contextlib.contextmanager
def data_in_graph() -> Iterator[None]:
    """Arrays that travel in the graph on purpose (a task rerun after a worker died can always get them, which a
    scattered copy on that worker cannot promise): distributed's large-graph advice is not for these graphs."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        yield
