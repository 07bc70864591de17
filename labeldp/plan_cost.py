"""The cost of a target before any job runs: runs, jobs and estimated hours (issue 28).

Usage::

    python -m labeldp.plan_cost table5_mnist                        # the full config's Table 5a
    python -m labeldp.plan_cost --configfile workflow/config/quick.yaml all

For each target (a table or figure name, or ``all``) it prints the planned runs, how many already
have a record, the sweep jobs (:mod:`labeldp.sweeps`), and estimated hours on this kind of 2-core
CPU and on one GPU, from per-step costs measured by the benchmarks and stored as data in
``workflow/resources/run_costs.yaml`` (each figure names its benchmark). Rough by design: steps are
``epochs x train units / batch size`` per run, a LabelDP-Pro step costs what the benchmarks
measured at the nearest alternative batch size n2, a method with a ``method_step_factor`` (LP-2ST,
ALIBI and LabelDP-Pro, from ``benchmarks/plan_cost_calibration.py``) costs that multiple of its family's step, and
fixed costs per run and per job are added.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import math
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from labeldp import feature_datasets, halving, plan, sweeps
from labeldp.config import load_config
from labeldp.data.registry import DATASETS

REPO = Path(__file__).resolve().parents[1]
COSTS = REPO / "workflow/resources/run_costs.yaml"

_LABELDP_PRO = {"labeldp_pro"}
_DPSGD = {"dpsgd", "dpsgd_opacus", "hybrid", "hybrid_user_level", "hybrid_rr_baseline", "hybrid_dpsgd_baseline"}


@functools.lru_cache(maxsize=8)
def load_costs(path: str | Path = COSTS) -> dict[str, Any]:
    """The cost data (cached: the Snakefile asks once per sweep job); do not modify the result."""
    return yaml.safe_load(Path(path).read_text())


def _model(dataset: str) -> str:
    if feature_datasets.features_base(dataset, plan.DATASET_KINDS):
        return "linear"
    model = DATASETS[dataset].model if dataset in DATASETS else None
    return model or "mlp"  # tabular: the ads and regression MLPs


def _train_units(config: Mapping[str, Any], dataset: str, costs: Mapping[str, Any]) -> int:
    base = feature_datasets.features_base(dataset, plan.DATASET_KINDS) or dataset
    dcfg = plan.dataset_cfg(config, base)
    if dcfg.get("subset"):
        return int(dcfg["subset"])
    if dcfg.get("standin"):
        return int(costs["standin_train_units"])
    return int(costs["train_units"].get(base, costs["train_units"].get(dataset, 60000)))


def step_seconds(spec, *, device: str, costs: Mapping[str, Any]) -> float:
    """Estimated seconds of one training step of ``spec`` on ``device`` (``cpu`` or ``gpu``).

    Args:
      spec: the run's spec (method, dataset, hparams, options).
      device: ``cpu`` or ``gpu``.
      costs: :func:`load_costs`'s data; ``method_step_factor[device][method]`` (default 1) scales the
        family's step for a method whose step does more (LP-2ST's two stages, ALIBI's soft labels,
        LabelDP-Pro's projection to a tolerance).

    Returns:
      Seconds per step: on the CPU proportional to the batch, on the GPU the same up to batch 1024.
    """
    table = costs["seconds_per_step"][device][_model(spec.dataset)]
    batch = int(spec.hparams.get("batch_size", 1024))
    if spec.method in _LABELDP_PRO:
        n2 = int(spec.options.get("alt_batch_size") or batch)
        sizes = sorted(int(k) for k in table["labeldp_pro"])
        per = float(table["labeldp_pro"][sizes[min(bisect.bisect_left(sizes, n2), len(sizes) - 1)]])
    else:
        per = float(table["dpsgd" if spec.method in _DPSGD else "sgd"])
    # a method whose step does more than its family's figure (LP-2ST, ALIBI, LabelDP-Pro) costs a measured multiple
    factor = float((costs.get("method_step_factor") or {}).get(device, {}).get(spec.method, 1.0))
    return factor * per * (batch / 1024 if device == "cpu" else 1.0)


def run_seconds(run, *, config: Mapping[str, Any], device: str, costs: Mapping[str, Any]) -> float:
    spec = run.spec
    batch = int(spec.hparams.get("batch_size", 1024))
    steps = math.ceil(float(spec.hparams.get("epochs", 1)) * _train_units(config, spec.dataset, costs) / batch)
    fixed = costs["seconds_per_run"][device]
    if isinstance(fixed, Mapping):  # per method: a GPU's vmapped DP-SGD sweeps share compilation
        fixed = fixed.get(spec.method, fixed["default"])
    return steps * step_seconds(spec, device=device, costs=costs) + float(fixed)


def runs_seconds(runs, *, config: Mapping[str, Any], device: str, costs: Mapping[str, Any] | None = None) -> float:
    """Estimated seconds of ``runs`` (planned runs) on ``device``, without the per-job cost: a sweep job's
    Slurm runtime and its Snakemake priority (workflow/rules/train.smk), and :func:`estimate`."""
    costs = costs or load_costs()
    return sum(run_seconds(r, config=config, device=device, costs=costs) for r in runs)


#: the orders Snakemake may start ready training jobs in (config key ``sweep_order``), the default first
SWEEP_ORDERS = ("longest_first", "shortest_first")
DEFAULT_SWEEP_ORDER = SWEEP_ORDERS[0]
#: training (sweep and audit) jobs' priorities lie in ``[0, PRIORITY_CEILING]``; estimates above it (about
#: 116 days) tie. Kept small: Snakemake's MILP scheduler weighs priorities in floating point
PRIORITY_CEILING = 10**7
#: the priority of jobs that make a sweep's inputs (fetch, prepare, SimCLR, pre-training) and of the
#: successive-halving checkpoints, above every training job's (the Snakefile; Snakemake does not pass
#: priorities upstream, so a sweep's inputs could otherwise wait behind other ready sweeps)
UPSTREAM_PRIORITY = 10**9


def sweep_priority(seconds: float, *, order: str = DEFAULT_SWEEP_ORDER) -> int:
    """A training job's Snakemake priority from its estimated seconds (Snakemake starts higher first).

    ``longest_first`` (the default) keeps both cores busy to the end of one uninterrupted run: a long job
    started last would finish alone while the other core idles. ``shortest_first`` completes the most
    jobs in a run that is stopped before the end (a session-bounded CPU run that a later session
    resumes); where a cell is one job (a halving table's stage 1 with at most ``sweep_max_runs`` points),
    its cheap cells finish, pass their checkpoint and are scored before the expensive ones start.

    Args:
      seconds: the job's estimated CPU seconds for its runs without a record (:func:`runs_seconds`).
      order: one of :data:`SWEEP_ORDERS`.

    Returns:
      A priority in ``[0, PRIORITY_CEILING]``, below :data:`UPSTREAM_PRIORITY`.

    Raises:
      ValueError: an unknown order (the message names the config key and its values).
    """
    if order not in SWEEP_ORDERS:
        raise ValueError(f"sweep_order: {order!r} is not one of {', '.join(SWEEP_ORDERS)}")
    s = min(max(int(seconds), 0), PRIORITY_CEILING)
    return s if order == "longest_first" else PRIORITY_CEILING - s


def job_priority(runs, *, config: Mapping[str, Any]) -> int:
    """A training job's Snakemake priority (workflow/rules/train.smk and audit.smk).

    Args:
      runs: the job's planned runs without a record.
      config: the workflow config; its ``sweep_order`` (default :data:`DEFAULT_SWEEP_ORDER`) sets the order.

    Returns:
      :func:`sweep_priority` of the runs' estimated CPU seconds.
    """
    seconds = runs_seconds(runs, config=config, device="cpu")
    return sweep_priority(seconds, order=config.get("sweep_order", DEFAULT_SWEEP_ORDER))


def target_runs(
    config: Mapping[str, Any], tables: Sequence[str], *, by_table: Mapping[str, Sequence[plan.PlannedRun]]
) -> list[plan.PlannedRun]:
    """The runs ``tables`` train, each once: a table's grid, or a successive-halving table's searched
    sub-grid (:func:`labeldp.halving.searched_runs`).

    Args:
      config: the workflow config. tables: table names.
      by_table: :func:`labeldp.plan.runs_by_table` of ``config``.
    """
    halved = [t for t in tables if halving.halving_keep(config["tables"][t])]
    runs = {r.record_path: r for t in tables if t not in halved for r in by_table.get(t, ())}
    for t in halved:
        runs.update((r.record_path, r) for r in halving.searched_runs(config, t))
    return list(runs.values())


def estimate(
    config: Mapping[str, Any],
    targets: Sequence[str],
    *,
    costs: Mapping[str, Any] | None = None,
    exists=None,
    by_table: Mapping[str, Sequence[plan.PlannedRun]] | None = None,
    all_sweeps: Mapping[str, sweeps.Sweep] | None = None,
) -> dict[str, Any]:
    """Runs, finished runs, jobs and estimated hours of ``targets`` (tables / figures, or ``all``).

    Args:
      config: the workflow config. targets: table or figure names, or ``all``.
      costs: :func:`load_costs`'s data. exists: ``path -> bool`` (default: on disk).
      by_table: :func:`labeldp.plan.runs_by_table` of ``config`` when the caller has it (planned
        once here otherwise; the full reproduction takes seconds to plan).
      all_sweeps: :func:`labeldp.sweeps.workflow_sweeps` of ``config`` when the caller has it.

    Raises:
      plan.ConfigError: an unknown target.
    """
    costs = costs or load_costs()
    exists = exists or os.path.exists
    tables = list(config["tables"]) if "all" in targets else list(targets)
    plan.check_known_tables(config, tables)  # an unknown target fails here, naming the known ones
    by_table = plan.runs_by_table(config) if by_table is None else by_table
    runs = target_runs(config, tables, by_table=by_table)
    all_sweeps = sweeps.workflow_sweeps(config, by_table) if all_sweeps is None else all_sweeps
    of_record = sweeps.sweep_of_record(all_sweeps)
    pending = [r for r in runs if not exists(r.record_path)]
    jobs = {of_record[r.record_path] for r in pending}
    out = {
        "targets": tables,
        "runs": len(runs),
        "with_record": len(runs) - len(pending),
        "pending": len(pending),
        "jobs": len(jobs),
        "hours": {},
    }
    for device in ("cpu", "gpu"):
        secs = runs_seconds(pending, config=config, device=device, costs=costs)
        secs += len(jobs) * float(costs["seconds_per_job"][device])
        out["hours"][device] = secs / 3600.0
    return out


def render(est: Mapping[str, Any], *, cores: int = 2) -> str:
    cpu_h, gpu_h = est["hours"]["cpu"], est["hours"]["gpu"]
    lines = [
        f"targets: {', '.join(est['targets'])}",
        f"planned runs: {est['runs']:,} ({est['with_record']:,} have a record, {est['pending']:,} to train) "
        f"in {est['jobs']:,} sweep jobs",
        f"estimated: {cpu_h:,.1f} h on a {cores}-core CPU like this one ({cpu_h / 24:,.1f} days; one job at a "
        f"time), {gpu_h:,.1f} h on one GPU (workflow/resources/run_costs.yaml; rough)",
    ]
    if cpu_h > 24:
        lines.append(
            "that is more than a day here: use the quick profile (snakemake --profile workflow/profiles/quick),"
            " a GPU (workflow/profiles/gpu) or a cluster (workflow/profiles/slurm; sweep_max_runs sets the "
            "runs per job), or restrict the grid in a config of your own"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="+", help="table or figure names, or 'all'")
    p.add_argument(
        "--configfile",
        action="append",
        default=[],
        help="configs merged over workflow/config/config.yaml, as Snakemake's --configfile",
    )
    a = p.parse_args(argv)
    config = load_config(REPO / "workflow/config/config.yaml", *a.configfile)
    try:
        est = estimate(config, a.targets)
    except plan.ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(render(est))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
