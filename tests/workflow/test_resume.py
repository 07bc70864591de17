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


def test_a_missing_record_is_trained_when_the_data_is_prepared_again(tmp_path):
    """Re-preparing the data must not hide a missing record's job.

    With every input ancient(), Snakemake 9 masks a job behind an upstream job that has to run
    and then skips it, so `snakemake <targets>` re-prepared the data and exited 0 without training
    (it happened when the data mirror was switched). Here the raw manifest is made newer than the
    prepared file, so prepare must run: the missing record must be planned with it, and the
    finished ones must not be.
    """
    first = _dry_run(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    plan = _planned(first.stdout)
    records = plan.get("train", [])
    assert len(records) >= 2, first.stdout[-3000:]
    prepared = [p for p in plan.get("prepare", []) if p.endswith(".npz")]
    manifests = [p for r in ("fetch", "make_standin") for p in plan.get(r, [])]
    assert prepared and manifests
    done, missing = records[:-1], records[-1]
    now = time.time()
    for rel, t in [*((r, now - 3600) for r in done), *((p, now - 60) for p in prepared),
                   *((m, now - 30) for m in manifests)]:  # manifests NEWER than the prepared files
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}" if rel in done else "x")
        os.utime(path, (t, t))

    second = _dry_run(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    again = _planned(second.stdout)
    assert again.get("prepare"), "the test's premise: prepare has to run again"
    assert missing in again.get("train", []), "the missing record was dropped from the run"
    assert again.get("train", []) == [missing], "finished records were planned again"


def test_switching_the_data_mirror_does_not_fetch_again(tmp_path, mirror):
    """Where the raw bytes come from is not a rerun trigger: they are checked against pinned
    checksums whatever the source, so a verified fetch stays done when the mirror is switched
    off or moved (it used to be a param of the fetch rule, and Snakemake redid the fetch)."""
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--cores", "1",
           "fetch_mnist", "--configfile", str(REPO / "workflow/config/smoke.yaml")]
    env = {k: v for k, v in os.environ.items() if k != "LABELDP_DATA_MIRROR"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env=dict(env, LABELDP_DATA_MIRROR=str(mirror)))
    assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = tmp_path / "another_mirror"
    elsewhere.mkdir()
    for label, run_env in [("no mirror", env), ("another mirror", dict(env, LABELDP_DATA_MIRROR=str(elsewhere)))]:
        dry = subprocess.run([*cmd, "-n"], capture_output=True, text=True, timeout=600, env=run_env)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert "fetch" not in _planned(dry.stdout), f"{label}: the fetch was planned again:\n{dry.stdout[-2000:]}"
