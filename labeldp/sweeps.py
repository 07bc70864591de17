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

The sweep id is ``<dataset>/<method>/<variant>[-shuffle][-labelsub]/eps<eps>/<hash>`` where the
hash covers the common spec and the job's list of runs, so a changed grid gives new jobs (whose
already-finished runs are skipped, not redone) and never a stale marker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any, Iterable, Mapping

from labeldp.methods.base import RunSpec
from labeldp.plan import PlannedRun, run_id

__all__ = ["Sweep", "DEFAULT_MAX_RUNS", "plan_sweeps", "sweep_of_runs", "max_runs", "marker_dir"]

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
        """The job's arguments, compact: the common spec once, then (hparams, seed, record) per run."""
        common = {k: v for k, v in self.runs[0].spec.to_dict().items() if k not in ("hparams", "seed")}
        return {"id": self.id, "common": common,
                "runs": [[dict(r.spec.hparams), int(r.spec.seed), r.record_path] for r in self.runs]}

    @staticmethod
    def specs_from_dict(d: Mapping[str, Any]) -> list[tuple[RunSpec, str]]:
        """``(spec, record path)`` of every run of a :meth:`to_dict` payload."""
        return [(RunSpec.from_dict({**d["common"], "hparams": hp, "seed": seed}), path) for hp, seed, path in d["runs"]]


def max_runs(config: Mapping[str, Any]) -> int:
    """The config's ``sweep_max_runs`` (runs per job), default :data:`DEFAULT_MAX_RUNS`."""
    value = int(config.get("sweep_max_runs") or DEFAULT_MAX_RUNS)
    if value < 1:
        raise ValueError(f"sweep_max_runs must be >= 1, got {value}")
    return value


def marker_dir(config: Mapping[str, Any]) -> str:
    return os.path.join(str(config["results_dir"]), ".sweeps")


def _group_key(run: PlannedRun) -> tuple:
    s = run.spec
    return (run.prepared_path, s.dataset, s.method, s.variant, repr(s.epsilon), repr(s.delta),
            json.dumps(s.options, sort_keys=True, default=str), s.accountant, s.profile, s.sampling,
            s.calibration_relation)


def _sweep_prefix(run: PlannedRun) -> str:
    """The record path's directories above the grid point (``<dataset>/<method>/<variant>/eps<e>``)."""
    return run_id(run.spec).rsplit("/", 2)[0]


def sweep_of_runs(runs: Iterable[PlannedRun], *, config: Mapping[str, Any]) -> Sweep:
    """The sweep of ``runs`` (all in one group; the caller cuts them to size)."""
    runs = tuple(runs)
    if not runs:
        raise ValueError("a sweep needs at least one run")
    key = _group_key(runs[0])
    if any(_group_key(r) != key for r in runs[1:]):
        raise ValueError("a sweep's runs must share everything but grid point and seed")
    digest = hashlib.sha256(json.dumps([key, [r.record_path for r in runs]]).encode()).hexdigest()[:12]
    sid = f"{_sweep_prefix(runs[0])}/sweep-{digest}"
    return Sweep(id=sid, runs=runs, prepared_path=runs[0].prepared_path,
                 marker_path=os.path.join(marker_dir(config), f"{sid}.json"))


def plan_sweeps(config: Mapping[str, Any], runs: Iterable[PlannedRun]) -> dict[str, Sweep]:
    """Groups planned runs into sweeps of at most :func:`max_runs` runs, keyed by marker path.

    Args:
      config: the workflow config (``results_dir``, ``sweep_max_runs``).
      runs: planned runs, each once (:func:`labeldp.plan.all_runs`'s values).

    Returns:
      ``{marker path: Sweep}`` in plan order.
    """
    cap = max_runs(config)
    groups: dict[tuple, list[PlannedRun]] = {}
    for r in runs:
        groups.setdefault(_group_key(r), []).append(r)
    out: dict[str, Sweep] = {}
    for members in groups.values():
        for start in range(0, len(members), cap):
            sw = sweep_of_runs(members[start:start + cap], config=config)
            out[sw.marker_path] = sw
    return out


def sweep_of_record(sweeps: Mapping[str, Sweep]) -> dict[str, str]:
    """``{record path: marker path}`` for every run of ``sweeps``."""
    return {r.record_path: marker for marker, sw in sweeps.items() for r in sw.runs}
