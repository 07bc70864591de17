# The second command of this session's GPU loan (2026-11-26 evening): bash reports/protocol-gpu-2026-11-26/go_call3.sh <rev>
# The first (go_call2.sh) ran Table 5a's grid with every epoch set to 1, which leaves 12 distinct
# configurations (36 runs); this one keeps all 36 (epochs 1 / 2 / 3 for 000's 2 / 5 / 10), 3 seeds:
# 108 runs, vmapped 36 at a time, each sweep job under cProfile (logs and profiles in bench_logs.tgz).
# Then LabelDP-Pro on its first 36 grid points at 1 epoch (36 x 3 runs).
set -u
T0=$(date +%s)
REV="${1:-unknown}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl \
  > "$OUT/install.log" 2>&1 || echo "wheel install failed (install.log)"
mkdir -p /tmp/bin && ln -sf "$(command -v python3)" /tmp/bin/python
export PATH=/tmp/bin:$PATH PYTHONPATH=$PWD LABELDP_GIT_REVISION="$REV" TQDM_DISABLE=1 PYTHONUNBUFFERED=1 \
  XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
timeout "${BENCH_LIMIT:-250}" python3 benchmarks/bench_sweep.py --subset 10000 --epochs 1 2 3 --configs 36 --seeds 3 \
  --methods dpsgd --single-runs 4 --sweep-runs 12 --vmap-runs 36 --vmap 0 --raw-dir .gpu/mirror/mnist \
  --out benchmarks/results/sweep_gpu --logs /tmp/bench_logs --profile > "$OUT/bench.log" 2>&1
echo "bench dpsgd rc $? after $(( $(date +%s) - T0 )) s"; grep -v cuda_timer "$OUT/bench.log" | tail -6
cp benchmarks/results/sweep_gpu.json benchmarks/results/sweep_gpu.md "$OUT/" 2>/dev/null
timeout "${PRO_LIMIT:-150}" python3 benchmarks/bench_sweep.py --subset 10000 --epochs 1 --configs 36 --seeds 3 \
  --methods labeldp_pro --single-runs 2 --sweep-runs 6 --vmap-runs 36 --vmap 0 --raw-dir .gpu/mirror/mnist \
  --out benchmarks/results/sweep_labeldp_pro_gpu --logs /tmp/bench_logs > "$OUT/bench_pro.log" 2>&1
echo "bench labeldp_pro rc $? after $(( $(date +%s) - T0 )) s"; grep -v cuda_timer "$OUT/bench_pro.log" | tail -6
tar czf "$OUT/results.tgz" benchmarks/results/sweep_gpu.* benchmarks/results/sweep_labeldp_pro_gpu.* -C /tmp bench_logs 2>/dev/null
ls -la "$OUT"
