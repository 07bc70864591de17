"""The audit's planned runs: which (method, eps, seed) a config audits, and where each goes.

The config's ``audit`` block names a table whose columns, grid and method variants the audited
runs take (``audit.table``; its grid must have one point per column, e.g. ``grid: quick``), the
columns and epsilons to audit, the seeds, the training subset and the number of canaries.
Each audited run is the table's run of that cell, trained on the first ``train_subset``
training examples of which ``num_canaries`` are label canaries (:mod:`labeldp.audit.runner`).
The runs of one prepared data file are one job (:func:`audit_sweeps`, :mod:`labeldp.audit.sweep`):
one process loads the data, imports the methods and compiles their shared programs once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from labeldp import plan
from labeldp.methods import registry
from labeldp.methods.base import RunSpec, runner_heldout_selection
from labeldp.plan import ConfigError, PlannedRun
from labeldp.sweeps import Sweep, job_chunks

__all__ = ["AuditRun", "audit_runs", "audit_dir", "audit_sweeps", "AUDIT_SETTINGS"]

#: The ``audit`` keys every audited run of a job is trained with (the job's command-line arguments).
AUDIT_SETTINGS = ("train_subset", "num_canaries", "confidence")


@dataclasses.dataclass(frozen=True)
class AuditRun:
    """One audited training run: the table's run spec, its record and its data."""

    spec: RunSpec
    column: str
    record_path: str
    prepared_path: str


def audit_dir(config: Mapping[str, Any], kind: str) -> Path:
    """``<results_dir>/audit`` (kind='results') or ``<reports_dir>/audit`` (kind='reports')."""
    return Path(config[f"{kind}_dir"]) / "audit"


def audit_runs(config: Mapping[str, Any]) -> list[AuditRun]:
    """Every audited run of ``config['audit']`` (empty when the config has no audit block).

    Raises:
      ConfigError: an unknown table or column, an unimplemented method, or a column whose grid
        has more than one point (the audit trains one configuration per cell).
    """
    acfg = config.get("audit")
    if not acfg:
        return []
    table = acfg["table"]
    if 2 * int(acfg["num_canaries"]) * float(config["delta"]) > 1:
        raise ConfigError(
            f"audit.num_canaries: 2 x {acfg['num_canaries']} canaries x delta {config['delta']} > 1, where "
            "the one-run bound is not monotone in eps; use fewer canaries"
        )
    if table not in config["tables"]:
        raise ConfigError(f"audit.table: {table!r} is not a table of this config; known: {sorted(config['tables'])}")
    cols = {c.id: c for c in plan.columns(config["tables"][table])}
    out = []
    for cid in acfg["columns"]:
        if cid not in cols:
            raise ConfigError(f"audit.columns: {cid!r} is not a column of {table}; known: {sorted(cols)}")
        col = cols[cid]
        ok, why = plan.cell_status(config, table, col)
        if not ok:
            raise ConfigError(f"audit.columns: {cid!r} cannot run here ({why}); remove it from audit.columns")
        for eps in acfg["epsilons"]:
            runs = plan.cell_runs(config, table, col, float(eps))
            points = {plan.hp_id(r.spec.hparams) for r in runs}
            if len(points) != 1:
                raise ConfigError(
                    f"audit: column {cid!r} of {table} has {len(points)} grid points in grid "
                    f"{config['grid']!r}; the audit trains one configuration per cell: use a one-point grid "
                    "(e.g. --configfile workflow/config/audit.yaml, grid: quick)"
                )
            spec0 = runs[0].spec
            selecting = runner_heldout_selection(
                selection_by_runner=bool(registry.declared(col.method, "HELDOUT_SELECTION_BY_RUNNER", False)),
                options=spec0.options,
            )
            if selecting:
                raise ConfigError(
                    f"audit.columns: {cid!r} of {table} selects on held-out rows (variant {col.variant!r} of "
                    f"{col.method} sets {selecting}); the held-out score and the label-canary audit both read the "
                    f"model at data.audit_inputs: remove {cid!r} from audit.columns, or audit a column whose variant "
                    f"does not set {selecting}"
                )
            for seed in acfg["seeds"]:
                spec = dataclasses.replace(spec0, seed=int(seed))
                path = audit_dir(config, "results") / f"{plan.run_id(spec)}.json"
                out.append(
                    AuditRun(
                        spec=spec,
                        column=cid,
                        record_path=str(path),
                        prepared_path=plan.prepared_path(config, spec.dataset),
                    )
                )
    return out


def audit_sweeps(config: Mapping[str, Any]) -> dict[str, Sweep]:
    """The audit's jobs: its runs grouped by prepared data file, at most ``sweep_max_runs`` runs each.

    Each job (the ``audit_sweep`` rule; :mod:`labeldp.audit.sweep`) trains its runs without a record
    in one process and then writes its marker, ``<results_dir>/audit/.sweeps/<id>.json``; the id is
    ``<dataset>/audit-<hash>``, the hash covering the data file, the runs' records and
    :data:`AUDIT_SETTINGS`, so a changed audit gives new jobs; their finished records are never redone
    (records do not depend on those settings' values in their paths: a job whose every record exists only
    writes its marker).

    Returns:
      ``{marker path: Sweep}``, empty when the config has no audit block.
    """
    runs = audit_runs(config)
    if not runs:
        return {}
    settings = [config["audit"][k] for k in AUDIT_SETTINGS]
    by_data: dict[str, list[AuditRun]] = {}
    for r in runs:
        by_data.setdefault(r.prepared_path, []).append(r)
    out: dict[str, Sweep] = {}
    for data_path, members in by_data.items():
        members = sorted(members, key=lambda r: r.record_path)
        for audit_chunk in job_chunks(members, config):
            chunk = tuple(
                PlannedRun(spec=r.spec, record_path=r.record_path, prepared_path=r.prepared_path) for r in audit_chunk
            )
            ident = [data_path, [r.record_path for r in chunk], settings]
            digest = hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:12]
            sid = f"{chunk[0].spec.dataset}/audit-{digest}"
            marker = str(audit_dir(config, "results") / ".sweeps" / f"{sid}.json")
            out[marker] = Sweep(id=sid, runs=chunk, prepared_path=data_path, marker_path=marker)
    return out
