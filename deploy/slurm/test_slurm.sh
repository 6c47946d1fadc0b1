#!/bin/bash
# `make test-slurm`: install and configure a single-node SLURM (Debian's slurm-wlm daemons and munge) on this
# machine, submit deploy/slurm/jsmf.sbatch on a small config (the shipped Reuters corpus, K = 5), wait for it, and
# check that its model equals the same config run without SLURM (B to 1e-10). Needs root (apt-get, the daemons);
# opt-in, not part of `make test`. Starts munged, slurmctld and slurmd and stops them (by their pids) at the end.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENV_BIN="$REPO/.venv/bin"
WORK=$(mktemp -d /tmp/jsmf-slurm.XXXXXX)
chmod 755 "$WORK"  # munged (user munge) writes under it
HOST=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 ))
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done; done
}
trap cleanup EXIT

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  echo "installing slurm (slurmctld, slurmd, slurm-client) and munge"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi
"$VENV_BIN/python" -c "import dask_jobqueue" 2>/dev/null || "$VENV_BIN/python" -m pip install -q "dask-jobqueue>=0.9.0"

# munge: the key the package made, a private socket
mkdir -p "$WORK/munge"
chown munge:munge "$WORK/munge"
runuser -u munge -- /usr/sbin/munged --socket="$WORK/munge/munge.socket" --pid-file="$WORK/munge/munged.pid" \
  --log-file="$WORK/munge/munged.log" --seed-file="$WORK/munge/seed"
for _ in $(seq 50); do [ -s "$WORK/munge/munged.pid" ] && break; sleep 0.1; done
PIDS+=("$(cat "$WORK/munge/munged.pid")")

# slurm: one node (this machine), one partition, no cgroups, no accounting
mkdir -p "$WORK/spool/ctld" "$WORK/spool/d" "$WORK/log"
cat > "$WORK/slurm.conf" <<EOF
ClusterName=jsmftest
SlurmctldHost=$HOST
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/munge.socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$WORK/spool/ctld
SlurmdSpoolDir=$WORK/spool/d
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$WORK/slurm.conf"
/usr/sbin/slurmctld -f "$SLURM_CONF"
/usr/sbin/slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do [ -s "$WORK/slurmctld.pid" ] && [ -s "$WORK/slurmd.pid" ] && break; sleep 0.1; done
PIDS+=("$(cat "$WORK/slurmd.pid")" "$(cat "$WORK/slurmctld.pid")")
for _ in $(seq 100); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 0.3; done
sinfo

# the run: the shipped Reuters corpus, 5 topics; the same config under SLURM and on threads
cp "$REPO/tests/data/reuters395/docword.reuters395.txt.gz" "$REPO/tests/data/reuters395/vocab.reuters395.txt" "$WORK/"
for name in slurm threads; do
  cat > "$WORK/$name.toml" <<EOF
root = "$WORK/run-$name"
[ingest]
inputs = ["$WORK/docword.reuters395.txt.gz"]
vocab_size = 400
[cooccur]
tile_size = 128
[[fit]]
topics = 5
iterations = 20
EOF
done
"$VENV_BIN/jsmf" run "$WORK/threads.toml" --scheduler threads --quiet
cd "$REPO"
start=$(date +%s)
# a 2-core node: the driver takes one core, the worker job one single-threaded worker on the other
PATH="$VENV_BIN:$PATH" JSMF_JOBS=1 JSMF_CORES=1 JSMF_MEMORY=2GB JSMF_WORKER_TIMEOUT=300 JSMF_LOG_DIRECTORY="$WORK/log" \
  sbatch --wait --cpus-per-task=1 --mem=2G --time=00:30:00 -o "$WORK/driver.out" \
  deploy/slurm/jsmf.sbatch "$WORK/slurm.toml"
echo "sbatch --wait returned after $(( $(date +%s) - start )) s; driver output:"
cat "$WORK/driver.out"
"$VENV_BIN/python" - "$WORK" <<'EOF'
import sys

import numpy as np

from jsmf_dask import open_model

work = sys.argv[1]
a, b = (open_model(f"{work}/run-{name}", "k5-ap").arrays["B"] for name in ("slurm", "threads"))
np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
print(f"B under SLURM equals B on threads (max |diff| {np.abs(a - b).max():.3g}); run root {work}/run-slurm")
EOF
left=$(squeue -h | wc -l)
[ "$left" -eq 0 ] || { echo "jobs left in the queue:"; squeue; exit 1; }

# scancel of a running driver: its worker job must go too (the driver closes the cluster on SIGTERM)
sed -e "s|run-slurm|run-cancelled|" -e "s|iterations = 20|iterations = 1000000|" "$WORK/slurm.toml" > "$WORK/long.toml"
job=$(PATH="$VENV_BIN:$PATH" JSMF_JOBS=1 JSMF_CORES=1 JSMF_MEMORY=2GB JSMF_LOG_DIRECTORY="$WORK/log" \
  sbatch --parsable --cpus-per-task=1 --mem=2G --time=00:30:00 -o "$WORK/cancelled.out" \
  deploy/slurm/jsmf.sbatch "$WORK/long.toml")
for _ in $(seq 240); do [ "$(squeue -h -t RUNNING | wc -l)" -eq 2 ] && break; sleep 0.5; done
squeue
[ "$(squeue -h -t RUNNING | wc -l)" -eq 2 ] || { echo "the driver and its worker job did not both start"; exit 1; }
sleep 5  # the fit is under way
scancel "$job"
for _ in $(seq 240); do [ "$(squeue -h | wc -l)" -eq 0 ] && break; sleep 0.5; done
[ "$(squeue -h | wc -l)" -eq 0 ] || { echo "jobs outlived their cancelled driver:"; squeue; exit 1; }
echo "scancel of the driver: its worker job was cancelled too"
echo "no job left in the queue: test-slurm passed"
