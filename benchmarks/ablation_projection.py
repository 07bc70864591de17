"""Which choice of LabelDP-Pro's projection moves the update towards the clean gradient? (issue 13)

A diagnostic that READS LABELS (the clean gradient) and so is never part of a private run. It
is the ablation issue 13 asks for when LabelDP-Pro does not beat DP-SGD: one axis at a time
away from the configuration of the CPU report's converged column (clipped vertices, one joint
simplex, predicted start, FISTA to a Frank-Wolfe gap of 1e-3 V^2 with a 500-iteration cap,
lambda 1, n2 = 32), measured on checkpoints of the run it would be part of.

Protocol. The 000 Table 10(a) CNN is trained with plain DP-SGD at the report's settings (lr 0.2,
C 5, Poisson q = 1024/n, sigma calibrated for ``--eps`` over 585 steps, delta 1e-5, add/remove,
the paper's convention). At each checkpoint, ``--draws`` independent Poisson batches give the
clean gradient (mean of clipped per-example gradients at the true labels) and its noisy
version; one alternative batch of 256 units is drawn per draw and every n2 uses its first n2
units (nested, so the n2 axis changes nothing else). Every variant projects the same noisy
gradient. Reported per checkpoint and variant, as mean (std) over draws: the cosine of the update
with the clean gradient, the update's norm over the clean gradient's, projection iterations and
final relative gap. The lr axis cannot be measured on a checkpoint (it is a training choice);
the norm ratio says how large a step the same lr takes, and the lr searches of
``reports/labeldp-pro-cpu-2026-11-24/`` measure it in training.

Run: ``.venv/bin/python benchmarks/ablation_projection.py --dataset fashion_mnist --eps 0.2``
(needs ``data/prepared/<dataset>-official-full.npz``). Writes
``benchmarks/results/projection_ablation_<dataset>_eps<eps>_<backend>.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from labeldp.machine import describe, loadavg  # noqa: E402
from bench_converged_projection import dpsgd_checkpoint_setup, train_until  # noqa: E402
from gradient_vectors import cosine, flat  # noqa: E402
from labeldp.atomic_io import write_text_atomic  # noqa: E402

CLIP, LR, N1, STEPS, DELTA, N2_MAX = 5.0, 0.2, 1024, 585, 1e-5, 256
BASE = dict(
    vertices="clipped", coefficient_set="joint", start="predicted", tol=1e-3, max_steps=500, smoothing=1.0, n2=32
)


def ablation_variants() -> dict[str, dict]:
    """The column's configuration and one change at a time: ``name -> (axis, settings)``."""
    one = [
        ("vertices", "raw"),
        ("coefficient_set", "per_example"),
        ("start", "uniform"),
        ("tol", 1e-2),
        ("tol", 1e-4),
        ("smoothing", 0.9),
        ("smoothing", 0.75),
        ("n2", 64),
        ("n2", 128),
        ("n2", 256),
    ]
    out = {"column (base)": dict(axis="-", **BASE)}
    for axis, value in one:
        s = {**BASE, axis: value}
        if axis == "tol" and value < BASE["tol"]:
            s["max_steps"] = 2000  # a tighter tolerance needs a larger cap to mean anything
        out[f"{axis}={value}"] = dict(axis=axis, **s)
    return out


def _summary(vals):
    v = np.asarray(vals, float)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def main(argv=None) -> int:
    import jax
    import jax.numpy as jnp

    from labeldp.denoisers.hull_converged import HullOptions, converged_hull_projection
    from labeldp.dpsgd import Batch, sample_alt_batch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="fashion_mnist", choices=["mnist", "fashion_mnist"])
    p.add_argument("--eps", type=float, default=0.2, help="target eps (add/remove) that calibrates sigma")
    p.add_argument("--steps", default="0,150,400", help="DP-SGD checkpoints (training steps)")
    p.add_argument("--draws", type=int, default=3, help="independent (batch, noise, alt batch) draws per checkpoint")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    if a.draws < 2:
        p.error("--draws must be >= 2 (the table reports a standard deviation over draws)")
    checkpoints = sorted(int(s) for s in a.steps.split(","))
    run = dpsgd_checkpoint_setup(
        dataset=a.dataset,
        eps=a.eps,
        seed=a.seed,
        clip=CLIP,
        lr=LR,
        n1=N1,
        steps=STEPS,
        delta=DELTA,
        num_batches=max(checkpoints) + len(checkpoints) * a.draws,
    )
    model, step, state, key, batches = run["model"], run["step"], run["state"], run["key"], run["batches"]
    xd, yd, y, n, sigma = run["xd"], run["yd"], run["y"], run["n"], run["sigma"]
    variants = ablation_variants()
    raw: list[dict] = []
    load0 = loadavg()
    t_start, done = time.perf_counter(), 0
    for ck in checkpoints:
        state, key, done = train_until(step, state, key, batches, xd, yd, done=done, until=ck)
        acc = float(np.mean(np.argmax(np.asarray(model.logits(state.params, xd[:2000])), -1) == y[:2000]) * 100)
        unravel = jax.flatten_util.ravel_pytree(state.params)[1]
        for d in range(a.draws):
            idx, mask = next(batches)
            batch = Batch(x=xd[idx], y=yd[idx], mask=jnp.asarray(mask))
            key, sk = jax.random.split(key)
            clean = flat(step.clipped_sum(state.params, batch, sk)[0]) / N1
            noisy = flat(step.noisy_gradient(state.params, batch, sk)[0])
            alt = xd[sample_alt_batch(n, size=N2_MAX, rng=np.random.default_rng([a.seed, ck, d, 2]))]
            raw.append(
                dict(
                    checkpoint=ck,
                    draw=d,
                    variant="DP-SGD (no projection)",
                    axis="-",
                    cos=cosine(noisy, clean),
                    norm_ratio=float(np.linalg.norm(noisy) / np.linalg.norm(clean)),
                    train_acc_2000=acc,
                )
            )
            for name, v in variants.items():
                opts = HullOptions(
                    vertices=v["vertices"],
                    clip_norm=CLIP,
                    coefficient_set=v["coefficient_set"],
                    start=v["start"],
                    tol=v["tol"],
                    max_steps=v["max_steps"],
                    smoothing=v["smoothing"],
                )
                t0 = time.perf_counter()
                res = converged_hull_projection(
                    model.logits, state.params, alt[: v["n2"]], unravel(jnp.asarray(noisy)), options=opts
                )
                o = flat(res.projected)
                raw.append(
                    dict(
                        checkpoint=ck,
                        draw=d,
                        variant=name,
                        axis=v["axis"],
                        cos=cosine(o, clean),
                        norm_ratio=float(np.linalg.norm(o) / np.linalg.norm(clean)),
                        iterations=int(res.iterations),
                        gap_relative=float(res.gap_relative),
                        seconds=time.perf_counter() - t0,
                        train_acc_2000=acc,
                    )
                )
        print(f"checkpoint {ck}: done ({time.perf_counter() - t_start:.0f} s)", flush=True)
    rows = []
    names = ["DP-SGD (no projection)", *variants]
    for ck in checkpoints:
        for name in names:
            rs = [r for r in raw if r["checkpoint"] == ck and r["variant"] == name]
            c, cs = _summary([r["cos"] for r in rs])
            nr, nrs = _summary([r["norm_ratio"] for r in rs])
            rows.append(
                dict(
                    checkpoint=ck,
                    variant=name,
                    axis=rs[0]["axis"],
                    cos_mean=c,
                    cos_std=cs,
                    norm_ratio_mean=nr,
                    norm_ratio_std=nrs,
                    train_acc_2000=rs[0]["train_acc_2000"],
                    iterations_median=float(np.median([r["iterations"] for r in rs]))
                    if "iterations" in rs[0]
                    else None,
                    gap_relative_max=max(r["gap_relative"] for r in rs) if "gap_relative" in rs[0] else None,
                )
            )
    machine = (
        f"{jax.default_backend()} ({jax.devices()[0].device_kind}, {describe().cpus} CPUs), "
        f"loadavg {load0} -> {loadavg()}"
    )
    result = {
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": dict(
            dataset=a.dataset,
            eps_add_remove=a.eps,
            sigma=sigma,
            clip=CLIP,
            lr=LR,
            n1=N1,
            checkpoints=checkpoints,
            draws=a.draws,
            seed=a.seed,
            base=BASE,
        ),
        "rows": rows,
        "draws": raw,
        "seconds_total": time.perf_counter() - t_start,
    }
    out = (
        Path(a.out)
        if a.out
        else ROOT / (f"benchmarks/results/projection_ablation_{a.dataset}_eps{a.eps:g}_{jax.default_backend()}")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    # not with_suffix: the stem holds the eps ("eps0.2"), whose "." is not a suffix
    write_text_atomic(Path(f"{out}.json"), json.dumps(result, indent=2))
    write_text_atomic(Path(f"{out}.md"), "\n".join(_markdown(result)) + "\n")
    print("\n".join(_markdown(result)))
    return 0


def _markdown(result: dict) -> list[str]:
    s = result["settings"]
    md = [
        f"# LabelDP-Pro projection ablation: {s['dataset']}, eps {s['eps_add_remove']:g} (sigma {s['sigma']:.4g})",
        "",
        f"- created: {result['created']}; machine: {result['machine']}; {result['seconds_total']:.0f} s",
        "- a diagnostic that reads labels (the clean gradient); never part of a private run",
        f"- checkpoints of plain DP-SGD (lr {s['lr']}, C {s['clip']}, batch {s['n1']}); mean (std) over "
        f"{s['draws']} draws of (batch, noise, alternative batch); every variant projects the same noisy gradient",
        f"- base = the CPU report's column: {s['base']}; every other row changes one axis",
        "",
        "| checkpoint (train acc.) | variant | cos(update, clean) | norm / clean norm | iterations | max rel. gap |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        it = "-" if r["iterations_median"] is None else f"{r['iterations_median']:.0f}"
        gap = "-" if r["gap_relative_max"] is None else f"{r['gap_relative_max']:.2g}"
        md.append(
            f"| {r['checkpoint']} ({r['train_acc_2000']:.0f}%) | {r['variant']} | {r['cos_mean']:.3f} "
            f"({r['cos_std']:.3f}) | {r['norm_ratio_mean']:.3g} ({r['norm_ratio_std']:.2g}) | {it} | {gap} |"
        )
    return md


if __name__ == "__main__":
    sys.exit(main())
