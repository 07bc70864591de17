"""User-level DP-SGD and user-level LabelDP-Pro, per step and per epoch on this machine (000 Table 11).

000 Table 11 (Appendix D.4) gives one epoch of Criteo Attribution (200,000 users, k = 5 examples
per user) on one A100: DP-SGD 205.67 s, LabelDP-Pro 315.69 s, a ratio of 1.53. This script
times the suite's two user-level steps side by side, in one run, on a SYNTHETIC stand-in of that
shape (the real data are not needed for timing):

* data: U users x k examples; 10 categorical features with the fixed vocabularies of
  :data:`VOCAB_SIZES` (a campaign-like one of 700 and nine contextual ones of 300 to 4,000;
  values drawn Zipf-like, index 0 = missing) and 1 numerical feature (standard normal); labels
  Bernoulli from a fixed random logistic function of the features (about 10% positives);
* model: :class:`labeldp.ads.model.AdsMLP`, hidden (128, 64), embedding dimension 8 for every
  feature (000 D.3, ``model_for("criteo_attribution")``), initial logit bias 0 (as the ads task
  uses for DP-SGD);
* step: :func:`labeldp.dpsgd.make_dpsgd_step` built exactly as
  :func:`labeldp.ads.train.train_user_level` builds it (RMSProp, ``unit="user"``: a user's k
  per-example gradients summed, then clipped to C as one unit; Poisson sampling over users at
  q = n1 / U, the batch padded to ``ceil(n1 + 6 sqrt(n1))``; noise multiplier 1.0), and the
  loop body of ``train_user_level`` (Poisson batch, alternative batch, gather, step) is what is
  timed, step by step, until the new state is ready;
* LabelDP-Pro: the same step with ``denoiser=`` the user-level AltConv that
  :func:`labeldp.tasks.ads.user_denoiser` builds for the Table 7 variant ``k5``
  (``UserSum(inner=make_denoiser_for(spec), examples_per_user=k)``: per-example coefficient
  sets, raw vertices, and the converged projection's defaults (start at the predicted
  probabilities, FISTA to a Frank-Wolfe gap of 1e-3, ``proj_steps`` the cap), ``proj_step_size``
  ``auto``, smoothing 0.75) and an alternative batch of ``--alt-users`` users drawn as
  ``train_user_level`` draws it. The solver ``auto`` resolves to, and the projection iterations
  each step ran, are recorded.

Each method runs in a fresh Python process (``--worker``), one after the other, so its peak
resident memory is its own: the process's ``VmHWM`` (data, compilation and steps together) and
``VmHWM`` after a reset (``/proc/self/clear_refs``) just before the first step, i.e. the peak
during the steps. ``--warmup`` steps (compilation included) are excluded from the timing; the
median over ``--steps`` timed steps times the steps of one epoch (``floor(U / n1)``, as
:func:`labeldp.dpsgd.num_steps` counts them) is the extrapolated epoch. Wall-clock on a possibly
shared machine: the load average and each worker's CPU time are recorded. No timing is asserted.

Run: ``.venv/bin/python benchmarks/bench_user_level.py [--users N --steps S]`` (defaults: the
paper's 200,000 users, 20 timed steps after 3 warm-up steps; about 7 minutes on 2 shared cores,
almost all of it LabelDP-Pro). Writes ``benchmarks/results/user_level_cpu.json`` and ``.md``
(``--out``: another directory), each through a temporary file and a rename; ``--rerender JSON``
rewrites the ``.md`` from a JSON without running anything.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_step import cpu_model, loadavg  # noqa: E402
from labeldp import records  # noqa: E402
from user_level_report import PAPER, PAPER_RATIO, render  # noqa: E402  (the markdown report)

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
    from labeldp.methods.pro_denoiser import make_denoiser_for
    from labeldp.tasks.ads import user_denoiser
    from labeldp.methods.base import RunSpec

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
    import jax
    import optax

    from labeldp.ads.model import AdsMLP, embedding_dims, model_for, two_class_logits
    from labeldp.ads.train import init_params
    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step, num_steps, poisson_batches, sample_alt_batch

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
    import jax

    from labeldp.denoisers.hull_converged import column_norms

    def timed(fn):
        t0 = time.perf_counter()
        res = jax.block_until_ready(fn())
        return res, time.perf_counter() - t0

    (noisy, _), t_noisy = timed(lambda: step.noisy_gradient(state.params, batch, rng))
    _, t_den = timed(
        lambda: denoiser(
            noisy,
            logits_fn=step._proj_fn,
            params=state.params,
            x=None,
            mask=None,
            x_alt=batch.x_alt,
            alt_mask=batch.alt_mask,
        )
    )
    out = {"noisy_gradient_s": t_noisy, "denoiser_s": t_den, "calls": 1, "solver": solver}
    if solver == "matrix_free":
        _, t_norms = timed(lambda: column_norms(step._proj_fn, state.params, batch.x_alt, mask=batch.alt_mask))
        out.update(column_norms_s=t_norms, projection_rest_s=t_den - t_norms)
    return out


def run_worker(args: dict) -> dict:
    load0 = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        cwd=str(ROOT),
    )  # the worker's progress goes to our stderr
    if proc.returncode != 0:
        raise RuntimeError(f"the {args['method']} worker failed (exit {proc.returncode}); its stderr is above")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res.update(worker_wall_s=time.perf_counter() - t0, load_before=load0, load_after=loadavg())
    return res


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=200_000, help="training users U (000: 200,000)")
    ap.add_argument("--k", type=int, default=5, help="examples per user (000 Table 11: 5)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per method")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation)")
    ap.add_argument("--batch", type=int, default=1024, help="expected users per step n1")
    ap.add_argument("--alt-users", type=int, default=1024, help="users in LabelDP-Pro's alternative batch n2")
    ap.add_argument("--proj-steps", type=int, default=100, help="projection iteration cap")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="output directory")
    ap.add_argument(
        "--rerender",
        default=None,
        metavar="JSON",
        help="only rewrite the .md next to a results JSON of this script (nothing is run)",
    )
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker is not None:
        print(json.dumps(worker(json.loads(a.worker))))
        return 0
    if a.rerender is not None:
        src = Path(a.rerender)
        _atomic_write(src.with_suffix(".md"), render(json.loads(src.read_text())))
        print(f"wrote {src.with_suffix('.md')}", file=sys.stderr)
        return 0
    if a.users < a.batch or a.steps < 1 or a.warmup < 0:
        ap.error("need --users >= --batch, --steps >= 1, --warmup >= 0")
    methods = [x for x in a.methods.split(",") if x]
    if any(x not in METHODS for x in methods):
        ap.error(f"--methods: choose from {METHODS}")
    import flax
    import jax
    import optax

    from labeldp.records import git_revision

    command = " ".join(
        [".venv/bin/python", "benchmarks/bench_user_level.py", *(argv if argv is not None else sys.argv[1:])]
    )
    settings = {
        "users": a.users,
        "k": a.k,
        "steps": a.steps,
        "warmup": a.warmup,
        "batch": a.batch,
        "alt_users": a.alt_users,
        "proj_steps": a.proj_steps,
        "proj_step_size": "auto",
        "smoothing": 0.75,
        "clip": 1.0,
        "noise_multiplier": 1.0,
        "learning_rate": 1e-3,
        "seed": a.seed,
        "vocab_sizes": list(VOCAB_SIZES),
    }
    load_start = loadavg()
    git = git_revision()
    t0 = time.perf_counter()
    results = []
    for method in methods:
        print(
            f"{method}: {a.users:,} users x {a.k}, {a.warmup} warm-up + {a.steps} timed steps",
            file=sys.stderr,
            flush=True,
        )
        res = run_worker(dict(settings, method=method, proj_step_size="auto"))
        results.append(res)
        print(
            f"{method}: median {res['median_step_s']:.3f} s/step, {res['epoch_s_extrapolated']:.1f} s/epoch "
            f"(extrapolated), peak RSS {res['peak_rss_process_mib']:.0f} MiB, load {res['load_before']} -> "
            f"{res['load_after']}",
            file=sys.stderr,
            flush=True,
        )
    mem = re.search(r"^MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text(), re.M)
    machine = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "mem_total_gib": int(mem.group(1)) / 2**20 if mem else math.nan,
        "jax": jax.__version__,
        "jax_backend": results[0]["jax_backend"],
        "devices": results[0]["devices"],
        "flax": flax.__version__,
        "optax": optax.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git": git,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "loadavg_start": load_start,
        "loadavg_end": loadavg(),
        "shared_cpu": True,
    }
    r = {x["method"]: x for x in results}
    ratio = (r["labeldp_pro"]["median_step_s"] / r["dpsgd"]["median_step_s"]) if len(r) == 2 else None
    payload = {
        "benchmark": "bench_user_level",
        "command": command,
        "machine": machine,
        "settings": settings,
        "paper": {
            "source": "000 Table 11 (Appendix D.4), Criteo Attribution, k = 5, one NVIDIA A100",
            "epoch_s": PAPER,
            "labeldp_pro_over_dpsgd": PAPER_RATIO,
        },
        "labeldp_pro_over_dpsgd": ratio,
        "results": results,
        "total_seconds": time.perf_counter() - t0,
    }
    text = render(payload)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(out / "user_level_cpu.json", json.dumps(payload, indent=1) + "\n")
    _atomic_write(out / "user_level_cpu.md", text)
    print(text)
    print(f"wrote {out / 'user_level_cpu.md'} and .json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
