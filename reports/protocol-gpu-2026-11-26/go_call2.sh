# The one command of this session's GPU loan (device tool, 2026-11-26 evening), run from the repository
# root on the lent machine: bash reports/protocol-gpu-2026-11-26/go_call2.sh <git revision>
# Carried as in go.sh: .whl/ (locked wheels the machine lacks) and .gpu/mirror/ (MNIST raw files).
# Phase 1: benchmarks/bench_sweep.py for DP-SGD on one whole cell of Table 5a's grid (36 configurations
# x 3 seeds, 1 epoch on 10,000 examples): one job per run (first 4 runs), a sequential sweep job
# (first 12), one sweep job with up to 36 runs per vmapped program (all 108). Phase 2: the same for
# LabelDP-Pro on its first 12 grid points. Phase 3: the protocol config through Snakemake until the
# call's time is spent; finished records come back in records.tgz.
set -u
T0=$(date +%s)
REV="${1:-unknown}"
BUDGET="${BUDGET:-540}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl \
  > "$OUT/install.log" 2>&1 || echo "wheel install failed (install.log)"
mkdir -p /tmp/bin && ln -sf "$(command -v python3)" /tmp/bin/python
export PATH=/tmp/bin:$PATH PYTHONPATH=$PWD LABELDP_DATA_MIRROR=$PWD/.gpu/mirror \
  LABELDP_GIT_REVISION="$REV" TQDM_DISABLE=1 PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import jax, flax, optax, dp_accounting, snakemake.api, jsonschema; print('jax', jax.__version__, jax.devices(), 'flax', flax.__version__, 'optax', optax.__version__)"
} > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
timeout "${BENCH_LIMIT:-210}" python3 benchmarks/bench_sweep.py --subset 10000 --epochs 1 --configs 36 --seeds 3 \
  --methods dpsgd --single-runs 4 --sweep-runs 12 --vmap-runs 36 --vmap 0 --raw-dir .gpu/mirror/mnist \
  --out benchmarks/results/sweep_gpu > "$OUT/bench.log" 2>&1
echo "bench dpsgd rc $? after $(( $(date +%s) - T0 )) s"; tail -6 "$OUT/bench.log"
cp benchmarks/results/sweep_gpu.json benchmarks/results/sweep_gpu.md "$OUT/" 2>/dev/null
timeout "${PRO_LIMIT:-170}" python3 benchmarks/bench_sweep.py --subset 10000 --epochs 1 --configs 12 --seeds 3 \
  --methods labeldp_pro --single-runs 2 --sweep-runs 6 --vmap-runs 12 --vmap 0 --raw-dir .gpu/mirror/mnist \
  --out benchmarks/results/sweep_labeldp_pro_gpu > "$OUT/bench_pro.log" 2>&1
echo "bench labeldp_pro rc $? after $(( $(date +%s) - T0 )) s"; tail -6 "$OUT/bench_pro.log"
cp benchmarks/results/sweep_labeldp_pro_gpu.json benchmarks/results/sweep_labeldp_pro_gpu.md "$OUT/" 2>/dev/null
LEFT=$(( BUDGET - ($(date +%s) - T0) - 25 ))
if [ "$LEFT" -gt 60 ]; then
  timeout "$LEFT" python3 -m snakemake --scheduler greedy --profile workflow/profiles/gpu --resources gpu_slots="${SLOTS:-3}" \
    --configfile workflow/config/protocol_gpu.yaml -- table5_mnist_dpsgd_grid_gpu > "$OUT/snakemake.log" 2>&1
  echo "snakemake rc $? after $(( $(date +%s) - T0 )) s"
fi
tar czf "$OUT/records.tgz" reports/protocol-gpu-2026-11-26/results logs/protocol-gpu-2026-11-26 2>/dev/null
ls -la "$OUT"
