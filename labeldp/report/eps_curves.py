"""A figure of metric-against-eps curves drawn from other tables' cells (``renderer: eps_curves``).

002 draws its tables as figures: Figure 2 is the relative AUC loss on Criteo Attribution against eps with
(i) example-level and (ii) user-level DP, "for each eps, the lowest loss among the different example caps";
Figure 3 (i) is Criteo pCTR; Figure 4 is pCTR with 64 epochs of DP-SGD. Such a figure runs nothing: each
of its ``panels`` names a source table (built only from records, :func:`labeldp.report.tables.build_table`)
and its ``series``; a series gathers the source's columns whose published counterpart is ``ref_method``
and takes, per eps, the best of their cells (the lowest for a lower-is-better metric, as 002's minimum
over caps) and the best of their published values the same way. Cells that are not run are left out.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from labeldp.report.outputs import renderer
from labeldp.report.render import save_figure
from labeldp.report.tables import LOWER_IS_BETTER, build_table

__all__ = ["build_rows", "main_eps_curves"]


def build_rows(config: Mapping[str, Any], figure: str) -> list[dict[str, Any]]:
    """One tidy row per (panel, series, eps): the best regenerated cell and the best published value over
    the series' columns, and which column gave the regenerated one."""
    fcfg = config["tables"][figure]
    built: dict[str, Any] = {}
    out = []
    for p_i, panel in enumerate(fcfg["panels"]):
        src = built.setdefault(panel["table"], build_table(config, panel["table"]))
        metric = src.config["tables"][panel["table"]]["metric"]
        pick = min if metric in LOWER_IS_BETTER else max
        for series in panel["series"]:
            cols = [c for c in src.columns if c.ref_method == series["ref_method"]]
            for e in src.epsilons:
                cells = [(src.cells[(c.id, e)], c.id) for c in cols if (c.id, e) in src.cells]
                ran = [(cell.mean, cid) for cell, cid in cells if cell.status == "ok" and cell.mean is not None]
                papers = [cell.paper for cell, _ in cells if cell.paper is not None]
                best = pick(ran) if ran else None
                out.append(
                    {
                        "figure": figure,
                        "panel": p_i,
                        "panel_title": panel["title"],
                        "source_table": panel["table"],
                        "series": series["label"],
                        "epsilon": e,
                        "metric": metric,
                        "status": "ok" if best else "not run",
                        "reason": ""
                        if best
                        else f"no cell of {series['ref_method']} in {panel['table']} at eps {e:g} ran",
                        "value": best[0] if best else None,
                        "column": best[1] if best else "",
                        "columns_considered": " ".join(c.id for c in cols),
                        "paper": pick(papers) if papers else None,
                        "standin": any(
                            r.get("dataset", {}).get("source") == "synthetic_standin" for r in src.records_used
                        ),
                    }
                )
    return out


def _markdown(config, figure: str, rows) -> str:
    fcfg = config["tables"][figure]
    out = [
        f"# {figure}: {fcfg['title']} (paper {fcfg['paper_table']})",
        "",
        "Each point: the best cell over the series' columns at that eps (the lowest for a lower-is-better "
        "metric, as 002's minimum over example caps), from the source table's records; the paper's value, "
        "chosen the same way, in parentheses.",
        "",
    ]
    for p_i, panel in enumerate(fcfg["panels"]):
        mine = [r for r in rows if r["panel"] == p_i]
        eps = sorted({r["epsilon"] for r in mine})
        series = list(dict.fromkeys(r["series"] for r in mine))
        out += [
            f"## {panel['title']} (from {panel['table']})",
            "",
            "| eps | " + " | ".join(series) + " |",
            "|---|" + "---|" * len(series),
        ]
        for e in eps:
            cells = []
            for s in series:
                r = next(r for r in mine if r["series"] == s and r["epsilon"] == e)
                paper = "-" if r["paper"] is None else f"{r['paper']:.4g}"
                val = f"{r['value']:.4g} [{r['column']}]" if r["status"] == "ok" else "not run"
                cells.append(f"{val} ({paper})")
            out.append(f"| {e:g} | " + " | ".join(cells) + " |")
        out.append("")
    if any(r["standin"] for r in rows):
        out += ["STAND-IN DATA: some panels are built on synthetic stand-ins of the real files, not the paper's data."]
    return "\n".join(out) + "\n"


def _plot(config, figure: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fcfg = config["tables"][figure]
    n = len(fcfg["panels"])
    fig, axes = plt.subplots(1, n, figsize=(4.0 * n, 3.2), squeeze=False)
    for p_i, (ax, panel) in enumerate(zip(axes[0], fcfg["panels"])):
        mine = [r for r in rows if r["panel"] == p_i]
        for i, s in enumerate(dict.fromkeys(r["series"] for r in mine)):
            pts = sorted((r["epsilon"], r["value"], r["paper"]) for r in mine if r["series"] == s)
            color = f"C{i}"
            ran = [(e, v) for e, v, _ in pts if v is not None and math.isfinite(v)]
            if ran:
                ax.plot(*zip(*ran), "o-", color=color, label=f"{s} (regenerated)")
            pub = [(e, p) for e, _, p in pts if p is not None]
            if pub:
                ax.plot(*zip(*pub), "x--", color=color, alpha=0.6, label=f"{s} (paper)")
        ax.set_xscale("log")
        ax.set_xlabel("eps")
        ax.set_ylabel(mine[0]["metric"] if mine else "")
        ax.set_title(panel["title"], fontsize=8)
        ax.legend(fontsize=6)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: Writes ``<figure>.md``, ``.csv`` and the plot (``.png``, ``.pdf``) in ``out_dir`` (the plot in
#: ``plot_dir`` when given).
main_eps_curves = renderer(build_rows, _markdown, _plot)
