#!/bin/bash
# Run `jsmf run CONFIG` on a plain Dask cluster started here: a `dask scheduler` and N single-threaded
# `dask worker` processes (BLAS limited to one thread each), each started from its own working directory as
# on separate hosts, stopped (by their pids) when the run ends or this script is interrupted.
#   deploy/dask/run_with_dask.sh pipelines/configs/demo.toml 2 4GiB
# On several hosts, start the same processes there instead (deploy/README.md, "Plain dask scheduler / dask
# worker"); the run root and inputs must then be on storage every host mounts at the same path.
set -euo pipefail
CONFIG=${1:?usage: run_with_dask.sh CONFIG.toml [WORKERS] [MEMORY_PER_WORKER]}
WORKERS=${2:-2}
MEMORY=${3:-4GiB}
CONFIG=$(cd "$(dirname "$CONFIG")" && pwd)/$(basename "$CONFIG")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/jsmf-dask.XXXXXX")
PIDS=()
stop() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap stop EXIT
trap 'exit 130' INT TERM
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
(cd "$WORK" && exec dask scheduler --host 127.0.0.1 --port 0 --dashboard-address 127.0.0.1:0 \
  --scheduler-file "$WORK/scheduler.json" >"$WORK/scheduler.log" 2>&1) &
PIDS+=("$!")
for _ in $(seq 300); do grep -qs '"address"' "$WORK/scheduler.json" && break; sleep 0.1; done
ADDRESS=$(python -c "import json, sys; print(json.load(open(sys.argv[1]))['address'])" "$WORK/scheduler.json")
for i in $(seq "$WORKERS"); do
  mkdir -p "$WORK/worker-$i"
  (cd "$WORK/worker-$i" && exec dask worker "$ADDRESS" --nthreads 1 --memory-limit "$MEMORY" --name "worker-$i" \
    --no-dashboard >"$WORK/worker-$i.log" 2>&1) &
  PIDS+=("$!")
done
echo "scheduler $ADDRESS, $WORKERS worker(s) of $MEMORY" >&2
jsmf run "$CONFIG" --scheduler "$ADDRESS" --wait-for-workers "$WORKERS" --worker-timeout 120
