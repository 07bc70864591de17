"""Sweeps: the planned runs grouped into jobs of one process each (issue 28).

000's protocol (best mean over 000 Table 8's grid, 3 seeds) plans hundreds of thousands of runs;
one Snakemake job per run pays a process start, a data load and a compilation each time and gives
a DAG no cluster accepts. A **sweep** is a set of planned runs that share everything but their
grid point and seed: the prepared data file, dataset, method, variant, epsilon, delta, options,
accountant, profile, sampling and calibration relation. One process trains a sweep
(:mod:`labeldp.sweep_runner`): the data is loaded once, compiled programs are reused where their
shapes and constants agree, and each run still writes its own record, the same record a single run
writes. A sweep is cut into jobs of at most ``sweep_max_runs`` runs (config key; default
:data:`DEFAULT_MAX_RUNS`), so a job fits a cluster's time limit.

A job's Snakemake output is a **marker** (``<results_dir>/.sweeps/<sweep id>.json``, the list of
its records), written after every run of the job has its record; the records themselves are not
the job's declared outputs, so a failed or killed job (whose outputs Snakemake deletes) keeps the
records of its finished runs, and rerunning it trains only the rest. Tables depend on the
markers of the sweeps that hold their runs.

Runs are also grouped by the set of tables that need them (the workflow passes it), so the jobs of a
target hold only its tables' runs, even where another table of the merged config shares its cells on a
different grid. The sweep id is ``<dataset>/<method>/<variant>[-shuffle][-labelsub]/eps<eps>/<hash>``
where the hash covers the common spec, the job's list of runs and that set of tables, so a changed grid gives new jobs (whose
already-finished runs are skipped, not redone) and never a stale marker.

The config's ``sweep_grouping`` chooses what a sweep holds: ``cell`` (the default) is the above;
``method`` groups every run of one prepared data file and method, whatever its eps, variant, options and
tables (the id's variant part is ``variants`` and its eps part ``epsmany`` where the runs differ in them;
a target then also trains the other runs of its jobs); ``data`` groups every run of one prepared data file
whatever its method (the id's method part is ``methods`` where they differ), so one process initialises the
network and compiles the programs the methods share (evaluation, the weighted-SGD step of RR, RR-Debiased,
ALIBI, LP-2ST and the non-private column) once. Where every cell is one run (the smoke profile:
one grid point, one seed) a job per cell spent most of its time starting a process, importing JAX and
dp_accounting and loading the data (about 5 s of a 2-core CPU's time per job); the runs of a ``method``
sweep that differ only in eps still call one compiled step, sigma being one of its traced inputs
(:mod:`labeldp.dpsgd.shared_steps`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any, Iterable, Mapping, Sequence, TypeVar

from labeldp.halving import stage_two_points
from labeldp.methods.base import RunSpec
from labeldp.plan import PlannedRun, all_runs, cell_path, runs_by_table

__all__ = [
    "Sweep",
    "DEFAULT_MAX_RUNS",
    "plan_sweeps",
    "workflow_sweeps",
    "tables_of_records",
    "sweep_of_runs",
    "max_runs",
    "job_chunks",
    "GROUPINGS",
    "grouping",
    "marker_dir",
]

Member = TypeVar("Member")

#: Runs per job unless the config says ``sweep_max_runs``: 000 Table 8's grid for one cell
#: (36 points x 3 seeds = 108 runs) is one job.
DEFAULT_MAX_RUNS = 108


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One job: runs sharing everything but grid point and seed.

    Attributes:
      id: the sweep id (module docstring); the marker is ``<marker_dir>/<id>.json``.
      runs: the planned runs, in plan order.
      prepared_path: the data file every run loads.
      marker_path: the job's Snakemake output.
    """

    id: str
    runs: tuple[PlannedRun, ...]
    prepared_path: str
    marker_path: str

    def to_dict(self) -> dict[str, Any]:
        """The job's arguments, compact: the common spec once, then (hparams, seed, record) per run, and a
        fourth entry with the run's other fields where the sweep's runs differ in them
        (``sweep_grouping: method``: eps, variant, options)."""
        specs = [r.spec.to_dict() for r in self.runs]
        varying = {k for k in specs[0] if k not in ("hparams", "seed") and any(d.get(k) != specs[0][k] for d in specs)}
        common = {k: v for k, v in specs[0].items() if k not in ("hparams", "seed") and k not in varying}
        rows = []
        for r, d in zip(self.runs, specs):
            row = [dict(r.spec.hparams), int(r.spec.seed), r.record_path]
            rows.append(row + [{k: d[k] for k in sorted(varying)}] if varying else row)
        return {"id": self.id, "common": common, "runs": rows}

    @staticmethod
    def specs_from_dict(d: Mapping[str, Any]) -> list[tuple[RunSpec, str]]:
        """``(spec, record path)`` of every run of a :meth:`to_dict` payload."""
        out = []
        for hp, seed, path, *per_run in d["runs"]:
            spec = RunSpec.from_dict({**d["common"], **(per_run[0] if per_run else {}), "hparams": hp, "seed": seed})
            out.append((spec, path))
        return out


def max_runs(config: Mapping[str, Any]) -> int:
    """The config's ``sweep_max_runs`` (runs per job), default :data:`DEFAULT_MAX_RUNS`."""
    value = int(config.get("sweep_max_runs") or DEFAULT_MAX_RUNS)
    if value < 1:
        raise ValueError(f"sweep_max_runs must be >= 1, got {value}")
    return value


def job_chunks(members: Sequence[Member], config: Mapping[str, Any]) -> list[tuple[Member, ...]]:
    """``members`` cut, in order, into jobs of at most :func:`max_runs` runs each (the last may be shorter).

    The one chunking of the workflow's sweeps (:func:`plan_sweeps`) and the audit's
    (:func:`labeldp.audit.plan.audit_sweeps`): a job's runs, and so its id, follow from it.
    """
    cap = max_runs(config)
    return [tuple(members[start : start + cap]) for start in range(0, len(members), cap)]


def marker_dir(config: Mapping[str, Any]) -> str:
    return os.path.join(str(config["results_dir"]), ".sweeps")


GROUPINGS = ("cell", "method", "data")
"""Values of the config's ``sweep_grouping`` (module docstring)."""


def grouping(config: Mapping[str, Any]) -> str:
    """The config's ``sweep_grouping`` (default ``cell``).

    Raises:
      ValueError: not one of :data:`GROUPINGS`.
    """
    value = config.get("sweep_grouping") or "cell"
    if value not in GROUPINGS:
        raise ValueError(f"sweep_grouping must be one of {list(GROUPINGS)}, got {value!r}")
    return value


def _options_json(options: Mapping[str, Any], *, memo: dict[int, tuple[Any, str]]) -> str:
    """``options`` as sorted JSON; ``memo`` keeps each options object's text (a planner shares one object
    among a cell's runs, so a full reproduction's 10^6 runs serialise a few thousand)."""
    hit = memo.get(id(options))
    if hit is None or hit[0] is not options:  # the memo holds the object, so its id is not reused meanwhile
        hit = memo[id(options)] = (options, json.dumps(options, sort_keys=True, default=str))
    return hit[1]


def _group_key(run: PlannedRun, *, by: str = "cell", memo: dict[int, tuple[Any, str]] | None = None) -> tuple:
    s = run.spec
    if by == "data":
        return (run.prepared_path, s.dataset, s.profile)
    if by == "method":
        return (run.prepared_path, s.dataset, s.method, s.profile)
    return (
        run.prepared_path,
        s.dataset,
        s.method,
        s.variant,
        repr(s.epsilon),
        repr(s.delta),
        _options_json(s.options, memo={} if memo is None else memo),
        s.accountant,
        s.profile,
        s.sampling,
        s.calibration_relation,
    )


def _sweep_prefix(runs: tuple[PlannedRun, ...]) -> str:
    """The record path's directories above the grid point (``<dataset>/<method>/<variant>/eps<e>``), with
    ``methods``, ``variants`` and ``epsmany`` where the runs differ in them."""
    parts = [cell_path(r.spec).split("/") for r in runs]
    first = parts[0]
    if any(p[0] != first[0] for p in parts):  # the same dataset by construction
        raise ValueError("a sweep's runs must share their dataset")
    method = first[1] if all(p[1] == first[1] for p in parts) else "methods"
    variant = first[2] if all(p[2] == first[2] for p in parts) else "variants"
    eps = first[3] if all(p[3] == first[3] for p in parts) else "epsmany"
    return "/".join([first[0], method, variant, eps])


def sweep_of_runs(
    runs: Iterable[PlannedRun], *, config: Mapping[str, Any], tables: tuple[str, ...] | None = None
) -> Sweep:
    """The sweep of ``runs`` (all in one group; the caller cuts them to size); ``tables``: the tables that
    need them (part of the id when given)."""
    runs = tuple(runs)
    if not runs:
        raise ValueError("a sweep needs at least one run")
    by = grouping(config)
    key = _group_key(runs[0], by=by)
    if any(_group_key(r, by=by) != key for r in runs[1:]):
        raise ValueError(
            {
                "cell": "a sweep's runs must share everything but grid point and seed",
                "method": "a sweep's runs must share their prepared data, dataset, method and profile",
                "data": "a sweep's runs must share their prepared data, dataset and profile",
            }[by]
        )
    return _grouped_sweep(runs, key=key, config=config, tables=tables)


def _grouped_sweep(
    runs: tuple[PlannedRun, ...], *, key: tuple, config: Mapping[str, Any], tables: tuple[str, ...] | None
) -> Sweep:
    """:func:`sweep_of_runs` for runs already grouped by ``key`` (their :func:`_group_key`)."""
    ident = [key, [r.record_path for r in runs]] + ([list(tables)] if tables is not None else [])
    digest = hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:12]
    sid = f"{_sweep_prefix(runs)}/sweep-{digest}"
    return Sweep(
        id=sid,
        runs=runs,
        prepared_path=runs[0].prepared_path,
        marker_path=os.path.join(marker_dir(config), f"{sid}.json"),
    )


def tables_of_records(by_table: Mapping[str, Iterable[PlannedRun]]) -> dict[str, tuple[str, ...]]:
    """``{record path: the sorted names of the tables that need the run}`` from :func:`labeldp.plan.runs_by_table`."""
    out: dict[str, set[str]] = {}
    for table, runs in by_table.items():
        for r in runs:
            out.setdefault(r.record_path, set()).add(table)
    return {path: tuple(sorted(names)) for path, names in out.items()}


def plan_sweeps(
    config: Mapping[str, Any],
    runs: Iterable[PlannedRun],
    *,
    tables_of: Mapping[str, tuple[str, ...]] | None = None,
    apart: Mapping[str, str] | None = None,
) -> dict[str, Sweep]:
    """Groups planned runs into sweeps of at most :func:`max_runs` runs, keyed by marker path.

    Args:
      config: the workflow config (``results_dir``, ``sweep_max_runs``).
      runs: planned runs, each once (:func:`labeldp.plan.all_runs`'s values).
      tables_of: :func:`tables_of_records`: when given, runs are also grouped by the set of tables that need
        them, so a target's sweeps hold only runs its tables need (a dated config's table that shares a cell
        with another table on a different grid never makes that table's extra runs part of its jobs).
      apart: ``{record path: label}``: runs with a label are grouped by it too (a successive-halving table's
        stage-2 runs, one sweep per grid point: :func:`labeldp.halving.stage_two_points`).

    Returns:
      ``{marker path: Sweep}`` in plan order.
    """
    by = grouping(config)
    groups: dict[tuple, list[PlannedRun]] = {}
    run_keys: dict[tuple, tuple] = {}  # the grouping key -> the runs' own _group_key
    memo: dict[int, tuple[Any, str]] = {}
    for r in runs:
        own = _group_key(r, by=by, memo=memo)
        key = own
        if tables_of is not None and by == "cell":
            key = (*key, tables_of.get(r.record_path, ()))
        if apart and r.record_path in apart:
            key = (*key, ("apart", apart[r.record_path]))
        groups.setdefault(key, []).append(r)
        run_keys.setdefault(key, own)
    out: dict[str, Sweep] = {}
    for key, members in groups.items():
        if by in ("method", "data"):
            # a method's (or data file's) runs come from many tables: order them and name their tables so the ids do not
            # depend on the order the config lists its tables in (Snakemake's merged config and a test's differ)
            members = sorted(members, key=lambda r: r.record_path)
            tables = None
            if tables_of is not None:
                tables = tuple(sorted({t for r in members for t in tables_of.get(r.record_path, ())}))
        else:
            tables = tables_of.get(members[0].record_path, ()) if tables_of is not None else None
        for chunk in job_chunks(members, config):
            sw = _grouped_sweep(chunk, key=run_keys[key], config=config, tables=tables)
            out[sw.marker_path] = sw
    return out


def workflow_sweeps(
    config: Mapping[str, Any], by_table: Mapping[str, Iterable[PlannedRun]] | None = None
) -> dict[str, Sweep]:
    """The workflow's sweeps: every table's runs (:func:`labeldp.plan.runs_by_table`, or ``by_table`` when the
    caller has it), grouped by the tables that need them (what the Snakefile plans); a successive-halving
    table's stage-2 runs are one sweep per grid point (:func:`labeldp.halving.stage_two_points`)."""
    by_table = runs_by_table(config) if by_table is None else by_table
    tables_of = tables_of_records(by_table)
    # a stage-2 run is its grid point's own sweep even where a full-grid table (e.g. the base config's, sharing
    # results_dir) needs it too: else building the halving table would train every point's every seed before its
    # checkpoint chose the points (the full-grid table then depends on the per-point sweeps; same runs, more jobs)
    return plan_sweeps(config, all_runs(config, by_table).values(), tables_of=tables_of, apart=stage_two_points(config))


def sweep_of_record(sweeps: Mapping[str, Sweep]) -> dict[str, str]:
    """``{record path: marker path}`` for every run of ``sweeps``."""
    return {r.record_path: marker for marker, sw in sweeps.items() for r in sw.runs}
