"""Run ``jsmf run CONFIG`` on a SLURM cluster through dask-jobqueue.

Workers are SLURM jobs (one single-threaded Dask worker per core); this
driver starts them, points ``jsmf`` at their scheduler through
``DASK_SCHEDULER_ADDRESS`` and releases them when the run ends, also when the
driver is cancelled (``scancel`` sends SIGTERM: the handler closes the cluster,
which cancels the worker jobs, so none outlives its driver). The run root must
be on a file system every node mounts.

    pip install dask-jobqueue
    python deploy/slurm/run_on_slurm.py pipelines/configs/nytimes.toml --jobs 4 --cores 4 --memory 16GB

(or submit it with ``sbatch deploy/slurm/jsmf.sbatch``, whose environment variables set these flags). Size
``--cores`` and ``--memory`` to a node of your partition: a worker job asking for more than any node has pends
forever (``Reason=PartitionConfig``); ``jsmf`` then waits ``--worker-timeout`` seconds for a worker and stops
with one error line instead of hanging. Without ``--walltime``, worker jobs get the driver's own remaining
time when it runs inside SLURM, so they never end before it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys


def _remaining_walltime() -> str | None:
    """The time left to this SLURM job (``squeue``'s ``%L``: ``[D-]HH:MM:SS``), or None outside SLURM."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        left = subprocess.run(["squeue", "-h", "-j", job, "-o", "%L"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return left if left and left not in ("INVALID", "UNLIMITED", "NOT_SET") else None


def _stop_on(signum, frame) -> None:  # noqa: ARG001 - the signal handler's signature
    raise SystemExit(128 + signum)  # unwinds through main's finally: the cluster (and its worker jobs) closes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--jobs", type=int, default=int(os.environ.get("JSMF_JOBS", 2)), help="SLURM jobs of workers")
    p.add_argument("--cores", type=int, default=int(os.environ.get("JSMF_CORES", 2)),
                   help="cores (= single-threaded workers) per job")
    p.add_argument("--memory", default=os.environ.get("JSMF_MEMORY", "8GB"), help="memory per job")
    p.add_argument("--queue", default=os.environ.get("JSMF_QUEUE"), help="SLURM partition")
    p.add_argument("--walltime", default=os.environ.get("JSMF_WALLTIME"),
                   help="worker jobs' time limit (default: the driver's remaining time inside SLURM, else 05:00:00)")
    p.add_argument("--worker-timeout", type=float, default=float(os.environ.get("JSMF_WORKER_TIMEOUT", 1800)),
                   help="seconds jsmf waits for the first worker job to start before giving up")
    p.add_argument("--log-directory", default=os.environ.get("JSMF_LOG_DIRECTORY"),
                   help="where the worker jobs write their slurm-JOBID.out (default: the directory the driver runs in)")
    args = p.parse_args(argv)
    from dask_jobqueue import SLURMCluster

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop_on)
    cluster = SLURMCluster(
        cores=args.cores, processes=args.cores, memory=args.memory, queue=args.queue,
        walltime=args.walltime or _remaining_walltime() or "05:00:00",
        job_script_prologue=["export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1"],
        log_directory=args.log_directory,
    )
    try:
        cluster.scale(jobs=args.jobs)
        env = dict(os.environ, DASK_SCHEDULER_ADDRESS=cluster.scheduler_address)
        driver = subprocess.Popen(["jsmf", "run", args.config, "--quiet", "--worker-timeout",
                                   str(args.worker_timeout)], env=env)
        try:
            return driver.wait()
        finally:
            if driver.poll() is None:  # cancelled: stop the command too before the cluster goes
                driver.terminate()
                driver.wait()
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
