"""The worker plugin the embedded LocalCluster registers, and the log filter it installs.

Imported only when a cluster starts (by :mod:`jsmf_dask.cluster`); it imports
nothing of this package, so the cluster module and the plugin form no circle.
"""

from __future__ import annotations

import logging

from distributed.diagnostics.plugin import WorkerPlugin

__all__ = ["QuietWorkerLog", "quiet_worker_log"]


class _DropReportedElsewhere(logging.Filter):
    """Drops the worker records whose news reaches the user another way.

    - "Compute Failed …" with the task's traceback: the exception reaches the
      client, which reports it once.
    - "Failed to communicate with scheduler during heartbeat" with a
      ``CommClosedError`` traceback: a heartbeat sent while the embedded
      cluster shuts down (the scheduler lives in the client's process, so it
      is gone only when the client closes it or is gone itself).
    """

    DROPPED = ("Compute Failed", "Failed to communicate with scheduler during heartbeat")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.DROPPED)


def quiet_worker_log() -> None:
    """Install :class:`_DropReportedElsewhere` on this process's worker logger (each LocalCluster worker's setup)."""
    logger = logging.getLogger("distributed.worker")
    if not any(isinstance(f, _DropReportedElsewhere) for f in logger.filters):
        logger.addFilter(_DropReportedElsewhere())


class QuietWorkerLog(WorkerPlugin):
    """Drops the worker records the user learns of another way, in every worker (restarted ones too).

    A failed task's exception still reaches the client, which reports it once;
    see :class:`_DropReportedElsewhere`.
    """

    name = "jsmf-quiet-worker-log"

    def setup(self, worker) -> None:
        quiet_worker_log()
