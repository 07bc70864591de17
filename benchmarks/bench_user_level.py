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

Each method runs in a fresh Python process (``user_level_worker.py``), one after the other, so its peak
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
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from labeldp.machine import cpu_model, describe, loadavg  # noqa: E402
from user_level_report import PAPER, PAPER_RATIO, render  # noqa: E402  (the markdown report)
from user_level_worker import METHODS, VOCAB_SIZES  # noqa: E402  (the timed process)
from labeldp.records import git_revision  # noqa: E402


def run_worker(args: dict) -> dict:
    load0 = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "user_level_worker.py"), json.dumps(args)],
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
    a = ap.parse_args(argv)
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
    machine = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "mem_total_gib": describe().memory_gib,
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
