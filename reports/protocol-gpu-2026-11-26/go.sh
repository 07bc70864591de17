# The one command of this GPU loan (device tool, 2026-11-26), run from the repository root on the
# lent machine: bash reports/protocol-gpu-2026-11-26/go.sh <git revision>
# Carried: .whl/ (wheels of the locked packages the machine lacks: dp-accounting, snakemake and
# their needs; not pulp, so Snakemake runs with --scheduler greedy, nor the packages it imports
# only for reports, notebooks and remote files) and .gpu/mirror/ (the MNIST raw files). Phase 1: benchmarks/bench_sweep.py (one job
# per run vs a sequential sweep vs a vmapped sweep). Phase 2: the protocol config through Snakemake
# until the call's time is spent; finished records come back in records.tgz.
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
if [ "${BENCH:-1}" = 1 ]; then
  timeout "${BENCH_LIMIT:-240}" python3 benchmarks/bench_sweep.py --subset 10000 --epochs 1 --configs 12 --seeds 3 \
    --methods dpsgd --single-runs 4 --sweep-runs 12 --vmap-runs 12 --vmap 0 --raw-dir .gpu/mirror/mnist \
    > "$OUT/bench.log" 2>&1
  echo "bench rc $? after $(( $(date +%s) - T0 )) s"; tail -8 "$OUT/bench.log"
  cp benchmarks/results/sweep_gpu.json benchmarks/results/sweep_gpu.md "$OUT/" 2>/dev/null
fi
LEFT=$(( BUDGET - ($(date +%s) - T0) - 25 ))
if [ "$LEFT" -gt 60 ]; then
  timeout "$LEFT" python3 -m snakemake --scheduler greedy --profile workflow/profiles/gpu --resources gpu_slots="${SLOTS:-3}" \
    --configfile workflow/config/protocol_gpu.yaml -- table5_mnist_dpsgd_grid_gpu > "$OUT/snakemake.log" 2>&1
  echo "snakemake rc $? after $(( $(date +%s) - T0 )) s"
fi
grep -h "metric=" logs/protocol-gpu-2026-11-26/sweeps/mnist/dpsgd/*/*/*.log 2>/dev/null | wc -l
tar czf "$OUT/records.tgz" reports/protocol-gpu-2026-11-26/results logs/protocol-gpu-2026-11-26 2>/dev/null
ls -la "$OUT"
