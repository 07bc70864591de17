"""001 Figure 3: learning curves of LP-1ST against LP-2ST (``renderer: learning_curves``).

001 Appendix E draws the test accuracy along training of LP-1ST and LP-2ST on CIFAR-10 at eps 2: LP-2ST's
stage 2 starts from the stage-1 model and climbs above LP-1ST. This figure runs nothing of its own: its
``learning_source`` names a table, an eps and columns; for each column it takes the configuration the
table reports for that cell (best mean, :func:`build_table`) and averages over that configuration's seeds
the test accuracy the LP-MST records keep after every epoch of every stage (``details.per_stage[t]
.test_accuracy_by_epoch`` for ``lp_mst``, ``details.test_accuracy_by_epoch`` for ``lp_2st``), the stages
one after another.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from labeldp import records
from labeldp.plan import cell_runs, columns
from labeldp.report.outputs import renderer
from labeldp.report.render import save_figure
from labeldp.report.tables import build_table

__all__ = ["epoch_curve", "build_rows", "main_learning_curves"]


def epoch_curve(details: Mapping[str, Any]) -> list[tuple[int, float]] | None:
    """``[(stage, test accuracy after the epoch)]`` over the stages' epochs in order, or None when the record
    predates the curves."""
    if "per_stage" in details:
        stages = [s.get("test_accuracy_by_epoch") for s in details["per_stage"]]
    elif isinstance(details.get("test_accuracy_by_epoch"), Mapping):
        by = details["test_accuracy_by_epoch"]
        stages = [by[k] for k in sorted(by, key=lambda k: int(k.removeprefix("stage")))]
    else:
        return None
    if not stages or any(s is None for s in stages):
        return None
    return [(t, float(a)) for t, accs in enumerate(stages, start=1) for a in accs]


def build_rows(config: Mapping[str, Any], figure: str) -> list[dict[str, Any]]:
    """One tidy row per (column, epoch): the stage and the seed-mean test accuracy; a column without such
    records gets one ``not run`` row."""
    src = config["tables"][figure]["learning_source"]
    table, eps = src["table"], float(src["epsilon"])
    res = build_table(config, table)
    cols = {c.id: c for c in columns(config["tables"][table])}
    out = []
    for cid in src["columns"]:
        col, cell = cols[cid], res.cells.get((cid, eps))
        curves = []
        for r in cell_runs(config, table, col, eps):
            if cell is None or cell.best_hparams is None or dict(r.spec.hparams) != dict(cell.best_hparams):
                continue
            if os.path.exists(r.record_path):
                curve = epoch_curve(records.read_record(r.record_path).get("details") or {})
                if curve:
                    curves.append(curve)
        if not curves or len({tuple(t for t, _ in c) for c in curves}) != 1:
            why = (
                "no record of the cell's configuration has per-epoch test accuracy"
                if not curves
                else "the seeds' curves differ in length"
            )
            out.append(
                {
                    "figure": figure,
                    "column": cid,
                    "label": col.label,
                    "status": "not run",
                    "reason": why,
                    "epoch": None,
                    "stage": None,
                    "test_accuracy_pct": None,
                    "n_seeds": 0,
                }
            )
            continue
        mean = np.mean([[a for _, a in c] for c in curves], axis=0)
        for i, ((stage, _), acc) in enumerate(zip(curves[0], mean), start=1):
            out.append(
                {
                    "figure": figure,
                    "column": cid,
                    "label": col.label,
                    "status": "ok",
                    "reason": "",
                    "epoch": i,
                    "stage": stage,
                    "test_accuracy_pct": float(acc),
                    "n_seeds": len(curves),
                }
            )
    return out


def _markdown(config, figure: str, rows) -> str:
    fcfg = config["tables"][figure]
    src = fcfg["learning_source"]
    out = [
        f"# {figure}: {fcfg['title']} (paper {fcfg['paper_table']})",
        "",
        f"From the records of `{src['table']}` at eps {float(src['epsilon']):g}: per column, the configuration its "
        "cell reports, the seed mean of the test accuracy after every epoch, the stages one after another.",
        "",
        "| column | seeds | epochs (per stage) | best | final |",
        "|---|---|---|---|---|",
    ]
    for cid in dict.fromkeys(r["column"] for r in rows):
        mine = [r for r in rows if r["column"] == cid]
        if mine[0]["status"] != "ok":
            out.append(f"| {mine[0]['label']} | not run: {mine[0]['reason']} | - | - | - |")
            continue
        per_stage = [sum(1 for r in mine if r["stage"] == s) for s in sorted({r["stage"] for r in mine})]
        out.append(
            f"| {mine[0]['label']} | {mine[0]['n_seeds']} | {len(mine)} ({' + '.join(map(str, per_stage))}) | "
            f"{max(r['test_accuracy_pct'] for r in mine):.2f} | {mine[-1]['test_accuracy_pct']:.2f} |"
        )
    return "\n".join(out) + "\n"


def _plot(config, figure: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for cid in dict.fromkeys(r["column"] for r in rows if r["status"] == "ok"):
        mine = [r for r in rows if r["column"] == cid]
        ax.plot([r["epoch"] for r in mine], [r["test_accuracy_pct"] for r in mine], label=mine[0]["label"])
    ax.set_xlabel("epoch (stages one after another)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(config["tables"][figure]["title"], fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: Writes ``<figure>.md``, ``.csv`` and its plot (``.png``, ``.pdf``) in ``out_dir`` (``plot_dir`` if given).
main_learning_curves = renderer(build_rows, _markdown, _plot)
