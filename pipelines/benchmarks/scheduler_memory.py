"""A long-lived scheduler's memory over many consecutive ``jsmf`` commands (issue: real clusters).

Starts a ``dask scheduler`` and two single-threaded workers on loopback, runs ``--commands`` CLI commands
against it one after another (each its own driver process, as nightly jobs and several users would: fit,
refine and evaluate in turn on a small synthetic root), and samples the scheduler's resident memory after
each. Prints the curve (every 5th command) and the growth from the first to the last sample::

    python -m pipelines.benchmarks.scheduler_memory --commands 50
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

BIN = Path(sys.executable).parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--commands", type=int, default=50)
    p.add_argument("--json", help="write the samples here")
    args = p.parse_args(argv)
    import dask

    from jsmf_dask import cooccur, synth

    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = work / "root"
        with dask.config.set({"scheduler": "threads", "jsmf.progress": False}):
            synth(root, n_docs=5000, n_words=500, n_topics=5, doc_length=50, seed=0, row_group_size=500)
            cooccur(root)
        sched_file = work / "scheduler.json"
        procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                   "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        try:
            while "address" not in (sched_file.read_text() if sched_file.exists() else ""):
                time.sleep(0.1)
            address = json.loads(sched_file.read_text())["address"]
            for i in range(2):
                procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--nthreads", "1", "--no-nanny",
                                               "--host", "127.0.0.1", "--no-dashboard", "--name", f"w{i}"],
                                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            scheduler = psutil.Process(procs[0].pid)
            commands = [["fit", str(root), "--topics", "5", "--iterations", "20", "--name", "k5", "--overwrite"],
                        ["refine", str(root), "--model", "k5", "--sweeps", "3", "--overwrite"],
                        ["evaluate", str(root)]]
            samples = []
            for n in range(1, args.commands + 1):
                argv_n = commands[(n - 1) % len(commands)]
                done = subprocess.run([str(BIN / "jsmf"), *argv_n, "--scheduler", address, "--quiet"], env=env,
                                      capture_output=True, text=True)
                if done.returncode:
                    print(done.stderr, file=sys.stderr)
                    return 1
                samples.append(scheduler.memory_info().rss / 2**20)
                if n % 5 == 0 or n == 1:
                    print(f"after command {n:3d} ({argv_n[0]}): scheduler RSS {samples[-1]:.0f} MiB", flush=True)
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:  # a worker stuck closing: our own process
                    proc.kill()
                    proc.wait()
    settled = min(9, len(samples) - 1)  # the first commands warm the scheduler up
    print(f"scheduler RSS: {samples[0]:.0f} MiB after command 1, {samples[-1]:.0f} MiB after command {len(samples)} "
          f"(growth {samples[-1] - samples[0]:+.0f} MiB; {samples[-1] - samples[settled]:+.0f} MiB since command "
          f"{settled + 1})")
    if args.json:
        Path(args.json).write_text(json.dumps(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
