"""Test accuracy after every epoch, from records (``renderer: learning_curves``): 001 Figure 3 and diagnostics.

001 Appendix E draws the test accuracy along training of LP-1ST and LP-2ST on CIFAR-10 at eps 2: LP-2ST's
stage 2 starts from the stage-1 model and climbs above LP-1ST. This figure runs nothing of its own: its
``learning_source`` names a table, an eps and columns; for each column it takes the configuration the
table reports for that cell (best mean, :func:`build_table`) and averages over that configuration's seeds
the test accuracy the records keep after every epoch of every stage (``details.per_stage[t]
.test_accuracy_by_epoch`` for ``lp_mst``, ``details.test_accuracy_by_epoch`` for ``lp_2st``, one stage per
key, and for ALIBI's ``test_curve_diagnostic``, one list), the stages one after another.

Beside the curve it states the cell's published value and the epochs whose seed-mean accuracy lies within
the scorecard's tolerance of it (``tolerance.accuracy_points``): how much of a cell's distance from the paper the
stopping epoch alone can explain. Choosing an epoch on this curve is choosing on the test set; it is a
diagnostic, not a selection. Where the records also hold the accuracy against the RR-released held-out labels
after every epoch (``details.validation_noisy_accuracy_by_epoch``, :func:`labeldp.selection.score_heldout`), it
also states the honest stopping epoch: the one whose seed-mean noisy held-out accuracy is highest, and the test
accuracy there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from labeldp import records
from labeldp.plan import cell_runs, columns
from labeldp.report.outputs import renderer
from labeldp.report.render import save_figure
from labeldp.report.scorecard import DEFAULT_TOLERANCE
from labeldp.report.tables import build_table

__all__ = ["epoch_curve", "epochs_within", "build_rows", "main_learning_curves"]


def _points(config: Mapping[str, Any]) -> float:
    """The scorecard's tolerance in points of accuracy (``tolerance.accuracy_points`` of the config)."""
    return float({**DEFAULT_TOLERANCE, **dict(config.get("tolerance") or {})}["accuracy_points"])


def epoch_curve(details: Mapping[str, Any]) -> list[tuple[int, float]] | None:
    """``[(stage, test accuracy after the epoch)]`` over the stages' epochs in order, or None when the record
    predates the curves."""
    if "per_stage" in details:
        stages = [s.get("test_accuracy_by_epoch") for s in details["per_stage"]]
    elif isinstance(details.get("test_accuracy_by_epoch"), Mapping):
        by = details["test_accuracy_by_epoch"]
        stages = [by[k] for k in sorted(by, key=lambda k: int(k.removeprefix("stage")))]
    elif isinstance(details.get("test_accuracy_by_epoch"), list):  # one stage (ALIBI's diagnostic)
        stages = [details["test_accuracy_by_epoch"]]
    else:
        return None
    if not stages or any(s is None for s in stages):
        return None
    return [(t, float(a)) for t, accs in enumerate(stages, start=1) for a in accs]


def epochs_within(accuracies: Sequence[float], paper: float, *, tolerance: float) -> list[range]:
    """The runs of consecutive epochs (1-based, as ``range``s) whose accuracy is within ``tolerance`` points of
    ``paper`` (inclusive), in order.

    Args:
      accuracies: the test accuracy after epoch 1, 2, ...
      paper: the published value.
      tolerance: the half-width of the band, in points.

    Returns:
      The maximal runs of epochs inside the band; empty when none is.
    """
    out: list[range] = []
    for epoch, acc in enumerate(accuracies, start=1):
        if abs(acc - paper) <= tolerance + 1e-9:
            if out and out[-1].stop == epoch:
                out[-1] = range(out[-1].start, epoch + 1)
            else:
                out.append(range(epoch, epoch + 1))
    return out


def _spans(runs: Sequence[range]) -> str:
    return ", ".join(f"{r.start}" if len(r) == 1 else f"{r.start}-{r.stop - 1}" for r in runs)


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
        curves, heldout = [], []
        for r in cell_runs(config, table, col, eps):
            if cell is None or cell.best_hparams is None or dict(r.spec.hparams) != dict(cell.best_hparams):
                continue
            if os.path.exists(r.record_path):
                details = records.read_record(r.record_path).get("details") or {}
                curve = epoch_curve(details)
                if curve:
                    curves.append(curve)
                    heldout.append(details.get("validation_noisy_accuracy_by_epoch"))
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
                    "validation_noisy_accuracy_pct": None,
                    "n_seeds": 0,
                    "paper": None if cell is None else cell.paper,
                }
            )
            continue
        mean = np.mean([[a for _, a in c] for c in curves], axis=0)
        # the noisy held-out accuracy after every epoch, where every seed's record has it for every epoch
        val = np.mean(heldout, axis=0) if all(v is not None and len(v) == len(mean) for v in heldout) else None
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
                    "validation_noisy_accuracy_pct": None if val is None else float(val[i - 1]),
                    "n_seeds": len(curves),
                    "paper": cell.paper,
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
        f"Paper: the cell's published value; the last column lists the epochs whose seed-mean accuracy is within "
        f"{_points(config):g} points of it (the scorecard's tolerance). Picking an epoch here is picking on the test "
        "set: a diagnostic of how far the stopping epoch alone moves the cell, not a selection. Where the records "
        "also hold the accuracy against the RR-released labels of held-out training rows after every epoch (a "
        "held-out variant, labeldp.selection), the honest stopping epoch is the one that maximises its seed mean: "
        "chosen without the test labels, its privacy the run's (the release is counted in the record's eps).",
        "",
        "| column | seeds | epochs (per stage) | best on the test set (epoch) | final | paper | epochs within "
        f"{_points(config):g} points of the paper | stopping epoch chosen on the held-out released labels: test "
        "accuracy (epoch) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cid in dict.fromkeys(r["column"] for r in rows):
        mine = [r for r in rows if r["column"] == cid]
        if mine[0]["status"] != "ok":
            out.append(f"| {mine[0]['label']} | not run: {mine[0]['reason']} | - | - | - | - | - | - |")
            continue
        per_stage = [sum(1 for r in mine if r["stage"] == s) for s in sorted({r["stage"] for r in mine})]
        accs = [r["test_accuracy_pct"] for r in mine]
        best = int(np.argmax(accs))
        paper = mine[0]["paper"]
        if paper is None:
            near = "- (no published value)"
        else:
            runs = epochs_within(accs, paper, tolerance=_points(config))
            near = f"{sum(map(len, runs))} of {len(accs)}: {_spans(runs)}" if runs else f"none of {len(accs)}"
        honest = _heldout_epoch(mine)
        chosen = "- (no held-out curve)" if honest is None else f"{accs[honest]:.2f} ({mine[honest]['epoch']})"
        out.append(
            f"| {mine[0]['label']} | {mine[0]['n_seeds']} | {len(mine)} ({' + '.join(map(str, per_stage))}) | "
            f"{accs[best]:.2f} ({mine[best]['epoch']}) | {accs[-1]:.2f} | "
            f"{'-' if paper is None else f'{paper:g}'} | {near} | {chosen} |"
        )
    return "\n".join(out) + "\n"


def _heldout_epoch(rows) -> int | None:
    """The index of the row (epoch) with the best noisy held-out accuracy (the first on ties), None without it."""
    val = [r["validation_noisy_accuracy_pct"] for r in rows]
    return None if any(v is None for v in val) else int(np.argmax(val))


def _plot(config, figure: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for cid in dict.fromkeys(r["column"] for r in rows if r["status"] == "ok"):
        mine = [r for r in rows if r["column"] == cid]
        (line,) = ax.plot([r["epoch"] for r in mine], [r["test_accuracy_pct"] for r in mine], label=mine[0]["label"])
        if mine[0]["paper"] is not None:
            paper = mine[0]["paper"]
            ax.axhline(paper, color=line.get_color(), linestyle="--", linewidth=0.8)
            ax.axhspan(paper - _points(config), paper + _points(config), color=line.get_color(), alpha=0.12)
        honest = _heldout_epoch(mine)
        if honest is not None:  # the stopping epoch chosen on the held-out released labels
            ax.axvline(mine[honest]["epoch"], color=line.get_color(), linestyle=":", linewidth=0.8)
    ax.set_xlabel("epoch (stages one after another)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(config["tables"][figure]["title"], fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: Writes ``<figure>.md``, ``.csv`` and its plot (``.png``, ``.pdf``) in ``out_dir`` (``plot_dir`` if given).
main_learning_curves = renderer(build_rows, _markdown, _plot)
