"""001 Figures 4 and 5: LP-2ST's robustness sweeps (``renderer: grid_heatmap`` and ``renderer: top_k_violin``).

001 Appendix E sweeps LP-2ST on CIFAR-10 at eps 2:

* Figure 4 (a): the final test accuracy over the stage-1 / stage-2 split and the prior's temperature;
  (b): over the mixup coefficients of stage 1 and stage 2. ``grid_heatmap`` draws one heat map per panel
  (``heatmap_panels: [{table, column, epsilon, x, y, title}]``): for every (x, y) grid point of the panel's table
  the seed mean of the final test accuracy, the best over any other axis the grid varies.
* Figure 5: the final test accuracy against the stage-1 model's test top-k accuracy at k = the rounded mean
  k* RRWithPrior computed (``details.filter_k``); ``top_k_violin`` bins the runs of its ``violin_sources``
  (``[{table, column, epsilon}]``) by that top-k accuracy (``violin_bins``, percent edges) and draws the final
  accuracies of each bin as a violin.

Both run nothing of their own and read only records. 001 prints these figures as plots without values, so
no published number stands beside them; every output names its datasets (and says when a source table ran
on a synthetic stand-in).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from labeldp import records
from labeldp.plan import cell_runs, columns
from labeldp.report.outputs import renderer, save_figure

__all__ = ["heatmap_rows", "violin_rows", "main_grid_heatmap", "main_top_k_violin", "DEFAULT_BINS"]

#: the stage-1 top-k accuracy ranges (percent) of Figure 5's x axis when a figure gives no ``violin_bins``
DEFAULT_BINS = (0.0, 60.0, 70.0, 80.0, 90.0, 95.0, 100.0)


def _records(config: Mapping[str, Any], table: str, column: str, eps: float):
    """``(planned run, record)`` of every existing record behind one cell; the number of planned runs."""
    col = {c.id: c for c in columns(config["tables"][table])}[column]
    runs = cell_runs(config, table, col, float(eps))
    found = [(r, records.read_record(r.record_path)) for r in runs if os.path.exists(r.record_path)]
    return col, found, len(runs)


def _is_standin(rec: Mapping[str, Any]) -> bool:
    return (rec.get("dataset") or {}).get("source", "official") != "official"


def heatmap_rows(config: Mapping[str, Any], figure: str) -> list[dict[str, Any]]:
    """One tidy row per (panel, x, y): the seed mean (and std) of the final test accuracy of that grid point,
    the best mean over the other axes; a panel without records gets one ``not run`` row."""
    out = []
    for panel in config["tables"][figure]["heatmap_panels"]:
        x_key, y_key = panel["x"], panel["y"]
        col, found, planned = _records(config, panel["table"], panel["column"], panel["epsilon"])
        base = {"figure": figure, "panel": panel["title"], "table": panel["table"], "x_axis": x_key, "y_axis": y_key}
        if not found:
            out.append({**base, "status": "not run", "reason": f"no record of {panel['table']}'s runs yet", "x": None})
            continue
        by_point: dict[tuple, dict[tuple, list[float]]] = {}
        for run, rec in found:
            hp = dict(run.spec.hparams)
            rest = tuple(sorted((k, v) for k, v in hp.items() if k not in (x_key, y_key)))
            point = (hp.get(x_key), hp.get(y_key))
            by_point.setdefault(point, {}).setdefault(rest, []).append(float(rec["metrics"]["test_accuracy_pct"]))
        standin = any(_is_standin(rec) for _, rec in found)
        for (x, y), per_rest in sorted(by_point.items(), key=lambda kv: (float(kv[0][0]), float(kv[0][1]))):
            rest, accs = max(per_rest.items(), key=lambda kv: np.mean(kv[1]))
            out.append(
                {
                    **base,
                    "status": "ok",
                    "reason": "",
                    "x": float(x),
                    "y": float(y),
                    "test_accuracy_pct": float(np.mean(accs)),
                    "std": float(np.std(accs)),
                    "n_seeds": len(accs),
                    "other_axes": ";".join(f"{k}={v}" for k, v in rest),
                    "n_records": len(found),
                    "n_planned_runs": planned,
                    "dataset": config["tables"][panel["table"]]["dataset"],
                    "standin": standin,
                }
            )
    return out


def _heatmap_markdown(config, figure: str, rows) -> str:
    fcfg = config["tables"][figure]
    out = [f"# {figure}: {fcfg['title']} (paper {fcfg['paper_table']})", ""]
    out += [
        "From result records only: per panel, the seed mean of LP-2ST's final test accuracy (%) at every grid point "
        "(the best mean over any other axis the grid varies). 001 prints this figure as a plot without values: "
        "there is no published number to compare.",
        "",
    ]
    for title in dict.fromkeys(r["panel"] for r in rows):
        mine = [r for r in rows if r["panel"] == title]
        out += [f"## {title}", ""]
        if mine[0]["status"] != "ok":
            out += [f"not run: {mine[0]['reason']}", ""]
            continue
        r0 = mine[0]
        done = f"{r0['n_records']} of {r0['n_planned_runs']} planned runs have records"
        out += [f"dataset `{r0['dataset']}`; {done}" + ("; **STAND-IN DATA**" if r0["standin"] else ""), ""]
        xs = sorted({r["x"] for r in mine})
        ys = sorted({r["y"] for r in mine})
        cell = {(r["x"], r["y"]): r for r in mine}
        out.append(f"| {r0['y_axis']} \\ {r0['x_axis']} | " + " | ".join(f"{x:g}" for x in xs) + " |")
        out.append("|---|" + "---|" * len(xs))
        for y in ys:
            vals = [
                f"{cell[(x, y)]['test_accuracy_pct']:.2f} ± {cell[(x, y)]['std']:.2f}" if (x, y) in cell else "-"
                for x in xs
            ]
            out.append(f"| {y:g} | " + " | ".join(vals) + " |")
        out.append("")
    return "\n".join(out)


def _heatmap_plot(config, figure: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys(r["panel"] for r in rows))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, title in zip(axes[0], panels):
        mine = [r for r in rows if r["panel"] == title and r["status"] == "ok"]
        ax.set_title(title, fontsize=8)
        if not mine:
            ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            continue
        xs, ys = sorted({r["x"] for r in mine}), sorted({r["y"] for r in mine})
        grid = np.full((len(ys), len(xs)), np.nan)
        for r in mine:
            grid[ys.index(r["y"]), xs.index(r["x"])] = r["test_accuracy_pct"]
        im = ax.imshow(grid, origin="lower", cmap="viridis", aspect="auto")
        for i in range(len(ys)):
            for j in range(len(xs)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", fontsize=7, color="w")
        ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs])
        ax.set_yticks(range(len(ys)), [f"{y:g}" for y in ys])
        ax.set_xlabel(mine[0]["x_axis"])
        ax.set_ylabel(mine[0]["y_axis"])
        fig.colorbar(im, ax=ax, label="test accuracy (%)")
    standin = " [STAND-IN DATA]" if any(r.get("standin") for r in rows) else ""
    fig.suptitle(config["tables"][figure]["title"] + standin, fontsize=8)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: 001 Figure 4: writes ``<figure>.md``, ``.csv`` and the heat maps (``.png``, ``.pdf``).
main_grid_heatmap = renderer(heatmap_rows, _heatmap_markdown, _heatmap_plot)


def stage1_top_k(details: Mapping[str, Any]) -> tuple[int, float] | None:
    """``(k, the stage-1 model's test top-k accuracy)`` at k = ``filter_k`` of an LP-2ST record, or None when
    the record predates the top-k accuracies."""
    top = details.get("stage1_test_top_k_accuracy_pct")
    k = details.get("filter_k")
    if not top or k is None:
        return None
    return int(k), float(top[int(k) - 1])


def _bin_label(edges: list[float], b: int) -> str:
    """``[lo, hi)``; the last bin includes its upper edge."""
    return f"[{edges[b]:g}, {edges[b + 1]:g}" + ("]" if b == len(edges) - 2 else ")")


def violin_rows(config: Mapping[str, Any], figure: str) -> list[dict[str, Any]]:
    """One tidy row per LP-2ST record of the sources: its stage-1 top-k accuracy (at k = filter_k), that
    accuracy's bin and the final test accuracy; a figure without such records gets one ``not run`` row."""
    fcfg = config["tables"][figure]
    edges = [float(e) for e in fcfg.get("violin_bins", DEFAULT_BINS)]
    out, seen, skipped = [], set(), 0
    for src in fcfg["violin_sources"]:
        col, found, _ = _records(config, src["table"], src["column"], src["epsilon"])
        for run, rec in found:
            if run.record_path in seen:  # a run two sweeps share (e.g. (b)'s point at (a)'s defaults) counts once
                continue
            seen.add(run.record_path)
            point = stage1_top_k(rec.get("details") or {})
            if point is None:
                skipped += 1
                continue
            k, top = point
            b = min(int(np.searchsorted(edges, top, side="right")) - 1, len(edges) - 2)
            out.append(
                {
                    "figure": figure,
                    "status": "ok",
                    "reason": "",
                    "table": src["table"],
                    "dataset": config["tables"][src["table"]]["dataset"],
                    "standin": _is_standin(rec),
                    "seed": run.spec.seed,
                    "hparams": ";".join(f"{a}={v}" for a, v in sorted(run.spec.hparams.items())),
                    "filter_k": k,
                    "stage1_top_k_accuracy_pct": top,
                    "bin": _bin_label(edges, max(b, 0)),
                    "test_accuracy_pct": float(rec["metrics"]["test_accuracy_pct"]),
                }
            )
    if not out:
        tables = ", ".join(s["table"] for s in fcfg["violin_sources"])
        why = f"no LP-2ST record of {tables} with the stage-1 top-k accuracies yet"
        out.append({"figure": figure, "status": "not run", "reason": why})
    for r in out:
        r["n_records_without_top_k"] = skipped  # records that predate the top-k accuracies: not drawn
    return out


def _violin_markdown(config, figure: str, rows) -> str:
    fcfg = config["tables"][figure]
    out = [f"# {figure}: {fcfg['title']} (paper {fcfg['paper_table']})", ""]
    out += [
        "From result records only: every LP-2ST run of "
        + ", ".join(f"`{s['table']}`" for s in fcfg["violin_sources"])
        + ", binned by its stage-1 model's test top-k accuracy at k = round(mean k*) of RRWithPrior; the final "
        "test accuracy (%) of the runs in each bin. 001 prints this figure as a plot without values.",
        "",
    ]
    if rows[0]["status"] != "ok":
        return "\n".join(out + [f"not run: {rows[0]['reason']}", ""])
    if rows[0]["n_records_without_top_k"]:
        out += [
            f"{rows[0]['n_records_without_top_k']} records predate the stage-1 top-k accuracies and are not drawn.",
            "",
        ]
    if any(r["standin"] for r in rows):
        out += ["**STAND-IN DATA**: some runs are on synthetic stand-ins of the real files.", ""]
    out += ["| stage-1 top-k accuracy (%) | runs | final accuracy: min | median | max |", "|---|---|---|---|---|"]
    for b in dict.fromkeys(r["bin"] for r in sorted(rows, key=lambda r: r["stage1_top_k_accuracy_pct"])):
        accs = [r["test_accuracy_pct"] for r in rows if r["bin"] == b]
        out.append(f"| {b} | {len(accs)} | {min(accs):.2f} | {np.median(accs):.2f} | {max(accs):.2f} |")
    return "\n".join(out) + "\n"


def _violin_plot(config, figure: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ok = [r for r in rows if r["status"] == "ok"]
    if ok:
        bins = list(dict.fromkeys(r["bin"] for r in sorted(ok, key=lambda r: r["stage1_top_k_accuracy_pct"])))
        data = [[r["test_accuracy_pct"] for r in ok if r["bin"] == b] for b in bins]
        ax.violinplot(data, showmedians=True)
        ax.set_xticks(range(1, len(bins) + 1), bins, fontsize=7)
    else:
        ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("stage-1 test top-k accuracy (%), k = round(mean k*)")
    ax.set_ylabel("LP-2ST final test accuracy (%)")
    standin = " [STAND-IN DATA]" if any(r.get("standin") for r in ok) else ""
    ax.set_title(config["tables"][figure]["title"] + standin, fontsize=8)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: 001 Figure 5: writes ``<figure>.md``, ``.csv`` and the violins (``.png``, ``.pdf``).
main_top_k_violin = renderer(violin_rows, _violin_markdown, _violin_plot)
