# Usage (on the lent GPU): bash .gpu/go.sh REV PHASE
set -u
REV="$1"; PHASE="$2"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD LABELDP_GIT_REVISION=$REV LABELDP_DATA_MIRROR=$PWD/.gpu/mirror TQDM_DISABLE=1 \
  XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p $OUT/logs
nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/logs/gpu.txt 2>&1
python3 - <<'PY' > $OUT/logs/prepare.log 2>&1
from labeldp.data.fetch import fetch_dataset
from labeldp.data.prepare import prepare_image_dataset
for d in ("mnist", "fashion_mnist"):
    fetch_dataset(d, data_dir="data/raw", mirror=".gpu/mirror", quiet=True)
    prepare_image_dataset(d, raw_dir=f"data/raw/{d}", out_path=f"data/prepared/{d}-official-full.npz")
PY
ls -la data/prepared >> $OUT/logs/prepare.log
RP="timeout ${LIMIT:-540} python3 workflow/scripts/run_planned.py"
G=workflow/config/gpu_report.yaml; A=workflow/config/gpu_report_ablation.yaml
pids=()
if [ "$PHASE" = 1 ]; then
  N=${N:-8}
  for ((i = 0; i < N; i++)); do
    $RP --configfile $G --tables table5_mnist table14 table2 --methods labeldp_pro --shard $i/$N \
      --time-budget ${BUDGET:-470} > $OUT/logs/p1_shard$i.log 2>&1 & pids+=($!)
  done
elif [ "$PHASE" = 2 ]; then
  if [ "${BENCH:-0}" = 1 ]; then
    timeout 150 python3 benchmarks/bench_projection_solver.py > $OUT/logs/bench.log 2>&1
    cp benchmarks/results/projection_solver_gpu.* $OUT/ 2>/dev/null
  fi
  for i in ${SHARDS:-0 1 2 3 4 5 6 7 10}; do
    $RP --configfile $G --configfile $A --tables ablation_mnist --methods labeldp_pro --eps 0.1,1.0 --shard $i/13 \
      > $OUT/logs/p2_shard$i.log 2>&1 & pids+=($!)
  done
elif [ "$PHASE" = bench ]; then
  timeout 200 python3 benchmarks/bench_projection_solver.py > $OUT/logs/bench.log 2>&1
  cp benchmarks/results/projection_solver_gpu.* $OUT/ 2>/dev/null
fi
for p in "${pids[@]}"; do wait "$p"; done
grep -h -E "acc=|Error|error" $OUT/logs/p*_shard*.log | tail -60
tar czf $OUT/res.tgz reports/gpu-2026-11-22 benchmarks/results 2>/dev/null
ls -la $OUT
