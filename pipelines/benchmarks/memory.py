"""Peak resident memory of the processes a benchmark runs, sampled in a thread.

``ru_maxrss`` will not do for workers: Linux keeps it across exec, so a process
spawned by a big driver inherits the driver's peak.
"""

from __future__ import annotations

import os
import threading

import psutil

__all__ = ["PeakMemory"]


class PeakMemory:
    """Peak resident set of each process, sampled every ``interval`` seconds while the ``with`` block runs.

    Parameters
    ----------
    pids : list of int, optional
        The processes to sample (a cluster's workers). Without them, the
        process ``root`` and every process below it, as they come and go.
    root : int, optional
        The tree's root (default: this process).
    interval : float, default=0.05

    Attributes
    ----------
    peaks : dict
        The largest resident set seen of each process, in bytes, by pid.
    """

    def __init__(self, pids: list[int] | None = None, *, root: int | None = None, interval: float = 0.05) -> None:
        self._fixed = [psutil.Process(pid) for pid in pids] if pids is not None else None
        self._root = psutil.Process(root or os.getpid())
        self.peaks: dict[int, int] = dict.fromkeys(pids or [], 0)
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @property
    def largest(self) -> int:
        """The largest resident set of any one process, in bytes."""
        return max(self.peaks.values(), default=0)

    def _processes(self) -> list[psutil.Process]:
        if self._fixed is not None:
            return self._fixed
        try:
            return [self._root, *self._root.children(recursive=True)]
        except psutil.Error:  # the root has exited
            return []

    def _sample(self) -> None:
        while not self._stop.is_set():
            for proc in self._processes():
                try:
                    self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0), proc.memory_info().rss)
                except psutil.Error:  # a process that just exited
                    pass
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
