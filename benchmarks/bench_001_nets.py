"""What 001's networks cost on this CPU: seconds per epoch of LP-1ST's training step (non-private SGD
on randomized labels, :func:`labeldp.training_step.make_weighted_sgd_step`) with 001 Appendix B's recipe
(momentum 0.9, l2 1e-4, warm-up / decay schedule, mixup alpha 8 in stage 1).

Compared: 000 Table 10(a)'s CNN (what the suite's 001 tables run by default) and 001's simplified
Inception (:class:`labeldp.models_001.Inception001`) on MNIST-shaped input (28x28x1, 60,000 training
images), with and without 001's augmentation (crop / flip / cutout, :mod:`labeldp.augment`); and
ResNet-18 V2 with the CIFAR stem (:class:`labeldp.models_001.ResNet18V2Cifar`) with augmentation on
CIFAR-shaped input (32x32x3, 50,000 training images).

Each configuration's step is compiled (one warm-up step, timed separately), then ``--steps`` steps of
``--batch`` synthetic examples are timed; the median step time is extrapolated linearly to one epoch
(``n_train / batch`` steps). A small batch keeps the run short on a CPU; conv-net step time is close
to linear in the batch there, so the extrapolation is per example. Wall-clock on a possibly shared
machine: the load average before and after is recorded.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_001_nets.py`` (about 2-3 minutes on 2 cores).
Writes ``benchmarks/results/bench_001_nets.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from labeldp.machine import cpu_model, loadavg  # noqa: E402

#: (label, model, input shape, training-set size, augmentation)
CONFIGS = (
    ("000 CNN (Table 10a), MNIST", "mnist_cnn", (28, 28, 1), 60000, "none"),
    ("001 simplified Inception, MNIST", "inception_001", (28, 28, 1), 60000, "none"),
    ("001 simplified Inception + augmentation, MNIST", "inception_001", (28, 28, 1), 60000, "crop_flip_cutout"),
    (
        "001 ResNet-18 V2 (CIFAR stem) + augmentation, CIFAR-10",
        "resnet18_v2_cifar",
        (32, 32, 3),
        50000,
        "crop_flip_cutout",
    ),
)


def time_config(model: str, shape, augment: str, *, batch: int, steps: int) -> dict:
    """Compile time and median step time of LP-1ST's step for one configuration."""
    import jax
    import jax.numpy as jnp

    from labeldp.models import build_model, num_params
    from labeldp.training import TrainConfig, one_hot, sgd_optimizer
    from labeldp.training_step import make_weighted_sgd_step

    spec = build_model(model, input_shape=shape, num_classes=10)
    cfg = TrainConfig(
        learning_rate=0.02, epochs=1, batch_size=batch, momentum=0.9, l2=1e-4, lr_schedule="warmup_linear_decay"
    )
    tx = sgd_optimizer(cfg, total_steps=1000)
    state = spec.init(jax.random.key(0))
    trainable = state["params"] if spec.has_batch_norm else state
    opt_state = tx.init(trainable)
    step = make_weighted_sgd_step(spec, tx, mixup_alpha=8.0, augment=augment, augment_pad=4, augment_cutout=8)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.uniform(0, 1, (batch, *shape)).astype(np.float32))
    w = jnp.asarray(one_hot(rng.integers(0, 10, batch), 10))
    mask = jnp.ones((batch,), jnp.float32)
    t0 = time.perf_counter()
    state, opt_state, loss = step(state, opt_state, x, w, mask, jax.random.key(1))
    jax.block_until_ready(loss)
    compile_s = time.perf_counter() - t0
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        state, opt_state, loss = step(state, opt_state, x, w, mask, jax.random.key(2 + i))
        jax.block_until_ready(loss)
        times.append(time.perf_counter() - t0)
    return {"params": num_params(trainable), "compile_and_first_step_s": compile_s, "step_s": statistics.median(times)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/bench_001_nets"))
    args = ap.parse_args()
    import jax

    load_before = loadavg()
    rows = []
    for label, model, shape, n_train, augment in CONFIGS:
        r = time_config(model, shape, augment, batch=args.batch, steps=args.steps)
        r.update(label=label, model=model, input_shape=list(shape), n_train=n_train, augment=augment)
        r["seconds_per_epoch"] = r["step_s"] * n_train / args.batch
        rows.append(r)
        print(
            f"{label}: {r['step_s']:.3f} s/step at batch {args.batch} -> {r['seconds_per_epoch']:.0f} s/epoch",
            flush=True,
        )
    base = rows[0]["seconds_per_epoch"]
    out = {
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "backend": jax.default_backend(),
            "jax": jax.__version__,
            "loadavg_before": load_before,
            "loadavg_after": loadavg(),
        },
        "batch": args.batch,
        "timed_steps": args.steps,
        "rows": rows,
    }
    Path(args.out + ".json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [
        "# LP-1ST's training step on 001's networks (benchmarks/bench_001_nets.py)",
        "",
        f"{out['date_utc']}; {out['machine']['cpu']}, {out['machine']['cores']} cores ({out['machine']['backend']}, "
        f"jax {out['machine']['jax']}); load average {load_before} before, {out['machine']['loadavg_after']} after "
        "(the machine is shared: one core was busy with another job).",
        "",
        f"001 Appendix B's recipe (momentum 0.9, l2 1e-4, mixup alpha 8), batch {args.batch} of synthetic inputs, "
        f"median of {args.steps} steps after compilation, extrapolated linearly to one epoch. Where the load "
        "average exceeds the core count, step times vary by tens of percent between runs (and a small batch "
        "overstates the small CNN's per-epoch time, whose step is mostly overhead): read the orders of magnitude.",
        "",
        "| network | params | augmentation | s / step | s / epoch | x 000's CNN | compile + first step (s) |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['params']:,} | {r['augment']} | {r['step_s']:.3f} | {r['seconds_per_epoch']:.0f} | "
            f"{r['seconds_per_epoch'] / base:.0f} | {r['compile_and_first_step_s']:.1f} |"
        )
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
