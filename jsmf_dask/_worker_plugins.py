"""Worker plugins the embedded LocalCluster registers (imported only when a cluster starts)."""

from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

from jsmf_dask.cluster import quiet_task_failures

__all__ = ["QuietTaskFailures"]


class QuietTaskFailures(WorkerPlugin):
    """Drops the worker's "Compute Failed" dump in every worker, including one its nanny restarts later.

    The failed task's exception still reaches the client, which reports it once.
    """

    name = "jsmf-quiet-task-failures"

    def setup(self, worker) -> None:
        quiet_task_failures()
