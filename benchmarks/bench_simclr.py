"""SimCLR pre-training speed on this machine (issue 16): images per second per configuration and the
share of a train step spent on the augmentation.

For each (input shape, ResNet-18 width) at batch ``--batch`` (default 256): the jitted train step of
``labeldp.simclr.pretrain`` (two augmented views, forward + backward through encoder and head, NT-Xent,
Adam), and ``augment_batch`` alone twice (the two views of a step), medians over ``--reps`` after one
warm-up call (the compilation). Throughput counts images (each gives two views). Runs on whatever JAX
backend is present; the result file is named by it: ``benchmarks/results/simclr_<backend>.{md,json}``.
The load average before and after is recorded (a shared machine slows every figure; ratios measured
in the same run are the comparable quantity).

Run: ``.venv/bin/python benchmarks/bench_simclr.py [--batch 256] [--reps 3]``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from labeldp.machine import describe, loadavg  # noqa: E402
from labeldp.simclr.pretrain import make_step  # noqa: E402

CONFIGS = [((28, 28, 1), 8), ((28, 28, 1), 16), ((28, 28, 1), 64), ((32, 32, 3), 8), ((32, 32, 3), 64)]
CPU_WIDTHS = (8, 16)  # width 64 takes minutes per step on a 2-core CPU: only with --widths 64 there


def _median_seconds(fn, reps: int) -> float:
    fn()  # warm-up: compilation
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(shape, width: int, batch: int, reps: int) -> dict:
    import jax
    import optax

    from labeldp.simclr.augment import augment_batch
    from labeldp.simclr.resnet import SimCLRNet

    x = jax.device_put(np.random.default_rng(0).integers(0, 256, (batch, *shape), dtype=np.uint8))
    model = SimCLRNet(width=width)
    v = model.init(jax.random.key(0), np.zeros((2, *shape), np.float32))
    tx = optax.chain(optax.add_decayed_weights(1e-6), optax.adam(1e-3))
    step = make_step(model, tx, temperature=0.5)
    state = [v["params"], v["batch_stats"], tx.init(v["params"])]

    def run_step():
        p, s, o, loss = step(*state, x, jax.random.key(1))
        loss.block_until_ready()

    def run_aug():
        a = augment_batch(jax.random.key(2), x)
        b = augment_batch(jax.random.key(3), x)
        b.block_until_ready()
        a.block_until_ready()

    t_step = _median_seconds(run_step, reps)
    t_aug = _median_seconds(run_aug, reps)
    return {
        "input_shape": list(shape),
        "width": width,
        "batch": batch,
        "seconds_per_step": t_step,
        "images_per_second": batch / t_step,
        "augmentation_seconds_two_views": t_aug,
        "augmentation_share_of_step": t_aug / t_step,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--widths", type=int, nargs="*", default=None, help="only these widths")
    args = ap.parse_args()
    import jax

    backend = jax.default_backend()
    load0 = loadavg()
    widths = args.widths or (CPU_WIDTHS if backend == "cpu" else [w for _, w in CONFIGS])
    rows = [measure(s, w, args.batch, args.reps) for s, w in CONFIGS if w in widths]
    load1 = loadavg()
    dev = jax.devices()[0]
    meta = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "backend": backend,
        "device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}",
        "cpu_count": describe().cpus,
        "machine": describe().line(),
        "loadavg_before": load0,
        "loadavg_after": load1,
        "batch": args.batch,
        "reps": args.reps,
        "jax": jax.__version__,
    }
    out = ROOT / "benchmarks" / "results" / f"simclr_{backend}"
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        f"# SimCLR pre-training speed ({backend})",
        "",
        f"Measured {meta['date']} on {meta['device']} ({meta['cpu_count']} CPUs), batch {args.batch}, medians of "
        f"{args.reps} after warm-up; load averages {load0} before, {load1} after (other jobs share "
        "the machine when this is above the CPU count). `benchmarks/bench_simclr.py`.",
        "",
        "| input | width | s / step | images / s | augmentation (2 views) s | augmentation share |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {'x'.join(map(str, r['input_shape']))} | {r['width']} | {r['seconds_per_step']:.3f} | "
            f"{r['images_per_second']:.0f} | {r['augmentation_seconds_two_views']:.4f} | "
            f"{100 * r['augmentation_share_of_step']:.1f}% |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
