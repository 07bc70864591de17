"""000 Figure 4: test-set confusion matrices of RR on SimCLR features (``renderer: confusion_matrices``).

000 Appendix E ("RR results in SelfSL"): below eps 1.6, RR on SimCLR features is worse than chance; the
confusion matrices of the model at initialisation and after RR training at eps 0.1 and 1.6 show why (the
predictions collapse onto a few classes). This figure runs nothing of its own: its ``confusion_source``
names a table, a column and eps values; for each eps it takes the configuration the table reports for
that cell (best mean, :func:`build_table`) and, of that configuration's runs, the lowest seed with a
record, whose ``details.confusion_matrix`` (trained) and ``details.confusion_matrix_init`` (the same
seed's model at initialisation) it draws. Rows are the true classes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from labeldp import records
from labeldp.plan import cell_runs, columns
from labeldp.report.render import save_figure, write_report_files
from labeldp.report.tables import build_table

__all__ = ["build_panels", "main_confusion"]


def build_panels(config: Mapping[str, Any], figure: str) -> list[dict[str, Any]]:
    """The panels: the model at initialisation (from the first eps's record), then one per eps; each
    ``{"title", "status", "reason", "matrix", "accuracy_pct", "seed", "hparams"}``."""
    src = config["tables"][figure]["confusion_source"]
    table = src["table"]
    col = {c.id: c for c in columns(config["tables"][table])}[src["column"]]
    res = build_table(config, table)
    panels, init = [], None
    for eps in (float(e) for e in src["epsilons"]):
        cell = res.cells.get((col.id, eps))
        runs = sorted(
            (
                r
                for r in cell_runs(config, table, col, eps)
                if cell is not None
                and cell.best_hparams is not None
                and dict(r.spec.hparams) == dict(cell.best_hparams)
                and os.path.exists(r.record_path)
            ),
            key=lambda r: r.spec.seed,
        )
        rec = records.read_record(runs[0].record_path) if runs else None
        details = (rec or {}).get("details") or {}
        if rec is None or "confusion_matrix" not in details:
            why = (
                "no record of the cell's configuration" if rec is None else "its record predates the confusion matrices"
            )
            panels.append(
                {
                    "title": f"{col.label}, eps = {eps:g}",
                    "status": "not run",
                    "reason": why,
                    "matrix": None,
                    "accuracy_pct": None,
                    "seed": None,
                    "hparams": "",
                }
            )
            continue
        hp = " ".join(f"{k}={v}" for k, v in sorted(cell.best_hparams.items()))
        seed = runs[0].spec.seed
        if init is None:
            init = {
                "title": "initialisation",
                "status": "ok",
                "reason": "",
                "matrix": details["confusion_matrix_init"],
                "seed": seed,
                "hparams": hp,
            }
        panels.append(
            {
                "title": f"{col.label}, eps = {eps:g}",
                "status": "ok",
                "reason": "",
                "matrix": details["confusion_matrix"],
                "seed": seed,
                "hparams": hp,
            }
        )
    for p in ([init] if init else []) + panels:
        if p["matrix"] is not None:
            m = np.asarray(p["matrix"])
            p["accuracy_pct"] = float(100.0 * np.trace(m) / max(m.sum(), 1))
    return ([init] if init else []) + panels


def _rows(figure: str, panels) -> list[dict[str, Any]]:
    out = []
    for p in panels:
        if p["matrix"] is None:
            out.append(
                {
                    "figure": figure,
                    "panel": p["title"],
                    "status": p["status"],
                    "reason": p["reason"],
                    "true": None,
                    "predicted": None,
                    "count": None,
                    "seed": None,
                }
            )
            continue
        for t, row in enumerate(p["matrix"]):
            for q, n in enumerate(row):
                out.append(
                    {
                        "figure": figure,
                        "panel": p["title"],
                        "status": "ok",
                        "reason": "",
                        "true": t,
                        "predicted": q,
                        "count": int(n),
                        "seed": p["seed"],
                    }
                )
    return out


def _markdown(config, figure: str, panels) -> str:
    fcfg = config["tables"][figure]
    src = fcfg["confusion_source"]
    out = [
        f"# {figure}: {fcfg['title']} (paper {fcfg['paper_table']})",
        "",
        f"From the records of `{src['table']}` (column `{src['column']}`): per eps, the cell's reported "
        "configuration, its lowest seed with a record; rows are true classes, columns predictions (test set).",
        "",
    ]
    for p in panels:
        if p["status"] != "ok":
            out += [f"## {p['title']}", "", f"not run: {p['reason']}", ""]
            continue
        m = np.asarray(p["matrix"])
        top = np.argsort(-m.sum(axis=0), kind="stable")[:3]
        out += [
            f"## {p['title']} (seed {p['seed']}; accuracy {p['accuracy_pct']:.1f}%)",
            "",
            f"configuration: {p['hparams']}; most predicted classes: "
            + ", ".join(f"{int(c)} ({int(m[:, c].sum())})" for c in top),
            "",
            "| true \\ predicted | " + " | ".join(str(i) for i in range(m.shape[1])) + " |",
            "|---|" + "---|" * m.shape[1],
        ]
        out += [f"| {t} | " + " | ".join(str(int(v)) for v in row) + " |" for t, row in enumerate(m)]
        out.append("")
    standin = config["tables"][src["table"]]["dataset"]
    out.append(f"dataset: `{standin}` (see the source table for whether it is a stand-in)")
    return "\n".join(out) + "\n"


def _plot(config, figure: str, panels, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(3.2 * max(1, len(panels)), 3.2), squeeze=False)
    for ax, p in zip(axes[0], panels):
        if p["matrix"] is None:
            ax.axis("off")
            ax.text(0.5, 0.5, f"{p['title']}\nnot run: {p['reason']}", ha="center", va="center", fontsize=7, wrap=True)
            continue
        m = np.asarray(p["matrix"], dtype=float)
        ax.imshow(m / np.maximum(m.sum(axis=1, keepdims=True), 1), vmin=0, vmax=1, cmap="Blues")
        ax.set_title(f"{p['title']} ({p['accuracy_pct']:.1f}%)", fontsize=7)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
    fig.suptitle(config["tables"][figure]["title"], fontsize=8)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


def main_confusion(config, figure: str, out_dir: Path, plot_dir: Path | None = None) -> int:
    """Writes ``<figure>.md``, ``.csv`` and its plot (``.png``, ``.pdf``) in ``out_dir`` (``plot_dir`` if given)."""
    panels = build_panels(config, figure)
    return write_report_files(
        out_dir,
        figure,
        rows=_rows(figure, panels),
        markdown=_markdown(config, figure, panels),
        draw=lambda png, pdf: _plot(config, figure, panels, png, pdf),
        plot_dir=plot_dir,
    )
