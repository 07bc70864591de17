"""Per-step timing on this machine: non-private SGD, DP-SGD (JAX and Opacus), LabelDP-Pro AltConv.

All on the 000 Table 10(a) MNIST CNN (SAME padding, 15,210 parameters), batch n1 = 1024, with
synthetic uniform [0, 1) inputs and random labels (timing does not depend on the data). Steps
are timed after warm-up (compilation); medians are reported, per step and per 60k-example
epoch (60000 / 1024 = 58.6 steps). Also measured:

* the LabelDP-Pro projection loop on this backend: ``lax.fori_loop`` inside ``jit`` (what the
  paper did on GPU) versus jitted unrolled chunks driven from Python, per PGD iteration;
* PGD convergence on one realistic instance (the noisy DP-SGD gradient of a batch, sigma = 12.78
  (eps = 0.1 on MNIST per the machine notes), C = 1, projected onto an alternative batch of
  n2 = 1024): the paper's unscaled step 0.02, the ``1/L`` step, and FISTA (``nesterov``) with
  the ``1/L`` step; iterations each needs to reach the objective of plain PGD after 200.

Every projection here uses the matrix-free solver (JVP/VJP per iteration); the materialised-
Jacobian solver is compared with it in ``benchmarks/bench_projection_solver.py``.

Run: ``.venv/bin/python benchmarks/bench_step.py`` (about 6-8 minutes on 2 cores; ``--quick``
for a 2-minute smoke run with fewer repetitions). Writes ``benchmarks/results/
step_timing_cpu.json`` and ``.md``. Timings are wall-clock on a possibly shared machine: the
load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from labeldp.machine import cpu_model, loadavg  # noqa: E402

N_TRAIN = 60000
BATCH = 1024
STEPS_PER_EPOCH = N_TRAIN / BATCH


def time_calls(fn, *, warmup: int, reps: int, sync) -> dict:
    """Runs fn warmup times, then reps timed times; returns seconds (median, all)."""
    t0 = time.perf_counter()
    for _ in range(warmup):
        sync(fn())
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sync(fn())
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    return {
        "median_s": med,
        "min_s": min(times),
        "max_s": max(times),
        "reps": reps,
        "warmup_s_incl_compile": first,
        "epoch_s": med * STEPS_PER_EPOCH,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions and PGD steps (smoke run)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    quick = args.quick

    import jax
    import jax.numpy as jnp
    import optax
    import torch
    import opacus

    from labeldp import denoisers as D
    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step, make_sgd_step
    from labeldp.models import build_model, num_params
    from baselines.torch_models import build_torch_model, nchw_tensor

    t_start = time.perf_counter()
    load_start = loadavg()
    reps_fast = 3 if quick else 7
    reps_alt = 1 if quick else 2
    pgd_steps = 40 if quick else 200
    fori_iters = 2 if quick else 3
    chunk_alt = 20
    sigma, clip, lr = 12.78, 1.0, 0.1

    spec = build_model("mnist_cnn", input_shape=(28, 28, 1))
    params = spec.init(jax.random.key(0))
    rng = np.random.default_rng(0)
    pad_to = DPSGDConfig(clip_norm=clip, noise_multiplier=sigma, expected_batch_size=BATCH).padded_batch_size
    x_pool = rng.random((pad_to + BATCH, 28, 28, 1), dtype=np.float32)
    y_pool = rng.integers(0, 10, size=pad_to + BATCH).astype(np.int32)
    x1024, y1024 = jnp.asarray(x_pool[:BATCH]), jnp.asarray(y_pool[:BATCH])
    # a Poisson-like batch: 1024 real rows padded to pad_to
    xpad, ypad = jnp.asarray(x_pool[:pad_to]), jnp.asarray(y_pool[:pad_to])
    mpad = np.r_[np.ones(BATCH, bool), np.zeros(pad_to - BATCH, bool)]
    x_alt = jnp.asarray(x_pool[pad_to : pad_to + BATCH])
    results: dict = {"steps": {}, "projection_loop": {}, "convergence": {}}
    sync_jax = jax.block_until_ready
    key = jax.random.key(1)

    def log(msg):
        print(f"[{time.perf_counter() - t_start:6.1f}s] {msg}", flush=True)

    # ---- the fast steps, timed round-robin (so load from other processes hits all alike) ------
    sgd = make_sgd_step(model=spec, optimizer=optax.sgd(lr), forward="model")
    st = sgd.init(params)
    b = Batch(x=x1024, y=y1024, mask=jnp.ones(BATCH))
    cfg_fixed = DPSGDConfig(clip_norm=clip, noise_multiplier=sigma, expected_batch_size=BATCH, sampling="shuffle")
    dp_fixed = make_dpsgd_step(model=spec, optimizer=optax.sgd(lr), config=cfg_fixed, formulation="vmap_grad")
    cfg_pois = DPSGDConfig(clip_norm=clip, noise_multiplier=sigma, expected_batch_size=BATCH)
    dp_pois = make_dpsgd_step(model=spec, optimizer=optax.sgd(lr), config=cfg_pois, formulation="vmap_grad")
    bp = Batch(x=xpad, y=ypad, mask=mpad)

    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    xt = nchw_tensor(x_pool[:BATCH])  # standard strides: see baselines.torch_models.nchw_tensor
    yt = torch.from_numpy(y_pool[:BATCH].astype(np.int64))
    lossf = torch.nn.CrossEntropyLoss()
    tmodel = build_torch_model("mnist_cnn", input_shape=(28, 28, 1))
    topt = torch.optim.SGD(tmodel.parameters(), lr=lr)

    def torch_sgd_step():
        topt.zero_grad(set_to_none=True)
        lossf(tmodel(xt), yt).backward()
        topt.step()

    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    gsm = GradSampleModule(build_torch_model("mnist_cnn", input_shape=(28, 28, 1)))  # hooks mode (default)
    dpopt = DPOptimizer(
        torch.optim.SGD(gsm.parameters(), lr=lr), noise_multiplier=sigma, max_grad_norm=clip, expected_batch_size=BATCH
    )

    def opacus_step():
        dpopt.zero_grad(set_to_none=True)
        lossf(gsm(xt), yt).backward()
        dpopt.step()

    fast = {
        "jax_sgd": (lambda: sgd(st, b, key), sync_jax),
        "jax_dpsgd_batch1024": (lambda: dp_fixed(st, b, key), sync_jax),
        "jax_dpsgd_poisson_padded": (lambda: dp_pois(st, bp, key), sync_jax),
        "torch_sgd": (torch_sgd_step, lambda _: None),
        "opacus_dpsgd": (opacus_step, lambda _: None),
    }
    warm = {}
    for name, (fn, sync) in fast.items():
        t0 = time.perf_counter()
        for _ in range(2):
            sync(fn())
        warm[name] = time.perf_counter() - t0
    times = {name: [] for name in fast}
    for _ in range(reps_fast):
        for name, (fn, sync) in fast.items():
            t0 = time.perf_counter()
            sync(fn())
            times[name].append(time.perf_counter() - t0)
    for name in fast:
        med = statistics.median(times[name])
        results["steps"][name] = {
            "median_s": med,
            "min_s": min(times[name]),
            "max_s": max(times[name]),
            "reps": reps_fast,
            "warmup_s_incl_compile": warm[name],
            "epoch_s": med * STEPS_PER_EPOCH,
        }
        log(f"{name}: {med:.3f}s/step")
    results["steps"]["jax_dpsgd_poisson_padded"]["pad_to"] = pad_to

    # ---- LabelDP-Pro AltConv step (200 PGD steps, n2 = 1024, CPU loop = python chunks) --------
    alt = D.alt_conv(steps=pgd_steps, step_size=0.02, smoothing=0.75, solver="matrix_free")
    dp_alt = make_dpsgd_step(model=spec, optimizer=optax.sgd(lr), config=cfg_pois, denoiser=alt)
    ba = Batch(x=xpad, y=ypad, mask=mpad, x_alt=x_alt)
    # warm-up with a short projection: compiles the same chunk kernel as the timed steps
    warm_step = make_dpsgd_step(
        model=spec, optimizer=optax.sgd(lr), config=cfg_pois, denoiser=D.alt_conv(steps=alt.chunk, solver="matrix_free")
    )
    t0 = time.perf_counter()
    sync_jax(warm_step(st, ba, key))
    warm_alt = time.perf_counter() - t0
    results["steps"]["jax_labeldp_pro_altconv"] = time_calls(
        lambda: dp_alt(st, ba, key), warmup=0, reps=reps_alt, sync=sync_jax
    )
    results["steps"]["jax_labeldp_pro_altconv"].update(
        {
            "pgd_steps": pgd_steps,
            "n2": BATCH,
            "loop": D.resolve_loop(alt.loop),
            "chunk": alt.chunk,
            "pad_to": pad_to,
            "warmup_s_incl_compile": warm_alt,
        }
    )
    log(f"altconv {results['steps']['jax_labeldp_pro_altconv']['median_s']:.3f}s/step")

    # ---- PGD convergence: paper step vs 1/L vs FISTA (also times the python-chunk loop) -------
    g_noisy, _ = dp_pois.noisy_gradient(params, bp, key)
    f = spec.logits
    t0 = time.perf_counter()
    lip = float(D.estimate_lipschitz(f, params, x_alt, iters=30))
    lip_s = time.perf_counter() - t0
    runs, traces = {}, {}
    for name, kw in {
        "pgd_paper_step_0.02": dict(step_size=0.02, momentum="none"),
        "pgd_step_1_over_L": dict(step_size=1.0 / (1.05 * lip), momentum="none"),
        "fista_step_1_over_L": dict(step_size=1.0 / (1.05 * lip), momentum="nesterov"),
    }.items():
        t0 = time.perf_counter()
        res = D.simplex_least_squares(
            f, params, x_alt, g_noisy, steps=pgd_steps, loop="python", chunk=10, solver="matrix_free", **kw
        )
        objs = np.asarray(res.objectives, np.float64)
        secs = time.perf_counter() - t0
        traces[name] = objs
        runs[name] = {
            "step_size": float(res.step_size),
            "initial_objective": float(res.initial_objective),
            "final_objective": float(objs[-1]),
            "min_objective": float(objs.min()),
            "argmin_iter": int(objs.argmin()) + 1,
            "objectives_every_10": [float(v) for v in objs[9::10]],
            "seconds": secs,
            "alpha_max": float(np.max(res.alpha)),
            "alpha_nonzero": int(np.sum(np.asarray(res.alpha) > 0)),
        }
        log(f"{name}: {float(res.initial_objective):.5g} -> {objs[-1]:.5g} ({secs:.1f}s)")
    target = runs["pgd_step_1_over_L"]["final_objective"]
    for name, v in runs.items():
        objs = np.asarray(traces[name])
        hit = np.flatnonzero(objs <= target * (1 + 1e-6))
        v["iters_to_target"] = int(hit[0]) + 1 if hit.size else None
    per_iter_10 = [v["seconds"] / pgd_steps for v in runs.values()]
    results["projection_loop"]["python_chunk10"] = {
        "per_iter_s": statistics.median(per_iter_10),
        "iters_timed": pgd_steps * len(per_iter_10),
        "first_call_s_incl_compile": warm_alt,
        "note": "median over the three convergence runs",
    }
    log(f"python chunk 10: {results['projection_loop']['python_chunk10']['per_iter_s']:.4f}s/iter")

    # ---- projection loop: python chunk 20 and fori, per PGD iteration -------------------------
    n_it = 3 * chunk_alt
    t0 = time.perf_counter()
    sync_jax(
        D.simplex_least_squares(
            f, params, x_alt, g_noisy, steps=chunk_alt, loop="python", chunk=chunk_alt, solver="matrix_free"
        )
    )
    compile_s = time.perf_counter() - t0
    r = time_calls(
        lambda: D.simplex_least_squares(
            f, params, x_alt, g_noisy, steps=n_it, loop="python", chunk=chunk_alt, solver="matrix_free"
        ),
        warmup=0,
        reps=1,
        sync=sync_jax,
    )
    results["projection_loop"][f"python_chunk{chunk_alt}"] = {
        "per_iter_s": r["median_s"] / n_it,
        "iters_timed": n_it,
        "first_call_s_incl_compile": compile_s,
    }
    log(f"python chunk {chunk_alt}: {r['median_s'] / n_it:.4f}s/iter")
    t0 = time.perf_counter()
    sync_jax(D.simplex_least_squares(f, params, x_alt, g_noisy, steps=fori_iters, loop="fori", solver="matrix_free"))
    compile_s = time.perf_counter() - t0
    r = time_calls(
        lambda: D.simplex_least_squares(f, params, x_alt, g_noisy, steps=fori_iters, loop="fori", solver="matrix_free"),
        warmup=0,
        reps=1,
        sync=sync_jax,
    )
    results["projection_loop"]["fori"] = {
        "per_iter_s": r["median_s"] / fori_iters,
        "iters_timed": fori_iters,
        "first_call_s_incl_compile": compile_s,
    }
    log(f"fori: {r['median_s'] / fori_iters:.4f}s/iter")
    results["convergence"] = {
        "g": f"noisy DP-SGD gradient, sigma={sigma}, C={clip}, n1={BATCH} (synthetic batch), at init params",
        "n2": BATCH,
        "lipschitz_L_estimate": lip,
        "lipschitz_seconds": lip_s,
        "paper_step_times_L": 0.02 * lip,
        "runs": runs,
        "target_objective": target,
    }
    results["machine"] = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "jax_backend": jax.default_backend(),
        "jax": jax.__version__,
        "flax": __import__("flax").__version__,
        "optax": optax.__version__,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "opacus": opacus.__version__,
        "python": platform.python_version(),
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "loadavg_start": load_start,
        "loadavg_end": loadavg(),
    }
    results["model"] = {"name": "mnist_cnn", "padding": "SAME", "params": num_params(params)}
    results["settings"] = {
        "quick": quick,
        "batch": BATCH,
        "epoch_examples": N_TRAIN,
        "steps_per_epoch": STEPS_PER_EPOCH,
        "reps_fast": reps_fast,
        "reps_altconv": reps_alt,
        "pgd_steps": pgd_steps,
        "fori_iters_timed": fori_iters,
        "inputs": "synthetic uniform [0,1) images, random labels",
    }
    results["total_seconds"] = time.perf_counter() - t_start
    s = results["steps"]
    results["ratios"] = {
        "altconv_over_jax_dpsgd": s["jax_labeldp_pro_altconv"]["median_s"] / s["jax_dpsgd_poisson_padded"]["median_s"],
        "opacus_over_jax_dpsgd": s["opacus_dpsgd"]["median_s"] / s["jax_dpsgd_batch1024"]["median_s"],
        "jax_dpsgd_over_jax_sgd": s["jax_dpsgd_batch1024"]["median_s"] / s["jax_sgd"]["median_s"],
        "fori_over_python_chunk10_per_iter": results["projection_loop"]["fori"]["per_iter_s"]
        / results["projection_loop"]["python_chunk10"]["per_iter_s"],
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "step_timing_cpu.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "step_timing_cpu.md").write_text(render_md(results))
    log(f"wrote {out / 'step_timing_cpu.json'} and .md")


def render_md(r: dict) -> str:
    m, s, pl, cv = r["machine"], r["steps"], r["projection_loop"], r["convergence"]
    lines = [
        "# Step timing on CPU (000 Table 10(a) MNIST CNN, batch 1024)",
        "",
        f"Generated by `benchmarks/bench_step.py` on {m['date']}: {m['cpu_model']}, {m['cores']} cores, "
        f"JAX {m['jax']} ({m['jax_backend']}), Flax {m['flax']}, optax {m['optax']}, PyTorch {m['torch']} "
        f"({m['torch_threads']} threads), Opacus {m['opacus']}, Python {m['python']}. Load average "
        f"before/after: {m['loadavg_start']} / {m['loadavg_end']} (the machine may be shared).",
        f"Model: {r['model']['name']} ({r['model']['padding']}, {r['model']['params']:,} parameters). "
        f"Inputs: {r['settings']['inputs']}. Medians over {r['settings']['reps_fast']} timed steps after "
        f"2 warm-up steps ({r['settings']['reps_altconv']} after 1 for AltConv){' -- QUICK RUN' if r['settings']['quick'] else ''}.",
        "",
        "| step | median s/step | min | max | s per 60k epoch (58.6 steps) | first calls incl. compile (s) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    labels = {
        "jax_sgd": "JAX non-private SGD (jit)",
        "jax_dpsgd_batch1024": "JAX DP-SGD, fixed batch 1024 (vmap(grad) + clip + noise, jit)",
        "jax_dpsgd_poisson_padded": "JAX DP-SGD, Poisson batch padded to {pad}",
        "torch_sgd": "PyTorch non-private SGD",
        "opacus_dpsgd": "Opacus DP-SGD (GradSampleModule hooks + DPOptimizer), batch 1024",
        "jax_labeldp_pro_altconv": "JAX LabelDP-Pro AltConv ({steps} PGD steps, n2 = {n2}, loop {loop}/chunk {chunk}), Poisson padded",
    }
    for k, v in s.items():
        lab = labels[k].format(
            pad=v.get("pad_to"), steps=v.get("pgd_steps"), n2=v.get("n2"), loop=v.get("loop"), chunk=v.get("chunk")
        )
        lines.append(
            f"| {lab} | {v['median_s']:.3f} | {v['min_s']:.3f} | {v['max_s']:.3f} | {v['epoch_s']:.1f} | {v['warmup_s_incl_compile']:.1f} |"
        )
    ra = r["ratios"]
    lines += [
        "",
        "Ratios (medians): "
        f"AltConv / JAX DP-SGD (both Poisson-padded) = {ra['altconv_over_jax_dpsgd']:.1f}x; "
        f"Opacus / JAX DP-SGD (batch 1024) = {ra['opacus_over_jax_dpsgd']:.2f}x; "
        f"JAX DP-SGD / JAX SGD = {ra['jax_dpsgd_over_jax_sgd']:.2f}x. "
        "(000 Table 11, GPU: LabelDP-Pro / DP-SGD = 59.93 / 44.52 = 1.35x on MNIST.)",
        "",
        "## Projection loop (one PGD iteration = one JVP + one VJP of the linearized loss map, n2 = 1024)",
        "",
        "| loop | s per iteration | iterations timed | first call incl. compile (s) |",
        "| --- | --- | --- | --- |",
    ]
    for k, v in pl.items():
        lines.append(f"| {k} | {v['per_iter_s']:.4f} | {v['iters_timed']} | {v['first_call_s_incl_compile']:.1f} |")
    lines += [
        "",
        f"fori / python-chunk-10 per iteration: {ra['fori_over_python_chunk10_per_iter']:.1f}x. "
        '`loop="auto"` picks `python` on the CPU backend and `fori` on GPU/TPU.',
        "",
        "## PGD convergence on one instance",
        "",
        f"Target g: {cv['g']}; projected onto an alternative batch of n2 = {cv['n2']}. "
        f"Estimated L = 2 lambda_max(G^T G) = {cv['lipschitz_L_estimate']:.4g} (power iteration, "
        f"{cv['lipschitz_seconds']:.1f} s), so the paper's unscaled step 0.02 is {cv['paper_step_times_L']:.3g} / L "
        "(PGD is only guaranteed to descend for step <= 1/L).",
        "",
        "| run | step | initial obj | final obj | min obj (iter) | iters to reach PGD(1/L)@{n} obj | max alpha | nonzero alpha | s |".format(
            n=r["settings"]["pgd_steps"]
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k, v in cv["runs"].items():
        hit = v.get("iters_to_target")
        lines.append(
            f"| {k} | {v['step_size']:.3g} | {v['initial_objective']:.5g} | {v['final_objective']:.5g} | "
            f"{v['min_objective']:.5g} ({v['argmin_iter']}) | {hit if hit is not None else 'not reached'} | "
            f"{v['alpha_max']:.3g} | {v['alpha_nonzero']} | {v['seconds']:.1f} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
