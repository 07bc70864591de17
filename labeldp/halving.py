"""Successive halving over a table's grid: a documented sub-grid where the full search does not fit.

000 D.2 selects each cell as the best mean over its whole grid (Table 8) with three seeds per
configuration. A table whose config says ``search: {successive_halving: {keep: K}}`` searches less, in
two stages per cell (issue 29):

1. every grid point with the table's first seed;
2. the ``K`` points with the best first-seed score (the column's selection metric: the paper's test
   accuracy, or a held-out one) with every other seed.

The cell is then the best mean over those ``K`` configurations, each with all its seeds, exactly as
:mod:`labeldp.report.tables` selects over a full grid. The table header says what was searched, and the
cell's search eps counts every run of both stages. Snakemake runs stage 2 after a checkpoint (rule
``halving_select``, ``workflow/rules/aggregate.smk``) that writes the kept points with
``python -m labeldp.halving``; the tables recompute them from the same records with the same function.
Every stage-2 point's extra seeds form a sweep of their own, so only the kept ones are trained.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from typing import Any, Mapping, Sequence

from labeldp import records
from labeldp.atomic_io import write_text_atomic
from labeldp.plan import (
    Column,
    ConfigError,
    PlannedRun,
    cell_runs,
    cell_status,
    columns,
    format_eps,
    hp_id,
    nonprivate_column,
    table_epsilons,
    table_seeds,
)
from labeldp.report.metrics import DERIVED_METRICS, LOWER_IS_BETTER, record_metric, selection_metric

__all__ = [
    "halving_keep",
    "selection_metric",
    "HalvingCell",
    "search_cell",
    "kept_points",
    "stage_two_points",
    "halving_cells",
    "selection_path",
    "description",
    "searched_runs",
    "split_stages",
]


def halving_keep(tcfg: Mapping[str, Any]) -> int | None:
    """``K`` of a table's ``search: {successive_halving: {keep: K}}``, or None for a full grid search.

    Raises:
      ConfigError: the block is malformed (names the key and the fix).
    """
    search = tcfg.get("search")
    if search is None:
        return None
    if not isinstance(search, Mapping) or set(search) != {"successive_halving"}:
        raise ConfigError(f"a table's search must be {{successive_halving: {{keep: K}}}}, got {search!r}")
    keep = (search["successive_halving"] or {}).get("keep")
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ConfigError(f"search.successive_halving.keep must be an integer >= 1, got {keep!r}")
    return keep


def _column_cfg(tcfg: Mapping[str, Any], column_id: str) -> Mapping[str, Any] | None:
    return next((c for c in tcfg.get("columns", []) if c["id"] == column_id), None)


@dataclasses.dataclass(frozen=True)
class HalvingCell:
    """One cell's successive-halving search.

    Attributes:
      planned: the runs the search trains: stage 1, and stage 2 of the kept points once they are known.
      candidates: the runs the cell's best mean is chosen from: every seed of the kept points, or, while
        stage 1 lacks records, every seed of every point (so a first-seed mean reads as a partial one).
      kept: the kept points' hyper-parameter ids, best first (None while stage 1 lacks records).
      first_seed: the seed of stage 1.
    """

    planned: tuple[PlannedRun, ...]
    candidates: tuple[PlannedRun, ...]
    kept: tuple[str, ...] | None
    first_seed: int

    def admits(self, run: PlannedRun) -> bool:
        """Whether a candidate ``run``'s record may enter a mean the cell is chosen from: any once the checkpoint
        has kept its points; before it, a first-seed one only (other seeds can have records another table
        trained; the cell is then its stage-1 means, partial by construction)."""
        return self.kept is not None or run.spec.seed == self.first_seed


def kept_points(first: Sequence[PlannedRun], *, keep: int, metric: str) -> tuple[str, ...] | None:
    """The ``keep`` grid points with the best stage-1 score, best first; None while a record is missing.

    A diverged run (``metrics.diverged`` or a non-finite score) ranks last; ties keep plan order.

    Args:
      first: the cell's stage-1 runs (one per grid point).
      keep: ``K``.
      metric: the selection metric (higher is better unless in ``LOWER_IS_BETTER``).

    Raises:
      ConfigError: ``metric`` is derived from another cell (not a record's own metric).
      ValueError: a stopped metric (:mod:`labeldp.heldout_stopping`) of a record without its curves.
    """
    if metric in DERIVED_METRICS:
        raise ConfigError(f"successive halving selects on a record's own metric; {metric!r} is derived")
    scored = []
    for order, run in enumerate(first):
        if not os.path.exists(run.record_path):
            return None
        rec = records.read_record(run.record_path)
        value = record_metric(rec, metric=metric)
        bad = bool(rec["metrics"].get("diverged")) or not math.isfinite(value)
        score = -math.inf if bad else (-value if metric in LOWER_IS_BETTER else value)
        scored.append((-score, order, hp_id(run.spec.hparams)))
    return tuple(hp for _, _, hp in sorted(scored)[:keep])


def _split(runs: Sequence[PlannedRun], first_seed: int) -> tuple[list[PlannedRun], dict[str, list[PlannedRun]]]:
    first = [r for r in runs if r.spec.seed == first_seed]
    rest: dict[str, list[PlannedRun]] = {}
    for r in runs:
        if r.spec.seed != first_seed:
            rest.setdefault(hp_id(r.spec.hparams), []).append(r)
    return first, rest


def split_stages(config: Mapping[str, Any], table: str, runs: Sequence[PlannedRun]):
    """``(stage-1 runs, {point: stage-2 runs})`` of a cell of ``table`` whose full grid is ``runs``."""
    return _split(runs, table_seeds(config, table)[0])


def search_cell(
    config: Mapping[str, Any], table: str, runs: Sequence[PlannedRun], *, metric: str
) -> HalvingCell | None:
    """The successive-halving search of a cell whose full grid is ``runs`` (:func:`labeldp.plan.cell_runs`),
    or None where the table searches its full grid."""
    keep = halving_keep(config["tables"][table])
    if keep is None:
        return None
    first_seed = table_seeds(config, table)[0]
    first, rest = _split(runs, first_seed)
    kept = kept_points(first, keep=keep, metric=metric)
    if kept is None:
        return HalvingCell(planned=tuple(first), candidates=tuple(runs), kept=None, first_seed=first_seed)
    kept_set = set(kept)
    second = [r for hp in kept for r in rest.get(hp, [])]
    candidates = [r for r in runs if hp_id(r.spec.hparams) in kept_set]
    return HalvingCell(planned=tuple(first + second), candidates=tuple(candidates), kept=kept, first_seed=first_seed)


def halving_cells(config: Mapping[str, Any], table: str) -> list[tuple[Column, float, list[PlannedRun]]]:
    """``(column, eps, full-grid runs)`` of every runnable cell of a successive-halving table (its
    non-private column at eps = inf too); empty for a full-grid table."""
    tcfg = config["tables"][table]
    if halving_keep(tcfg) is None:
        return []
    out = []
    for col in columns(tcfg):
        if cell_status(config, table, col)[0]:
            out.extend((col, eps, cell_runs(config, table, col, eps)) for eps in table_epsilons(tcfg))
    np_col = nonprivate_column(tcfg)
    if np_col is not None and cell_status(config, table, np_col)[0]:
        out.append((np_col, math.inf, cell_runs(config, table, np_col, math.inf)))
    return out


def stage_two_points(config: Mapping[str, Any]) -> dict[str, str]:
    """``{record path: grid point id}`` of every stage-2 run of every successive-halving table: the sweeps
    keep each point's extra seeds apart (:func:`labeldp.sweeps.plan_sweeps`), so a job trains one kept point."""
    out: dict[str, str] = {}
    for table in config["tables"]:
        for _, _, runs in halving_cells(config, table):
            first_seed = table_seeds(config, table)[0]
            for r in runs:
                if r.spec.seed != first_seed:
                    out[r.record_path] = hp_id(r.spec.hparams)
    return out


def stage_runs(
    config: Mapping[str, Any], table: str, column_id: str, eps: float
) -> tuple[Column, list[PlannedRun], dict[str, list[PlannedRun]]]:
    """``(column, stage-1 runs, {point: stage-2 runs})`` of one cell of a successive-halving table."""
    for col, e, runs in halving_cells(config, table):
        if col.id == column_id and format_eps(e) == format_eps(eps):
            first, rest = _split(runs, table_seeds(config, table)[0])
            return col, first, rest
    raise ConfigError(f"table {table!r} has no successive-halving cell for column {column_id!r} at eps {eps}")


def selection_path(config: Mapping[str, Any], table: str, column_id: str, eps: float) -> str:
    """Where the checkpoint writes a cell's kept points: ``<results_dir>/.halving/<table>/<column>/eps<e>.json``."""
    return os.path.join(str(config["results_dir"]), ".halving", table, column_id, f"eps{format_eps(eps)}.json")


def searched_runs(config: Mapping[str, Any], table: str) -> list[PlannedRun]:
    """The runs a successive-halving table trains (for cost previews): per cell, stage 1 and the kept points'
    other seeds; where stage 1 lacks records, the first ``K`` points' other seeds stand in for the unknown ones."""
    tcfg = config["tables"][table]
    keep = halving_keep(tcfg)
    out: list[PlannedRun] = []
    for col, _, runs in halving_cells(config, table):
        search = search_cell(config, table, runs, metric=selection_metric(tcfg, _column_cfg(tcfg, col.id)))
        if search.kept is not None:
            out.extend(search.planned)
            continue
        first, rest = _split(runs, search.first_seed)
        out.extend(first)
        out.extend(r for hp in list(rest)[:keep] for r in rest[hp])
    return out


def description(config: Mapping[str, Any], table: str) -> str | None:
    """The table header's line on what was searched (None for a full grid search)."""
    tcfg = config["tables"][table]
    keep = halving_keep(tcfg)
    if keep is None:
        return None
    seeds = table_seeds(config, table)
    return (
        f"searched by successive halving (a sub-grid): every grid point with seed {seeds[0]}, then the {keep} best "
        f"by that seed's selection metric with seeds {', '.join(map(str, seeds))}; a cell is the best mean over "
        f"those {keep} (the paper searched every point with every seed); its search eps counts both stages"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m labeldp.halving --config-json CFG --table T --column C --eps E --out PATH``: writes the
    cell's kept points (stage 1 must be complete)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config-json", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--column", required=True)
    ap.add_argument("--eps", required=True, type=float)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    config = json.loads(a.config_json)
    tcfg = config["tables"][a.table]
    _, first, _ = stage_runs(config, a.table, a.column, a.eps)
    metric = selection_metric(tcfg, _column_cfg(tcfg, a.column))
    kept = kept_points(first, keep=halving_keep(tcfg), metric=metric)
    if kept is None:
        missing = [r.record_path for r in first if not os.path.exists(r.record_path)]
        raise SystemExit(
            f"error: stage 1 of {a.table}/{a.column}/eps{a.eps} lacks {len(missing)} records: {missing[:3]}"
        )
    payload = {"table": a.table, "column": a.column, "epsilon": a.eps, "metric": metric, "kept": list(kept)}
    write_text_atomic(a.out, json.dumps(payload, indent=1) + "\n")
    print(f"{a.table}/{a.column}/eps{format_eps(a.eps)}: kept {', '.join(kept)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
