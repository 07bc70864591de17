"""The header of a built table (:class:`labeldp.report.tables.TableResult`): what ran, on what, how it is accounted.

Every table states the neighbouring relation its DP-SGD-family cells were calibrated under (:data:`RELATION_TEXT`),
the hardware and code revisions read from its records, what its search covered, and any column that reads another
metric (a derived metric, the honest stopping epoch); :mod:`labeldp.report.render` puts these lines above the cells.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from labeldp import records
from labeldp.halving import description as halving_description
from labeldp.heldout_stopping import STOPPED_COLUMN_TEXT, STOPPED_TEST_METRIC
from labeldp.plan import table_relation
from labeldp.report.metrics import DERIVED_METRICS
from labeldp.report.provenance import encoder_text, pretrained_starts, revision_text, revisions_text

if TYPE_CHECKING:  # pragma: no cover
    from labeldp.report.tables import TableResult

__all__ = ["RELATION_TEXT", "OTHER_RELATION", "RELATION_SHORT", "derived_metric_line", "header_lines"]

RELATION_TEXT = {
    "add_or_remove": "add-or-remove-one (the paper's convention, 000 Section 3.4)",
    "label_substitution": "label substitution (one example's label changes: label DP exactly, 000 Definition 2; "
    "dp_accounting REPLACE_ONE)",
}
OTHER_RELATION = {"add_or_remove": "label_substitution", "label_substitution": "add_or_remove"}
RELATION_SHORT = {"add_or_remove": "add/remove", "label_substitution": "label subst."}


def derived_metric_line(res: TableResult) -> str | None:
    """For a derived-metric table (002's relative AUC loss): how the metric is derived and the
    AUC_np used (mean ± std over the non-private seeds), or that there is none; else None."""
    metric = res.config["tables"][res.table]["metric"]
    if metric not in DERIVED_METRICS:
        return None
    np_cell = res.nonprivate
    if np_cell is not None and np_cell.status == "ok" and np_cell.mean is not None:
        seeds = (
            f"{np_cell.n_seeds} of {np_cell.n_planned_seeds} planned seeds"
            if np_cell.n_missing
            else f"{np_cell.n_seeds} seed{'s' if np_cell.n_seeds != 1 else ''}"
        )
        auc_np = (
            f"AUC_np = {np_cell.mean:.4f} ± {np_cell.std or 0.0:.4f} (mean ± std over {seeds})"
            if np_cell.n_seeds > 1
            else f"AUC_np = {np_cell.mean:.4f} ({seeds}: no std)"
        )
    else:
        auc_np = "AUC_np: none (the non-private runs have no usable records, so no private cell has a number)"
    return (
        f"metric: 002's relative AUC loss (%) = 100 ((1 - AUC) - (1 - AUC_np)) / (1 - AUC_np), computed per run "
        f"from its test AUC, then mean ± std over seeds; AUC_np is the mean test AUC of this table's "
        f"non-private runs; lower is better (bold: lowest loss); {auc_np}"
    )


def header_lines(res: TableResult) -> list[str]:
    """The table header's bullet lines: revision, grid, seeds, data, accounting and relation, hardware, the
    records' code revisions, what was searched, derived metrics and stopped columns, options, privacy unit,
    features, quoted columns, and a warning when any record ran on stand-in data."""
    cfg = res.config
    tcfg = cfg["tables"][res.table]
    recs = res.records_used
    # the build rewrites its own report files in the checkout: those changes are not code changes
    git = records.git_revision(exclude=tuple(str(cfg[k]) for k in ("reports_dir", "results_dir") if cfg.get(k)))
    hw = sorted({records.machine_description(r["environment"]) for r in recs}) or ["no runs"]
    rec_revs = revisions_text([revision_text(r["environment"].get("git") or {}) for r in recs])
    options = sorted(
        {
            f"{r['method']}/{r['variant']}: {json.dumps(r['config']['run_spec'].get('options') or {}, sort_keys=True)}"
            for r in recs
            if (r.get("config") or {}).get("run_spec", {}).get("options")
        }
    )
    sizes = sorted(
        {
            f"{r['dataset']['name']}"
            + (f" (view {r['dataset']['view']})" if r["dataset"].get("view") else "")
            + f": n_train={r['dataset']['n_train']}, n_test={r['dataset']['n_test']}, "
            f"source={r['dataset']['source']}"
            for r in recs
        }
    ) or ["no runs"]
    epochs = sorted({r["hparams"].get("epochs") for r in recs if "epochs" in r["hparams"]})
    grid = cfg["grids"][cfg["grid"]][tcfg["grid"]]
    lines = [
        f"- generated: {records.now_utc()}",
        f"- git revision: {revision_text(git)}",
        f"- profile: {cfg['profile']} (grid `{cfg['grid']}.{tcfg['grid']}`: "
        + ", ".join(f"{k}={v}" for k, v in grid.items())
        + ")",
        f"- seeds: {tcfg.get('seeds') or cfg['seeds']}; epochs run: {epochs or '-'}",
        f"- data actually used: {'; '.join(sizes)}",
        f"- delta: {cfg['delta']} (DP-SGD family); pure-DP label randomizers have delta = 0",
        f"- accountant: {cfg['accountant']} (dp_accounting); sampling: {cfg['sampling']}",
        f"- privacy relation: DP-SGD-family noise calibrated so that eps is met under "
        f"**{RELATION_TEXT[table_relation(cfg, res.table)]}**; the column "
        f'"eps ({RELATION_SHORT[OTHER_RELATION[table_relation(cfg, res.table)]]})" gives the same runs\' eps under '
        f"{OTHER_RELATION[table_relation(cfg, res.table)].replace('_', ' ')} (max over the row's reported DP-SGD-family "
        f"runs, dp_accounting PLD). Label randomizers (RR, RR-Debiased, LP-2ST, ALIBI, RRWithPrior) are exactly "
        f"eps-label-DP under label substitution in every table (docs/privacy_relations.md); a held-out selection "
        f"column's eps is the max of its runs' and of its held-out labels' RR release (parallel composition, "
        f"labeldp/selection.py)",
        f"- hardware: {'; '.join(hw)}",
        f"- code revisions of the records: {rec_revs}",
    ]
    searched = halving_description(cfg, res.table)
    if searched:
        lines.append(f"- {searched}")
    derived = derived_metric_line(res)
    if derived:
        lines.append(f"- {derived}")
    for c in tcfg["columns"]:
        if c.get("metric") == STOPPED_TEST_METRIC:
            lines.append(f"- column `{c['id']}`: {STOPPED_COLUMN_TEXT}")
    if options:
        lines.append(f"- method options of the runs: {'; '.join(options)}")
    starts = pretrained_starts(recs)
    if starts:
        lines.append(f"- pre-trained starting points (details.init_from of the records): {starts}")
    units = sorted({(r.get("privacy") or {}).get("privacy_unit", "example") for r in recs})
    if "user" in units:
        methods = {r["method"] for r in recs if (r.get("privacy") or {}).get("privacy_unit") == "user"}
        how = []
        if methods & {"rr", "dpsgd", "labeldp_pro"}:
            how.append(
                "000 Section 6: RR spends eps / k on each of a user's k labels (group privacy); DP-SGD and "
                "LabelDP-Pro clip each user's summed gradient as one unit and sample users"
            )
        if "hybrid_user_level" in methods:
            how.append(
                "002 Proposition 6 (hybrid_user_level): every user capped at k examples, RR at eps / k per "
                "label, DP-SGD at the item-level (eps2 / k, delta (e^{eps2/k} - 1) / (e^{eps2} - 1)) over "
                "the capped rows, user level by group privacy; Hybrid's RR phase on one example per user"
            )
        lines.append(
            "- privacy unit: **user** (every label of one user changes together): "
            + "; ".join(how)
            + "; eps and both relations above are at the user level"
            + ("" if units == ["user"] else f" (records of units {units} are mixed in this table)")
        )
    for enc in sorted(
        {json.dumps(r["dataset"]["encoder"], sort_keys=True) for r in recs if r["dataset"].get("encoder")}
    ):
        lines.append("- features: " + encoder_text(json.loads(enc)))
    for col in res.columns:
        if col.quoted:
            lines.append(f"- {col.label}: quoted from {col.quoted}; not run here, never bold, not in any claim")
    if any(r["dataset"]["source"] != "official" for r in recs):
        lines.append(
            "- **WARNING: some runs use SYNTHETIC stand-in data (smoke profile); their numbers are "
            "not comparable to the paper.**"
        )
    return lines
