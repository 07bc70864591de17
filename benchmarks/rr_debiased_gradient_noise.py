"""Why RR-Debiased trails RR at eps 2 on MNIST (issue 29): each step's gradient against the clean one.

A diagnostic that READS THE TRUE LABELS (the clean gradient) and so is never part of a private run.

RR-Debiased (000 Appendix D.1; LP-RR-SGD of 001 Algorithm 5) trains on the same RR release as RR with
weights ``(1 - p/K) / (1 - p)`` on the noisy label and ``-(p/K) / (1 - p)`` on every other class: its
gradient is the clean gradient in expectation over the release, RR's is not. In training here it stays 7
points below RR and below the paper (``reports/protocol-cpu-2026-11-26/``). This measures the cost of that
unbiasedness per step.

Protocol. One RR release at ``--eps`` (seed 0, the runs' label stream ``baselines.common.label_rng``, so
the same noisy labels as the runs of seed 0). The 000 Table 10(a) CNN is trained with plain SGD (``--lr``, default 0.1,
batch 1024) on RR's one-hot targets (or, ``--trajectory rr_debiased``, with RR-Debiased's loss); at each checkpoint (optimiser steps ``--checkpoints``) it computes
the clean full-training-set gradient ``G`` (mean cross-entropy at the true labels over all training
examples) and, over ``--draws`` batches of 1024 (drawn without replacement; every loss sees the same
batches), the gradient of RR's loss, of RR-Debiased's and of the clean loss on the batch. Each batch
gradient ``g`` is split along ``G``: ``along = <g, G> / |G|^2`` (the progress a step makes, in units of
the clean gradient) and ``across = |g - along G| / |G|`` (the rest). Reported per checkpoint and loss:
mean (std over draws) of ``along``, ``across`` and the cosine with ``G``, and the ratio of the means
``mean across / mean along``: the off-course movement per unit of progress, which no step size changes (a
smaller step scales both; a ratio of means, since ``along`` of one batch can be near 0). The
same split of each loss's gradient over the WHOLE release (every training example, the fixed noisy labels)
says where full-batch descent on that release goes: RR-Debiased is unbiased over draws of the release, not
for the one release a run trains on.

Run: ``.venv/bin/python benchmarks/rr_debiased_gradient_noise.py --eps 2`` (needs
``data/prepared/mnist-official-full.npz``). Writes
``benchmarks/results/rr_debiased_gradient_noise_mnist_eps<eps>_<trajectory>_lr<lr>.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from labeldp.machine import describe, loadavg  # noqa: E402

from baselines import common, rr_debiased  # noqa: E402
from gradient_vectors import flat, split_along  # noqa: E402
from labeldp.atomic_io import write_text_atomic  # noqa: E402
from labeldp.data.prepare import load_prepared  # noqa: E402
from labeldp.methods.common import build_model_for  # noqa: E402
from labeldp.training import one_hot, to_float_images  # noqa: E402
from labeldp.training_step import weighted_ce  # noqa: E402

BATCH, LR = 1024, 0.1
LOSSES = ("clean", "rr", "rr_debiased")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eps", type=float, default=2.0)
    p.add_argument("--draws", type=int, default=20)
    p.add_argument("--checkpoints", type=int, nargs="+", default=[0, 60, 180, 590])
    p.add_argument(
        "--trajectory", choices=("rr", "rr_debiased"), default="rr", help="whose loss trains the checkpoints"
    )
    p.add_argument("--lr", type=float, default=LR, help="the trajectory's plain-SGD rate")
    p.add_argument("--data", default=str(ROOT / "data/prepared/mnist-official-full.npz"))
    p.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    a = p.parse_args(argv)
    t0 = time.time()
    data = load_prepared(a.data)
    k = int(data.num_classes)
    x = jnp.asarray(to_float_images(data.x_train))
    y = np.asarray(data.y_train)
    if not 1 <= a.draws <= len(y) // BATCH:
        p.error(f"--draws must be in [1, {len(y) // BATCH}] (disjoint batches of {BATCH}), got {a.draws}")
    rng = common.label_rng(0, common.STREAM_RANDOMIZED_RESPONSE)
    noisy, w_debiased = rr_debiased.noisy_targets(y, num_classes=k, epsilon=a.eps, rng=rng)
    targets = {
        "clean": jnp.asarray(one_hot(y, k)),
        "rr": jnp.asarray(one_hot(noisy, k)),
        "rr_debiased": jnp.asarray(w_debiased),
    }
    spec = build_model_for(data)
    params = spec.init(jax.random.key(0))

    def loss(pr, xb, wb):
        return jnp.mean(weighted_ce(spec.logits(pr, xb), wb))

    grad = jax.jit(jax.grad(loss))
    tx = optax.sgd(a.lr)
    opt = tx.init(params)

    @jax.jit
    def sgd_step(pr, o, xb, wb):
        g = jax.grad(loss)(pr, xb, wb)
        u, o = tx.update(g, o, pr)
        return optax.apply_updates(pr, u), o

    def full_gradient(pr, name):
        """The mean over every training example: batch means weighted by their sizes (the last one is smaller)."""
        total = 0.0
        for s in range(0, len(y), BATCH):
            rows = min(BATCH, len(y) - s)
            total = total + rows * flat(grad(pr, x[s : s + rows], targets[name][s : s + rows]))
        return total / len(y)

    draw_rng = np.random.default_rng(1)
    train_rng = np.random.default_rng(2)
    order, pos, step = train_rng.permutation(len(y)), 0, 0
    rows = []
    for ckpt in sorted(a.checkpoints):
        while step < ckpt:
            if pos + BATCH > len(y):
                order, pos = train_rng.permutation(len(y)), 0
            idx = order[pos : pos + BATCH]
            pos += BATCH
            params, opt = sgd_step(params, opt, x[idx], targets[a.trajectory][idx])
            step += 1
        clean_full = full_gradient(params, "clean")
        release = {name: split_along(full_gradient(params, name), clean_full) for name in ("rr", "rr_debiased")}
        perm = draw_rng.permutation(len(y))
        per_loss = {name: [] for name in LOSSES}
        for d in range(a.draws):
            idx = perm[d * BATCH : (d + 1) * BATCH]
            for name in LOSSES:
                g = flat(grad(params, x[idx], targets[name][idx]))
                per_loss[name].append(split_along(g, clean_full))
        acc = float(np.mean(np.argmax(np.asarray(spec.logits(params, x[:10000])), -1) == y[:10000]) * 100)
        for name in LOSSES:
            summary = {
                key: [float(np.mean([r[key] for r in per_loss[name]])), float(np.std([r[key] for r in per_loss[name]]))]
                for key in ("along", "across", "cosine")
            }
            summary["across_over_along_of_means"] = summary["across"][0] / summary["along"][0]
            full = release.get(name, split_along(clean_full, clean_full))
            rows.append(
                {"step": ckpt, "train_accuracy_first_10k_pct": acc, "loss": name, **summary, "whole_release": full}
            )
        print(f"step {ckpt}: done ({time.time() - t0:.0f} s)", flush=True)
    p_rr = k / (np.exp(a.eps) + k - 1.0)
    result = {
        "benchmark": "rr_debiased_gradient_noise",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{describe().line()}, load {loadavg()[:1]}",
        "jax": jax.__version__,
        "eps": a.eps,
        "rr_p": p_rr,
        "noisy_label_accuracy": float(np.mean(noisy == y)),
        "draws": a.draws,
        "batch": BATCH,
        "trajectory": f"plain SGD lr {a.lr:g} on {a.trajectory}'s targets, seed 0",
        "seconds": round(time.time() - t0, 1),
        "rows": rows,
    }
    out = Path(a.out)
    stem = f"rr_debiased_gradient_noise_mnist_eps{a.eps:g}_{a.trajectory}_lr{a.lr:g}"
    write_text_atomic(out / f"{stem}.json", json.dumps(result, indent=2) + "\n")
    md = [
        f"# RR-Debiased's and RR's batch gradients against the clean gradient (MNIST, eps {a.eps:g})",
        "",
        f"- created {result['created']}; machine: {result['machine']}; {result['seconds']} s; "
        f"`benchmarks/rr_debiased_gradient_noise.py` (module docstring: protocol)",
        f"- one RR release (seed 0): p = {p_rr:.3f}, noisy-label accuracy {result['noisy_label_accuracy']:.3f}; "
        f"checkpoints on {result['trajectory']}; {a.draws} batches of {BATCH} per checkpoint; mean (std over batches)",
        "- along: progress along the clean full-data gradient G per step, in units of G; across: the rest, in units "
        "of |G|; across / along: the ratio of the two means, off-course movement per unit of progress (no step size "
        "changes it)",
        "",
        "- whole release: the loss's gradient over every training example (the fixed release's full-batch gradient), "
        "split along G the same way: along / across / cosine",
        "",
        "| step | train acc. (first 10k, %) | loss | along | across | cosine with G | across / along | whole release: "
        "along / across / cosine |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {r['step']} | {r['train_accuracy_first_10k_pct']:.1f} | {r['loss']} | "
            + " | ".join(f"{r[key][0]:.3f} ({r[key][1]:.3f})" for key in ("along", "across", "cosine"))
            + f" | {r['across_over_along_of_means']:.3f} | "
            + " / ".join(f"{r['whole_release'][key]:.3f}" for key in ("along", "across", "cosine"))
            + " |"
        )
    write_text_atomic(out / f"{stem}.md", "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
