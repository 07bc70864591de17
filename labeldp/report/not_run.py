"""A table or figure of a paper that cannot run anywhere (``renderer: not_run``): proprietary data.

002 Table 4 and Figure 3 (ii) use 002's proprietary pCVR dataset; 003 Figure 5b uses App Ads data. Their
targets exist so that every experiment of the four papers has one, and each says "not run" with its
reason, cell by cell, beside every value the paper prints for it (from the reference directory), never a
number of ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from labeldp.report.outputs import renderer
from labeldp.report.render import save_figure
from labeldp.report.reference import load_reference

__all__ = ["build_rows", "main_not_run"]


def build_rows(config: Mapping[str, Any], table: str) -> list[dict[str, Any]]:
    """One ``not run`` row per published cell of the paper table (one row if the paper prints none)."""
    tcfg = config["tables"][table]
    ref = [r for r in load_reference(config["reference_dir"]) if r["table"] == tcfg["paper_table"]]
    base = {"table": table, "paper_table": tcfg["paper_table"], "status": "not run", "reason": tcfg["reason"]}
    if not ref:
        return [{**base, "dataset": "", "method": "", "epsilon": "", "k": "", "metric": "", "paper": None}]
    return [
        {
            **base,
            "dataset": r["dataset"],
            "method": r["method"],
            "epsilon": r["epsilon"],
            "k": r.get("k") or "",
            "metric": r["metric"],
            "paper": float(r["value"]),
        }
        for r in ref
    ]


def _markdown(config, table: str, rows) -> str:
    tcfg = config["tables"][table]
    out = [f"# {table}: {tcfg['title']} (paper {tcfg['paper_table']})", "", f"**Not run: {tcfg['reason']}**", ""]
    if rows[0]["paper"] is None:
        return "\n".join(out + ["The paper prints no values for it in the reference directory."]) + "\n"
    out += ["| dataset | method | eps | k | metric | regenerated | paper |", "|---|---|---|---|---|---|---|"]
    out += [
        f"| {r['dataset']} | {r['method']} | {r['epsilon']} | {r['k'] or '-'} | {r['metric']} | not run | "
        f"{r['paper']:g} |"
        for r in rows
    ]
    return "\n".join(out) + "\n"


def _plot(config, table: str, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tcfg = config["tables"][table]
    fig, ax = plt.subplots(figsize=(6, 1.6))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{tcfg['title']}\nnot run: {tcfg['reason']}", ha="center", va="center", wrap=True, fontsize=8)
    save_figure(fig, png, pdf)
    plt.close(fig)


#: Writes ``<table>.md``, ``.csv``, ``.tex`` in ``out_dir`` and a plot that says "not run" (``plot_dir``).
main_not_run = renderer(
    build_rows, _markdown, lambda config, table, rows, png, pdf: _plot(config, table, png, pdf), tex=True
)
