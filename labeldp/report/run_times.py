"""000 Table 11: seconds per training epoch of each method per dataset, from the records of the
tables' runs (``renderer: run_times``; issue 31).

000 Table 11 times one epoch of RR, RR-Debiased, LP-2ST, DP-SGD and LabelDP-Pro (batch 1024; 200
projection steps) on a P100 (MNIST, CIFAR-10, CIFAR-10 SimCLR features) and an A100 (Criteo
Attribution, k = 5). This table runs nothing: for each source table of the config (``sources``:
``{table, ref_dataset}``, the reference CSV's dataset key) and each method of ``methods``, it
reads the ``timings.seconds_per_epoch`` of every existing record of that table's runs with that
method and prints their median, the number of runs and the machines they ran on (each record's
``environment``), beside the paper's value. Timings from different machines are never pooled
into one number without saying so, and they are not scored (the scorecard compares results, not
hardware).
"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping

from labeldp import records
from labeldp.plan import table_runs
from labeldp.report.outputs import renderer
from labeldp.report.render import save_figure
from labeldp.report.reference import load_reference

__all__ = ["build_rows", "main_run_times", "METRIC"]

METRIC = "seconds_per_epoch"


def _paper(ref, dataset: str, method: str) -> float | None:
    for r in ref:
        if r["table"] == "11" and r["dataset"] == dataset and r["method"] == method and r["metric"] == METRIC:
            return float(r["value"])
    return None


def build_rows(config: Mapping[str, Any], table: str, ref) -> list[dict[str, Any]]:
    """One tidy row per (source table, method, machine): the median seconds per epoch over the
    existing records of that machine (timings of different machines are never pooled); a method
    without any record gets one ``not run`` row."""
    tcfg = config["tables"][table]
    rows = []
    for src in tcfg["sources"]:
        by_key: dict[tuple[str, str], list[float]] = defaultdict(list)
        standin: dict[str, set] = defaultdict(set)
        for run in table_runs(config, src["table"]):
            if run.spec.method not in tcfg["methods"] or not os.path.exists(run.record_path):
                continue
            r = records.read_record(run.record_path)
            if "seconds_per_epoch" not in (r.get("timings") or {}):
                continue
            by_key[(run.spec.method, records.machine_description(r["environment"]))].append(
                float(r["timings"]["seconds_per_epoch"])
            )
            if r["dataset"].get("source") == "synthetic_standin":
                standin[run.spec.method].add(r["dataset"]["name"])
        for method in tcfg["methods"]:
            machines = sorted(m for (meth, m) in by_key if meth == method) or [None]
            for machine in machines:
                vals = by_key.get((method, machine), [])
                rows.append(
                    {
                        "table": table,
                        "paper_table": tcfg["paper_table"],
                        "dataset": src["ref_dataset"],
                        "source_table": src["table"],
                        "column": method,
                        "method": method,
                        "epsilon": "",
                        "metric": METRIC,
                        "machine": machine or "",
                        "status": "ok" if vals else "not run",
                        "reason": "" if vals else f"no record of {method} in {src['table']}'s runs",
                        "mean": statistics.median(vals) if vals else None,
                        "std": None,
                        "n_runs": len(vals),
                        "paper": _paper(ref, src["ref_dataset"], method),
                        "standin": ", ".join(sorted(standin[method])),
                        "valid": True,
                    }
                )
    return rows


def _markdown(config, table: str, rows) -> str:
    tcfg = config["tables"][table]
    out = [
        f"# {table}: {tcfg['title']} (paper Table {tcfg['paper_table']})",
        "",
        "Each cell: the median of `timings.seconds_per_epoch` over the existing records of the source table's "
        "runs of that method on that machine (training only, compilation in the first epoch included; [runs "
        "timed]); the paper's value (P100; Criteo Attribution on an A100) in parentheses. Machines are never "
        "pooled. Not scored: the hardware differs.",
        "",
    ]
    methods = list(tcfg["methods"])
    out.append("| dataset (source table) | machine | " + " | ".join(methods) + " |")
    out.append("|---|---|" + "---|" * len(methods))
    for src in tcfg["sources"]:
        mine = [r for r in rows if r["source_table"] == src["table"]]
        machines = sorted({r["machine"] for r in mine if r["machine"]}) or [""]
        for machine in machines:
            cells = []
            for m in methods:
                hit = [r for r in mine if r["method"] == m and r["machine"] == machine]
                paper = next((r["paper"] for r in mine if r["method"] == m), None)
                ptxt = "-" if paper is None else f"{paper:g}"
                cells.append(
                    f"{hit[0]['mean']:.3g} [{hit[0]['n_runs']}] ({ptxt})"
                    if hit and hit[0]["mean"] is not None
                    else f"not run ({ptxt})"
                )
            out.append(f"| {src['ref_dataset']} ({src['table']}) | {machine or '-'} | " + " | ".join(cells) + " |")
    standin = sorted({d for r in rows for d in r["standin"].split(", ") if d})
    if standin:
        out += ["", f"STAND-IN DATA: the timings of {', '.join(standin)} are on synthetic stand-ins of the real files."]
    return "\n".join(out) + "\n"


def _plot(config, table: str, rows, png: Path, pdf: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.2))
    rows = [r for r in rows if r["mean"] is not None or r["paper"] is not None]
    labels = [f"{r['dataset']}\n{r['method']}\n{r['machine'][:18]}" for r in rows]
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["mean"] or 0 for r in rows], width=0.4, label="regenerated (median)")
    ax.bar([x + 0.2 for x in xs], [r["paper"] or 0 for r in rows], width=0.4, label="paper (P100 / A100)", fill=False)
    ax.set_xticks(list(xs), labels, rotation=90, fontsize=6)
    ax.set_yscale("symlog")
    ax.set_ylabel("seconds per epoch")
    ax.set_title(config["tables"][table]["title"], fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, png, pdf)
    plt.close(fig)


#: Writes ``<table>.md``, ``.csv``, ``.tex`` in ``out_dir`` and its plot in ``plot_dir``.
main_run_times = renderer(
    lambda config, table: build_rows(config, table, load_reference(config["reference_dir"])), _markdown, _plot, tex=True
)
