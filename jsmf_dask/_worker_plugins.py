"""Worker plugins the embedded LocalCluster registers (imported only when a cluster starts)."""

from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

from jsmf_dask.cluster import quiet_worker_log

__all__ = ["QuietWorkerLog"]


class QuietWorkerLog(WorkerPlugin):
    """Drops the worker records the user learns of another way, in every worker (restarted ones too).

    A failed task's exception still reaches the client, which reports it once;
    see :class:`jsmf_dask.cluster._DropReportedElsewhere`.
    """

    name = "jsmf-quiet-worker-log"

    def setup(self, worker) -> None:
        quiet_worker_log()
