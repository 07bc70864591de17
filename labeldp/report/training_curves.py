"""000 Figure 2: gradient norm and training loss along training, per smoothing coefficient lambda
(``renderer: training_curves``).

000 Section 3.3: without smoothing (lambda = 1) the projection coefficients sometimes put their weight on a
wrong class and the gradient norm spikes; lambda < 1 stabilises training (Figure 2, Table 2). This figure
runs nothing of its own: its ``source`` names a table (one column per lambda) and an eps; for each column
it takes the configuration the table reports for that cell (its best mean, :func:`build_table`) and
averages over that configuration's seeds the per-run curves the DP loop records
(``details.training_curves``: block means of the per-step loss and of the norm of the noisy, projected
gradient, :meth:`labeldp.dpsgd.loop.DPLoopResult.curves`). These are diagnostics of training, not private
outputs.
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

__all__ = ["build_rows", "main_training_curves"]

CURVES = ("grad_norm", "loss")


def build_rows(config: Mapping[str, Any], figure: str) -> list[dict[str, Any]]:
    """One tidy row per (column, point): the step, the seed-mean loss and gradient norm; a column
    without records (or whose records predate the curves) gets one ``not run`` row."""
    src = config["tables"][figure]["source"]
    table, eps = src["table"], float(src["epsilon"])
    res = build_table(config, table)
    out = []
    for col in columns(config["tables"][table]):
        cell = res.cells.get((col.id, eps))
        runs = [
            r
            for r in cell_runs(config, table, col, eps)
            if cell is not None and cell.best_hparams is not None and dict(r.spec.hparams) == dict(cell.best_hparams)
        ]
        curves = [
            (records.read_record(r.record_path).get("details") or {}).get("training_curves")
            for r in runs
            if os.path.exists(r.record_path)
        ]
        curves = [c for c in curves if c and c.get("loss")]
        if not curves or len({(c["steps_per_point"], len(c["loss"])) for c in curves}) != 1:
            why = (
                "no record of the cell's configuration has training curves"
                if not curves
                else "the seeds' curves differ in length"
            )
            out.append(
                {
                    "figure": figure,
                    "column": col.id,
                    "label": col.label,
                    "status": "not run",
                    "reason": why,
                    "point": None,
                    "step": None,
                    "loss": None,
                    "grad_norm": None,
                    "n_seeds": 0,
                    "hparams": "",
                }
            )
            continue
        every = curves[0]["steps_per_point"]
        means = {k: np.mean([c[k] for c in curves], axis=0) for k in CURVES}
        for i in range(len(curves[0]["loss"])):
            out.append(
                {
                    "figure": figure,
                    "column": col.id,
                    "label": col.label,
                    "status": "ok",
                    "reason": "",
                    "point": i,
                    "step": (i + 1) * every,
                    "loss": float(means["loss"][i]),
                    "grad_norm": float(means["grad_norm"][i]),
                    "n_seeds": len(curves),
                    "hparams": " ".join(f"{k}={v}" for k, v in sorted(cell.best_hparams.items())),
                }
            )
    return out


def _markdown(config, figure: str, rows) -> str:
    fcfg = config["tables"][figure]
    src = fcfg["source"]
    out = [
        f"# {figure}: {fcfg['title']} (paper {fcfg['paper_table']})",
        "",
        f"From the records of `{src['table']}` at eps {float(src['epsilon']):g}: per column, the configuration "
        "its cell reports, the seed mean of the per-run curves (block means of the per-step training loss and "
        "of the norm of the noisy, projected gradient). Diagnostics, not private outputs.",
        "",
        "| column | configuration | seeds | max gradient norm | final loss |",
        "|---|---|---|---|---|",
    ]
    for col in dict.fromkeys(r["column"] for r in rows):
        mine = [r for r in rows if r["column"] == col]
        if mine[0]["status"] != "ok":
            out.append(f"| {mine[0]['label']} | not run: {mine[0]['reason']} | - | - | - |")
            continue
        out.append(
            f"| {mine[0]['label']} | {mine[0]['hparams']} | {mine[0]['n_seeds']} | "
            f"{max(r['grad_norm'] for r in mine):.4g} | {mine[-1]['loss']:.4g} |"
        )
    return "\n".join(out) + "\n"


def _plot(config, figure: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.0))
    for col in dict.fromkeys(r["column"] for r in rows if r["status"] == "ok"):
        mine = [r for r in rows if r["column"] == col]
        for ax, key in zip(axes, CURVES):
            ax.plot([r["step"] for r in mine], [r[key] for r in mine], label=mine[0]["label"])
    for ax, key in zip(axes, ("gradient norm", "training loss")):
        ax.set_xlabel("step")
        ax.set_ylabel(key)
        ax.legend(fontsize=6)
    fig.suptitle(config["tables"][figure]["title"], fontsize=8)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: Writes ``<figure>.md``, ``.csv`` and its plot (``.png``, ``.pdf``) in ``out_dir`` (``plot_dir`` if given).
main_training_curves = renderer(build_rows, _markdown, _plot)
