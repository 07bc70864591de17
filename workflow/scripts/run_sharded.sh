#!/usr/bin/env bash
# Runs N shards of workflow/scripts/run_planned.py in parallel (one GPU shared by N processes,
# each taking 1/N-ish of its memory), waits, and exits non-zero if any shard failed.
# Usage: workflow/scripts/run_sharded.sh N [run_planned.py arguments...]
#   e.g. workflow/scripts/run_sharded.sh 4 --configfile workflow/config/gpu_report.yaml \
#          --tables table5_mnist table14 --time-budget 500
# Before the shards start, the data of every selected run is fetched and prepared once
# (run_planned.py --prepare-only), so that the shards only read it.
# Environment:
#   PYTHON         interpreter (default python3)
#   WHEEL_DIR      optional folder of wheels to install first, without network or dependencies, into
#                  $WHEEL_TARGET (default /tmp/labeldp-site), which is put first on PYTHONPATH (for a
#                  lent machine whose image lacks e.g. dp-accounting and has no package index)
#   SHARD_LOG_DIR  where shard<i>.log and prepare.log go (default .)
# On a lent machine whose working tree is re-synced at every call, copy the records written
# under the results directory back into your own checkout between calls, or the next call
# redoes them (finished records are never redone only where they exist).
set -u
n="$1"; shift
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
LOGS="${SHARD_LOG_DIR:-.}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
if [ -n "${WHEEL_DIR:-}" ]; then
  target="${WHEEL_TARGET:-/tmp/labeldp-site}"
  "$PY" -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target "$target" "$WHEEL_DIR"/*.whl || {
    echo "error: could not install the wheels in WHEEL_DIR=$WHEEL_DIR" >&2; exit 2; }
  export PYTHONPATH="$target:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PY" workflow/scripts/run_planned.py "$@" --prepare-only > "$LOGS/prepare.log" 2>&1 || {
  echo "error: data preparation failed, no shard started; see $LOGS/prepare.log" >&2; exit 2; }
status=0
pids=()
for ((i = 0; i < n; i++)); do
  "$PY" workflow/scripts/run_planned.py "$@" --shard "$i/$n" > "$LOGS/shard$i.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
