"""000 Table 12: the intersection point eps* where RR overtakes LabelDP-Pro (``renderer: intersection``).

000 Appendix E ("Intersection point"): below a threshold eps* LabelDP-Pro beats RR, above it RR-Debiased
(or RR) wins; Table 12 prints eps* as a bracket of two eps values, (a) against the number of classes K
(MNIST restricted to its first K classes) and (b) against delta (1/n, 1/n^1.1, 1/n^1.2). This renderer
runs nothing of its own: each of its ``rows`` names a source table (an eps sweep built only from
records, :func:`labeldp.report.tables.build_table`), the LabelDP-Pro column and the RR-family columns
to compare; per eps the baseline is the best of those columns' cells. eps* is bracketed by the last eps
where LabelDP-Pro is at least the baseline and the first larger eps where the baseline is better. A row
whose baseline never wins says "> largest eps", one whose baseline wins everywhere "< smallest eps", and
one where the order flips more than once says so (the bracket is then the first crossing). Cells that
are not run are left out and named. The paper's brackets are in ``labeldp_pro_table12.csv`` of the
reference directory (transcribed from 000 Table 12).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Mapping, Sequence

from labeldp.report.outputs import renderer
from labeldp.report.render import save_figure
from labeldp.report.tables import build_table

__all__ = ["bracket", "build_rows", "load_paper_brackets", "main_intersection"]


def bracket(eps: Sequence[float], pro: Sequence[float], baseline: Sequence[float]) -> dict[str, Any]:
    """eps* from two curves on the same increasing eps grid.

    Args:
      eps: increasing eps values.
      pro: LabelDP-Pro's accuracy at each eps.
      baseline: the RR family's best accuracy at each eps.

    Returns:
      ``{"low", "high", "text", "crossings"}``: ``low``/``high`` bound eps* (None when open), ``text`` is
      the paper's form ("1.2 ~ 1.3", "> 2", "< 0.5"), ``crossings`` the number of order changes.
    """
    if not (len(eps) == len(pro) == len(baseline)) or not eps:
        raise ValueError("bracket needs one LabelDP-Pro and one baseline value per eps (and at least one eps)")
    if any(b <= a for a, b in zip(eps, eps[1:])):
        raise ValueError(f"eps must increase, got {list(eps)}")
    rr_wins = [b > p for p, b in zip(pro, baseline)]
    crossings = sum(1 for a, b in zip(rr_wins, rr_wins[1:]) if a != b)
    if not any(rr_wins):
        return {"low": eps[-1], "high": None, "text": f"> {eps[-1]:g}", "crossings": crossings}
    first = rr_wins.index(True)
    if first == 0:
        return {"low": None, "high": eps[0], "text": f"< {eps[0]:g}", "crossings": crossings}
    return {
        "low": eps[first - 1],
        "high": eps[first],
        "text": f"{eps[first - 1]:g} ~ {eps[first]:g}",
        "crossings": crossings,
    }


def load_paper_brackets(reference_dir: str | Path) -> dict[tuple[str, str], str]:
    """``{(part, key): "low ~ high"}`` from ``labeldp_pro_table12.csv`` (empty when the file is absent)."""
    path = Path(reference_dir) / "labeldp_pro_table12.csv"
    if not path.exists():
        return {}
    with open(path) as f:
        return {(r["part"], r["key"]): f"{float(r['eps_low']):g} ~ {float(r['eps_high']):g}" for r in csv.DictReader(f)}


def build_rows(config: Mapping[str, Any], table: str) -> list[dict[str, Any]]:
    """One tidy row per configured row: the curves' values per eps, eps*, the paper's bracket."""
    tcfg = config["tables"][table]
    paper = load_paper_brackets(config["reference_dir"])
    built: dict[str, Any] = {}
    out = []
    for row in tcfg["rows"]:
        src = built.setdefault(row["table"], build_table(config, row["table"]))
        eps_ok, pro_v, base_v, base_col, missing = [], [], [], [], []
        for e in src.epsilons:
            pro = src.cells.get((row["pro"], e))
            bases = [(src.cells.get((c, e)), c) for c in row["baselines"]]
            bases = [(c.mean, cid) for c, cid in bases if c is not None and c.status == "ok"]
            if pro is None or pro.status != "ok" or not bases:
                missing.append(e)
                continue
            best, cid = max(bases)
            eps_ok.append(e)
            pro_v.append(pro.mean)
            base_v.append(best)
            base_col.append(cid)
        res = bracket(eps_ok, pro_v, base_v) if eps_ok else None
        standin = any(r.get("dataset", {}).get("source") == "synthetic_standin" for r in src.records_used)
        out.append(
            {
                "table": table,
                "part": row["part"],
                "key": row["key"],
                "label": row["label"],
                "source_table": row["table"],
                "status": "ok" if res else "not run",
                "reason": "" if res else f"no eps of {row['table']} has both LabelDP-Pro and a baseline cell",
                "eps_star": res["text"] if res else "",
                "eps_low": res["low"] if res else None,
                "eps_high": res["high"] if res else None,
                "crossings": res["crossings"] if res else None,
                "paper": paper.get((row["part"], row["key"]), ""),
                "epsilons": " ".join(f"{e:g}" for e in eps_ok),
                "labeldp_pro": " ".join(f"{v:.2f}" for v in pro_v),
                "baseline": " ".join(f"{v:.2f}" for v in base_v),
                "baseline_column": " ".join(base_col),
                "eps_not_run": " ".join(f"{e:g}" for e in missing),
                "standin": standin,
            }
        )
    return out


def _markdown(config, table: str, rows) -> str:
    tcfg = config["tables"][table]
    out = [
        f"# {table}: {tcfg['title']} (paper Table {tcfg['paper_table']})",
        "",
        "eps* brackets the eps where the RR family (the best of the row's baseline columns at each eps) first "
        "beats LabelDP-Pro: the last eps where LabelDP-Pro is at least as good, then the first where the "
        "baseline is better (000 Appendix E). Built from the source tables' cells (records only); the paper's "
        "bracket beside.",
        "",
    ]
    for part in dict.fromkeys(r["part"] for r in rows):
        out += [
            f"## ({part})",
            "",
            "| row | eps* | paper | order changes | source table | eps not run |",
            "|---|---|---|---|---|---|",
        ]
        for r in (r for r in rows if r["part"] == part):
            star = r["eps_star"] if r["status"] == "ok" else f"not run: {r['reason']}"
            flips = "" if r["crossings"] is None else str(r["crossings"])
            out.append(
                f"| {r['label']} | {star} | {r['paper'] or '-'} | {flips} | {r['source_table']} | "
                f"{r['eps_not_run'] or '-'} |"
            )
        out.append("")
    out += ["## Curves", "", "| row | eps | LabelDP-Pro | baseline (best of) |", "|---|---|---|---|"]
    for r in rows:
        if r["status"] == "ok":
            out.append(
                f"| {r['label']} | {r['epsilons']} | {r['labeldp_pro']} | {r['baseline']} ({r['baseline_column']}) |"
            )
    if any(r["standin"] for r in rows):
        out += ["", "STAND-IN DATA: some source tables ran on synthetic stand-ins of the real files."]
    return "\n".join(out) + "\n"


def _plot(config, table: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r["status"] == "ok"]
    fig, axes = plt.subplots(1, max(1, len(ok)), figsize=(3.0 * max(1, len(ok)), 2.8), squeeze=False)
    for ax, r in zip(axes[0], ok):
        eps = [float(e) for e in r["epsilons"].split()]
        ax.plot(eps, [float(v) for v in r["labeldp_pro"].split()], "o-", label="LabelDP-Pro")
        ax.plot(eps, [float(v) for v in r["baseline"].split()], "s--", label="RR family (best)")
        ax.set_title(f"{r['label']}: eps* {r['eps_star']}", fontsize=8)
        ax.set_xlabel("eps")
        ax.set_ylabel("test accuracy (%)")
        ax.legend(fontsize=6)
    fig.suptitle(config["tables"][table]["title"], fontsize=8)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: Writes ``<table>.md``, ``.csv``, ``.tex`` in ``out_dir`` and its plot in ``plot_dir``.
main_intersection = renderer(build_rows, _markdown, _plot, tex=True)
