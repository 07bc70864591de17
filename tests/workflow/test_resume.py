"""A finished record is never redone because the data was prepared again after it.

Records are keyed by their RunSpec and the prepared file by its dataset, source and subset, so a
record written (or committed, or copied back from a GPU box) before the prepared file it was
trained on must still count as done: a fresh clone prepares the data after checking the reports'
records out. The train rule's data input is ``ancient``; without it Snakemake would plan every
committed record again ("Updated input files").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import REPO

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def _dry_run(workdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), "-n", "--cores", "2", "table15",
         "--configfile", str(REPO / "workflow/config/smoke.yaml")],
        capture_output=True, text=True, timeout=600)


def _planned(stdout: str) -> dict[str, list[str]]:
    """rule name -> the outputs it would make, from a dry run's job listing."""
    out: dict[str, list[str]] = {}
    rule = None
    for line in stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):", line.strip())
        if m:
            rule = m.group(1)
        elif rule and line.strip().startswith("output:"):
            out.setdefault(rule, []).extend(p.strip() for p in line.split("output:", 1)[1].split(","))
    return out


def test_records_older_than_the_prepared_data_are_not_redone(tmp_path):
    first = _dry_run(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    plan = _planned(first.stdout)
    records = plan.get("train", [])
    assert len(records) >= 2, first.stdout[-3000:]
    # the data side exists: raw manifests first, prepared files after them (as fetch -> prepare)
    data_outputs = [p for r in ("fetch", "make_standin", "prepare") for p in plan.get(r, [])]
    assert any(p.endswith(".npz") for p in data_outputs)
    # every record but one is finished, written an hour BEFORE the data was prepared
    done, missing = records[:-1], records[-1]
    old = time.time() - 3600
    for rel in done:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        os.utime(path, (old, old))
    for i, rel in enumerate(data_outputs):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        t = time.time() - 60 + i  # newer than every record; prepared files newer than manifests
        os.utime(path, (t, t))

    second = _dry_run(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    again = _planned(second.stdout)
    assert again.get("train", []) == [missing], (
        "finished records older than the prepared data were planned again: "
        f"{sorted(set(again.get('train', [])) - {missing})[:3]}")
    assert not any(r in again for r in ("fetch", "make_standin", "prepare"))
