"""003's regression outputs from result records: Figures 3, 4, 5a and Table G.3.

A table entry with ``renderer: regression`` is built here (dispatched from
:mod:`labeldp.report.tables`), with the same cell selection as every other table
(:func:`labeldp.report.tables.build_table`) and one of three plots (``regression_plot``):

* ``vs_epsilon`` (Figures 4, 5a): (a) the noisy-label MSE on the training set and (b) the test
  MSE against eps, one line per randomizer, error bars = std over seeds;
* ``joint_density`` (Figure 3): per randomizer, a heat map of the joint density of (label,
  randomized label) at the table's eps, from the records' coarse joint histogram (one seed);
* ``mesh_table`` (Table G.3): per column, the randomizer's construction (LP) time, the noisy-label
  loss and the test loss, next to 003's published values.

Every output states the selection protocol (003's: the best *test* MSE over the grid, which
selects on the test set; or the honest one: the lowest MSE on held-out *noisy* training labels)
and, when the data is not the paper's, that it is a stand-in.
"""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
from pathlib import Path
from typing import Any, Mapping

from labeldp import records
from labeldp.plan import cell_runs, hp_id
from labeldp.report.metrics import selection_kind
from labeldp.report.render import NOT_RUN, save_figure, write_atomic_text
from labeldp.report.tables import build_table

__all__ = ["main_regression", "selected_records", "protocol_text"]

PAPER_PROTOCOL = (
    "003's protocol: each cell is the grid point with the lowest mean TEST MSE over seeds "
    "(this selects on the test set, as the paper reports 'the best test loss over the grid')"
)
PROTOCOLS = {
    "test_mse": PAPER_PROTOCOL,
    "validation_noisy_mse": "honest protocol: each cell is the grid point with the lowest mean MSE on a held-out 10% "
    "of the training split scored with its RANDOMIZED labels only (no true label and no test "
    "label is read to select)",
}


def protocol_text(tcfg: Mapping[str, Any]) -> str:
    return PROTOCOLS[tcfg.get("selection_metric") or "test_mse"]


def selected_records(config, table: str, col, eps: float, cell) -> list[dict]:
    """The records of a cell's reported grid point (all its seeds that have a record)."""
    if cell.status != "ok" or cell.best_hparams is None:
        return []
    want = hp_id(cell.best_hparams)
    out = []
    for r in cell_runs(config, table, col, eps):
        if hp_id(r.spec.hparams) == want and os.path.exists(r.record_path):
            out.append(records.read_record(r.record_path))
    return out


def _mean_std(vals: list[float]) -> tuple[float | None, float | None]:
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    if not vals:
        return None, None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def _fmt(m, s=None, n=None, digits=4) -> str:
    if m is None:
        return "-"
    txt = f"{m:.{digits}g}" + (f" ± {s:.2g}" if s else "")
    return txt + (f" ({n} seeds)" if n is not None else "")


def _g3_paper(ref, method: str, mesh) -> dict | None:
    return next(
        (p for p in ref if p["mechanism"] == method and (p["mesh_size"] or None) == (str(mesh) if mesh else None)), None
    )


def _rows(config, table: str, res) -> list[dict[str, Any]]:
    """One tidy row per (column, eps): selected config, test MSE, noisy-label MSE, LP seconds;
    with the scorecard's fields (``paper_table``, ``metric``, ``mean``, ``std``, ``paper``)."""
    tcfg = config["tables"][table]
    ref = _load_g3_reference(config, tcfg["dataset"]) if tcfg.get("regression_plot") == "mesh_table" else []
    rows = []
    for c in res.columns:
        for e in res.epsilons:
            cell = res.cells[(c.id, e)]
            recs = selected_records(config, table, c, e, cell)
            test = _mean_std([float(r["metrics"]["test_mse"]) for r in recs])
            noisy = _mean_std([float(r["metrics"]["noisy_label_mse"]) for r in recs])
            lp = _mean_std([r["details"].get("randomizer_build_seconds") for r in recs])
            sources = sorted({r["dataset"]["source"] for r in recs})
            rows.append(
                {
                    "table": table,
                    "column": c.id,
                    "label": c.label,
                    "method": c.method,
                    "epsilon": e,
                    "status": cell.status,
                    "reason": cell.reason,
                    "n_seeds": len(recs),
                    "n_planned_seeds": cell.n_planned_seeds,
                    "selected_hparams": hp_id(cell.best_hparams) if cell.best_hparams else "",
                    "test_mse_mean": test[0],
                    "test_mse_std": test[1],
                    "noisy_label_mse_mean": noisy[0],
                    "noisy_label_mse_std": noisy[1],
                    "randomizer_seconds_mean": lp[0],
                    "epsilon1": recs[0]["details"].get("epsilon1") if recs else None,
                    "epsilon2": recs[0]["details"].get("epsilon2") if recs else None,
                    "mesh_size": recs[0]["details"].get("mesh_size") if recs else None,
                    "achieved_epsilon": cell.achieved_epsilon,
                    "neighboring_relation": recs[0]["privacy"]["neighboring_relation"] if recs else None,
                    "privacy_valid": cell.valid,
                    "data_source": ";".join(sources),
                    "selection_metric": tcfg_selection(config, table),
                    "selection": selection_kind(config["tables"][table]),
                    "paper_table": tcfg["paper_table"],
                    "metric": tcfg["metric"],
                    "mean": test[0],
                    "std": test[1],
                    "valid": cell.valid,
                    "_records": recs,
                }
            )
            mesh = rows[-1]["mesh_size"] or (c.fixed_hparams or {}).get("mesh_size")
            paper = _g3_paper(ref, c.method, mesh) if ref else None
            rows[-1]["paper"] = float(paper["test_loss"]) if paper and paper.get("test_loss") else None
    return rows


def tcfg_selection(config, table) -> str:
    return config["tables"][table].get("selection_metric") or "test_mse"


def _header(config, table: str, rows) -> list[str]:
    tcfg = config["tables"][table]
    sources = sorted({s for r in rows for s in r["data_source"].split(";") if s})
    lines = [f"# {table}: {tcfg['title']}", ""]
    if any(s != "official" for s in sources) or tcfg.get("standin_note"):
        lines += [
            f"**STAND-IN DATA, not the paper's data set** (record sources: {', '.join(sources) or '-'}). "
            + (tcfg.get("standin_note") or "Numbers are not comparable with 003's."),
            "",
        ]
    lines += [
        f"- paper: 003 {tcfg['paper_table']}; dataset `{tcfg['dataset']}`; seeds {tcfg.get('seeds') or config['seeds']}",
        f"- selection: {protocol_text(tcfg)}",
        "- privacy: every randomizer is pure eps-label-DP under label substitution (one training label changes), "
        "for labels in the dataset's fixed range; RR-on-Bins and the optimal unbiased randomizer spend eps1 on a "
        "Laplace-histogram prior and eps2 = eps - eps1 on the randomizer (basic composition)",
        f"- generated: {records.now_utc()}",
        "",
    ]
    return lines


def _markdown_vs_epsilon(config, table, res, rows) -> str:
    lines = _header(config, table, rows)
    by = {(r["column"], r["epsilon"]): r for r in rows}
    for title, key in (
        ("(b) test MSE (true test labels)", "test_mse"),
        ("(a) noisy-label MSE on the training set", "noisy_label_mse"),
    ):
        lines += [
            f"## {title}",
            "",
            "| eps | " + " | ".join(c.label for c in res.columns) + " |",
            "|---|" + "---|" * len(res.columns),
        ]
        for e in res.epsilons:
            cells = []
            for c in res.columns:
                r = by[(c.id, e)]
                if r["status"] != "ok":
                    cells.append(
                        f"{NOT_RUN}: {r['reason']}" if r["status"] == NOT_RUN else f"{r['status']}: {r['reason']}"
                    )
                else:
                    partial = (
                        ""
                        if r["n_seeds"] == r["n_planned_seeds"]
                        else f" ({r['n_seeds']} of {r['n_planned_seeds']} seeds)"
                    )
                    cells.append(_fmt(r[f"{key}_mean"], r[f"{key}_std"]) + partial)
            lines.append(f"| {e:g} | " + " | ".join(cells) + " |")
        lines.append("")
    npc = res.nonprivate
    if npc is not None:
        lines += [
            "Non-private reference (the same MLP on the true labels, grid point chosen by the same rule): "
            + (
                f"test MSE {_fmt(npc.mean, npc.std)} ({npc.n_seeds} seeds)"
                if npc.status == "ok"
                else f"{npc.status}: {npc.reason}"
            ),
            "",
        ]
    lines += [
        "Selected grid points: "
        + "; ".join(f"{r['label']} @ {r['epsilon']:g}: {r['selected_hparams']}" for r in rows if r["selected_hparams"]),
        "",
    ]
    return "\n".join(lines)


G3_DATASET = "census1940"  # 003 Table G.3 is on the Census; another data set has no paper value


def _load_g3_reference(config, dataset: str = G3_DATASET) -> list[dict]:
    path = Path(config.get("reference_dir", "workflow/resources/reference")) / "unbiased_regression_tables.csv"
    if dataset != G3_DATASET or not path.exists():
        return []
    with open(path) as fh:
        return [r for r in csv.DictReader(fh) if r["table"] == "G.3"]


def _markdown_mesh_table(config, table, res, rows) -> str:
    ref = _load_g3_reference(config, config["tables"][table]["dataset"])
    lines = _header(config, table, rows)
    lines += [
        "| randomizer | mesh | seconds to compute: ours (paper) | noisy-label loss: ours (paper) | "
        "test loss: ours (paper) | seeds |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        paper = _g3_paper(ref, r["method"], r["mesh_size"])
        pv = lambda k: f" ({paper[k]})" if paper and paper.get(k) else " (-)"
        if r["status"] != "ok":
            lines.append(f"| {r['label']} | {r['mesh_size'] or '-'} | {NOT_RUN}: {r['reason']} | | | |")
            continue
        lines.append(
            f"| {r['label']} | {r['mesh_size'] or '-'} | {_fmt(r['randomizer_seconds_mean'])}{pv('seconds_to_compute')} | "
            f"{_fmt(r['noisy_label_mse_mean'], r['noisy_label_mse_std'])}{pv('noisy_label_loss')} | "
            f"{_fmt(r['test_mse_mean'], r['test_mse_std'])}{pv('test_loss')} | {r['n_seeds']} |"
        )
    lines += [
        "",
        "Seconds: the randomizer's construction on this run's machine (for the optimal unbiased randomizer, "
        "the LP of 003 Algorithm 1 with HiGHS plus the polish); 003 does not state its machine.",
        "",
    ]
    return "\n".join(lines)


def _plot(config, table, res, rows, png: Path, pdf: Path | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import numpy as np

    tcfg = config["tables"][table]
    kind = tcfg.get("regression_plot", "vs_epsilon")
    standin = " [STAND-IN DATA]" if any(r["data_source"] not in ("", "official") for r in rows) else ""
    if kind == "joint_density":
        ok = [r for r in rows if r["status"] == "ok" and r["_records"]]
        n = max(len(ok), 1)
        fig, axes = plt.subplots(1, n, figsize=(3 * n, 3), squeeze=False)
        for ax, r in zip(axes[0], ok):
            h = r["_records"][0]["details"]["joint_histogram"]
            counts = np.asarray(h["counts"], float)
            ax.imshow(
                np.log1p(counts.T),
                origin="lower",
                aspect="auto",
                cmap="viridis",
                extent=[h["label_edges"][0], h["label_edges"][-1], h["noisy_edges"][0], h["noisy_edges"][-1]],
            )
            ax.set_title(r["label"], fontsize=8)
            ax.set_xlabel("label", fontsize=7)
            ax.set_ylabel("randomized label", fontsize=7)
        if not ok:
            axes[0][0].text(0.5, 0.5, "not run: no records", ha="center", va="center")
        fig.suptitle(
            f"{table}: log(1 + count) of (label, randomized label), eps = {res.epsilons[0]:g}{standin}", fontsize=8
        )
    elif kind == "mesh_table":
        fig, ax = plt.subplots(figsize=(5, 3.5))
        pts = [(r["mesh_size"], r["randomizer_seconds_mean"]) for r in rows if r["status"] == "ok" and r["mesh_size"]]
        if pts:
            ax.plot(*zip(*pts), "-o", label="ours")
        ref = [
            (float(p["mesh_size"]), float(p["seconds_to_compute"]))
            for p in _load_g3_reference(config, tcfg["dataset"])
            if p["mesh_size"]
        ]
        if ref:
            ax.plot(*zip(*ref), "o", mfc="none", label="003 Table G.3")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("mesh size")
        ax.set_ylabel("seconds to build the randomizer")
        ax.legend(fontsize=7)
        ax.set_title(f"{table}{standin}", fontsize=8)
    else:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, key, name in (
            (axes[0], "noisy_label_mse", "(a) noisy-label MSE (train)"),
            (axes[1], "test_mse", "(b) test MSE"),
        ):
            for i, c in enumerate(res.columns):
                pts = [r for r in rows if r["column"] == c.id and r["status"] == "ok"]
                if pts:
                    ax.errorbar(
                        [r["epsilon"] for r in pts],
                        [r[f"{key}_mean"] for r in pts],
                        yerr=[r[f"{key}_std"] or 0 for r in pts],
                        fmt="-o",
                        color=f"C{i}",
                        label=c.label,
                        capsize=2,
                    )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(res.epsilons)
            ax.set_xticklabels([f"{e:g}" for e in res.epsilons])
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel("epsilon")
            ax.set_title(name, fontsize=9)
        npc = res.nonprivate
        if npc is not None and npc.status == "ok":
            axes[1].axhline(npc.mean, color="black", ls="--", lw=1, label="non-private")
        axes[1].legend(fontsize=6)
        fig.suptitle(f"{table}: {tcfg['title']}{standin}\nselection: {tcfg_selection(config, table)}", fontsize=8)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


def main_regression(config, table: str, out_dir: Path, plot_dir: Path | None = None) -> int:
    """Writes ``<table>.md``, ``.csv`` (and ``.tex`` for a table) in ``out_dir`` and the plot
    (``.png``, ``.pdf``) in ``plot_dir`` (a table) or ``out_dir`` (a figure)."""

    tcfg = config["tables"][table]
    res = build_table(config, table)
    rows = _rows(config, table, res)
    kind = tcfg.get("regression_plot", "vs_epsilon")
    md = (
        _markdown_mesh_table(config, table, res, rows)
        if kind == "mesh_table"
        else _markdown_vs_epsilon(config, table, res, rows)
    )
    if kind == "joint_density":
        md += "\nThe heat maps (PNG/PDF) show one seed of each randomizer's selected configuration.\n"
    buf = io.StringIO()
    fields = [k for k in rows[0] if not k.startswith("_")] if rows else ["table"]
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic_text(out_dir / f"{table}.csv", buf.getvalue())
    is_table = tcfg.get("kind", "table") == "table"
    if is_table:
        write_atomic_text(
            out_dir / f"{table}.tex",
            "% generated from result records (same content as the .md)\n"
            "\\begin{verbatim}\n" + md + "\n\\end{verbatim}\n",
        )
    plots = plot_dir if (is_table and plot_dir) else out_dir
    _plot(config, table, res, rows, plots / f"{table}.png", plots / f"{table}.pdf")
    write_atomic_text(out_dir / f"{table}.md", md)
    print(f"wrote {out_dir / table}.*")
    return 0
