"""The reproduction status: every published cell of 000's tables beside the best complete result the committed
tables hold for it (one row per cell with its evidence, and the counts).

A dated report's scorecard scores its own tables. A user asking "does the suite reproduce 000 Table 5a's RR at
eps 2?" needs the answer across reports: the cell may have been searched on a GPU in one report and probed with
another optimiser in a second. This module builds that view (issue 29's measure of progress) from the tidy table
CSVs only (each built only from result records and the published values):

- The cells: every published cell of the chosen tables (default 000's Tables 2, 3, 5a and 14) whose value is above
  ``chance_pct`` (an accuracy at chance says nothing of a method); a variant ending in ``reference_only`` (000 Table
  3's "w/ AMP" columns, whose accounting the suite cannot give) is listed apart, never scored
  (:mod:`labeldp.report.published_cells`).
- The evidence of a cell: the rows of any source CSV with the same paper table, dataset, published method and
  variant (tidy ``paper_method`` / ``paper_variant``) and eps, under the paper's selection (tidy ``selection``:
  the configuration with the best test mean, 000 D.2), run in full (every planned run and seed, at least
  ``min_seeds`` seeds), valid accounting, not reference-only, not a validation column, official data in full, on
  the paper's metric, and (for the DP-SGD family) noise calibrated under the paper's neighbouring relation
  (``calibration_relation``, default add-or-remove; a label-DP-exact table calibrated under label substitution is
  another cell).
- The cell's value: the best mean among the rows of tables their report scores (tidy ``scored``: the report's
  protocol, e.g. Table 8's grid searched); the best row of the other tables (experiments: another optimiser, a
  setting chosen on one seed) is shown beside it, never counted. Source table and configuration are printed.
- Within tolerance: ``|best - paper| <= tolerance_points`` (strict: the std is shown, never used to pass).
- A cell outside with an experiment within tolerance: counted as reached by an experiment only where the experiment's
  mean is above the scored best (a best-mean selection over both would pick it); at or below it (the paper's value
  between a worse and a better configuration) it is counted apart (``experiment_below_scored``).
- Why a cell is outside: ``explanations`` maps a cell key (``eps*`` for every eps of the method) to a sentence and
  the report section with the experiment; a cell outside without one says so.

Usage: ``python -m labeldp.report.reproduction_status --config-json '<json>' --reference-dir D --out-dir R <csv...>``
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from labeldp.report.outputs import csv_float
from labeldp.report.published_cells import CELL_KEY_FIELDS, PaperCell, cell_key, paper_cells

__all__ = ["DEFAULTS", "REQUIRED_FIELDS", "Status", "build_status", "summarise"]

#: The config block ``reproduction_status``'s defaults.
DEFAULTS = {
    "tables": ["2", "3", "5a", "14"],
    "metric": "test_accuracy_pct",
    "chance_pct": 15.0,
    "min_seeds": 3,
    "tolerance_points": 2.0,
    # 000's neighbouring relation (its Section 3.4): a DP-SGD-family cell calibrated under another is not its cell
    "calibration_relation": "add_or_remove",
}

#: Fields every tidy table CSV has had (a CSV without them, e.g. a scorecard's, is no table: skipped).
TIDY_FIELDS = ("table", "paper_table", "column", "epsilon", "status", "mean", "n_seeds", "is_best")
#: Tidy CSV fields a source must have (a CSV built before them is named, with the fix, instead of being read).
REQUIRED_FIELDS = ("paper_method", "paper_variant", "selection", "column_metric", "scored", "validation", "data_source")


def _is_true(v: Any) -> bool:
    return str(v).strip().lower() == "true"


def _complete(row: Mapping[str, Any], *, min_seeds: int) -> bool:
    n_runs, planned = csv_float(row.get("n_runs")), csv_float(row.get("n_planned_runs"))
    if n_runs is not None and planned is not None and n_runs < planned:
        return False  # a partly searched grid
    return int(csv_float(row.get("n_missing_seeds")) or 0) == 0 and int(csv_float(row.get("n_seeds")) or 0) >= min_seeds


def _evidence(row: Mapping[str, Any], *, metric: str, min_seeds: int, relation: str) -> bool:
    """A row that shows the published cell under the paper's selection (scored table or experiment alike)."""
    return (
        row.get("status") == "ok"
        and (row.get("calibration_relation") or relation) == relation
        and row.get("selection") == "paper"
        and row.get("metric") == metric
        and (row.get("column_metric") or metric) == metric
        and _is_true(row.get("valid"))
        and not _is_true(row.get("reference_only"))
        and not _is_true(row.get("validation"))
        and row.get("data_source") == "official"
        and csv_float(row.get("mean")) is not None
        and _complete(row, min_seeds=min_seeds)
    )


def _source_name(path: Path) -> str:
    """``<report>/<table>`` for ``reports/<report>/tables/<table>.csv``."""
    return f"{path.parent.parent.name}/{path.stem}"


def _explanation(explanations: Mapping[str, Mapping[str, str]], cell: PaperCell) -> Mapping[str, str] | None:
    args = dict(table=cell.table, dataset=cell.dataset, method=cell.method, variant=cell.variant)
    return explanations.get(cell_key(**args, epsilon=cell.epsilon)) or explanations.get(cell_key(**args, epsilon="*"))


@dataclasses.dataclass(frozen=True)
class Status:
    """What :func:`build_status` found.

    Attributes:
      rows: one per published cell (see :func:`build_status`).
      stale: source CSVs of the chosen tables built before the fields this view needs (not read; rebuild them).
      unmatched: ``"<source>: <key>"`` for each evidence row whose published method, variant or eps is no cell of
        the reference (a column's ``ref_method`` / ``ref_variant`` to fix, or a cell the paper does not print).
      explained_within: keys of cells within the tolerance (or at chance) that an explanation still names: the
        explanation is out of date.
    """

    rows: list[dict[str, Any]]
    stale: list[str]
    unmatched: list[str]
    explained_within: list[str] = dataclasses.field(default_factory=list)


def _best(found: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return max(found, key=lambda r: float(r["mean"])) if found else None


def build_status(
    *,
    csv_paths: Sequence[Path],
    ref: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any] | None = None,
    explanations: Mapping[str, Mapping[str, str]] | None = None,
) -> Status:
    """One row per published cell, with its best complete evidence.

    A cell is scored on the tables whose report scores them (tidy ``scored``: the report's protocol tables); the
    best row of an experiment table (a setting off the paper's grid, or chosen on one seed) is shown beside it and
    never counted.

    Args:
      csv_paths: tidy table CSVs (any report's).
      ref: the published values (:func:`labeldp.report.reference.load_reference`).
      settings: the config block ``reproduction_status`` (:data:`DEFAULTS` fill what it omits).
      explanations: :func:`labeldp.report.published_cells.load_explanations`'s mapping.

    Returns:
      The :class:`Status`; a CSV of other paper tables is skipped.

    Raises:
      ValueError: an explanation whose key is no cell of the chosen tables (names the key).
    """
    s = {**DEFAULTS, **dict(settings or {})}
    tables = [str(t) for t in s["tables"]]
    tol = float(s["tolerance_points"])
    explanations = dict(explanations or {})
    cells = paper_cells(ref, tables=tables, metric=s["metric"])
    known = {
        cell_key(table=c.table, dataset=c.dataset, method=c.method, variant=c.variant, epsilon=e)
        for c in cells
        for e in (c.epsilon, "*")
    }
    unknown = sorted(set(explanations) - known)
    if unknown:
        raise ValueError(
            f"explanations name no published cell of tables {tables}: {unknown} (keys look like "
            "'5a/mnist/rr_debiased/eps2' or '3/mnist/labeldp_pro_selfspan:no_amp/eps*')"
        )
    cell_ids = {(c.table, c.dataset, c.method, c.variant, c.epsilon) for c in cells}
    by_cell: dict[tuple, list[dict[str, Any]]] = {}
    stale, unmatched, explained_within = [], [], []
    for p in map(Path, csv_paths):
        with open(p, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
        fields = reader.fieldnames or ()
        if any(f not in fields for f in TIDY_FIELDS) or not any(r.get("paper_table") in tables for r in rows):
            continue  # not a tidy table CSV (a scorecard, this view's own output), or another paper table
        if any(field not in fields for field in REQUIRED_FIELDS):
            stale.append(str(p))
            continue
        for r in rows:
            if r.get("paper_table") not in tables or not _evidence(
                r, metric=s["metric"], min_seeds=s["min_seeds"], relation=s["calibration_relation"]
            ):
                continue
            if math.isinf(float(r["epsilon"])):
                continue  # the non-private reference row: 000's tables print no such cell
            key = (r["paper_table"], r["dataset"], r["paper_method"], r["paper_variant"], float(r["epsilon"]))
            if key not in cell_ids:
                unmatched.append(
                    f"{_source_name(p)}: {cell_key(**dict(zip(CELL_KEY_FIELDS, key)))} (column {r['column']})"
                )
                continue
            by_cell.setdefault(key, []).append({**r, "source": _source_name(p)})
    out = []
    for c in cells:
        found = by_cell.get((c.table, c.dataset, c.method, c.variant, c.epsilon), [])
        best = _best([r for r in found if _is_true(r.get("scored"))])
        experiment = _best([r for r in found if not _is_true(r.get("scored"))])
        row: dict[str, Any] = {
            "paper_table": c.table,
            "dataset": c.dataset,
            "paper_method": c.method,
            "paper_variant": c.variant,
            "epsilon": f"{c.epsilon:g}",
            "paper": c.value,
            "key": cell_key(table=c.table, dataset=c.dataset, method=c.method, variant=c.variant, epsilon=c.epsilon),
            "status": "",
            "n_candidates": len(found),
            **_evidence_fields("", best, c.value),
            **_evidence_fields("experiment_", experiment, c.value),
            "experiment_within": "",
            "experiment_below_scored": "",
            "why": "",
            "section": "",
        }
        if c.reference_only:
            row["status"] = "reference only"
        elif c.value <= float(s["chance_pct"]):
            row["status"] = "at chance"
        elif best is None:
            row["status"] = "not run"
        else:
            row["status"] = "within" if row["abs_diff"] <= tol else "outside"
        if experiment is not None:
            # for a cell outside, a best-mean selection over the scored rows and the experiment's picks the experiment
            # only where its mean is above the scored best: an experiment within the tolerance at or below it (the
            # paper's value between a worse and a better configuration) is listed apart, never counted as reaching it
            within = row["experiment_abs_diff"] <= tol
            below = within and row["status"] == "outside" and row["experiment_best"] <= row["best"]
            row["experiment_within"] = within and not below
            row["experiment_below_scored"] = below
        e = _explanation(explanations, c)
        if row["status"] in ("outside", "not run"):
            row["why"], row["section"] = (e["why"], e.get("section") or "") if e else ("", "")
        elif e is not None and row["status"] in ("within", "at chance"):
            explained_within.append(row["key"])
        out.append(row)
    return Status(rows=out, stale=stale, unmatched=unmatched, explained_within=explained_within)


def _evidence_fields(prefix: str, best: Mapping[str, Any] | None, paper: float) -> dict[str, Any]:
    """The chosen row's mean, std, seeds, |diff|, source table, column, variant and configuration."""
    if best is None:
        names = ("best", "std", "n_seeds", "n_search_runs", "abs_diff", "source", "column", "variant", "best_hparams")
        return {prefix + n: None if n in ("best", "std", "n_seeds", "n_search_runs", "abs_diff") else "" for n in names}
    mean = float(best["mean"])
    return {
        prefix + "best": mean,
        prefix + "std": csv_float(best.get("std")),
        prefix + "n_seeds": int(float(best["n_seeds"])),
        # the runs the cell's search planned (a quick point: one configuration x its seeds; 000 Table 8's grid: 108)
        prefix + "n_search_runs": int(csv_float(best.get("n_planned_runs")) or csv_float(best.get("n_runs")) or 0),
        prefix + "abs_diff": abs(mean - paper),
        prefix + "source": best["source"],
        prefix + "column": best["column"],
        prefix + "variant": best["variant"],
        prefix + "best_hparams": best.get("best_hparams") or "",
    }


def summarise(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per-table counts of :func:`build_status`'s rows.

    Args:
      rows: :attr:`Status.rows`.

    Returns:
      One row per paper table and one ``all``: the scored cells (above chance, computable), those with results,
      within tolerance, outside, not run, outside or not run with an experiment table within tolerance whose mean
      is above the scored best or that has no scored row (a best-mean selection including it would pick it),
      outside with an experiment within tolerance only at or below the scored best (listed apart: no selection by
      best mean reaches the paper through it), and those outside or not run that no explanation covers; the cells
      at chance and the reference-only ones.
    """
    out = []
    tables = list(dict.fromkeys(r["paper_table"] for r in rows))
    for t in [*tables, "all"]:
        rs = [r for r in rows if t in ("all", r["paper_table"])]
        scored = [r for r in rs if r["status"] in ("within", "outside", "not run")]
        missed = [r for r in scored if r["status"] in ("outside", "not run")]
        out.append(
            {
                "paper_table": t,
                "cells": len(scored),
                "with_results": sum(r["status"] in ("within", "outside") for r in scored),
                "within": sum(r["status"] == "within" for r in scored),
                "outside": sum(r["status"] == "outside" for r in scored),
                "not_run": sum(r["status"] == "not run" for r in scored),
                "experiment_within": sum(r["experiment_within"] is True for r in missed),
                "experiment_below_scored": sum(r["experiment_below_scored"] is True for r in missed),
                "unexplained": sum(not r["why"] for r in missed),
                "at_chance": sum(r["status"] == "at chance" for r in rs),
                "reference_only": sum(r["status"] == "reference only" for r in rs),
            }
        )
    return out
