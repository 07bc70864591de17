"""The reproduction scorecard: every regenerated cell against the published one.

Built only from the tidy table CSVs (which are built only from the result records and the
reference file). For each cell with both a regenerated mean and a published value it reports
``|regenerated - paper|`` and whether that is within the tolerance of the config
(``tolerance``: accuracy ``max(accuracy_points, 2 std)`` points, AUC ``auc`` absolute, MSE
``mse_relative`` of the paper's value, and so is 002's relative AUC loss). Per table it counts
the cells within tolerance, those under the paper's selection apart from the honest held-out selection
columns beside them (tidy ``selection``, :func:`labeldp.report.metrics.selection_kind`), and evaluates the paper's qualitative claims, declared as data in
the table's ``claims`` config::

    claims:
      - {id: pro_beats_all_small_eps, text: "...", winner: labeldp_pro,
         losers: [dpsgd, rr, rr_debiased, lp_2st, alibi], eps_max: 0.5}
      - {id: rr_beats_pro_eps2, text: "...", winner: rr, losers: [labeldp_pro], epsilons: [2.0]}

A claim "holds" when, at every epsilon in its scope, the winner's regenerated mean is above
every loser's (by at least ``min_margin`` metric units when the claim gives one: 001's "far above") (below, for an error metric of :data:`~labeldp.report.tables.LOWER_IS_BETTER`: MSE,
002's relative AUC loss); it is "not evaluable" when a cell it needs was not run, is
partial (fewer seeds than planned: its mean is not the one the claim is about), or is
reference-only (invalid accounting) for the winner.

An agreement check ``{id, text, agree: [a, b], epsilons: [...], max_standard_errors: 2}``
(e.g. the Opacus validation column against the JAX DP-SGD) "holds" when at every epsilon in
scope ``|mean_a - mean_b| <= k * sqrt(std_a^2 / n_a + std_b^2 / n_b)`` (``k`` =
``max_standard_errors``, default 2; std over seeds): the two agree within seed noise.

Usage: ``python -m labeldp.report.scorecard --config-json '<json>' --out-dir reports <csv...>``
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from labeldp.plan import SOURCE_RENDERERS
from labeldp.report.outputs import csv_float
from labeldp.report.tables import LOWER_IS_BETTER, write_atomic_text, write_csv

#: ``accuracy_std_multiplier``: k in ``max(accuracy_points, k std)``; 0 is the strict rule (the std is
#: shown, never used to pass a cell).
DEFAULT_TOLERANCE = {"accuracy_points": 2.0, "accuracy_std_multiplier": 2.0, "auc": 0.01, "mse_relative": 0.10}


def tolerance_for(metric: str, *, paper: float, std: float | None, tol: Mapping[str, float]) -> float:
    """The allowed |regenerated - paper| of one cell.

    Args:
      metric: the table's metric.
      paper: the published value.
      std: the regenerated std over seeds (None for one seed).
      tol: the config's ``tolerance`` mapping.

    Returns:
      The tolerance in the metric's units.
    """
    t = {**DEFAULT_TOLERANCE, **dict(tol or {})}
    if metric == "test_accuracy_pct":
        return max(float(t["accuracy_points"]), float(t["accuracy_std_multiplier"]) * (std or 0.0))
    if metric == "test_auc":
        return float(t["auc"])
    return float(t["mse_relative"]) * abs(paper)


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    table: str
    claim: str
    text: str
    verdict: str  # "holds" | "fails" | "not evaluable"
    detail: str


def score_cells(rows: Sequence[Mapping[str, Any]], tol: Mapping[str, float]) -> list[dict[str, Any]]:
    """One scorecard row per table cell (non-private references excluded)."""
    out = []
    for r in rows:
        if r["column"] == "nonprivate":
            continue
        mean, std, paper = csv_float(r.get("mean")), csv_float(r.get("std")), csv_float(r.get("paper"))
        row = {
            "table": r["table"],
            "paper_table": r["paper_table"],
            "column": r["column"],
            "method": r["method"],
            "epsilon": r["epsilon"],
            "metric": r["metric"],
            "status": r["status"],
            "regenerated": mean,
            "std": std,
            "n_seeds": r.get("n_seeds"),
            "paper": paper,
            "abs_diff": None,
            "tolerance": None,
            "within_tolerance": "",
            "valid": r.get("valid"),
            # "paper" or "held-out"; a CSV built before the field says "unknown" (rebuild it to count the cell)
            "selection": r.get("selection") or "unknown",
        }
        n_runs, planned = csv_float(r.get("n_runs")), csv_float(r.get("n_planned_runs"))
        partial = r["status"] == "ok" and n_runs is not None and planned is not None and n_runs < planned
        row["search"] = f"partial: {int(n_runs)} of {int(planned)} runs" if partial else ""
        if partial and paper is not None:
            row["abs_diff"] = abs(mean - paper)  # shown; not scored until the cell's grid is searched
        elif r["status"] == "ok" and mean is not None and paper is not None:
            row["abs_diff"] = abs(mean - paper)
            row["tolerance"] = tolerance_for(r["metric"], paper=paper, std=std, tol=tol)
            row["within_tolerance"] = row["abs_diff"] <= row["tolerance"]
        out.append(row)
    return out


def _scope(claim: Mapping[str, Any], epsilons: Sequence[float]) -> list[float]:
    if "epsilons" in claim:
        return [float(e) for e in claim["epsilons"]]
    hi = float(claim.get("eps_max", math.inf))
    lo = float(claim.get("eps_min", 0.0))
    return [e for e in epsilons if lo <= e <= hi]


def _absent(column: str, eps: float, cell: Mapping[str, Any] | None) -> str:
    """Why a claim cannot use a cell (``""`` when it can): not run, or partial (fewer seeds than
    planned, so its mean is not the one the claim is about)."""
    if cell is None or cell["status"] != "ok":
        return f"{column}@{eps:g}"
    missing = int(float(cell.get("n_missing_seeds") or 0))
    if missing:
        n = int(float(cell.get("n_seeds") or 0))
        return f"{column}@{eps:g} ({n} of {n + missing} seeds)"
    return ""


def _evaluate_agreement(table: str, claim: Mapping[str, Any], cells, scope) -> ClaimResult:
    a, b = claim["agree"]
    k = float(claim.get("max_standard_errors", 2.0))
    missing, failures, details = [], [], []
    for e in scope:
        ca, cb = cells.get((a, e)), cells.get((b, e))
        absent = [why for why in (_absent(a, e, ca), _absent(b, e, cb)) if why]
        if absent:
            missing += absent
            continue
        ma, mb = float(ca["mean"]), float(cb["mean"])
        sa, sb = (csv_float(c.get("std")) or 0.0 for c in (ca, cb))
        na, nb = (int(float(c.get("n_seeds") or 0)) for c in (ca, cb))
        if min(na, nb) < 2:  # one seed has no spread: the noise cannot be estimated
            missing.append(f"{a if na < 2 else b}@{e:g} (fewer than 2 seeds)")
            continue
        se = math.sqrt(sa**2 / na + sb**2 / nb)
        line = f"eps {e:g}: {a} {ma:.4g} vs {b} {mb:.4g} (|diff| {abs(ma - mb):.3g}, {k:g} SE = {k * se:.3g})"
        (failures if abs(ma - mb) > k * se else details).append(line)
    text = claim.get("text", "")
    if failures:
        return ClaimResult(table, claim["id"], text, "fails", "; ".join(failures + details))
    if missing:
        return ClaimResult(table, claim["id"], text, "not evaluable", "cells not run or partial: " + ", ".join(missing))
    return ClaimResult(table, claim["id"], text, "holds", "; ".join(details))


def evaluate_claim(table: str, claim: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], metric: str) -> ClaimResult:
    """Evaluates one qualitative claim on a table's tidy rows (see the module docstring)."""
    cells = {(r["column"], float(r["epsilon"])): r for r in rows if r["epsilon"] != "inf"}
    eps_all = sorted({e for _, e in cells})
    scope = _scope(claim, eps_all)
    if "agree" in claim:
        if not scope:
            return ClaimResult(table, claim["id"], claim.get("text", ""), "not evaluable", "no epsilon in scope")
        return _evaluate_agreement(table, claim, cells, scope)
    lower_better = metric in LOWER_IS_BETTER
    margin = float(claim.get("min_margin", 0.0))  # "far above": by at least this much (metric units)
    missing, failures = [], []
    if not scope:
        return ClaimResult(table, claim["id"], claim.get("text", ""), "not evaluable", "no epsilon in scope")
    for e in scope:
        w = cells.get((claim["winner"], e))
        why = _absent(claim["winner"], e, w) or (
            f"{claim['winner']}@{e:g}" if str(w.get("reference_only")) == "True" else ""
        )
        if why:
            missing.append(why)
            continue
        wm = float(w["mean"])
        for loser in claim["losers"]:
            lc = cells.get((loser, e))
            why = _absent(loser, e, lc)
            if why:
                missing.append(why)
                continue
            lm = float(lc["mean"])
            if not ((wm < lm - margin) if lower_better else (wm > lm + margin)):
                failures.append(
                    f"eps {e:g}: {claim['winner']} {wm:.4g} vs {loser} {lm:.4g}"
                    + (f" (needs a margin of {margin:g})" if margin else "")
                )
    if failures:
        return ClaimResult(table, claim["id"], claim.get("text", ""), "fails", "; ".join(failures))
    if missing:
        return ClaimResult(
            table,
            claim["id"],
            claim.get("text", ""),
            "not evaluable",
            "cells not run or partial: " + ", ".join(missing),
        )
    return ClaimResult(
        table, claim["id"], claim.get("text", ""), "holds", f"at eps {', '.join(f'{e:g}' for e in scope)}"
    )


def _read_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def claims_only(config: Mapping[str, Any]) -> list[str]:
    """The tables whose claims the scorecard evaluates without scoring their cells.

    Args:
      config: the workflow config.

    Returns:
      Config ``claim_tables`` less ``scorecard_tables`` (experiment tables of a dated report, e.g. a method at a
      setting found off the paper's grid beside the grid's selected cell: the comparison is the point, the
      cell is not the paper's); none when ``scorecard_tables`` is absent (every table is scored).
    """
    scored = config.get("scorecard_tables")
    if scored is None:  # every table is scored, claims included
        return []
    return [t for t in config.get("claim_tables") or () if t not in scored]


def build(config: Mapping[str, Any], csv_paths: Sequence[Path]) -> tuple[list[dict], list[dict], list[ClaimResult]]:
    """Returns (cell rows, per-table summary rows, claim results).

    Args:
      config: the workflow config (``tables``, ``tolerance``, ``scorecard_tables``, ``claim_tables``).
      csv_paths: the tidy table CSVs; a table in :func:`claims_only` contributes its claims only.

    Returns:
      The scored cell rows, one summary row per scored table, and every claim's result in input order.
    """
    tol = config.get("tolerance") or {}
    unscored = set(claims_only(config))
    cell_rows, summary, claims = [], [], []
    for p in csv_paths:
        own = config["tables"].get(Path(p).stem) or {}
        if own.get("renderer") in SOURCE_RENDERERS:  # built from other tables (their rows have no cells to score)
            continue
        rows = _read_csv(Path(p))
        if not rows:
            continue
        table = rows[0]["table"]
        tcfg = config["tables"][table]
        if (
            tcfg.get("renderer") in SOURCE_RENDERERS
        ):  # timings on other hardware; intersection brackets: shown, not scored
            continue
        if table in unscored:
            claims += [evaluate_claim(table, c, rows, tcfg["metric"]) for c in tcfg.get("claims", [])]
            continue
        scored = score_cells(rows, tol)
        cell_rows += scored
        compared = [r for r in scored if r["within_tolerance"] != ""]
        paper = [r for r in compared if r["selection"] == "paper"]
        heldout = [r for r in compared if r["selection"] == "held-out"]
        summary.append(
            {
                "table": table,
                "paper_table": tcfg["paper_table"],
                "cells": len(scored),
                "cells_run": sum(1 for r in scored if r["status"] == "ok"),
                # the paper's selection (the goal's count) and the honest selection beside it, counted apart
                "cells_compared": len(paper),
                "within_tolerance": sum(1 for r in paper if r["within_tolerance"]),
                "heldout_compared": len(heldout),
                "heldout_within_tolerance": sum(1 for r in heldout if r["within_tolerance"]),
                "unknown_selection": sum(1 for r in compared if r["selection"] == "unknown"),
            }
        )
        for c in tcfg.get("claims", []):
            claims.append(evaluate_claim(table, c, rows, tcfg["metric"]))
    return cell_rows, summary, claims


def render_markdown(config: Mapping[str, Any], cell_rows, summary, claims) -> str:
    tol = {**DEFAULT_TOLERANCE, **dict(config.get("tolerance") or {})}
    out = [
        "# Reproduction scorecard",
        "",
        f"- profile: {config['profile']} (grid `{config['grid']}`), seeds {config['seeds']}",
        (
            f"- tolerance: accuracy max({tol['accuracy_points']} points, {tol['accuracy_std_multiplier']:g} std); "
            if float(tol["accuracy_std_multiplier"]) > 0
            else f"- tolerance: accuracy {tol['accuracy_points']} points (strict: the std over seeds is shown, never used "
            "to pass a cell); "
        )
        + f"AUC {tol['auc']}; "
        f"MSE and relative AUC loss {tol['mse_relative']:.0%} of the paper's value",
        "- built only from the tables' tidy CSVs (themselves built only from result records and the "
        "published values); `not run` cells are counted, never scored; a cell whose grid is only partly searched "
        "(fewer records than planned runs) shows its difference but is not scored until the search is complete",
        *(
            [
                f"- claims also evaluated on experiment tables whose cells are not scored: {', '.join(claims_only(config))}"
            ]
            if claims_only(config)
            else []
        ),
        "",
        "## Per table",
        "",
        "Compared and within tolerance: the cells under the paper's selection (the table's protocol). The held-out "
        "selection columns beside them (configuration or stopping epoch chosen on RR-released held-out labels) are "
        "counted apart.",
        *(
            [
                f"- {', '.join(s['table'] for s in summary if s['unknown_selection'])}: tidy CSVs built before the "
                "`selection` field; their cells are not counted (rebuild the tables)"
            ]
            if any(s["unknown_selection"] for s in summary)
            else []
        ),
        "",
        "| table | paper | cells | run | compared | within tolerance | held-out selection: within / compared |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        heldout = f"{s['heldout_within_tolerance']} / {s['heldout_compared']}" if s["heldout_compared"] else "-"
        out.append(
            f"| {s['table']} | {s['paper_table']} | {s['cells']} | {s['cells_run']} | "
            f"{s['cells_compared']} | {s['within_tolerance']} / {s['cells_compared']} | {heldout} |"
        )
    out += ["", "## The papers' qualitative claims", "", "| table | claim | verdict | detail |", "|---|---|---|---|"]
    for c in claims:
        out.append(f"| {c.table} | {c.text or c.claim} | **{c.verdict}** | {c.detail} |")
    if not claims:
        out.append("| - | no claims configured | - | - |")
    out += [
        "",
        "## Cells",
        "",
        "| table | column | eps | regenerated | paper | abs diff | tolerance | within |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in cell_rows:
        reg = "not run" if r["status"] != "ok" else f"{r['regenerated']:.4g}"
        paper = "-" if r["paper"] is None else f"{r['paper']:.4g}"
        diff = "-" if r["abs_diff"] is None else f"{r['abs_diff']:.3g}"
        tl = "-" if r["tolerance"] is None else f"{r['tolerance']:.3g}"
        within = {True: "yes", False: "no", "": "-"}[r["within_tolerance"]]
        if r.get("search"):
            within = f"not scored ({r['search']})"
        out.append(f"| {r['table']} | {r['column']} | {r['epsilon']} | {reg} | {paper} | {diff} | {tl} | {within} |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config-json", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("csvs", nargs="+", help="tidy table CSVs")
    a = p.parse_args(argv)
    config = json.loads(a.config_json)
    cell_rows, summary, claims = build(config, [Path(c) for c in a.csvs])
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "scorecard.csv", cell_rows)
    write_csv(out / "scorecard_claims.csv", [dataclasses.asdict(c) for c in claims])
    write_atomic_text(out / "scorecard.md", render_markdown(config, cell_rows, summary, claims))
    print(f"wrote {out / 'scorecard.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
