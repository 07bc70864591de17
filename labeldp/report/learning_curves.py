"""Test accuracy after every epoch, from records (``renderer: learning_curves``): 001 Figure 3 and diagnostics.

001 Appendix E draws the test accuracy along training of LP-1ST and LP-2ST on CIFAR-10 at eps 2: LP-2ST's
stage 2 starts from the stage-1 model and climbs above LP-1ST. This figure runs nothing of its own: its
``learning_source`` names a table, its eps and columns; for each eps and column it takes the configuration the
table reports for that cell (best mean, :func:`build_table`) and averages over that configuration's seeds
the test accuracy the records keep after every epoch of every stage (``details.per_stage[t]
.test_accuracy_by_epoch`` for ``lp_mst``, ``details.test_accuracy_by_epoch`` for ``lp_2st``, one stage per
key, and for ALIBI's ``test_curve_diagnostic``, one list), the stages one after another.

Beside the curve it states the cell's published value (dashed in the plot, every column, 001 Figure 3's too)
and the epochs whose seed-mean accuracy lies within the scorecard's accuracy tolerance of it
(``tolerance.accuracy_points``; its std term not applied): how much of a cell's distance from the paper the
stopping epoch alone can explain. Choosing an epoch on this curve is choosing on the test set; it is a
diagnostic, not a selection. Where the records also hold the accuracy against the RR-released held-out labels
after every epoch (``details.validation_noisy_accuracy_by_epoch``, :func:`labeldp.selection.score_heldout`),
it also states each seed's honest stopping epoch (the one where that run's model agrees best with the cell's one
RR release of the held-out labels) and the seed mean of the test accuracy there.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from labeldp import records
from labeldp.heldout_stopping import stopping_epoch
from labeldp.plan import cell_runs, columns
from labeldp.report.outputs import renderer
from labeldp.report.render import save_figure
from labeldp.report.scorecard import tolerance_for
from labeldp.report.tables import build_table

__all__ = ["epoch_curve", "epochs_within", "heldout_stopping", "build_rows", "main_learning_curves"]


def _points(config: Mapping[str, Any], paper: float) -> float:
    """The scorecard's tolerance for a seed-mean accuracy against ``paper``, without its std term
    (:func:`labeldp.report.scorecard.tolerance_for` with no std): ``tolerance.accuracy_points``."""
    return tolerance_for("test_accuracy_pct", paper=paper, std=None, tol=config.get("tolerance") or {})


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
    ``paper`` (inclusive, as the scorecard compares), in order.

    Args:
      accuracies: the test accuracy after epoch 1, 2, ...
      paper: the published value.
      tolerance: the half-width of the band, in points.

    Returns:
      The maximal runs of epochs inside the band; empty when none is.
    """
    out: list[range] = []
    for epoch, acc in enumerate(accuracies, start=1):
        if abs(acc - paper) <= tolerance:
            if out and out[-1].stop == epoch:
                out[-1] = range(out[-1].start, epoch + 1)
            else:
                out.append(range(epoch, epoch + 1))
    return out


def _spans(runs: Sequence[range]) -> str:
    """``"8-10, 13"``: the runs of :func:`epochs_within`, 1-based and inclusive."""
    return ", ".join(f"{r.start}" if len(r) == 1 else f"{r.start}-{r.stop - 1}" for r in runs)


def heldout_stopping(
    tests: Sequence[Sequence[float]], *, heldout: Sequence[Sequence[float] | None]
) -> tuple[list[int], float | None, str]:
    """Each seed's honest stopping epoch and the seed-mean test accuracy there.

    A seed's epoch is :func:`labeldp.heldout_stopping.stopping_epoch` of its held-out curve (the first where its
    run's model agrees best with the cell's one RR release of the held-out labels; that module states the
    guarantee: the eps its record states). The test accuracy is read only to report the chosen epochs' value.

    Args:
      tests: per seed, the test accuracy after every epoch.
      heldout: per seed (the same order), the noisy held-out accuracy after every epoch (None where the record
        has none).

    Returns:
      ``(epochs, accuracy, why not)``: the 1-based epoch per seed and the mean test accuracy at them, or
      ``([], None, reason)`` when some seed has no held-out curve of its test curve's length.

    Raises:
      ValueError: ``tests`` and ``heldout`` of different lengths.
    """
    have = [
        v is not None and len(v) == len(t) > 0 and bool(np.all(np.isfinite(v)))
        for t, v in zip(tests, heldout, strict=True)
    ]
    if not any(have):
        return [], None, "no held-out curve in the records"
    if not all(have):
        return [], None, f"held-out curve in {sum(have)} of {len(have)} seeds"
    chosen = [stopping_epoch(v) for v in heldout]
    return chosen, float(np.mean([t[e - 1] for t, e in zip(tests, chosen)])), ""


def build_rows(config: Mapping[str, Any], figure: str) -> list[dict[str, Any]]:
    """One tidy row per (eps, column, epoch); a cell without such records gets one ``not run`` row.

    Each row: the stage, the seed-mean test accuracy (``test_accuracy_pct``), the seed-mean noisy held-out
    accuracy where every seed has it (``validation_noisy_accuracy_pct``, else None), the cell's published value
    (``paper``) and, repeated on each of the column's rows, :func:`heldout_stopping`'s epochs
    (``heldout_stopping_epochs``, ``"4; 5; 3"``), accuracy (``heldout_stopping_test_accuracy_pct``) and reason
    (``heldout_stopping_reason``).

    Args:
      config: the workflow config.
      figure: the figure's table name (its ``learning_source`` names the table, the eps and the columns).

    Returns:
      The rows, eps then columns in ``learning_source`` order.
    """
    src = config["tables"][figure]["learning_source"]
    table = src["table"]
    res = build_table(config, table)
    cols = {c.id: c for c in columns(config["tables"][table])}
    out = []
    for eps, cid in ((float(e), c) for e in src["epsilons"] for c in src["columns"]):
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
        base = {
            "figure": figure,
            "epsilon": eps,
            "column": cid,
            "label": col.label,
            "paper": None if cell is None else cell.paper,
        }
        if not curves or len({tuple(t for t, _ in c) for c in curves}) != 1:
            why = (
                "no record of the cell's configuration has per-epoch test accuracy"
                if not curves
                else "the seeds' curves differ in length"
            )
            out.append(
                {
                    **base,
                    "status": "not run",
                    "reason": why,
                    "epoch": None,
                    "stage": None,
                    "test_accuracy_pct": None,
                    "validation_noisy_accuracy_pct": None,
                    "n_seeds": 0,
                    "heldout_stopping_epochs": "",
                    "heldout_stopping_test_accuracy_pct": None,
                    "heldout_stopping_reason": why,
                }
            )
            continue
        tests = [[a for _, a in c] for c in curves]
        mean = np.mean(tests, axis=0)
        epochs, honest, why_not = heldout_stopping(tests, heldout=heldout)
        val = np.mean(heldout, axis=0) if honest is not None else None
        for i, ((stage, _), acc) in enumerate(zip(curves[0], mean), start=1):
            out.append(
                {
                    **base,
                    "status": "ok",
                    "reason": "",
                    "epoch": i,
                    "stage": stage,
                    "test_accuracy_pct": float(acc),
                    "validation_noisy_accuracy_pct": None if val is None else float(val[i - 1]),
                    "n_seeds": len(curves),
                    "heldout_stopping_epochs": "; ".join(map(str, epochs)),
                    "heldout_stopping_test_accuracy_pct": honest,
                    "heldout_stopping_reason": why_not,
                }
            )
    return out


def _cells(rows) -> list[tuple[float, str]]:
    """The rows' (eps, column) cells in order."""
    return list(dict.fromkeys((r["epsilon"], r["column"]) for r in rows))


def _markdown(config, figure: str, rows) -> str:
    fcfg = config["tables"][figure]
    src = fcfg["learning_source"]
    points = _points(config, 0.0)
    out = [
        f"# {figure}: {fcfg['title']} (paper {fcfg['paper_table']})",
        "",
        f"From the records of `{src['table']}` at eps {', '.join(f'{float(e):g}' for e in src['epsilons'])}: per eps "
        "and column, the configuration its cell reports, the seed mean of the test accuracy after every epoch, the "
        "stages one after another.",
        "",
        f"Paper: the cell's published value. 'Epochs within {points:g} points' lists the epochs whose seed-mean "
        "accuracy is within the scorecard's accuracy tolerance of it (its std term not applied). Picking an epoch "
        "there is picking on the test set: a diagnostic of how far the stopping epoch alone moves the cell, not a "
        "selection. Where the records also hold the accuracy against the RR-released labels of held-out training "
        "rows after every epoch (a held-out variant, labeldp.selection), the last column gives each seed's honest "
        "stopping epoch, the one where that run's model agrees best with the cell's one RR release of the held-out "
        "labels, and the seed mean of the test accuracy there: chosen without the test labels, by post-processing "
        "the run and the release (disjoint rows), so each chosen model has its record's eps, max(eps of the run, "
        "eps of the release) by parallel composition.",
        "",
        "| eps | column | seeds | epochs (per stage) | best on the test set (epoch) | final | paper | epochs within "
        f"{points:g} points of the paper | stopping epoch chosen on the released held-out labels: test accuracy "
        "(epoch per seed) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for eps, cid in _cells(rows):
        mine = [r for r in rows if (r["epsilon"], r["column"]) == (eps, cid)]
        if mine[0]["status"] != "ok":
            out.append(f"| {eps:g} | {mine[0]['label']} | not run: {mine[0]['reason']} | - | - | - | - | - | - |")
            continue
        per_stage = [sum(1 for r in mine if r["stage"] == s) for s in sorted({r["stage"] for r in mine})]
        accs = [r["test_accuracy_pct"] for r in mine]
        best = int(np.argmax(accs))
        paper = mine[0]["paper"]
        if paper is None:
            near = "- (no published value)"
        else:
            runs = epochs_within(accs, paper, tolerance=_points(config, paper))
            near = f"{sum(map(len, runs))} of {len(accs)}: {_spans(runs)}" if runs else f"none of {len(accs)}"
        honest = mine[0]["heldout_stopping_test_accuracy_pct"]
        chosen = (
            f"- ({mine[0]['heldout_stopping_reason']})"
            if honest is None
            else f"{honest:.2f} ({mine[0]['heldout_stopping_epochs']})"
        )
        out.append(
            f"| {eps:g} | {mine[0]['label']} | {mine[0]['n_seeds']} | {len(mine)} ({' + '.join(map(str, per_stage))}) | "
            f"{accs[best]:.2f} ({mine[best]['epoch']}) | {accs[-1]:.2f} | "
            f"{'-' if paper is None else f'{paper:g}'} | {near} | {chosen} |"
        )
    return "\n".join(out) + "\n"


def _plot(config, figure: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    eps_list = list(dict.fromkeys(r["epsilon"] for r in rows))
    fig, axes = plt.subplots(1, len(eps_list), figsize=(5 * len(eps_list), 3.2), squeeze=False)
    for eps, cid in _cells([r for r in rows if r["status"] == "ok"]):
        ax = axes[0][eps_list.index(eps)]
        mine = [r for r in rows if (r["epsilon"], r["column"]) == (eps, cid)]
        (line,) = ax.plot([r["epoch"] for r in mine], [r["test_accuracy_pct"] for r in mine], label=mine[0]["label"])
        if mine[0]["paper"] is not None:
            paper = mine[0]["paper"]
            band = _points(config, paper)
            ax.axhline(paper, color=line.get_color(), linestyle="--", linewidth=0.8)
            ax.axhspan(paper - band, paper + band, color=line.get_color(), alpha=0.12)
        for epoch in filter(None, mine[0]["heldout_stopping_epochs"].split("; ")):  # each seed's honest epoch
            ax.axvline(int(epoch), color=line.get_color(), linestyle=":", linewidth=0.8)
    for eps, ax in zip(eps_list, axes[0]):
        ax.set_xlabel("epoch (stages one after another)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"eps {eps:g}", fontsize=8)
        if ax.has_data():
            ax.legend(fontsize=7)
    fig.suptitle("\n".join(textwrap.wrap(config["tables"][figure]["title"], 80 * len(eps_list))), fontsize=7)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: Writes ``<figure>.md``, ``.csv`` and its plot (``.png``, ``.pdf``) in ``out_dir`` (``plot_dir`` if given).
main_learning_curves = renderer(build_rows, _markdown, _plot)
