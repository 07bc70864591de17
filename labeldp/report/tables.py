"""Builds a paper table (or figure) only from result records and the published values.

Written by the ``table`` / ``figure`` rules through :mod:`labeldp.report.build`::

    python -m labeldp.report.build --table table5_mnist --config-json '<config>' --out-dir reports/tables

Cell semantics:
- each column x epsilon cell collects the planned runs (grid points x seeds); per grid point
  the mean and std over seeds; the cell is the grid point with the best mean (000 D.2; the
  lowest for an error metric, :data:`LOWER_IS_BETTER`) among those with all their planned seeds
  and no diverged seed, or, only when there is no such grid point, among the partial ones (the
  cell then says "(k of n seeds)", is never marked the row's best, and a Delta computed from it
  says "(partial)");
- a grid point with a diverged seed (NaN / inf loss) is not eligible and is counted in the
  cell (``n_diverged``), never averaged silently;
- a cell whose method or data is not available says ``not run`` and why;
- a reference-only cell (invalid privacy accounting, e.g. SelfSpan with amplification) is
  marked ``†`` and excluded from the row's best and from the Delta columns;
- every cell shows ``regenerated (paper)``;
- a derived metric (:data:`DERIVED_METRICS`, 002's ``relative_auc_loss_pct``) is computed per
  record from its ``test_auc`` and AUC_np, the mean ``test_auc`` of the table's non-private
  cell (built first), before means, std and selection; without AUC_np every private cell is
  ``not run`` and says why, never a number.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from labeldp import records
from labeldp.plan import (
    Column,
    calibration_relation,
    cell_runs,
    cell_status,
    columns,
    hp_id,
    nonprivate_column,
    table_epsilons,
    table_relation,
)
from labeldp.report.metrics import DERIVED_METRICS, LOWER_IS_BETTER, record_metric  # noqa: F401 (re-exported)
from labeldp.halving import search_cell, selection_metric
from labeldp.report.reference import load_reference, paper_value  # noqa: F401 (re-exported)
from labeldp.report.search_cost import SearchSpend, search_spend

# Rendering lives in labeldp.report.render; re-exported here, where callers have found it.
from labeldp.report.provenance import revision_text  # noqa: F401
from labeldp.report.render import (  # noqa: F401
    NOT_RUN,
    QUOTED,
    cell_text,
    delta_text,
    header_lines,
    relation_column,
    render_figure,
    render_latex,
    render_markdown,
    tidy_rows,
    write_atomic_text,
    write_csv,
)
from labeldp.data.views import base_dataset

#: Why a private cell of a derived-metric table has no number when its non-private cell has no records.
NO_NONPRIVATE_REFERENCE = "the non-private reference (needed for the relative AUC loss) has no records"


def relative_auc_loss_pct(auc: float, auc_nonprivate: float) -> float:
    """002's relative AUC loss (%) of a model with ``auc`` against the non-private ``auc_nonprivate``."""
    return 100.0 * ((1.0 - auc) - (1.0 - auc_nonprivate)) / (1.0 - auc_nonprivate)


BASELINE_IDS = ("rr", "rr_debiased", "lp_2st", "alibi")


@dataclasses.dataclass
class Cell:
    column: str
    epsilon: float
    status: str  # "ok" | "not run" | "all diverged" | "quoted"
    reason: str = ""
    mean: float | None = None
    std: float | None = None
    n_seeds: int = 0
    n_runs: int = 0
    n_planned_runs: int = 0  # the cell's planned runs (grid points x seeds); fewer records: a partial search
    n_missing: int = 0  # planned seeds of the reported (best) configuration without a record
    n_planned_seeds: int = 0  # seeds planned for the reported configuration
    n_diverged: int = 0
    best_hparams: Mapping[str, Any] | None = None
    achieved_epsilon: float | None = None
    delta: float | None = None
    valid: bool = True
    invalid_reason: str | None = None
    paper: float | None = None
    reference_only: bool = False
    # the relation the runs' noise was calibrated under (None: not accountant-calibrated, e.g. RR)
    calibration_relation: str | None = None
    # max over the reported runs of their epsilon per relation (records' privacy.epsilon_by_relation)
    epsilon_by_relation: dict[str, float] | None = None
    # eps of releasing every run of the cell's search (labeldp.report.search_cost.search_spend): under the table's
    # relation at the cell's delta, or a label randomizer's cell's under label substitution at delta 0
    search_spend: SearchSpend | None = None  # its epsilon, relation, delta, runs and distinct label releases


# ----------------------------------------------------------------------------- cells


def _metric(record: Mapping[str, Any], metric: str, auc_nonprivate: float | None = None) -> float:
    if metric in DERIVED_METRICS:
        auc = record_metric(record, metric=DERIVED_METRICS[metric])
        return relative_auc_loss_pct(auc, auc_nonprivate) if auc_nonprivate is not None else float("nan")
    return record_metric(record, metric=metric)


def build_cell(
    config: Mapping[str, Any],
    table: str,
    col: Column,
    eps: float,
    ref: Sequence[Mapping[str, Any]],
    *,
    column_cfg: Mapping[str, Any] | None = None,
    metric: str | None = None,
    auc_nonprivate: float | None = None,
    reference_reason: str = NO_NONPRIVATE_REFERENCE,
) -> Cell:
    """One cell; ``metric`` overrides the table's (the non-private cell of a derived metric is
    built on its source metric), ``auc_nonprivate`` is the reference a derived metric needs (each
    record's ``test_auc`` becomes its relative loss before means, std and selection); without it
    the cell is ``not run`` for ``reference_reason``. A column's own ``metric`` (one of
    :data:`~labeldp.heldout_stopping.STOPPED_METRICS`) reads the table's metric at each run's honest stopping
    epoch: the cell shows it beside the paper's value of the table's metric."""
    tcfg = config["tables"][table]
    paper_metric = metric or tcfg["metric"]
    metric = metric or (column_cfg or {}).get("metric") or tcfg["metric"]
    k = (column_cfg or {}).get("ref_k")
    cell = Cell(column=col.id, epsilon=eps, status=NOT_RUN, reference_only=col.reference_only)
    cell.paper = paper_value(
        ref,
        table=tcfg["paper_table"],
        dataset=_ref_dataset(tcfg),
        method=col.ref_method,
        variant=col.ref_variant,
        epsilon=eps,
        k=k,
        metric=paper_metric,
    )
    ok, why = cell_status(config, table, col)
    if col.quoted:  # a value quoted from another paper: shown as such, never run, never the row's best
        cell.status = QUOTED
        cell.reason = why
        return cell
    if not ok:
        cell.reason = why
        return cell
    if metric in DERIVED_METRICS and auc_nonprivate is None:
        cell.reason = reference_reason
        return cell
    # the honest protocol (003's figures, a column's held-out selection: labeldp.selection) selects on the
    # noisy held-out labels, not the test set
    select_on = selection_metric(tcfg, column_cfg, default=metric)
    runs = cell_runs(config, table, col, eps)
    # a successive-halving table (labeldp.halving) trains a sub-grid and chooses among its kept points
    search = search_cell(config, table, runs, metric=select_on)
    planned = list(search.planned) if search is not None else runs
    candidates = {r.record_path for r in (search.candidates if search is not None else runs)}
    by_hp: dict[str, list[dict]] = defaultdict(list)
    planned_by_hp: dict[str, int] = defaultdict(int)
    searched: list[dict] = []  # every record of the search (its eps counts all of them)
    for r in runs:
        hp = hp_id(r.spec.hparams)
        if r.record_path in candidates:
            planned_by_hp[hp] += 1
        if not os.path.exists(r.record_path):
            continue
        rec = records.read_record(r.record_path)
        searched.append(rec)
        if r.record_path in candidates and (search is None or search.admits(r)):
            by_hp[hp].append(rec)
    missing = sum(not os.path.exists(r.record_path) for r in planned)
    cell.n_runs = len(planned) - missing
    cell.n_planned_runs = len(planned)
    if not by_hp:
        cell.reason = f"no result records ({missing} of {len(planned)} planned runs missing)"
        return cell
    best = None
    for hp, recs in by_hp.items():
        vals = [_metric(r, metric, auc_nonprivate) for r in recs]
        score = statistics.fmean(_metric(r, select_on, auc_nonprivate) for r in recs)
        div = [bool(r["metrics"].get("diverged")) or not math.isfinite(v) for r, v in zip(recs, vals)]
        cell.n_diverged += sum(div)
        if any(div):
            continue
        # a configuration with all its planned seeds outranks any partial one: the best of one
        # or two seeds is biased upwards against a mean over all of them
        mean = statistics.fmean(vals)
        key = (len(recs) == planned_by_hp[hp], -score if select_on in LOWER_IS_BETTER else score)
        if best is None or key > best[0]:
            best = (key, mean, vals, recs, hp)
    if best is None:
        cell.status = "all diverged"
        cell.reason = f"{cell.n_diverged}/{cell.n_runs} runs diverged"
        return cell
    _, mean, vals, recs, best_hp = best
    cell.n_planned_seeds = planned_by_hp[best_hp]
    cell.n_missing = planned_by_hp[best_hp] - len(recs)
    cell.status = "ok"
    cell.mean = mean
    cell.std = statistics.stdev(vals) if len(vals) > 1 else 0.0
    cell.n_seeds = len(vals)
    cell.best_hparams = recs[0]["hparams"]
    eps_vals = [records.decode_epsilon(r["privacy"]["epsilon"]) for r in recs]
    cell.achieved_epsilon = max(eps_vals)
    cell.calibration_relation = calibration_relation(config, table, col.method)
    by_rel: dict[str, float] = {}
    for rel in sorted({k for r in recs for k in (r["privacy"].get("epsilon_by_relation") or {})}):
        vals_rel = [(r["privacy"].get("epsilon_by_relation") or {}).get(rel) for r in recs]
        if all(v is not None for v in vals_rel):  # a relation some record lacks is not stated
            by_rel[rel] = max(records.decode_epsilon(v) for v in vals_rel)
    cell.epsilon_by_relation = by_rel or None
    cell.delta = max(float(r["privacy"]["delta"]) for r in recs)
    cell.valid = all(bool(r["privacy"]["valid"]) for r in recs)
    reasons = {r["privacy"].get("invalid_reason") for r in recs if not r["privacy"]["valid"]}
    cell.invalid_reason = "; ".join(sorted(x for x in reasons if x)) or None
    if missing:
        cell.reason = f"{missing} of {len(planned)} planned runs missing"
    if search is not None and search.kept is None:
        cell.reason = "; ".join(x for x in (cell.reason, "successive halving: stage 1 incomplete") if x)
    if tcfg.get("search_cost", True):
        cell.search_spend = search_spend(searched, delta=cell.delta, relation=table_relation(config, table))
    return cell


def nonprivate_reference(np_cell: Cell | None) -> tuple[float | None, str]:
    """AUC_np of a derived-metric table (the mean over its non-private cell's seeds), or None and
    why not: no records, all diverged, or an AUC of 1 (the relative loss divides by 1 - AUC_np)."""
    if np_cell is None or np_cell.status == NOT_RUN:
        return None, NO_NONPRIVATE_REFERENCE
    if np_cell.status != "ok" or np_cell.mean is None:
        return None, (
            f"the non-private reference (needed for the relative AUC loss) has no usable records "
            f"({np_cell.reason or np_cell.status})"
        )
    if not np_cell.mean < 1.0:
        return None, (
            f"the non-private reference has AUC {np_cell.mean:g}: the relative AUC loss "
            f"(divided by 1 - AUC_np) is undefined"
        )
    return np_cell.mean, ""


def _ref_dataset(tcfg: Mapping[str, Any]) -> str:
    """The dataset the paper's cells are filed under: a split view's base (labeldp.data.views)."""
    return base_dataset(tcfg["dataset"])


@dataclasses.dataclass
class TableResult:
    table: str
    config: Mapping[str, Any]
    columns: list[Column]
    epsilons: list[float]
    cells: dict[tuple[str, float], Cell]
    nonprivate: Cell | None
    deltas: dict[tuple[str, float], float | None]
    best: dict[float, set[str]]
    records_used: list[dict]
    partial_deltas: set[tuple[str, float]] = dataclasses.field(default_factory=set)  # from a partial cell


def build_table(config: Mapping[str, Any], table: str) -> TableResult:
    tcfg = config["tables"][table]
    ref = load_reference(config.get("reference_dir", "workflow/resources/reference"))
    cols = columns(tcfg)
    col_cfgs = {c["id"]: c for c in tcfg["columns"]}
    eps_list = table_epsilons(tcfg)
    np_col = nonprivate_column(tcfg)
    source = DERIVED_METRICS.get(tcfg["metric"])
    if source is not None and np_col is None:
        raise ValueError(
            f"table {table}: metric {tcfg['metric']} is relative to the non-private model; set nonprivate: true"
        )
    # a derived metric's non-private cell is built first, on the source metric: its mean is AUC_np
    np_cell = build_cell(config, table, np_col, math.inf, ref, metric=source) if np_col else None
    auc_np, why_np = nonprivate_reference(np_cell) if source is not None else (None, "")
    cells = {
        (c.id, e): build_cell(
            config,
            table,
            c,
            e,
            ref,
            column_cfg=col_cfgs[c.id],
            auc_nonprivate=auc_np,
            reference_reason=why_np or NO_NONPRIVATE_REFERENCE,
        )
        for c in cols
        for e in eps_list
    }
    deltas: dict[tuple[str, float], float | None] = {}
    partial: set[tuple[str, float]] = set()
    best: dict[float, set[str]] = {}
    for e in eps_list:
        # partial cells (a mean over fewer seeds than planned, or a search with planned runs missing: another point
        # could still win, as the scorecard counts it) are shown but never marked best
        eligible = [
            cells[(c.id, e)]
            for c in cols
            if cells[(c.id, e)].status == "ok"
            and not c.reference_only
            and not c.validation
            and cells[(c.id, e)].valid
            and not cells[(c.id, e)].n_missing
            and cells[(c.id, e)].n_runs >= cells[(c.id, e)].n_planned_runs
        ]
        if eligible:
            top = (min if tcfg["metric"] in LOWER_IS_BETTER else max)(x.mean for x in eligible)
            best[e] = {x.column for x in eligible if x.mean == top}
        else:
            best[e] = set()
        if tcfg.get("deltas"):
            pro = cells.get(("labeldp_pro", e))
            base = [cells.get((b, e)) for b in BASELINE_IDS]
            dps = cells.get(("dpsgd", e))
            ok = lambda c: c is not None and c.status == "ok"  # noqa: E731
            deltas[("baseline", e)] = (
                (pro.mean - max(b.mean for b in base)) if ok(pro) and all(ok(b) for b in base) else None
            )
            deltas[("dpsgd", e)] = (pro.mean - dps.mean) if ok(pro) and ok(dps) else None
            for key, used_cells in (("baseline", [pro, *base]), ("dpsgd", [pro, dps])):
                if deltas[(key, e)] is not None and any(c.n_missing for c in used_cells):
                    partial.add((key, e))
    used = []
    for c in cols + ([np_col] if np_col else []):
        if not cell_status(config, table, c)[0]:
            continue
        for e in eps_list if c.id != "nonprivate" else [math.inf]:
            for r in cell_runs(config, table, c, e):
                if os.path.exists(r.record_path):
                    used.append(records.read_record(r.record_path))
    return TableResult(table, config, cols, eps_list, cells, np_cell, deltas, best, used, partial)


def write_table(
    config: Mapping[str, Any], table: str, out_dir: Path, *, figure: bool = False, plot_dir: Path | None = None
) -> int:
    """Builds ``table`` (a table of cells, no renderer) from records and writes ``<table>.md``, ``.csv`` and
    ``.tex`` in ``out_dir`` (a figure target: the plot there instead of ``.tex``; else the plot in ``plot_dir``)."""
    res = build_table(config, table)
    out = Path(out_dir)
    write_csv(out / f"{table}.csv", tidy_rows(res))
    if figure:
        render_figure(res, out / f"{table}.png", out / f"{table}.pdf")
    else:
        write_atomic_text(out / f"{table}.tex", render_latex(res))
        if plot_dir:
            plots = Path(plot_dir)
            render_figure(res, plots / f"{table}.png", plots / f"{table}.pdf")
    write_atomic_text(out / f"{table}.md", render_markdown(res))
    print(f"wrote {out / table}.*")
    return 0
