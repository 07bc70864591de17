"""Does the LabelDP-Pro projection denoise? Projection variants on DP-SGD-trained checkpoints.

A diagnostic that READS LABELS (the clean gradient) and so is never part of a private run. On
the real MNIST training set (the suite's prepared file), the 000 Table 10(a) CNN is trained
with plain DP-SGD (eps 1: sigma 1.7556, C 5, lr 0.2, Poisson q = 1024/60000); at each
checkpoint one Poisson batch gives the clean gradient (the mean of clipped per-example
gradients at the true labels, what the noise hides) and its noisy version, and each projection
variant maps the noisy gradient onto the hull of an independent alternative batch (n2 = 256):

* ``dpsgd``: no projection (the noisy gradient itself);
* ``paper_pgd100``: the paper's form (raw vertices, uniform start, 100 PGD steps of 1/L, lambda);
* ``converged_*``: :mod:`labeldp.denoisers.hull_converged` with vertices, coefficient set and start
  as named, FISTA to a relative Frank-Wolfe gap of 1e-3 (cap 2000), both solvers.

Reported per checkpoint and variant: cosine with the clean gradient, norm ratio, iterations,
final relative gap, and the seconds of the projection (after compilation; wall-clock on a
possibly shared machine, load average recorded). Also one DP-SGD step against one LabelDP-Pro
step with the converged default (the per-epoch ratio of 000 Table 11).

Run: ``.venv/bin/python benchmarks/bench_converged_projection.py [--steps 0,40,150] [--quick]``
(needs ``data/prepared/mnist-official-full.npz``: ``snakemake --cores 1 prepare_mnist`` or any
MNIST run). Writes ``benchmarks/results/converged_projection_<device>.{json,md}``.
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
from labeldp.machine import loadavg  # noqa: E402
from gradient_vectors import cosine, flat  # noqa: E402
from labeldp.data.prepare import load_prepared  # noqa: E402

SIGMA, CLIP, LR, N1, N2, LAMBDA = 1.7556, 5.0, 0.2, 1024, 256, 0.75


def train_until(step, state, key, batches, xd, yd, *, done: int, until: int):
    """Plain DP-SGD steps on the next Poisson batches until ``until`` steps are done.

    Returns:
      ``(state, key, done)`` after the steps (shared with ``ablation_projection.py``).
    """
    import jax
    import jax.numpy as jnp

    from labeldp.dpsgd import Batch

    while done < until:
        idx, mask = next(batches)
        key, sk = jax.random.split(key)
        state, _ = step(state, Batch(x=xd[idx], y=yd[idx], mask=jnp.asarray(mask)), sk)
        done += 1
    return state, key, done


def dpsgd_checkpoint_setup(
    *, dataset: str, eps: float, seed: int, clip: float, lr: float, n1: int, steps: int, delta: float, num_batches: int
):
    """Plain DP-SGD at the reports' settings, ready to train to checkpoints (shared with
    ``ablation_projection.py`` and ``bias_projection.py``).

    Returns:
      a dict: ``model``, ``step``, ``state`` (initialised), ``key``, ``batches`` (``num_batches``
      Poisson batches), ``xd`` / ``yd`` (device arrays), ``y`` (host labels), ``n``, ``sigma``
      (calibrated for ``eps`` over ``steps`` steps, add/remove).
    """
    import jax
    import jax.numpy as jnp
    import optax

    from labeldp.accounting import calibrate_noise_multiplier
    from labeldp.dpsgd import DPSGDConfig, make_dpsgd_step, poisson_batches
    from labeldp.methods.common import build_model_for
    from labeldp.training import to_float_images

    data = load_prepared(ROOT / f"data/prepared/{dataset}-official-full.npz")
    x, y = to_float_images(data.x_train), np.asarray(data.y_train, np.int32)
    n = x.shape[0]
    sigma = calibrate_noise_multiplier(target_epsilon=eps, target_delta=delta, sampling_rate=n1 / n, steps=steps)
    model = build_model_for(data)
    cfg = DPSGDConfig(clip_norm=clip, noise_multiplier=sigma, expected_batch_size=n1)
    step = make_dpsgd_step(optimizer=optax.sgd(lr), config=cfg, model=model)
    key = jax.random.key(seed)
    key, ik = jax.random.split(key)
    batches = poisson_batches(
        n,
        sampling_rate=n1 / n,
        rng=np.random.default_rng([seed, 1]),
        pad_to=cfg.padded_batch_size,
        num_batches=num_batches,
    )
    return dict(
        model=model,
        step=step,
        state=step.init(model.init(ik)),
        key=key,
        batches=batches,
        xd=jnp.asarray(x),
        yd=jnp.asarray(y),
        y=y,
        n=n,
        sigma=sigma,
    )


def variants(quick: bool):
    from labeldp.denoisers.hull_converged import HullOptions

    conv = dict(tol=1e-3, max_steps=2000, smoothing=LAMBDA)
    out = {
        "converged_clipped_joint_predicted": HullOptions(vertices="clipped", clip_norm=CLIP, start="predicted", **conv),
        "converged_clipped_joint_predicted_lambda1": HullOptions(
            vertices="clipped", clip_norm=CLIP, start="predicted", **{**conv, "smoothing": 1.0}
        ),
        "converged_clipped_per_example_predicted": HullOptions(
            vertices="clipped", clip_norm=CLIP, coefficient_set="per_example", start="predicted", **conv
        ),
        "converged_raw_joint_predicted_lambda1": HullOptions(
            vertices="raw", start="predicted", **{**conv, "smoothing": 1.0}
        ),
        "converged_clipped_joint_uniform": HullOptions(vertices="clipped", clip_norm=CLIP, start="uniform", **conv),
    }
    if not quick:
        out["converged_clipped_joint_predicted_matrix_free"] = HullOptions(
            vertices="clipped", clip_norm=CLIP, start="predicted", solver="matrix_free", **conv
        )
    return out


def main(argv=None) -> int:
    import jax
    import jax.numpy as jnp
    import optax

    from labeldp import denoisers as D
    from labeldp.denoisers.hull_converged import converged_hull_projection
    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step, poisson_batches, sample_alt_batch
    from labeldp.methods.common import build_model_for
    from labeldp.training import to_float_images

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(ROOT / "data/prepared/mnist-official-full.npz"))
    p.add_argument("--steps", default="0,40,150", help="DP-SGD checkpoints (training steps)")
    p.add_argument("--quick", action="store_true", help="fewer variants (no matrix-free solver)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    checkpoints = sorted(int(s) for s in a.steps.split(","))
    data = load_prepared(a.data)
    x = to_float_images(data.x_train)
    y = np.asarray(data.y_train, np.int32)
    n = x.shape[0]
    model = build_model_for(data)
    cfg = DPSGDConfig(clip_norm=CLIP, noise_multiplier=SIGMA, expected_batch_size=N1)
    step = make_dpsgd_step(optimizer=optax.sgd(LR), config=cfg, model=model)
    key = jax.random.key(0)
    key, ik = jax.random.split(key)
    state = step.init(model.init(ik))
    rng = np.random.default_rng([0, 1])
    batches = poisson_batches(
        n,
        sampling_rate=N1 / n,
        rng=rng,
        pad_to=cfg.padded_batch_size,
        num_batches=max(checkpoints) + len(checkpoints) + 8,
    )  # + the timed steps
    xd, yd = jnp.asarray(x), jnp.asarray(y)
    rows, done = [], 0
    load0 = loadavg()
    for ck in checkpoints:
        state, key, done = train_until(step, state, key, batches, xd, yd, done=done, until=ck)
        idx, mask = next(batches)
        batch = Batch(x=xd[idx], y=yd[idx], mask=jnp.asarray(mask))
        key, sk = jax.random.split(key)
        clean_sum, _ = step.clipped_sum(state.params, batch, sk)
        clean = flat(clean_sum) / N1
        noisy_tree, _ = step.noisy_gradient(state.params, batch, sk)
        noisy = flat(noisy_tree)
        x_alt = xd[sample_alt_batch(n, size=N2, rng=np.random.default_rng([ck, 2]))]
        acc = float(np.mean(np.argmax(np.asarray(model.logits(state.params, xd[:2000])), -1) == y[:2000]) * 100)
        rows.append(
            dict(
                checkpoint=ck,
                variant="dpsgd",
                cos_clean=cosine(noisy, clean),
                norm_ratio=float(np.linalg.norm(noisy) / np.linalg.norm(clean)),
                train_acc_2000=acc,
            )
        )
        unravel = jax.flatten_util.ravel_pytree(state.params)[1]
        # the paper's form: 100 PGD steps of 1/L from the uniform point, lambda 0.75
        for _ in range(2):  # second call timed (the first compiles)
            t0 = time.perf_counter()
            out, _ = D.convex_hull_projection(
                model.logits,
                state.params,
                x_alt,
                unravel(jnp.asarray(noisy)),
                steps=100,
                step_size="auto",
                smoothing=LAMBDA,
                solver="jacobian",
            )
            jax.block_until_ready(out)
            sec = time.perf_counter() - t0
        o = flat(out)
        rows.append(
            dict(
                checkpoint=ck,
                variant="paper_pgd100",
                cos_clean=cosine(o, clean),
                norm_ratio=float(np.linalg.norm(o) / np.linalg.norm(clean)),
                iterations=100,
                seconds=sec,
            )
        )
        for name, opts in variants(a.quick).items():
            for _ in range(2):
                t0 = time.perf_counter()
                res = converged_hull_projection(
                    model.logits, state.params, x_alt, unravel(jnp.asarray(noisy)), options=opts
                )
                jax.block_until_ready(res.projected)
                sec = time.perf_counter() - t0
            o = flat(res.projected)
            rows.append(
                dict(
                    checkpoint=ck,
                    variant=name,
                    cos_clean=cosine(o, clean),
                    norm_ratio=float(np.linalg.norm(o) / np.linalg.norm(clean)),
                    iterations=int(res.iterations),
                    gap_relative=float(res.gap_relative),
                    smoothing_bias_ratio=float(res.smoothing_bias_norm / max(np.linalg.norm(o), 1e-30)),
                    solver=res.solver,
                    seconds=sec,
                )
            )
        print(f"checkpoint {ck}: done ({len(rows)} rows)", flush=True)
    # one DP-SGD step vs one LabelDP-Pro step (converged default), same batch, after compilation
    den = D.alt_conv(
        steps=2000,
        step_size="auto",
        smoothing=LAMBDA,
        momentum="nesterov",
        vertices="clipped",
        clip_norm=CLIP,
        start="predicted",
        tol=1e-3,
    )
    pro = make_dpsgd_step(optimizer=optax.sgd(LR), config=cfg, model=model, denoiser=den)
    timing = {}
    for name, st in (("dpsgd", step), ("labeldp_pro_converged", pro)):
        secs = []
        for _ in range(4):
            idx, mask = next(batches)
            b = Batch(x=xd[idx], y=yd[idx], mask=jnp.asarray(mask), x_alt=x_alt)
            key, sk = jax.random.split(key)
            t0 = time.perf_counter()
            s2, _ = st(state, b, sk)
            jax.block_until_ready(s2.params)
            secs.append(time.perf_counter() - t0)
        timing[name] = float(np.median(secs[1:]))
    timing["ratio_labeldp_pro_over_dpsgd"] = timing["labeldp_pro_converged"] / timing["dpsgd"]
    machine = f"{jax.default_backend()} ({jax.devices()[0].device_kind}), loadavg {load0} -> {loadavg()}"
    result = {
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine,
        "settings": dict(sigma=SIGMA, clip=CLIP, lr=LR, n1=N1, n2=N2, smoothing=LAMBDA, eps_add_remove=1.0),
        "rows": rows,
        "step_seconds": timing,
    }
    out = Path(a.out) if a.out else ROOT / f"benchmarks/results/converged_projection_{jax.default_backend()}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.part")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(out.with_suffix(".json"))
    md = [
        f"# Projection variants on DP-SGD checkpoints (MNIST, eps 1, n2 = {N2})",
        "",
        f"- created: {result['created']}; machine: {machine}",
        "- a diagnostic that reads labels (clean gradient); never part of a private run",
        "",
        "| checkpoint | variant | cos(update, clean) | norm ratio | iterations | rel. gap | bias ratio | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {r['checkpoint']} | {r['variant']} | {r['cos_clean']:.3f} | {r['norm_ratio']:.3g} | "
            f"{r.get('iterations', '-')} | {r.get('gap_relative', float('nan')):.2g} | "
            f"{r.get('smoothing_bias_ratio', float('nan')):.2g} | {r.get('seconds', float('nan')):.2f} |"
        )
    md += [
        "",
        f"One step (median of 3 after warm-up): DP-SGD {timing['dpsgd']:.2f} s, LabelDP-Pro converged "
        f"{timing['labeldp_pro_converged']:.2f} s, ratio {timing['ratio_labeldp_pro_over_dpsgd']:.1f} "
        "(000 Table 11: 1.35 on a GPU).",
    ]
    tmp = out.with_suffix(".md.part")
    tmp.write_text("\n".join(md) + "\n")
    tmp.replace(out.with_suffix(".md"))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
