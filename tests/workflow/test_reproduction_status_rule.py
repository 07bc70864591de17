"""The rule reproduction_status through Snakemake: it reads committed tables' CSVs by glob, never trains, and refuses
a glob that matches nothing before any job."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")

FIELDS = [
    "table", "paper_table", "dataset", "column", "method", "variant", "paper_method", "paper_variant", "metric",
    "column_metric", "selection", "epsilon", "status", "mean", "std", "n_seeds", "n_missing_seeds", "n_runs",
    "n_planned_runs", "best_hparams", "valid", "reference_only", "paper", "scored", "validation", "data_source", "is_best",
]  # fmt: skip


def _run(work: Path, probe: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", "1", *extra]
    cmd += ["--configfile", str(REPO / "workflow/config/smoke.yaml"), str(probe), "--", "reproduction_status"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ))


@pytest.mark.slow
def test_the_rule_builds_the_status_from_globbed_tables_without_training(tmp_path):
    work = tmp_path / "work"
    table = work / "reports" / "dated-report" / "tables" / "table5_grid.csv"
    table.parent.mkdir(parents=True)
    with open(table, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerow(
            dict(table="table5_grid", paper_table="5a", dataset="mnist", column="rr", method="rr", variant="default",
                 paper_method="rr", paper_variant="", metric="test_accuracy_pct", column_metric="test_accuracy_pct",
                 selection="paper", epsilon="2", status="ok", mean=96.0, std=0.4, n_seeds=3, n_missing_seeds=0,
                 n_runs=3, n_planned_runs=3, best_hparams="", valid="True", reference_only="False", paper=96.7,
                 scored="True", validation="False", data_source="official", is_best="True")
        )  # fmt: skip
    (work / "why.yaml").write_text("5a/mnist/dpsgd/eps1: {why: the grid's corner, section: somewhere}\n")
    probe = tmp_path / "probe.yaml"
    probe.write_text(
        "reproduction_status:\n  sources: ['reports/dated-report/tables/*.csv']\n  explanations: why.yaml\n"
    )
    done = _run(work, probe)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "rule sweep" not in done.stderr and "rule table" not in done.stderr  # read committed tables only
    md = (work / "reports" / "smoke" / "reproduction_status.md").read_text()
    assert (
        "| 5a/mnist/rr/eps2 | 96.7 | 96.0 +- 0.4 (3 seeds, 3 runs searched) | 0.7 | within | dated-report/table5_grid"
        in md
    )
    assert "| 5a/mnist/dpsgd/eps1 | 92.8 | - | - | not run | - | - | - | the grid's corner (section: somewhere) |" in md

    probe.write_text("reproduction_status:\n  sources: ['reports/no-such-report/tables/*.csv']\n")
    refused = _run(work, probe)
    assert refused.returncode != 0 and "match no tidy table CSV" in refused.stderr


@pytest.mark.slow
def test_the_reports_own_tables_are_rebuilt_from_existing_records_only_with_aggregate_existing_only(tmp_path):
    """A glob over the report's own tables makes them inputs: without aggregate_existing_only their missing runs
    are trained first (as for the scorecard); with it only the tables are rebuilt, from the records on disk."""
    work = tmp_path / "work"
    own = work / "reports" / "smoke" / "tables" / "table2.csv"
    own.parent.mkdir(parents=True)
    own.write_text(",".join(FIELDS) + "\n")
    probe = tmp_path / "probe.yaml"
    probe.write_text("reproduction_status:\n  sources: ['reports/smoke/tables/table2.csv']\n")
    trains = _run(work, probe, "-n")
    assert trains.returncode == 0, trains.stderr[-4000:]
    assert "sweep" in trains.stdout + trains.stderr
    rebuilds = _run(work, probe, "-n", "--config", "aggregate_existing_only=True")
    assert rebuilds.returncode == 0, rebuilds.stderr[-4000:]
    out = rebuilds.stdout + rebuilds.stderr
    assert "reproduction_status" in out and "table2" in out and "sweep" not in out
