"""Successive halving through Snakemake: stage 1, the checkpoint, only the kept point's other seeds, the table;
and a fresh clone whose table is there but a kept point's record is not trains it again."""

from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")

PROBE = """
seeds: [0, 1]
sweep_grouping: cell  # one sweep per cell: the assertions below name each cell's jobs
tables:
  halving_probe:
    paper_table: "5a"
    title: "successive-halving probe"
    dataset: mnist
    metric: test_accuracy_pct
    epsilons: [2.0]
    grid: halving_probe
    search: {successive_halving: {keep: 1}}
    search_cost: false
    columns:
      - {id: rr, label: RR, method: rr}
grids:
  smoke:
    halving_probe: {learning_rate: [0.05, 0.5], epochs: [1], batch_size: [64]}
scorecard_tables: [halving_probe]
"""


def _snakemake(workdir: Path, probe: Path, mirror: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), "--cores", "1", *extra]
    cmd += ["--configfile", str(REPO / "workflow/config/smoke.yaml"), str(probe), "--", "halving_probe"]
    env = dict(os.environ, LABELDP_DATA_MIRROR=str(mirror))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


@pytest.mark.slow
def test_stage_two_trains_only_the_kept_point_and_resumes_on_a_fresh_clone(tmp_path, mirror):
    probe = tmp_path / "probe.yaml"
    probe.write_text(PROBE)
    work = tmp_path / "work"
    done = _snakemake(work, probe, mirror)
    assert done.returncode == 0, done.stderr[-4000:]
    results = work / "results" / "smoke"
    (selection,) = (results / ".halving" / "halving_probe" / "rr").glob("eps2.0.json")
    kept = json.loads(selection.read_text())["kept"]
    cell = results / "mnist" / "rr" / "default" / "eps2.0"
    trained = sorted(str(p.relative_to(cell)) for p in cell.rglob("seed*.json"))
    other = ({"bs64-ep1-lr0.05", "bs64-ep1-lr0.5"} - set(kept)).pop()
    assert trained == sorted([f"{kept[0]}/seed0.json", f"{kept[0]}/seed1.json", f"{other}/seed0.json"])
    table = (work / "reports" / "smoke" / "tables" / "halving_probe.md").read_text()
    assert "successive halving" in table

    # a fresh clone: the table and stage 1 are there, the kept point's second seed and its marker are not
    (cell / kept[0] / "seed1.json").unlink()
    for marker in (results / ".sweeps").rglob("*.json"):
        if kept[0] in marker.read_text() and "seed1" in marker.read_text():
            marker.unlink()
    shutil.rmtree(work / ".snakemake")
    dry = _snakemake(work, probe, mirror, "-n")
    assert dry.returncode == 0, dry.stderr[-4000:]
    assert "Nothing to be done" not in dry.stdout and "rule sweep" in dry.stdout, dry.stdout[-3000:]


def test_every_cells_stage_one_is_planned_at_once_not_one_checkpoint_after_another(tmp_path, mirror):
    probe = tmp_path / "probe.yaml"
    probe.write_text(PROBE.replace("epsilons: [2.0]", "epsilons: [2.0, 1.0, 0.5]"))
    dry = _snakemake(tmp_path / "work", probe, mirror, "-n")
    assert dry.returncode == 0, dry.stderr[-4000:]
    stats = dict(re.findall(r"^(halving_select|halving_cell_done)\s+(\d+)$", dry.stdout, re.M))
    assert stats == {"halving_select": "3", "halving_cell_done": "3"}, dry.stdout[-3000:]
    sweeps = re.findall(r"output: (\S+/\.sweeps/\S+\.json)", dry.stdout)
    assert all(any(f"/eps{e}/" in m for m in sweeps) for e in ("2.0", "1.0", "0.5")), sweeps
