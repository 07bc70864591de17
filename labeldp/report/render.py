"""Renders a built table (:class:`labeldp.report.tables.TableResult`): markdown, LaTeX, tidy
CSV and the figure, each written atomically (temporary name, then rename).

Privacy relation: the header of every table names the neighbouring relation its DP-SGD-family
cells were calibrated under, and a column gives those cells' epsilon under the other relation
(``label_substitution`` is label DP exactly; ``add_or_remove`` is the papers' convention), read
from the records' ``privacy.epsilon_by_relation``.
"""

from __future__ import annotations

import json
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labeldp.plan import calibration_relation, format_eps, table_relation
from labeldp.report.metrics import DERIVED_METRICS, selection_kind
from labeldp.report.table_scope import records_data_source, scored_table
from labeldp.report.table_header import OTHER_RELATION, RELATION_SHORT, derived_metric_line, header_lines
from labeldp.report.outputs import save_figure, write_atomic_text, write_csv, write_report_files  # noqa: F401 (re-exported)
from labeldp.report.search_cost import search_cost_lines

if TYPE_CHECKING:  # pragma: no cover
    from labeldp.report.tables import Cell, TableResult

NOT_RUN = "not run"
QUOTED = "quoted"  # a cell showing another paper's published value (a column with `quoted: <source>`)


# ----------------------------------------------------------------------------- formatting


def _fmt_num(v: float | None, metric: str) -> str:
    if v is None:
        return ""
    # AUC and 002's relative AUC loss (%) with the three decimals 002 prints, as 001 prints its RMSE
    return f"{v:.3f}" if metric in ("test_auc", "relative_auc_loss_pct", "test_rmse") else f"{v:.1f}"


def cell_text(cell: Cell, metric: str, *, bold: bool = False, latex: bool = False) -> str:
    paper = f" ({_fmt_num(cell.paper, metric)})" if cell.paper is not None else " (paper: -)"
    if cell.status == QUOTED:  # another paper's published value (e.g. PATE-FM, Malek et al. 2021)
        return f"quoted: {_fmt_num(cell.paper, metric)}" if cell.paper is not None else "quoted: -"
    if cell.status == NOT_RUN:
        return f"{NOT_RUN}{paper}"
    if cell.status == "all diverged":
        return f"diverged {cell.n_diverged}/{cell.n_runs}{paper}"
    pm = r" $\pm$ " if latex else " ± "
    if cell.n_seeds == 1:  # no spread from one seed: say so instead of printing "± 0.0"
        seeds = f"1 of {cell.n_planned_seeds} seeds" if cell.n_missing else "1 seed"
        core = f"{_fmt_num(cell.mean, metric)} ({seeds})"
    else:
        core = f"{_fmt_num(cell.mean, metric)}{pm}{_fmt_num(cell.std, metric)}"
        if cell.n_missing:  # a partial cell says over how many seeds its mean is
            core += f" ({cell.n_seeds} of {cell.n_planned_seeds} seeds)"
    if bold:
        core = rf"\textbf{{{core}}}" if latex else f"**{core}**"
    marks = ""
    if cell.reference_only or not cell.valid:
        marks += r"$^\dagger$" if latex else "†"
    if cell.n_diverged:
        marks += f" [{cell.n_diverged} diverged]"
    return f"{core}{marks}{paper}"


def delta_text(res: TableResult, key: str, eps: float) -> str:
    """A Delta cell: ``+x.x``, ``+x.x (partial)`` when a cell it is computed from has fewer
    seeds than planned, or ``not run``."""
    d = res.deltas.get((key, eps))
    if d is None:
        return NOT_RUN
    return f"{d:+.1f}" + (" (partial)" if (key, eps) in res.partial_deltas else "")


def relation_column(res: "TableResult") -> dict[float, str] | None:
    """Per eps: the DP-SGD-family cells' epsilon under the relation OTHER than the table's
    calibration relation (the max over those cells' records), or None when the table has no
    accountant-calibrated cell."""
    rel = table_relation(res.config, res.table)
    other = OTHER_RELATION[rel]
    out, any_family = {}, False
    for e in res.epsilons:
        vals = []
        for c in res.columns:
            cell = res.cells[(c.id, e)]
            if calibration_relation(res.config, res.table, c.method) is None:
                continue
            any_family = True
            if cell.status == "ok":
                v = (cell.epsilon_by_relation or {}).get(other)
                vals.append(v)
        if not vals:
            out[e] = NOT_RUN
        elif any(v is None for v in vals):
            out[e] = "not accounted (records predate it: run workflow/scripts/reaccount_records.py)"
        else:
            out[e] = f"{max(vals):.3g}"
    return out if any_family else None


def render_markdown(res: TableResult) -> str:
    tcfg = res.config["tables"][res.table]
    metric = tcfg["metric"]
    out = [f"# {res.table}: {tcfg['title']} (paper Table {tcfg['paper_table']})", ""]
    out += header_lines(res)
    out.append("")
    out.append(
        "Each cell: regenerated mean ± std over seeds of the best configuration (paper value in "
        "parentheses). **Bold**: best valid cell of the row among those whose planned runs all have records "
        '(a cell over fewer says "(k of n seeds)"; a Delta from such a cell says "(partial)"). † : not a valid privacy guarantee '
        "(reference only). `not run`: method or data not available yet. `+dirty`: the tree "
        "had uncommitted code or config changes."
    )
    out.append("")
    if res.nonprivate is not None:
        np_metric = DERIVED_METRICS.get(metric, metric)  # a derived metric's non-private row is its AUC
        what = " (test AUC)" if metric in DERIVED_METRICS else ""
        out.append(
            f"Non-private reference{what}: {cell_text(res.nonprivate, np_metric)}"
            + (f" — {res.nonprivate.reason}" if res.nonprivate.status != "ok" else "")
        )
        out.append("")
    rel_col = relation_column(res)
    other = RELATION_SHORT[OTHER_RELATION[table_relation(res.config, res.table)]]
    heads = ["eps"] + ([f"eps ({other})"] if rel_col else []) + [c.label for c in res.columns]
    if tcfg.get("deltas"):
        heads += ["Δ_Baseline", "Δ_DP-SGD"]
    out.append("| " + " | ".join(heads) + " |")
    out.append("|" + "---|" * len(heads))
    for e in res.epsilons:
        row = [format_eps(e)] + ([rel_col[e]] if rel_col else [])
        for c in res.columns:
            cell = res.cells[(c.id, e)]
            row.append(cell_text(cell, metric, bold=c.id in res.best[e]))
        if tcfg.get("deltas"):
            row += [delta_text(res, key, e) for key in ("baseline", "dpsgd")]
        out.append("| " + " | ".join(row) + " |")
    by_reason: dict[tuple[str, str], list[str]] = defaultdict(list)  # one note per reason, naming its eps
    for c in res.columns:
        for e in res.epsilons:
            if res.cells[(c.id, e)].reason:
                by_reason[(c.label, res.cells[(c.id, e)].reason)].append(format_eps(e))
    notes = sorted(
        f"{label} (eps {', '.join(eps)}{'; in each' if len(eps) > 1 else ''}): {why}"
        for (label, why), eps in by_reason.items()
    )
    invalid = sorted(
        {
            f"{c.label}: {res.cells[(c.id, e)].invalid_reason or 'reference only'}"
            for c in res.columns
            for e in res.epsilons
            if res.cells[(c.id, e)].reference_only or not res.cells[(c.id, e)].valid
        }
    )
    out += search_cost_lines(res, relation_label=RELATION_SHORT[table_relation(res.config, res.table)])
    if notes:
        out += ["", "Notes:"] + [f"- {n}" for n in notes]
    if invalid:
        out += ["", "† Not private as accounted:"] + [f"- {n}" for n in invalid]
    return "\n".join(out) + "\n"


def render_latex(res: TableResult) -> str:
    tcfg = res.config["tables"][res.table]
    metric = tcfg["metric"]
    rel_col = relation_column(res)
    other = RELATION_SHORT[OTHER_RELATION[table_relation(res.config, res.table)]]
    heads = (
        ["$\\epsilon$"]
        + ([f"$\\epsilon$ ({other})"] if rel_col else [])
        + [c.label.replace("_", r"\_") for c in res.columns]
    )
    if tcfg.get("deltas"):
        heads += [r"$\Delta_{\mathrm{Baseline}}$", r"$\Delta_{\mathrm{DP\text{-}SGD}}$"]
    derived = derived_metric_line(res)
    lines = [f"% {res.table}: built from result records; regenerated (paper)"]
    if derived:
        lines.append(f"% {derived}")
        if res.nonprivate is not None:
            lines.append(f"% non-private reference (test AUC): {cell_text(res.nonprivate, 'test_auc')}")
    lines += [r"\begin{tabular}{" + "l" * len(heads) + "}", r"\toprule", " & ".join(heads) + r" \\", r"\midrule"]
    for e in res.epsilons:
        row = (
            [format_eps(e)]
            + ([rel_col[e].split(" (")[0]] if rel_col else [])
            + [cell_text(res.cells[(c.id, e)], metric, bold=c.id in res.best[e], latex=True) for c in res.columns]
        )
        if tcfg.get("deltas"):
            row += [delta_text(res, k, e) for k in ("baseline", "dpsgd")]
        lines.append(" & ".join(row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def tidy_rows(res: TableResult) -> list[dict[str, Any]]:
    tcfg = res.config["tables"][res.table]
    rows = []
    cells = list(res.cells.values()) + ([res.nonprivate] if res.nonprivate else [])
    by_id = {c.id: c for c in res.columns}
    col_cfgs = {c["id"]: c for c in tcfg["columns"]}
    scored = scored_table(res.config, res.table)
    data_source = records_data_source(res.records_used)
    for cell in cells:
        col = by_id.get(cell.column)
        rows.append(
            {
                "table": res.table,
                "paper_table": tcfg["paper_table"],
                "dataset": tcfg["dataset"],
                "column": cell.column,
                "method": col.method if col else "nonprivate",
                "variant": col.variant if col else "default",
                # the published cell the column stands beside (reference method / variant; labeldp.report.reference)
                "paper_method": (col.ref_method or "") if col else "non_private",
                "paper_variant": (col.ref_variant or "") if col else "",
                # a derived metric's non-private row holds its source metric (002: the AUC_np runs' AUC)
                "metric": tcfg["metric"] if col else DERIVED_METRICS.get(tcfg["metric"], tcfg["metric"]),
                # what the column's cells read: the table's metric, or it at the honest stopping epoch
                "column_metric": (col_cfgs.get(cell.column) or {}).get("metric") or tcfg["metric"] if col else "",
                # the paper's selection, or an honest one beside it (the scorecard counts them apart)
                "selection": selection_kind(tcfg, col_cfgs.get(cell.column)),
                # the report's scorecard scores this table (its protocol) or not (an experiment beside it)
                "scored": scored,
                # a validation column (e.g. DP-SGD via Opacus): checks another column, never a table's best
                "validation": bool(col and col.validation),
                # official (full) / official subset / stand-in: what data the table's records ran on
                "data_source": data_source,
                "epsilon": format_eps(cell.epsilon),
                "status": cell.status,
                "reason": cell.reason,
                "mean": cell.mean,
                "std": cell.std,
                "n_seeds": cell.n_seeds,
                "n_missing_seeds": cell.n_missing,
                "n_runs": cell.n_runs,
                "n_planned_runs": cell.n_planned_runs,
                "n_diverged": cell.n_diverged,
                "best_hparams": json.dumps(cell.best_hparams) if cell.best_hparams else "",
                "achieved_epsilon": None if cell.achieved_epsilon is None else format_eps(cell.achieved_epsilon),
                "delta": cell.delta,
                "valid": cell.valid and not cell.reference_only,
                "reference_only": cell.reference_only,
                "paper": cell.paper,
                "calibration_relation": cell.calibration_relation or "",
                "epsilon_add_or_remove": (cell.epsilon_by_relation or {}).get("add_or_remove"),
                "epsilon_label_substitution": (cell.epsilon_by_relation or {}).get("label_substitution"),
                "search_epsilon": cell.search_spend.epsilon if cell.search_spend else None,
                "search_relation": cell.search_spend.relation if cell.search_spend else "",
                "search_delta": cell.search_spend.delta if cell.search_spend else None,
                "search_runs": cell.search_spend.runs if cell.search_spend else None,
                "search_label_releases": cell.search_spend.label_releases if cell.search_spend else None,
                "is_best": cell.column in res.best.get(cell.epsilon, set()),
            }
        )
    return rows


def render_figure(res: TableResult, png: Path, pdf: Path | None = None) -> None:
    """Accuracy (AUC, MSE) vs eps on a log axis: one line per column with std bands, the
    paper's values as hollow markers of the same colour; written atomically as PNG (and PDF)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tcfg = res.config["tables"][res.table]
    fig, ax = plt.subplots(figsize=(6, 4))
    any_line = False
    for i, c in enumerate(res.columns):
        color = f"C{i}"
        pts = [(e, res.cells[(c.id, e)]) for e in res.epsilons]
        ok = [(e, x) for e, x in pts if x.status == "ok"]
        if ok:
            any_line = True
            xs = [e for e, _ in ok]
            ys = [x.mean for _, x in ok]
            sd = [x.std or 0 for _, x in ok]
            ax.plot(xs, ys, "-o", color=color, label=textwrap.fill(c.label, 80))
            ax.fill_between(
                xs, [y - s for y, s in zip(ys, sd)], [y + s for y, s in zip(ys, sd)], color=color, alpha=0.2
            )
        pp = [(e, x.paper) for e, x in pts if x.paper is not None]
        if pp:
            ax.plot(
                [e for e, _ in pp],
                [v for _, v in pp],
                "o",
                mfc="none",
                color=color,
                label=None if ok else textwrap.fill(f"{c.label} (paper)", 80),
            )
    ax.plot([], [], "o", mfc="none", color="gray", label="hollow: paper value")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel(tcfg["metric"])
    ax.set_title(textwrap.fill(f"{res.table}: {tcfg['title']}", 90), fontsize=8)  # long titles wrap, not clip
    if not any_line:
        ax.text(
            0.5,
            0.5,
            "not run: no method of this figure is implemented yet",
            transform=ax.transAxes,
            ha="center",
            va="center",
        )
    fig.tight_layout()
    # below the axes, after the layout (which would shrink the axes to fit it): long labels hide no line
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    save_figure(fig, png, pdf)
    plt.close(fig)
