"""Builds a paper table (or figure) only from result records and the published values.

Usage (the ``table`` / ``figure`` rules)::

    python -m labeldp.report.tables --table table5_mnist --config-json '<config>' --out-dir reports/tables

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
- every cell shows ``regenerated (paper)``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from labeldp import records
from labeldp.plan import Column, cell_runs, cell_status, columns, format_eps, hp_id, nonprivate_column, table_epsilons

NOT_RUN = "not run"
LOWER_IS_BETTER = ("test_mse", "noisy_label_mse")
"""Metrics (errors) for which the best configuration and the best cell of a row have the lowest mean."""
BASELINE_IDS = ("rr", "rr_debiased", "lp_2st", "alibi")


@dataclasses.dataclass
class Cell:
    column: str
    epsilon: float
    status: str  # "ok" | "not run" | "all diverged"
    reason: str = ""
    mean: float | None = None
    std: float | None = None
    n_seeds: int = 0
    n_runs: int = 0
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


# ----------------------------------------------------------------------------- reference


def load_reference(reference_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of the published-values file of the main paper (labeldp_pro_tables.csv)."""
    import csv

    path = Path(reference_dir) / "labeldp_pro_tables.csv"
    if not path.exists():
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def paper_value(ref: Sequence[Mapping[str, Any]], *, table: str, dataset: str, method: str | None,
                variant: str | None, epsilon: float, k: int | None, metric: str) -> float | None:
    if method is None:
        return None
    for r in ref:
        if r["table"] != table or r["method"] != method or r["metric"] != metric:
            continue
        if (r.get("variant") or None) != (variant or None):
            continue
        if r["dataset"] != dataset:
            continue
        if (r.get("k") or None) != (str(k) if k is not None else None):
            continue
        r_eps = math.inf if r["epsilon"] == "inf" else float(r["epsilon"])
        if (math.isinf(r_eps) and math.isinf(epsilon)) or (not math.isinf(r_eps) and math.isclose(r_eps, epsilon)):
            return float(r["value"])
    return None


# ----------------------------------------------------------------------------- cells


def _metric(record: Mapping[str, Any], metric: str) -> float:
    v = record["metrics"].get(metric)
    return float("nan") if v is None else float(v)


def build_cell(config: Mapping[str, Any], table: str, col: Column, eps: float,
               ref: Sequence[Mapping[str, Any]], *, column_cfg: Mapping[str, Any] | None = None) -> Cell:
    tcfg = config["tables"][table]
    metric = tcfg["metric"]
    k = (column_cfg or {}).get("ref_k")
    cell = Cell(column=col.id, epsilon=eps, status=NOT_RUN, reference_only=col.reference_only)
    cell.paper = paper_value(ref, table=tcfg["paper_table"], dataset=_ref_dataset(tcfg), method=col.ref_method,
                             variant=col.ref_variant, epsilon=eps, k=k, metric=metric)
    ok, why = cell_status(config, table, col)
    if not ok:
        cell.reason = why
        return cell
    runs = cell_runs(config, table, col, eps)
    by_hp: dict[str, list[dict]] = defaultdict(list)
    planned_by_hp: dict[str, int] = defaultdict(int)
    missing = 0
    for r in runs:
        hp = hp_id(r.spec.hparams)
        planned_by_hp[hp] += 1
        if not os.path.exists(r.record_path):
            missing += 1
            continue
        by_hp[hp].append(records.read_record(r.record_path))
    cell.n_runs = sum(len(v) for v in by_hp.values())
    if cell.n_runs == 0:
        cell.reason = f"no result records ({missing} of {len(runs)} planned runs missing)"
        return cell
    best = None
    for hp, recs in by_hp.items():
        vals = [_metric(r, metric) for r in recs]
        div = [bool(r["metrics"].get("diverged")) or not math.isfinite(v) for r, v in zip(recs, vals)]
        cell.n_diverged += sum(div)
        if any(div):
            continue
        # a configuration with all its planned seeds outranks any partial one: the best of one
        # or two seeds is biased upwards against a mean over all of them
        mean = statistics.fmean(vals)
        key = (len(recs) == planned_by_hp[hp], -mean if metric in LOWER_IS_BETTER else mean)
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
    cell.delta = max(float(r["privacy"]["delta"]) for r in recs)
    cell.valid = all(bool(r["privacy"]["valid"]) for r in recs)
    reasons = {r["privacy"].get("invalid_reason") for r in recs if not r["privacy"]["valid"]}
    cell.invalid_reason = "; ".join(sorted(x for x in reasons if x)) or None
    if missing:
        cell.reason = f"{missing} of {len(runs)} planned runs missing"
    return cell


def _ref_dataset(tcfg: Mapping[str, Any]) -> str:
    return tcfg["dataset"]


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
    cells = {(c.id, e): build_cell(config, table, c, e, ref, column_cfg=col_cfgs[c.id]) for c in cols for e in eps_list}
    np_col = nonprivate_column(tcfg)
    np_cell = build_cell(config, table, np_col, math.inf, ref) if np_col else None
    deltas: dict[tuple[str, float], float | None] = {}
    partial: set[tuple[str, float]] = set()
    best: dict[float, set[str]] = {}
    for e in eps_list:
        # partial cells (a mean over fewer seeds than planned) are shown but never marked best
        eligible = [cells[(c.id, e)] for c in cols if cells[(c.id, e)].status == "ok" and not c.reference_only
                    and not c.validation and cells[(c.id, e)].valid and not cells[(c.id, e)].n_missing]
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
            deltas[("baseline", e)] = (pro.mean - max(b.mean for b in base)) if ok(pro) and all(ok(b) for b in base) else None
            deltas[("dpsgd", e)] = (pro.mean - dps.mean) if ok(pro) and ok(dps) else None
            for key, used_cells in (("baseline", [pro, *base]), ("dpsgd", [pro, dps])):
                if deltas[(key, e)] is not None and any(c.n_missing for c in used_cells):
                    partial.add((key, e))
    used = []
    for c in cols + ([np_col] if np_col else []):
        if not cell_status(config, table, c)[0]:
            continue
        for e in (eps_list if c.id != "nonprivate" else [math.inf]):
            for r in cell_runs(config, table, c, e):
                if os.path.exists(r.record_path):
                    used.append(records.read_record(r.record_path))
    return TableResult(table, config, cols, eps_list, cells, np_cell, deltas, best, used, partial)


# ----------------------------------------------------------------------------- formatting


def _fmt_num(v: float | None, metric: str) -> str:
    if v is None:
        return ""
    return f"{v:.3f}" if metric == "test_auc" else f"{v:.1f}"


def cell_text(cell: Cell, metric: str, *, bold: bool = False, latex: bool = False) -> str:
    paper = f" ({_fmt_num(cell.paper, metric)})" if cell.paper is not None else " (paper: -)"
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


def _revision_text(git: Mapping[str, Any]) -> str:
    """A record's code revision as the table header names it: the commit, ``+dirty`` when the
    tree had changes, and the revision the caller stated where it was given too."""
    commit = str(git.get("commit"))
    text = commit + {True: "+dirty", None: " (tree state unknown)"}.get(git.get("dirty"), "")
    stated = git.get("stated")
    if stated:
        other = str(stated["commit"])
        if not (commit.startswith(other) or other.startswith(commit)):  # a short hash names the same commit
            text += f" (stated: {other}{'+dirty' if stated.get('dirty') else ''})"
    return text


def header_lines(res: TableResult) -> list[str]:
    cfg = res.config
    tcfg = cfg["tables"][res.table]
    recs = res.records_used
    # the build rewrites its own report files in the checkout: those changes are not code changes
    git = records.git_revision(exclude=tuple(str(cfg[k]) for k in ("reports_dir", "results_dir") if cfg.get(k)))
    hw = sorted({records.machine_description(r["environment"]) for r in recs}) or ["no runs"]
    rec_revs = sorted({_revision_text(r["environment"].get("git") or {}) for r in recs})
    options = sorted({f"{r['method']}/{r['variant']}: {json.dumps(r['config']['run_spec'].get('options') or {}, sort_keys=True)}"
                      for r in recs if (r.get("config") or {}).get("run_spec", {}).get("options")})
    sizes = sorted({f"{r['dataset']['name']}: n_train={r['dataset']['n_train']}, n_test={r['dataset']['n_test']}, "
                    f"source={r['dataset']['source']}" for r in recs}) or ["no runs"]
    epochs = sorted({r["hparams"].get("epochs") for r in recs if "epochs" in r["hparams"]})
    grid = cfg["grids"][cfg["grid"]][tcfg["grid"]]
    lines = [
        f"- generated: {records.now_utc()}",
        f"- git revision: {_revision_text(git)}",
        f"- profile: {cfg['profile']} (grid `{cfg['grid']}.{tcfg['grid']}`: "
        + ", ".join(f"{k}={v}" for k, v in grid.items()) + ")",
        f"- seeds: {cfg['seeds']}; epochs run: {epochs or '-'}",
        f"- data actually used: {'; '.join(sizes)}",
        f"- delta: {cfg['delta']} (DP-SGD family); pure-DP label randomizers have delta = 0",
        f"- accountant: {cfg['accountant']} (dp_accounting); sampling: {cfg['sampling']}",
        f"- hardware: {'; '.join(hw)}",
        f"- code revisions of the records: {', '.join(rec_revs) or '-'}",
    ]
    if options:
        lines.append(f"- method options of the runs: {'; '.join(options)}")
    if any(r["dataset"]["source"] != "official" for r in recs):
        lines.append("- **WARNING: some runs use SYNTHETIC stand-in data (smoke profile); their numbers are "
                     "not comparable to the paper.**")
    return lines


def render_markdown(res: TableResult) -> str:
    tcfg = res.config["tables"][res.table]
    metric = tcfg["metric"]
    out = [f"# {res.table}: {tcfg['title']} (paper Table {tcfg['paper_table']})", ""]
    out += header_lines(res)
    out.append("")
    out.append("Each cell: regenerated mean ± std over seeds of the best configuration (paper value in "
               "parentheses). **Bold**: best valid cell of the row among those with all planned seeds "
               "(a cell over fewer says \"(k of n seeds)\"; a Delta from such a cell says \"(partial)\"). † : not a valid privacy guarantee "
               "(reference only). `not run`: method or data not available yet. `+dirty`: the tree "
               "had uncommitted code or config changes.")
    out.append("")
    if res.nonprivate is not None:
        out.append(f"Non-private reference: {cell_text(res.nonprivate, metric)}"
                   + (f" — {res.nonprivate.reason}" if res.nonprivate.status != 'ok' else ""))
        out.append("")
    heads = ["eps"] + [c.label for c in res.columns]
    if tcfg.get("deltas"):
        heads += ["Δ_Baseline", "Δ_DP-SGD"]
    out.append("| " + " | ".join(heads) + " |")
    out.append("|" + "---|" * len(heads))
    for e in res.epsilons:
        row = [format_eps(e)]
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
    notes = sorted(f"{label} (eps {', '.join(eps)}{'; in each' if len(eps) > 1 else ''}): {why}"
                   for (label, why), eps in by_reason.items())
    invalid = sorted({f"{c.label}: {res.cells[(c.id, e)].invalid_reason or 'reference only'}" for c in res.columns
                      for e in res.epsilons if res.cells[(c.id, e)].reference_only or not res.cells[(c.id, e)].valid})
    if notes:
        out += ["", "Notes:"] + [f"- {n}" for n in notes]
    if invalid:
        out += ["", "† Not private as accounted:"] + [f"- {n}" for n in invalid]
    return "\n".join(out) + "\n"


def render_latex(res: TableResult) -> str:
    tcfg = res.config["tables"][res.table]
    metric = tcfg["metric"]
    heads = ["$\\epsilon$"] + [c.label.replace("_", r"\_") for c in res.columns]
    if tcfg.get("deltas"):
        heads += [r"$\Delta_{\mathrm{Baseline}}$", r"$\Delta_{\mathrm{DP\text{-}SGD}}$"]
    lines = [f"% {res.table}: built from result records; regenerated (paper)",
             r"\begin{tabular}{" + "l" * len(heads) + "}", r"\toprule", " & ".join(heads) + r" \\", r"\midrule"]
    for e in res.epsilons:
        row = [format_eps(e)] + [cell_text(res.cells[(c.id, e)], metric, bold=c.id in res.best[e], latex=True)
                                 for c in res.columns]
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
    for cell in cells:
        col = by_id.get(cell.column)
        rows.append({
            "table": res.table, "paper_table": tcfg["paper_table"], "dataset": tcfg["dataset"],
            "column": cell.column, "method": col.method if col else "nonprivate",
            "variant": col.variant if col else "default", "metric": tcfg["metric"],
            "epsilon": format_eps(cell.epsilon), "status": cell.status, "reason": cell.reason,
            "mean": cell.mean, "std": cell.std, "n_seeds": cell.n_seeds, "n_missing_seeds": cell.n_missing,
            "n_runs": cell.n_runs,
            "n_diverged": cell.n_diverged, "best_hparams": json.dumps(cell.best_hparams) if cell.best_hparams else "",
            "achieved_epsilon": None if cell.achieved_epsilon is None else format_eps(cell.achieved_epsilon),
            "delta": cell.delta, "valid": cell.valid and not cell.reference_only,
            "reference_only": cell.reference_only, "paper": cell.paper,
            "is_best": cell.column in res.best.get(cell.epsilon, set()),
        })
    return rows


def write_atomic_text(path: Path, text: str) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import csv
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0].keys()) if rows else ["table"])
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_atomic_text(path, buf.getvalue())


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
            ax.plot(xs, ys, "-o", color=color, label=c.label)
            ax.fill_between(xs, [y - s for y, s in zip(ys, sd)], [y + s for y, s in zip(ys, sd)], color=color, alpha=0.2)
        pp = [(e, x.paper) for e, x in pts if x.paper is not None]
        if pp:
            ax.plot([e for e, _ in pp], [v for _, v in pp], "o", mfc="none", color=color,
                    label=None if ok else f"{c.label} (paper)")
    ax.plot([], [], "o", mfc="none", color="gray", label="hollow: paper value")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel(tcfg["metric"])
    ax.set_title(f"{res.table}: {tcfg['title']}", fontsize=8)
    if not any_line:
        ax.text(0.5, 0.5, "not run: no method of this figure is implemented yet", transform=ax.transAxes,
                ha="center", va="center")
    ax.legend(fontsize=6)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    for path, kw in ((png, {"dpi": 120}), (pdf, {})):
        if path is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.part{path.suffix}")
        fig.savefig(tmp, **kw)
        os.replace(tmp, path)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", required=True)
    p.add_argument("--config-json", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--figure", action="store_true", help="a figure target: draw <table>.png/.pdf in --out-dir")
    p.add_argument("--plot-dir", default=None, help="a table target: also draw <table>.png/.pdf there")
    args = p.parse_args(argv)
    config = json.loads(args.config_json)
    if args.table not in config["tables"]:
        raise SystemExit(f"error: unknown table {args.table!r}; known: {sorted(config['tables'])}")
    res = build_table(config, args.table)
    out = Path(args.out_dir)
    write_csv(out / f"{args.table}.csv", tidy_rows(res))
    if args.figure:
        render_figure(res, out / f"{args.table}.png", out / f"{args.table}.pdf")
    else:
        write_atomic_text(out / f"{args.table}.tex", render_latex(res))
        if args.plot_dir:
            plots = Path(args.plot_dir)
            render_figure(res, plots / f"{args.table}.png", plots / f"{args.table}.pdf")
    write_atomic_text(out / f"{args.table}.md", render_markdown(res))
    print(f"wrote {out / args.table}.*")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
