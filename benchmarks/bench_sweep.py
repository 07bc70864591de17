"""Runs per hour: one job per run against one sweep job, on one cell of 000 Table 5a (issue 28).

For each method (DP-SGD, LabelDP-Pro) the benchmark plans one cell of Table 5a on MNIST at eps 1
with the full config's grid (000 Table 8; its epochs 2 / 5 / 10 replaced by ``--epochs``, one value each
for a grid of 36 configurations, or one value for all; the first ``--configs``
grid points, ``--seeds`` seeds) and trains those runs in each mode, in this order, on the same machine:

* ``single``: one process per run, the command the ``train`` rule ran before sweeps
  (``python -m labeldp.runner``): every run imports JAX, loads the data and compiles its step
  (``--single-runs N``: the first N runs only, where one job per run would take too long);
* ``sweep``: one process for all of them (``python -m labeldp.sweep_runner``, the ``sweep`` rule's
  job), the runs one after another: the data is loaded once and compiled programs are reused
  within the process (``--sweep-runs N``: the first N runs only);
* ``vmapped`` (``--vmap-runs R`` > 1): the same sweep job with up to R runs per vmapped program
  (:mod:`labeldp.dpsgd.vmapped_loop`; the accelerator's default), on all runs.

Runs per hour are each mode's runs over its wall time. Where modes trained the same run, their
records are compared: the privacy block must be identical, and the metrics identical (sequential)
or within about 1e-5 relative (vmapped).

Both modes run with the workflow's persistent JAX compilation cache (``jax_compilation_cache_dir``),
each from an empty cache, as Snakemake runs them. Every pair of records is compared: the metrics
and the privacy block must be identical (the sweep is a scheduling change, not a numerical one).

Batching runs into one vmapped program (``--vmap R``, R > 1): the MNIST CNN's DP-SGD step (batch
1024, the book-keeping formulation on CPU) for R runs at once, ``jax.jit(jax.vmap(step.pure_step))``
over R states, batches and keys, against R calls of the compiled single-run step; seconds per
run-step of each, side by side in one process.

Run: ``.venv/bin/python benchmarks/bench_sweep.py [--subset 10000 --epochs 1 --configs 12 --seeds 1] [--vmap 4]
[--vmap-runs 12 --single-runs 6 --sweep-runs 12]`` (on a GPU: ``--vmap-runs 12``).
Writes ``benchmarks/results/sweep_<device>.{json,md}``. MNIST must be fetched (``snakemake --cores 1
fetch_mnist``, or ``LABELDP_DATA_MIRROR``).
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from labeldp import plan, sweeps
from labeldp.atomic_io import write_text_atomic
from labeldp.config import load_workflow_config
from labeldp.machine import cpu_model, loadavg

TABLE = "table5_mnist"
EPSILON = 1.0


def _config(results: Path, data_dir: Path, *, subset: int, epochs: list[int], seeds: int) -> dict:
    cfg = load_workflow_config(REPO / "workflow/config/config.yaml")
    cfg = copy.deepcopy(cfg)
    cfg.update(results_dir=str(results), data_dir=str(data_dir), seeds=list(range(seeds)), sweep_max_runs=10_000)
    cfg["datasets"]["mnist"] = {"subset": subset, "standin": False}
    cfg["grids"][cfg["grid"]]["table5a"] = {**cfg["grids"][cfg["grid"]]["table5a"], "epochs": list(epochs)}
    cfg["reference_dir"] = str(REPO / "workflow/resources/reference")
    return cfg


def _runs(cfg: dict, method: str, configs: int) -> list:
    runs = plan.select_runs(cfg, [TABLE], methods={method}, epsilons={EPSILON})
    points = []
    for r in runs:
        key = json.dumps(r.spec.hparams, sort_keys=True)
        if key not in points:
            points.append(key)
    keep = set(points[:configs])
    return [r for r in runs if json.dumps(r.spec.hparams, sort_keys=True) in keep]


def _pythonpath() -> str:
    """The repository first, then whatever PYTHONPATH already holds (a lent GPU box's wheels)."""
    return os.pathsep.join([str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def _env(cache: Path) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": _pythonpath(),
        "JAX_COMPILATION_CACHE_DIR": str(cache),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def _prepare(raw: Path, out: Path, subset: int) -> None:
    if out.exists():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "labeldp.data.prepare",
            "mnist",
            "--raw-dir",
            str(raw),
            "--out",
            str(out),
            "--subset",
            str(subset),
        ],
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": _pythonpath()},
    )


def _single(runs, cache: Path) -> float:
    t0 = time.perf_counter()
    for r in runs:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "labeldp.runner",
                "--spec",
                json.dumps(r.spec.to_dict()),
                "--data",
                r.prepared_path,
                "--out",
                r.record_path,
            ],
            check=True,
            cwd=REPO,
            env=_env(cache),
            stdout=subprocess.DEVNULL,
        )
    return time.perf_counter() - t0


def _sweep(cfg, runs, cache: Path, vmap_runs: int = 1, *, log: Path | None = None, profile: bool = False) -> float:
    """Seconds of one sweep job over ``runs`` (``log``: its output; ``profile``: under cProfile,
    the statistics beside the log as ``.prof``)."""
    (job,) = sweeps.plan_sweeps(cfg, runs).values()
    prefix = ["-m", "cProfile", "-o", str(log.with_suffix(".prof"))] if profile and log else []
    t0 = time.perf_counter()
    with open(log, "w") if log else open(os.devnull, "w") as out:
        subprocess.run(
            [
                sys.executable,
                *prefix,
                "-m",
                "labeldp.sweep_runner",
                "--sweep",
                json.dumps(job.to_dict()),
                "--data",
                job.prepared_path,
                "--marker",
                job.marker_path,
                "--vmap-runs",
                str(vmap_runs),
            ],
            check=True,
            cwd=REPO,
            env=_env(cache),
            stdout=out,
            stderr=subprocess.STDOUT if log else None,
        )
    return time.perf_counter() - t0


def vmap_ratio(runs: int, *, reps: int = 5) -> dict:
    """Seconds per run-step: R runs' DP-SGD steps vmapped into one program vs R single-run steps."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step
    from labeldp.models import build_model

    model = build_model("mnist_cnn", input_shape=(28, 28, 1))
    step = make_dpsgd_step(
        model=model,
        optimizer=optax.sgd(0.1),
        config=DPSGDConfig(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=1024),
    )
    rng = np.random.default_rng(0)
    pad = step.pad_to

    def batch(r=None):
        shape = (pad,) if r is None else (r, pad)
        return Batch(
            x=jnp.asarray(rng.random((*shape, 28, 28, 1), np.float32)),
            y=jnp.asarray(rng.integers(0, 10, shape), jnp.int32),
            mask=jnp.ones(shape, jnp.float32),
        )

    states = [step.init(model.init(jax.random.key(i))) for i in range(runs)]
    stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *states)
    keys = jax.random.split(jax.random.key(1), runs)
    vstep = jax.jit(jax.vmap(step.pure_step))
    single_batch, many = batch(), batch(runs)
    jax.block_until_ready(step(states[0], single_batch, keys[0]))  # compile both
    jax.block_until_ready(vstep(stacked, many, keys))
    single, vmapped = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready([step(s, single_batch, k) for s, k in zip(states, keys)])
        single.append((time.perf_counter() - t0) / runs)
        t0 = time.perf_counter()
        jax.block_until_ready(vstep(stacked, many, keys))
        vmapped.append((time.perf_counter() - t0) / runs)
    med = sorted(single)[reps // 2], sorted(vmapped)[reps // 2]
    return {
        "runs": runs,
        "single_seconds_per_run_step": med[0],
        "vmapped_seconds_per_run_step": med[1],
        "vmap_speedup": med[0] / med[1],
        "formulation": step.formulation,
    }


def _compare_records(single, other) -> dict:
    """On the runs both modes trained: privacy blocks identical? metrics identical? the largest
    relative difference of a float metric (vmapped programs agree to about 1e-5, not bitwise)."""
    same_privacy, same_metrics, worst = True, True, 0.0
    for a, b in zip(single, other):
        ra, rb = (json.loads(Path(r.record_path).read_text()) for r in (a, b))
        same_privacy &= ra["privacy"] == rb["privacy"]
        same_metrics &= ra["metrics"] == rb["metrics"]
        for k, v in ra["metrics"].items():
            if isinstance(v, float) and isinstance(rb["metrics"].get(k), float) and not math.isnan(v):
                worst = max(worst, abs(v - rb["metrics"][k]) / max(abs(v), 1e-12))
    return {
        "compared_runs": min(len(single), len(other)),
        "privacy_identical": same_privacy,
        "metrics_identical": same_metrics,
        "max_relative_metric_difference": worst,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subset", type=int, default=10000, help="MNIST training examples (first n)")
    p.add_argument(
        "--epochs",
        type=int,
        nargs="+",
        default=[1],
        help="the grid's epochs (Table 8: 2 5 10; e.g. 1 2 3 keeps its 36 configurations at reduced cost)",
    )
    p.add_argument(
        "--logs",
        default=None,
        help="folder for each sweep job's log (default: discarded); with --profile also its cProfile output",
    )
    p.add_argument("--profile", action="store_true", help="run each sweep job under cProfile (needs --logs)")
    p.add_argument("--configs", type=int, default=36, help="grid points per method (Table 8: 36 for DP-SGD)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--methods", nargs="+", default=["dpsgd", "labeldp_pro"])
    p.add_argument("--raw-dir", default=str(REPO / "data/raw/mnist"))
    p.add_argument("--out", default=None, help="results stem (default benchmarks/results/sweep_<device>)")
    p.add_argument("--vmap", type=int, default=4, help="runs per vmapped program in the step measurement (0: skip)")
    p.add_argument("--single-runs", type=int, default=0, help="one job per run on the first N runs only (0: all)")
    p.add_argument("--sweep-runs", type=int, default=0, help="the sequential sweep on the first N runs only (0: all)")
    p.add_argument(
        "--vmap-runs",
        type=int,
        default=0,
        help="also one sweep job with up to R runs per vmapped program, on all runs (0/1: skip)",
    )
    a = p.parse_args()
    if a.profile and not a.logs:
        p.error("--profile writes beside the sweep logs: give --logs DIR")
    if a.logs:
        Path(a.logs).mkdir(parents=True, exist_ok=True)
    import jax

    device = jax.devices()[0].platform
    modes = {"single": a.single_runs, "sweep": a.sweep_runs}
    if a.vmap_runs > 1:
        modes["vmapped"] = None  # every run
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for method in a.methods:
            row = {"method": method}
            recs = {}
            for mode, limit in modes.items():
                cfg = _config(tmp / mode / "results", tmp / "data", subset=a.subset, epochs=a.epochs, seeds=a.seeds)
                runs = _runs(cfg, method, a.configs)
                runs = runs[:limit] if limit else runs
                _prepare(Path(a.raw_dir), Path(runs[0].prepared_path), a.subset)
                cache = tmp / mode / f"jax-cache-{method}"
                if mode == "single":
                    seconds = _single(runs, cache)
                else:
                    seconds = _sweep(
                        cfg,
                        runs,
                        cache,
                        vmap_runs=a.vmap_runs if mode == "vmapped" else 1,
                        log=Path(a.logs) / f"{method}-{mode}.log" if a.logs else None,
                        profile=a.profile,
                    )
                recs[mode] = runs
                row[mode] = {
                    "runs": len(runs),
                    "seconds": seconds,
                    "runs_per_hour": len(runs) * 3600 / seconds,
                    "configs": len({json.dumps(r.spec.hparams, sort_keys=True) for r in runs}),
                }
                print(f"{method} {mode}: {len(runs)} runs in {seconds:.1f} s", flush=True)
            for mode in modes:
                if mode != "single":
                    row[mode]["speedup_vs_single"] = row[mode]["runs_per_hour"] / row["single"]["runs_per_hour"]
                    row[mode]["records_vs_single"] = _compare_records(recs["single"], recs[mode])
            rows.append(row)
    vm = vmap_ratio(a.vmap) if a.vmap > 1 else None
    meta = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "device": device,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "accelerator": jax.devices()[0].device_kind,
        "load_average": loadavg(),
        "dataset": f"MNIST, first {a.subset} training examples",
        "epsilon": EPSILON,
        "epochs": a.epochs,
        "seeds": a.seeds,
        "grid": "000 Table 8 (table5a of workflow/config/config.yaml), first grid points",
    }
    stem = Path(a.out) if a.out else REPO / f"benchmarks/results/sweep_{device}"
    write_text_atomic(stem.with_suffix(".json"), json.dumps({"meta": meta, "rows": rows, "vmap": vm}, indent=1) + "\n")
    lines = [
        f"# Runs per hour: one job per run vs one sweep job ({meta['date']})",
        "",
        (
            f"Machine: {meta['cpu']}, {meta['cores']} cores, device {device} ({meta['accelerator']}); load average at the end "
            f"{', '.join(f'{x:.2f}' for x in meta['load_average'])}."
        ),
        (
            f"What ran: {meta['dataset']}, eps {EPSILON}, epochs {'/'.join(map(str, a.epochs))} per grid point, {a.seeds} seed(s), "
            f"{meta['grid']}; every mode with an empty persistent JAX compilation cache at the start."
        ),
        "",
        f"Runs per job mode: one job per run on {f'the first {a.single_runs}' if a.single_runs else 'all'} runs, "
        f"one sweep job (runs one after another) on {f'the first {a.sweep_runs}' if a.sweep_runs else 'all'}"
        + (
            f", one sweep job with up to {a.vmap_runs} runs per vmapped program on all of them."
            if a.vmap_runs > 1
            else "."
        ),
        "",
        "| method | mode | runs | seconds | runs/hour | vs one job per run | records vs one job per run |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for mode in modes:
            m = r[mode]
            cmp = m.get("records_vs_single")
            same = (
                ""
                if cmp is None
                else (
                    f"{cmp['compared_runs']} runs: privacy {'identical' if cmp['privacy_identical'] else 'DIFFERENT'}, "
                    + (
                        "metrics identical"
                        if cmp["metrics_identical"]
                        else f"metrics within {cmp['max_relative_metric_difference']:.1e} relative"
                    )
                )
            )
            speed = "" if mode == "single" else f"{m['speedup_vs_single']:.2f}x"
            lines.append(
                f"| {r['method']} | {mode} | {m['runs']} | {m['seconds']:.1f} | {m['runs_per_hour']:.0f} | "
                f"{speed} | {same} |"
            )
    if vm:
        lines += [
            "",
            (
                f"Batching runs into one vmapped program (MNIST CNN DP-SGD step, batch 1024, {vm['formulation']}): "
                f"{vm['runs']} runs vmapped take {vm['vmapped_seconds_per_run_step']:.3f} s per run-step against "
                f"{vm['single_seconds_per_run_step']:.3f} s for the single-run step ({vm['vmap_speedup']:.2f}x)."
            ),
        ]
    write_text_atomic(stem.with_suffix(".md"), "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
