#!/usr/bin/env bash
# Runs N shards of workflow/scripts/run_planned.py in parallel (one GPU shared by N processes,
# each taking 1/N-ish of its memory), waits, and exits non-zero if any shard failed.
# Usage: workflow/scripts/run_sharded.sh N [run_planned.py arguments...]
#   e.g. workflow/scripts/run_sharded.sh 4 --configfile workflow/config/gpu_report.yaml \
#          --tables table5_mnist table14 --time-budget 500
set -u
n="$1"; shift
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
status=0
pids=()
for ((i = 0; i < n; i++)); do
  "$PY" workflow/scripts/run_planned.py "$@" --shard "$i/$n" > "${SHARD_LOG_DIR:-.}/shard$i.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
