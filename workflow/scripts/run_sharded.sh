#!/usr/bin/env bash
# Runs N shards of workflow/scripts/run_planned.py in parallel (one GPU shared by N processes,
# each taking 1/N-ish of its memory) and waits for them.
# Usage: workflow/scripts/run_sharded.sh N [run_planned.py arguments...]
#   e.g. workflow/scripts/run_sharded.sh 4 --configfile workflow/config/gpu_report.yaml \
#          --tables table5_mnist table14 --time-budget 500
# Before the shards start, the data of every selected run still to do is fetched and prepared
# once (run_planned.py --prepare-only), so that the shards only read it (skipped with --dry-run).
# Exit status: 0 when every shard succeeded, 1 when a shard failed, 2 for bad usage, a failed
# wheel install or a failed data preparation (then no shard starts).
# Environment:
#   PYTHON         interpreter (default python3)
#   WHEEL_DIR      optional folder of wheels to install first, without network or dependencies, into
#                  $WHEEL_TARGET (default /tmp/labeldp-site), which is put first on PYTHONPATH (for a
#                  lent machine whose image lacks e.g. dp-accounting and has no package index)
#   SHARD_LOG_DIR  where prepare.log and shard<i>.log go (default: the current directory; created)
# Relative paths in WHEEL_DIR and SHARD_LOG_DIR are relative to the directory the script is
# started from; run_planned.py's own arguments are relative to the repository root.
# On a lent machine whose working tree is re-synced at every call, copy the records written
# under the results directory back into your own checkout between calls: finished runs are
# skipped only if their records exist in the tree that the call sees.
set -u
if [[ ! ${1:-} =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 N [run_planned.py arguments...]   (N = number of shards, a positive integer)" >&2
  exit 2
fi
n="$1"; shift
LOGS="$(mkdir -p "${SHARD_LOG_DIR:-.}" && cd "${SHARD_LOG_DIR:-.}" && pwd)" || {
  echo "error: cannot create the log directory SHARD_LOG_DIR=${SHARD_LOG_DIR:-.}" >&2; exit 2; }
WHEELS=""
if [ -n "${WHEEL_DIR:-}" ]; then
  WHEELS="$(cd "$WHEEL_DIR" 2>/dev/null && pwd)" || { echo "error: WHEEL_DIR=$WHEEL_DIR is not a directory" >&2; exit 2; }
fi
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
if [ -n "$WHEELS" ]; then
  target="${WHEEL_TARGET:-/tmp/labeldp-site}"
  "$PY" -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target "$target" "$WHEELS"/*.whl || {
    echo "error: could not install the wheels in WHEEL_DIR=$WHEEL_DIR" >&2; exit 2; }
  export PYTHONPATH="$target:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
prepare=1
for arg in "$@"; do
  case "$arg" in --dry-run|-h|--help) prepare=0 ;; esac
done
if [ "$prepare" = 1 ]; then
  "$PY" workflow/scripts/run_planned.py "$@" --prepare-only > "$LOGS/prepare.log" 2>&1 || {
    echo "error: data preparation failed, no shard started; see $LOGS/prepare.log" >&2; exit 2; }
fi
status=0
pids=()
for ((i = 0; i < n; i++)); do
  "$PY" workflow/scripts/run_planned.py "$@" --shard "$i/$n" > "$LOGS/shard$i.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
