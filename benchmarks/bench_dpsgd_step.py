"""Seconds per step of every DP-SGD formulation against the non-private steps and Opacus (issue 32).

For each model the suite trains with DP-SGD: 000's MNIST CNN (Table 10(a), batch 1024), the
linear probe on 512-dimensional SimCLR features (batch 1024), the ads MLP of 000 Table 7 on
Criteo-Attribution-shaped rows (per user, k = 4 examples, 256 users per batch; per example,
batch 1024), and 000's CIFAR-10 CNN (batch 256, dropout on: each row's masks from its own key in
both formulations), the steps below are timed round-robin in one process, so a load change hits
them alike:

* ``sgd_model``: the non-private step through the model's own Flax forward, whole batch;
* ``sgd_tapped``: the non-private step through the tapped forward (im2col), in chunks of 64;
* ``dpsgd_vmap_grad``: the reference DP-SGD step (``jax.vmap(jax.grad)`` + clip + noise);
* ``dpsgd_bookkeeping``: the fast step (:mod:`labeldp.dpsgd.clipping`): tapped forward, per-layer
  per-example norms from inputs and output gradients, one reweighted matmul per layer, chunks;
* MNIST only: PyTorch SGD and Opacus DP-SGD (hooks) on the same architecture.

Effective GFLOP/s counts the useful work of a step, ``3 x 2 x MACs`` of the forward pass per
example (forward, and the two matmuls of the backward pass) from the tape's layer shapes, against
the measured float32 matmul peak of this machine (2048 x 2048 ``jnp.dot``). The goals of issue 32
on a 2-core CPU: MNIST DP-SGD <= 0.1 s per step, >= 3x faster than Opacus, <= 1.5x the fastest
non-private step.

Run: ``.venv/bin/python benchmarks/bench_dpsgd_step.py [--reps 7]`` (about 5 minutes on 2 cores).
Writes ``benchmarks/results/dpsgd_step_<device>.{json,md}``.
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
from labeldp.atomic_io import write_text_atomic  # noqa: E402
from labeldp.machine import cpu_model, loadavg  # noqa: E402


def matmul_peak_gflops(jax, jnp, n: int = 2048, reps: int = 10) -> float:
    a = jnp.asarray(np.random.default_rng(0).random((n, n), dtype=np.float32))
    f = jax.jit(lambda u: u @ u)
    jax.block_until_ready(f(a))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(a))
        ts.append(time.perf_counter() - t0)
    return 2 * n**3 / min(ts) / 1e9


def forward_macs(jax, tapped, params, x_one) -> int:
    """Multiply-accumulates of one example's forward pass through the tape's linear layers."""
    from labeldp.dpsgd.tape import Tape

    tape = Tape(None)
    jax.eval_shape(lambda p, xx: tapped(p, xx, tape), params, x_one)
    macs = 0
    for path, rec in tape.layers.items():
        if rec.kind == "linear":
            macs += int(np.prod(rec.inputs.shape[1:])) * int(tape.output_shapes[path][-1])
    return macs


def main(argv=None) -> int:
    import jax
    import jax.numpy as jnp
    import optax

    from labeldp.ads.model import AdsMLP, two_class_logits
    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step, make_sgd_step
    from labeldp.models import build_model, num_params

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    key = jax.random.key(1)
    sigma, clip, lr = 1.0, 1.0, 0.1
    load0 = loadavg()
    peak = matmul_peak_gflops(jax, jnp)
    print(f"matmul peak {peak:.1f} GFLOP/s", flush=True)

    cases = {}  # name -> dict(fns={step: (fn, sync)}, macs, batch, params, note)

    def image_case(name, model_name, shape, batch):
        spec = build_model(model_name, input_shape=shape)
        params = spec.init(jax.random.key(0))
        x = jnp.asarray(rng.random((batch, *shape), dtype=np.float32))
        y = jnp.asarray(rng.integers(0, 10, batch), jnp.int32)
        b = Batch(x=x, y=y, mask=jnp.ones(batch))
        cfg = DPSGDConfig(clip_norm=clip, noise_multiplier=sigma, expected_batch_size=batch, sampling="shuffle")
        fns = {}
        for fwd in ("model", "tapped"):
            if fwd == "tapped" and spec.tapped is None:
                continue
            st = make_sgd_step(model=spec, optimizer=optax.sgd(lr), forward=fwd)
            s0 = st.init(params)
            fns[f"sgd_{fwd}"] = (lambda st=st, s0=s0: st(s0, b, key), jax.block_until_ready)
        for form in ("vmap_grad", "bookkeeping"):
            if form == "bookkeeping" and spec.tapped is None:
                continue
            st = make_dpsgd_step(model=spec, optimizer=optax.sgd(lr), config=cfg, formulation=form)
            s0 = st.init(params)
            fns[f"dpsgd_{form}"] = (lambda st=st, s0=s0: st(s0, b, key), jax.block_until_ready)
        macs = forward_macs(jax, spec.tapped, params, x[:1]) if spec.tapped is not None else None
        cases[name] = dict(
            fns=fns,
            macs=macs,
            batch=batch,
            params=num_params(params),
            note="" if spec.tapped else "dropout: no tapped forward, reference formulation only",
        )
        return spec, params, x, y

    spec, params, x, y = image_case("mnist_cnn", "mnist_cnn", (28, 28, 1), 1024)
    _add_torch(cases["mnist_cnn"]["fns"], x, y, sigma=sigma, clip=clip, lr=lr)
    image_case("linear_simclr512", "linear", (512,), 1024)
    image_case("cifar_cnn", "cifar_cnn", (32, 32, 3), 256)

    # ads MLP, 000 Table 7's shapes: 10 categorical columns with embeddings of 8, 3 numerical
    vocab = tuple(int(v) for v in rng.integers(50, 5000, 10))
    model = AdsMLP(hidden=(128, 64), vocab_sizes=vocab, embed_dims=(8,) * 10)
    for unit, lead, n1 in (("user", (256, 4), 256), ("example", (1024,), 1024)):
        xn = jnp.asarray(rng.normal(size=(*lead, 3)).astype(np.float32))
        xc = jnp.asarray(np.stack([rng.integers(0, v, lead) for v in vocab], axis=-1).astype(np.int32))
        yy = jnp.asarray(rng.integers(0, 2, lead), jnp.int32)
        ads_params = model.init(jax.random.key(0), (xn.reshape(-1, 3), xc.reshape(-1, 10)))
        logits = two_class_logits(model)
        b = Batch(x=(xn, xc), y=yy, mask=jnp.ones(lead))
        cfg = DPSGDConfig(clip_norm=clip, noise_multiplier=sigma, expected_batch_size=n1, sampling="shuffle", unit=unit)
        fns = {}
        for form in ("vmap_grad", "bookkeeping"):
            st = make_dpsgd_step(
                logits_fn=logits, tapped_fn=logits.tapped, optimizer=optax.rmsprop(1e-3), config=cfg, formulation=form
            )
            s0 = st.init(ads_params)
            fns[f"dpsgd_{form}"] = (lambda st=st, s0=s0, b=b: st(s0, b, key), jax.block_until_ready)
        one = (xn.reshape(-1, 3)[:1], xc.reshape(-1, 10)[:1])
        macs = forward_macs(jax, logits.tapped, ads_params, one) * (4 if unit == "user" else 1)
        cases[f"ads_mlp_{unit}"] = dict(
            fns=fns,
            macs=macs,
            batch=n1,
            params=num_params(ads_params),
            note=f"{'256 users x 4 examples' if unit == 'user' else '1024 examples'}, "
            "10 embedded columns (dim 8), MLP 128-64",
        )

    results = {}
    for name, case in cases.items():
        fns = case["fns"]
        warm = {}
        for k, (fn, sync) in fns.items():
            t0 = time.perf_counter()
            for _ in range(2):
                sync(fn())
            warm[k] = time.perf_counter() - t0
        times = {k: [] for k in fns}
        for _ in range(a.reps):
            for k, (fn, sync) in fns.items():
                t0 = time.perf_counter()
                sync(fn())
                times[k].append(time.perf_counter() - t0)
        rows = {}
        for k, ts in times.items():
            med = statistics.median(ts)
            gf = None if case["macs"] is None else 6 * case["macs"] * case["batch"] / med / 1e9
            rows[k] = dict(
                median_s=med,
                min_s=min(ts),
                max_s=max(ts),
                warmup_s_incl_compile=warm[k],
                effective_gflops=gf,
                fraction_of_peak=None if gf is None else gf / peak,
            )
            print(f"{name} {k}: {med:.4f} s", flush=True)
        results[name] = dict(
            rows=rows, macs_per_example=case["macs"], batch=case["batch"], params=case["params"], note=case["note"]
        )
    m = results["mnist_cnn"]["rows"]
    fastest_sgd = min(v["median_s"] for k, v in m.items() if "sgd" in k and "dpsgd" not in k)
    goals = {
        "mnist_dpsgd_s_per_step": m["dpsgd_bookkeeping"]["median_s"],
        "goal_at_most_0.1_s": m["dpsgd_bookkeeping"]["median_s"] <= 0.1,
        "speedup_over_vmap_grad": m["dpsgd_vmap_grad"]["median_s"] / m["dpsgd_bookkeeping"]["median_s"],
        "speedup_over_opacus": m["opacus_dpsgd"]["median_s"] / m["dpsgd_bookkeeping"]["median_s"],
        "goal_3x_opacus": m["opacus_dpsgd"]["median_s"] / m["dpsgd_bookkeeping"]["median_s"] >= 3,
        "over_fastest_nonprivate": m["dpsgd_bookkeeping"]["median_s"] / fastest_sgd,
        "goal_at_most_1.5x_nonprivate": m["dpsgd_bookkeeping"]["median_s"] / fastest_sgd <= 1.5,
    }
    device = jax.devices()[0].platform
    meta = dict(
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        device=device,
        cpu=cpu_model(),
        cpus=len(os.sched_getaffinity(0)),
        jax=jax.__version__,
        python=platform.python_version(),
        loadavg_before=list(load0),
        loadavg_after=loadavg(),
        reps=a.reps,
        matmul_peak_gflops=peak,
        sigma=sigma,
        clip_norm=clip,
    )
    out = Path(a.out) if a.out else ROOT / f"benchmarks/results/dpsgd_step_{device}"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(f"{out}.json", json.dumps(dict(meta=meta, results=results, goals=goals), indent=1))
    write_text_atomic(f"{out}.md", render(meta, results, goals))
    print(render(meta, results, goals))
    return 0


def _add_torch(fns, x, y, *, sigma, clip, lr):
    import torch
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    from baselines.torch_models import build_torch_model, nchw_tensor

    torch.set_num_threads(len(os.sched_getaffinity(0)))
    torch.manual_seed(0)
    xt = nchw_tensor(np.asarray(x))
    yt = torch.from_numpy(np.asarray(y).astype(np.int64))
    lossf = torch.nn.CrossEntropyLoss()
    tm = build_torch_model("mnist_cnn", input_shape=(28, 28, 1))
    topt = torch.optim.SGD(tm.parameters(), lr=lr)

    def torch_sgd():
        topt.zero_grad(set_to_none=True)
        lossf(tm(xt), yt).backward()
        topt.step()

    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    gsm = GradSampleModule(build_torch_model("mnist_cnn", input_shape=(28, 28, 1)))
    dpopt = DPOptimizer(
        torch.optim.SGD(gsm.parameters(), lr=lr),
        noise_multiplier=sigma,
        max_grad_norm=clip,
        expected_batch_size=xt.shape[0],
    )

    def opacus_step():
        dpopt.zero_grad(set_to_none=True)
        lossf(gsm(xt), yt).backward()
        dpopt.step()

    fns["torch_sgd"] = (torch_sgd, lambda _: None)
    fns["opacus_dpsgd"] = (opacus_step, lambda _: None)


LABELS = {
    "sgd_model": "JAX SGD, Flax forward (whole batch)",
    "sgd_tapped": "JAX SGD, tapped forward (im2col, chunks of 64)",
    "dpsgd_vmap_grad": "JAX DP-SGD, `vmap_grad` (reference)",
    "dpsgd_bookkeeping": "JAX DP-SGD, `bookkeeping`",
    "torch_sgd": "PyTorch SGD",
    "opacus_dpsgd": "Opacus DP-SGD (hooks)",
}


def render(meta, results, goals) -> str:
    lines = [
        f"# DP-SGD step formulations ({meta['device']})",
        "",
        f"- created {meta['created']}; {meta['cpu']}, {meta['cpus']} cpus; JAX {meta['jax']}; load average "
        f"{meta['loadavg_before']} -> {meta['loadavg_after']}; every step of a model timed round-robin "
        f"({meta['reps']} reps after 2 warm-up calls), medians",
        f"- measured float32 matmul peak (2048^2 `jnp.dot`): {meta['matmul_peak_gflops']:.1f} GFLOP/s; "
        "effective GFLOP/s = 6 x forward MACs x batch / time (useful work of forward + backward)",
        "",
    ]
    for name, r in results.items():
        lines += [
            f"## {name} (batch {r['batch']}, {r['params']:,} parameters{'; ' + r['note'] if r['note'] else ''})",
            "",
            "| step | s/step | min | max | effective GFLOP/s | % of peak | first 2 calls incl. compile (s) |",
            "|---|---|---|---|---|---|---|",
        ]
        for k, v in r["rows"].items():
            gf = "-" if v["effective_gflops"] is None else f"{v['effective_gflops']:.1f}"
            fr = "-" if v["fraction_of_peak"] is None else f"{100 * v['fraction_of_peak']:.0f}%"
            lines.append(
                f"| {LABELS[k]} | {v['median_s']:.4f} | {v['min_s']:.4f} | {v['max_s']:.4f} | {gf} | {fr} | "
                f"{v['warmup_s_incl_compile']:.1f} |"
            )
        lines.append("")
    g = goals
    lines += [
        "## Goals of issue 32 (MNIST CNN, this machine)",
        "",
        f"- DP-SGD step {g['mnist_dpsgd_s_per_step']:.3f} s: goal <= 0.1 s {'met' if g['goal_at_most_0.1_s'] else 'MISSED'}",
        f"- {g['speedup_over_vmap_grad']:.1f}x the reference `vmap_grad` step",
        f"- {g['speedup_over_opacus']:.1f}x faster than Opacus: goal >= 3x {'met' if g['goal_3x_opacus'] else 'MISSED'}",
        f"- {g['over_fastest_nonprivate']:.2f}x the fastest non-private step: goal <= 1.5x "
        f"{'met' if g['goal_at_most_1.5x_nonprivate'] else 'MISSED'}",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
