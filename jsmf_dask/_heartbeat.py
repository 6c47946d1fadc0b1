"""The watchdog of a command on an existing Dask scheduler: a thread asking the scheduler for its identity,
which interrupts the command when the scheduler stops answering (``jsmf --heartbeat-timeout``;
:func:`jsmf_dask.cluster.connect`)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

__all__ = ["Heartbeat", "HUNG_AFTER"]


#: Seconds a process may go on after the heartbeat's watchdog interrupted it before ``connect``'s ``on_hung``
#: ends it (closing the client takes at most 2 of them; the rest is the command's own exit, which has said
#: what happened by then: ending it early skips only the exit handlers).
HUNG_AFTER = 5.0


class Heartbeat:
    """A daemon thread asking ``client``'s scheduler for its identity every ``timeout / 4`` seconds (at most 5);
    when an answer takes longer than ``timeout`` it sets :attr:`frozen` and interrupts the main thread, and
    if the process still runs :data:`HUNG_AFTER` seconds later, calls ``on_hung(message)``.

    The interrupt is a real SIGINT sent to the main thread (``pthread_kill``), not
    ``_thread.interrupt_main``: that one only marks the signal pending, which a main thread blocked in a
    lock's wait without a timeout (a future's result) never looks at — the command then hung past the
    timeout (seen in full test runs: ``jsmf cooccur`` still waiting 120 s after its scheduler froze). A real
    signal interrupts the wait, and Python raises ``KeyboardInterrupt`` there.

    A process started in the background without job control (``nohup jsmf … &`` from a script, as a
    scheduled job may be) begins with SIGINT ignored, and the interrupt would never arrive. Made in the
    main thread, the watchdog then handles SIGINT itself until :meth:`stop`: its own interrupt raises
    ``KeyboardInterrupt``, any other SIGINT stays ignored, and :meth:`stop` leaves SIGINT ignored again (an
    interrupt sent as it stops is ignored too)."""

    def __init__(self, client, timeout: float, message: str = "",
                 on_hung: Callable[[str], None] | None = None) -> None:
        self.frozen = False
        self._stop = threading.Event()
        self._client, self._timeout, self._message, self._on_hung = client, timeout, message, on_hung
        self._ignored_sigint = (threading.current_thread() is threading.main_thread()
                                and signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
        if self._ignored_sigint:
            signal.signal(signal.SIGINT, self._on_sigint)
        self._thread = threading.Thread(target=self._watch, name="jsmf-heartbeat", daemon=True)
        self._thread.start()

    def _on_sigint(self, signum, frame) -> None:
        """SIGINT's handler while it would otherwise be ignored: the watchdog's interrupt only."""
        if self.frozen:
            raise KeyboardInterrupt

    def _watch(self) -> None:
        import asyncio

        interval = min(self._timeout / 4, 5.0)
        loop = self._client.loop.asyncio_loop
        while not self._stop.wait(interval):
            answer = asyncio.run_coroutine_threadsafe(self._client.scheduler.identity(), loop)
            try:
                answer.result(timeout=self._timeout)
            except TimeoutError:
                answer.cancel()
                if not self._stop.is_set():
                    self.frozen = True
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                    if self._on_hung is not None:
                        time.sleep(HUNG_AFTER)  # a daemon thread: a process that ends in time ends it too
                        self._on_hung(self._message)
                return
            except Exception:  # noqa: BLE001 - a closed connection: the client itself reports that
                return

    def stop(self) -> None:
        """Stop watching (SIGINT ignored again if it was when the watchdog started)."""
        self._stop.set()
        if self._ignored_sigint and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
