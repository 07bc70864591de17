"""The worker process of :mod:`bench_user_level`: one method's user-level step, timed on the synthetic stand-in.

Run by ``bench_user_level.py`` as ``python benchmarks/user_level_worker.py '<settings JSON>'`` in a fresh
process, so that its peak resident memory is its own; prints one JSON line (the measurement). See
``bench_user_level.py`` for what is timed and how.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np
import optax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeldp import records  # noqa: E402
from labeldp.ads.model import AdsMLP, embedding_dims, model_for, two_class_logits
from labeldp.ads.train import init_params
from labeldp.denoisers.hull_converged import column_norms
from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step, num_steps, poisson_batches, sample_alt_batch
from labeldp.methods.base import RunSpec
from labeldp.methods.pro_denoiser import make_denoiser_for
from labeldp.tasks.ads import user_denoiser

#: Vocabulary sizes (index 0 = missing included) of the synthetic stand-in: campaign, cat1..cat9.
VOCAB_SIZES = (700, 300, 450, 600, 900, 1200, 1600, 2000, 3000, 4000)
METHODS = ("dpsgd", "labeldp_pro")
LABELS = {"dpsgd": "DP-SGD, per-user gradients", "labeldp_pro": "LabelDP-Pro, per-user gradients + user-level AltConv"}
MIB = 1024.0


# --------------------------------------------------------------------------------------
# The synthetic stand-in.
# --------------------------------------------------------------------------------------


def synthetic_users(users: int, k: int, *, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x_num (U, k, 1) float32, x_cat (U, k, 10) int32, y (U, k) int32): see the module docstring."""
    rng = np.random.default_rng([seed, 11])
    n = users * k
    x_num = rng.standard_normal((n, 1), dtype=np.float32)
    x_cat = np.empty((n, len(VOCAB_SIZES)), np.int32)
    score = -2.3 + 0.5 * x_num[:, 0]
    for j, v in enumerate(VOCAB_SIZES):
        # Zipf-like frequencies over 1..v-1 (a few values common, a long tail), 1% missing (0)
        w = 1.0 / np.arange(1, v, dtype=np.float64) ** 1.1
        col = 1 + rng.choice(v - 1, size=n, p=w / w.sum()).astype(np.int32)
        col[rng.random(n) < 0.01] = 0
        x_cat[:, j] = col
        score += rng.normal(0.0, 0.4, v)[col]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-score))).astype(np.int32)
    return x_num.reshape(users, k, 1), x_cat.reshape(users, k, -1), y.reshape(users, k)


# --------------------------------------------------------------------------------------
# The worker (one method in a fresh process).
# --------------------------------------------------------------------------------------


_status_kib = records.proc_status_kib
_reset_peak = records.reset_peak_rss


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _user_denoiser(a: dict):
    """The denoiser and n2 exactly as the ads task builds them for the Table 7 variant ``k<k>``."""

    hp = {
        "learning_rate": a["learning_rate"],
        "epochs": 1,
        "batch_size": a["batch"],
        "clip_norm": a["clip"],
        "proj_step_size": a["proj_step_size"],
        "proj_steps": a["proj_steps"],
        "smoothing": a["smoothing"],
    }
    options = {"denoiser": "alt_conv", "amplification": True, "examples_per_user": a["k"]}  # config.yaml's k5
    if a["alt_users"] != a["batch"]:  # the ads task's n2 defaults to the batch size
        options["alt_batch_size"] = a["alt_users"]
    spec = RunSpec(
        dataset="criteo_attribution",
        method="labeldp_pro",
        variant=f"k{a['k']}",
        epsilon=1.0,
        delta=1e-5,
        seed=a["seed"],
        hparams=hp,
        options=options,
    )
    return user_denoiser(spec, make_denoiser_for, k=a["k"])


def worker(a: dict) -> dict:

    method, users, k, n1 = a["method"], a["users"], a["k"], a["batch"]
    t_data = time.perf_counter()
    x_num, x_cat, y = synthetic_users(users, k, seed=a["seed"])
    data_s = time.perf_counter() - t_data
    cfg = model_for("criteo_attribution")
    model = AdsMLP(
        hidden=cfg.hidden,
        vocab_sizes=VOCAB_SIZES,
        embed_dims=embedding_dims(VOCAB_SIZES, rule=cfg.embedding),
        output_bias=0.0,
    )
    denoiser, n2 = (None, 0) if method == "dpsgd" else _user_denoiser(a)
    n2 = min(n2, users)
    # --- as labeldp.ads.train.train_user_level builds its step -------------------------------
    dp_config = DPSGDConfig(
        clip_norm=a["clip"],
        noise_multiplier=a["noise_multiplier"],
        expected_batch_size=n1,
        sampling="poisson",
        unit="user",
    )
    logits = two_class_logits(model)
    step = make_dpsgd_step(
        optimizer=optax.rmsprop(a["learning_rate"]),
        config=dp_config,
        logits_fn=logits,
        projection_logits_fn=None if denoiser is None else logits,
        denoiser=denoiser,
    )
    params = init_params(model, x_num[:, 0], x_cat[:, 0], seed=a["seed"])
    state = step.init(params)
    d = int(sum(p.size for p in jax.tree_util.tree_leaves(params)))
    key = jax.random.PRNGKey(a["seed"])
    alt_rng = np.random.default_rng([a["seed"], 2])
    y_int = np.asarray(y, dtype=np.int32)
    steps_per_epoch = num_steps(n=users, expected_batch_size=n1, epochs=1)
    total = a["warmup"] + a["steps"]
    solver = None if denoiser is None else denoiser.projection_solver(rows=n2 * k, k=2, params=params)
    rss_before = _status_kib("VmRSS")
    reset = _reset_peak()
    rows = []
    for i, (idx, mask) in enumerate(
        poisson_batches(
            users,
            sampling_rate=n1 / users,
            rng=np.random.default_rng([a["seed"], 1]),
            pad_to=step.pad_to,
            num_batches=total,
        )
    ):
        if i == a["warmup"]:
            cpu0, wall0 = _cpu_seconds(), time.perf_counter()
        t0 = time.perf_counter()
        # --- the loop body of train_user_level -----------------------------------------------
        x_alt = None
        if n2:
            alt = sample_alt_batch(users, size=n2, rng=alt_rng)
            x_alt = (x_num[alt].reshape(-1, x_num.shape[-1]), x_cat[alt].reshape(-1, x_cat.shape[-1]))
        batch = Batch(x=(x_num[idx], x_cat[idx]), y=y_int[idx], mask=mask, x_alt=x_alt)
        t1 = time.perf_counter()
        state, info = step(state, batch, jax.random.fold_in(key, i))
        jax.block_until_ready(state)
        t2 = time.perf_counter()
        row = {
            "step": i,
            "timed": i >= a["warmup"],
            "seconds": t2 - t0,
            "host_batch_s": t1 - t0,
            "users": int(mask.sum()),
            "padded": int(mask.size),
            "loss": float(info.loss),
            "clipped_fraction": float(info.clipped_fraction),
        }
        for name in ("projection_iterations", "projection_gap_relative"):
            if name in info.denoise:
                row[name] = float(info.denoise[name])
        rows.append(row)
        print(
            f"  {method} step {i}{'' if row['timed'] else ' (warm-up)'}: {row['seconds']:.3f} s"
            + (f", {row['projection_iterations']:.0f} projection iterations" if "projection_iterations" in row else ""),
            file=sys.stderr,
            flush=True,
        )
    timed_cpu, timed_wall = _cpu_seconds() - cpu0, time.perf_counter() - wall0
    timed = [r["seconds"] for r in rows if r["timed"]]
    med = statistics.median(timed)
    out = {
        "method": method,
        "label": LABELS[method],
        "params": d,
        "pad_to": step.pad_to,
        "alt_batch_users": n2,
        "alt_batch_rows": n2 * k,
        "denoiser": None if denoiser is None else denoiser.name,
        "projection_solver": solver,
        "host_loop": None if denoiser is None else bool(denoiser.host_loop(params)),
        "steps_per_epoch": steps_per_epoch,
        "median_step_s": med,
        "mean_step_s": statistics.fmean(timed),
        "min_step_s": min(timed),
        "max_step_s": max(timed),
        "median_host_batch_s": statistics.median(r["host_batch_s"] for r in rows if r["timed"]),
        "warmup_s_incl_compile": sum(r["seconds"] for r in rows if not r["timed"]),
        "epoch_s_extrapolated": med * steps_per_epoch,
        "timed_steps": len(timed),
        "timed_wall_s": timed_wall,
        "timed_cpu_s": timed_cpu,
        "cpu_per_wall": timed_cpu / timed_wall if timed_wall > 0 else None,
        "data_s": data_s,
        "rss_before_steps_mib": rss_before / MIB,
        "peak_rss_during_steps_mib": _status_kib("VmHWM") / MIB if reset else None,
        "peak_rss_process_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MIB,  # KiB on Linux
        "process_cpu_s": _cpu_seconds(),
        "rows": rows,
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "devices": [f"{dev.platform}:{dev.device_kind}" for dev in jax.devices()],
    }
    if denoiser is not None:
        out["breakdown"] = _breakdown(step, denoiser, state, batch, jax.random.fold_in(key, total), solver)
        its = [r["projection_iterations"] for r in rows if r["timed"] and "projection_iterations" in r]
        gaps = [r["projection_gap_relative"] for r in rows if r["timed"] and "projection_gap_relative" in r]
        out.update(
            projection_iterations_median=statistics.median(its) if its else None,
            projection_iterations_min=min(its) if its else None,
            projection_iterations_max=max(its) if its else None,
            projection_gap_relative_median=statistics.median(gaps) if gaps else None,
            projection_options={
                "proj_steps (cap)": a["proj_steps"],
                "proj_step_size": a["proj_step_size"],
                "smoothing": a["smoothing"],
                "vertices": denoiser.inner.vertices,
                "coefficient_set": denoiser.inner.coefficient_set,
                "start": denoiser.inner.start,
                "tol": denoiser.inner.tol,
                "momentum": denoiser.inner.momentum,
                "solver option": denoiser.inner.solver,
            },
        )
    return out


def _breakdown(step, denoiser, state, batch, rng, solver) -> dict:
    """One LabelDP-Pro step taken apart, on the last timed step's batch and the state after it
    (everything already compiled; one call each): the noisy gradient, the whole denoiser call,
    and, for the matrix-free solver, within it the exact per-(row, class) gradient norms
    (``column_norms``, what ``_solve_matrix_free`` computes first); the rest of the denoiser is
    then the projection proper (power iterations for 1/L, the FISTA chunks, the output). The
    jacobian solver gets its norms from the G^T it builds, so no split is made for it."""

    def timed(fn):
        t0 = time.perf_counter()
        res = jax.block_until_ready(fn())
        return res, time.perf_counter() - t0

    (noisy, _), t_noisy = timed(lambda: step.noisy_gradient(state.params, batch, rng))
    _, t_den = timed(
        lambda: denoiser(
            noisy,
            logits_fn=step.projection_logits_fn,
            params=state.params,
            x=None,
            mask=None,
            x_alt=batch.x_alt,
            alt_mask=batch.alt_mask,
        )
    )
    out = {"noisy_gradient_s": t_noisy, "denoiser_s": t_den, "calls": 1, "solver": solver}
    if solver == "matrix_free":
        _, t_norms = timed(
            lambda: column_norms(step.projection_logits_fn, state.params, batch.x_alt, mask=batch.alt_mask)
        )
        out.update(column_norms_s=t_norms, projection_rest_s=t_den - t_norms)
    return out


if __name__ == "__main__":
    print(json.dumps(worker(json.loads(sys.argv[1]))))
