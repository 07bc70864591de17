"""The reproduction status as Markdown: its definition, the per-table counts, then every cell."""

from __future__ import annotations

from typing import Any, Mapping

from labeldp.report.reproduction_status.build import DEFAULTS, Status, summarise

__all__ = ["render_markdown"]


def _fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _evidence_text(row: Mapping[str, Any], prefix: str) -> tuple[str, str]:
    if row[prefix + "best"] is None:
        return "-", "-"
    value = (
        f"{row[prefix + 'best']:.1f} +- {_fmt(row[prefix + 'std'])} ({row[prefix + 'n_seeds']} seeds, "
        f"{row[prefix + 'n_search_runs']} runs searched)"
    )
    source = ", ".join(row[prefix + k] for k in ("source", "column", "variant", "best_hparams") if row[prefix + k])
    return value, source.replace("|", "/")


def render_markdown(*, status: Status, settings: Mapping[str, Any] | None = None) -> str:
    """The status as Markdown: the definition, the per-table counts, the sources not read, then every cell.

    Args:
      status: :func:`build_status`'s result.
      settings: the config block ``reproduction_status`` (:data:`DEFAULTS` fill what it omits).

    Returns:
      The Markdown text.
    """
    s = {**DEFAULTS, **dict(settings or {})}
    lines = [
        "# Reproduction status: every published cell against the best complete result of the committed tables",
        "",
        f"- cells: the published cells of 000 Tables {', '.join(map(str, s['tables']))} ({s['metric']}) above "
        f"{s['chance_pct']:g}% (chance); 'w/ AMP' reference-only columns listed, never scored",
        "- scored on: the tables each report scores (its `scorecard_tables`: the report's protocol, e.g. 000 Table "
        "8's grid searched in full or by successive halving, or the report's one configuration), under the paper's "
        "selection (best test mean over the table's search, 000 D.2), every planned run recorded, at least "
        f"{s['min_seeds']} seeds, valid accounting, official data in full, noise calibrated under "
        f"{s['calibration_relation']} (000's relation), validation columns left out; a cell "
        "takes the best of these rows; held-out selections are counted in each report's scorecard, not here. A "
        "report without `scorecard_tables` scores all its tables, so its quick-point tables (one configuration) "
        "count: 'runs searched' says how large each cell's search was. The best over several reports' runs is "
        "optimistic, as 000 D.2's best mean over a grid is",
        "- experiment: the best row of the other tables (settings off the paper's grid, e.g. another optimiser, or "
        "chosen on one seed), under the same rules: shown beside the cell, never counted. 'An experiment within' "
        "counts a cell outside (or not run) whose experiment is within the tolerance and above the scored best, or has "
        "no scored row (a best-mean selection over both would pick it); one within the tolerance but at or below the "
        "scored best is "
        "counted apart ('only below the scored best'): no selection by best mean reaches the paper through it",
        f"- within: |best - paper| <= {s['tolerance_points']:g} points (strict; the std is shown, never used to pass)",
        "- why: the experiment that explains a cell outside or not run (the report section named); 'no explanation "
        "yet' where none is written up",
        "- built only from the tables' tidy CSVs (themselves built only from result records and the published values)",
        "",
        "| paper table | cells | with results | within | outside | not run | outside or not run, an experiment "
        "within | outside, an experiment within only below the scored best | outside or not run, unexplained | at "
        "chance (not scored) | reference only |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summarise(status.rows):
        lines.append(
            f"| {r['paper_table']} | {r['cells']} | {r['with_results']} | {r['within']} | {r['outside']} | "
            f"{r['not_run']} | {r['experiment_within']} | {r['experiment_below_scored']} | {r['unexplained']} | "
            f"{r['at_chance']} | {r['reference_only']} |"
        )
    if status.stale:
        lines += ["", "Not read (built before the fields this view needs; rebuild them with their report's command):"]
        lines += [f"- `{p}`" for p in status.stale]
    if status.explained_within:
        lines += ["", "Explanations of cells now within the tolerance or at chance (out of date: remove them):"]
        lines += [f"- {k}" for k in status.explained_within]
    if status.unmatched:
        lines += ["", "Rows matching no published cell (a column's `ref_method` / `ref_variant`, or a cell 000 does "
                  "not print):"]  # fmt: skip
        lines += [f"- {u}" for u in status.unmatched]
    lines += [
        "",
        "| cell | paper | best (mean +- std) | diff | status | source (table, column, variant, configuration) "
        "| experiment (not counted) | experiment's source | why |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in status.rows:
        best, src = _evidence_text(r, "")
        exp, exp_src = _evidence_text(r, "experiment_")
        if r["experiment_best"] is not None:
            exp += f", diff {r['experiment_abs_diff']:.1f}"
            if r["experiment_below_scored"] is True:
                exp += " (at or below the scored best: a best-mean selection would not pick it)"
        why = r["why"] + (f" (section: {r['section']})" if r["section"] else "") if r["why"] else ""
        if r["status"] in ("outside", "not run") and not why:
            why = "no explanation yet"
        lines.append(
            f"| {r['key']} | {r['paper']:g} | {best} | {_fmt(r['abs_diff'])} | {r['status']} | {src} | {exp} | "
            f"{exp_src} | {why.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"
