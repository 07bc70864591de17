"""LabelDP-Pro / DP-SGD time per step against the alternative batch size n2 (issue 13's speed goal).

000 Table 11 gives LabelDP-Pro / DP-SGD = 1.35 per MNIST epoch on a GPU; the goal on this CPU
is at most 3. A LabelDP-Pro step here is the converged projection of the reports
(:mod:`labeldp.denoisers.hull_converged`: AltConv, vertices clipped to C, one joint simplex,
predicted start, FISTA to a Frank-Wolfe gap of 1e-3 C^2, lambda 1, auto solver), whose cost
grows with the n2 * K vertices; DP-SGD is the same engine without a denoiser.

Measured side by side in one process: each training step of every configuration is timed in
turn (DP-SGD, then each n2), so a load change on a shared machine hits all of them alike, and
the ratio is of medians over the same steps. Real MNIST, the 000 Table 10(a) CNN, Poisson
batches of expected size 1024, sigma 12.78 (eps 0.1 under add/remove over 585 steps), C 5,
lr 1, from the initial parameters.

``--solvers auto,gram`` times the converged projection with each solver (``auto``: what the
reports' runs use, ``jacobian`` here; ``gram``: FISTA on ``G^T G``, the same iterates,
:mod:`labeldp.denoisers.hull_gram`); configurations of a solver other than ``auto`` are named
``labeldp_pro_n<n2>_<solver>``.

``--self`` adds the two denoisers of 000 Table 3 whose vertices are the batch's OWN examples
(n1 * K = 10,240 of them at batch 1024): SelfConv with the same converged projection and
SelfSpan (the span solver, 100 iterations); these say what Table 3 costs per step here.

``--formulations vmap_grad,bookkeeping`` runs every configuration with each clipping formulation
(:mod:`labeldp.dpsgd.clipping`; book-keeping also computes the projection's per-class rows through
the model's tape), side by side.

Run: ``.venv/bin/python benchmarks/bench_step_ratio.py [--n2 32,64,128,256] [--solvers auto,gram] [--formulations vmap_grad,bookkeeping] [--steps 12] [--self]``
(needs ``data/prepared/mnist-official-full.npz``). Writes
``benchmarks/results/step_ratio_<device>.{json,md}``.
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
from labeldp.machine import describe, loadavg  # noqa: E402
from labeldp.atomic_io import write_text_atomic  # noqa: E402
from labeldp.data.prepare import load_prepared  # noqa: E402

SIGMA, CLIP, LR, N1 = 12.78, 5.0, 1.0, 1024


def main(argv=None) -> int:
    import jax
    import jax.numpy as jnp
    import optax

    from labeldp import denoisers as D
    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step, poisson_batches, sample_alt_batch
    from labeldp.methods.common import build_model_for
    from labeldp.training import to_float_images

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(ROOT / "data/prepared/mnist-official-full.npz"))
    p.add_argument("--n2", default="32,64,128,256")
    p.add_argument("--steps", type=int, default=12, help="training steps per configuration (the first 2 compile)")
    p.add_argument(
        "--solvers", default="auto", help="comma-separated projection solvers (auto, jacobian, gram, matrix_free)"
    )
    p.add_argument(
        "--formulations",
        default="auto",
        help="comma-separated clipping formulations (auto, vmap_grad, bookkeeping: labeldp.dpsgd.clipping); "
        "with several, every configuration runs with each, named <config>@<formulation>",
    )
    p.add_argument("--self", action="store_true", help="also time SelfConv (converged) and SelfSpan over the batch")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    sizes = [int(s) for s in a.n2.split(",")]
    data = load_prepared(a.data)
    x = jnp.asarray(to_float_images(data.x_train))
    y = jnp.asarray(np.asarray(data.y_train, np.int32))
    n = int(x.shape[0])
    model = build_model_for(data)
    cfg = DPSGDConfig(clip_norm=CLIP, noise_multiplier=SIGMA, expected_batch_size=N1)
    params0 = model.init(jax.random.key(0))

    configs = {"dpsgd": (None, 0)}
    for n2 in sizes:
        for solver in a.solvers.split(","):
            name = f"labeldp_pro_n{n2}" + ("" if solver == "auto" else f"_{solver}")
            configs[name] = (
                D.alt_conv(
                    steps=500,
                    step_size="auto",
                    smoothing=1.0,
                    solver=solver,
                    momentum="nesterov",
                    vertices="clipped",
                    clip_norm=CLIP,
                    coefficient_set="joint",
                    start="predicted",
                    tol=1e-3,
                ),
                n2,
            )
    if a.self:
        configs["self_conv"] = (
            D.self_conv(
                steps=500,
                step_size="auto",
                smoothing=1.0,
                solver="auto",
                momentum="nesterov",
                vertices="clipped",
                clip_norm=CLIP,
                coefficient_set="joint",
                start="predicted",
                tol=1e-3,
            ),
            0,
        )
        configs["self_span"] = (D.self_span(iters=100), 0)
    formulations = a.formulations.split(",")
    if len(formulations) > 1:
        configs = {f"{name}@{f}": (den, n2, f) for name, (den, n2) in configs.items() for f in formulations}
    else:
        configs = {name: (den, n2, formulations[0]) for name, (den, n2) in configs.items()}
    steps, states = {}, {}
    for name, (den, _, form) in configs.items():
        steps[name] = make_dpsgd_step(optimizer=optax.sgd(LR), config=cfg, model=model, denoiser=den, formulation=form)
        states[name] = steps[name].init(params0)
    batches = list(
        poisson_batches(
            n, sampling_rate=N1 / n, rng=np.random.default_rng(0), pad_to=cfg.padded_batch_size, num_batches=a.steps
        )
    )
    alt_rng = np.random.default_rng(1)
    times = {k: [] for k in configs}
    iters = {k: [] for k in configs}
    key = jax.random.key(1)
    load0 = loadavg()
    for idx, mask in batches:
        key, sk = jax.random.split(key)
        for name, (den, n2, _) in configs.items():
            x_alt = x[sample_alt_batch(n, size=n2, rng=alt_rng)] if n2 else None
            batch = Batch(x=x[idx], y=y[idx], mask=jnp.asarray(mask), x_alt=x_alt)
            t0 = time.perf_counter()
            states[name], info = steps[name](states[name], batch, sk)
            jax.block_until_ready(states[name].params)
            times[name].append(time.perf_counter() - t0)
            print(f"{name}: {times[name][-1]:.2f} s", flush=True)
            if "projection_iterations" in info.denoise:
                iters[name].append(float(info.denoise["projection_iterations"]))
    load1 = loadavg()
    med = {k: float(np.median(v[2:])) for k, v in times.items()}

    def dpsgd_of(k):  # the DP-SGD configuration of the same formulation
        return "dpsgd" + (k[k.index("@") :] if "@" in k else "")

    rows = [
        dict(
            config=k,
            n2=configs[k][1] or None,
            formulation=steps[k].formulation,
            median_s_per_step=med[k],
            ratio_to_dpsgd=med[k] / med[dpsgd_of(k)],
            ratio_to_reference_dpsgd=med[k] / med["dpsgd@vmap_grad"] if "dpsgd@vmap_grad" in med else None,
            median_iterations=float(np.median(iters[k][2:])) if iters[k] else None,
        )
        for k in configs
    ]
    device = jax.devices()[0].platform
    meta = dict(
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        device=device,
        machine=describe().line(),
        jax=jax.__version__,
        loadavg_before=load0,
        loadavg_after=load1,
        timed_steps=a.steps - 2,
        sigma=SIGMA,
        clip_norm=CLIP,
        learning_rate=LR,
        expected_batch_size=N1,
    )
    out = Path(a.out) if a.out else ROOT / f"benchmarks/results/step_ratio_{device}"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(f"{out}.json", json.dumps(dict(meta=meta, rows=rows), indent=1))
    lines = [
        f"# LabelDP-Pro / DP-SGD seconds per step against n2 (MNIST CNN, batch 1024, {device})",
        "",
        f"- created {meta['created']}; {meta['machine']}; JAX {meta['jax']}; load average {load0} -> {load1} "
        "(the machine may be shared: every configuration's steps are interleaved, so the ratios are side by side)",
        f"- medians over {meta['timed_steps']} steps after 2 compiling ones, from the initial parameters; "
        f"sigma {SIGMA} (eps 0.1 add/remove over 585 steps), C {CLIP}, lr {LR}",
        "- LabelDP-Pro: AltConv, clipped vertices, joint simplex, predicted start, FISTA to a gap of 1e-3 C^2 "
        "(cap 500), lambda 1; solver `auto` (jacobian here) unless the name says `_gram` (FISTA on G^T G, the "
        "same iterates); goal: ratio <= 3 on this CPU (000 Table 11: 1.35 on a GPU)",
        "",
        "- clipping formulation (`labeldp.dpsgd.clipping`): `vmap_grad` (per-example gradients by vmap) or "
        "`bookkeeping` (tapped forward, per-layer norms, and the projection's per-class rows through the tape); "
        "each ratio is to DP-SGD with the same formulation, the last column to DP-SGD with `vmap_grad`",
        "",
        "| configuration | n2 | formulation | s/step | ratio to DP-SGD | ratio to vmap_grad DP-SGD | projection iterations |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        it = "-" if r["median_iterations"] is None else f"{r['median_iterations']:.0f}"
        ref = "-" if r["ratio_to_reference_dpsgd"] is None else f"{r['ratio_to_reference_dpsgd']:.2f}"
        lines.append(
            f"| {r['config']} | {r['n2'] or '-'} | {r['formulation']} | {r['median_s_per_step']:.3f} | "
            f"{r['ratio_to_dpsgd']:.2f} | {ref} | {it} |"
        )
    if a.self:
        lines.append("")
        lines.append(
            "self_conv / self_span: vertices are the batch's own n1 * K per-example per-class gradients "
            "(000 Table 3); n2 does not apply. SelfConv uses the converged projection above; SelfSpan "
            "the span solver (100 iterations)."
        )
    write_text_atomic(f"{out}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
