"""Run ``jsmf run CONFIG`` on a SLURM cluster through dask-jobqueue.

Workers are SLURM jobs (one single-threaded Dask worker per core); this
driver starts them, points ``jsmf`` at their scheduler through
``DASK_SCHEDULER_ADDRESS`` and releases them when the run ends. The run root
must be on a file system every node mounts.

    pip install dask-jobqueue
    python deploy/slurm/run_on_slurm.py pipelines/configs/nytimes.toml --jobs 4 --queue normal

(or submit it with ``sbatch deploy/slurm/jsmf.sbatch``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--jobs", type=int, default=4, help="SLURM jobs of workers")
    p.add_argument("--cores", type=int, default=8, help="cores (= single-threaded workers) per job")
    p.add_argument("--memory", default="96GB", help="memory per job")
    p.add_argument("--queue", default=None, help="SLURM partition")
    p.add_argument("--walltime", default="04:00:00")
    args = p.parse_args()
    from dask_jobqueue import SLURMCluster

    cluster = SLURMCluster(
        cores=args.cores, processes=args.cores, memory=args.memory, queue=args.queue, walltime=args.walltime,
        job_script_prologue=["export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1"],
    )
    try:
        cluster.scale(jobs=args.jobs)
        env = dict(os.environ, DASK_SCHEDULER_ADDRESS=cluster.scheduler_address)
        return subprocess.call(["jsmf", "run", args.config, "--quiet"], env=env)
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
