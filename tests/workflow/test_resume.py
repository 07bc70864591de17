"""A finished record is never redone because the data was prepared again after it.

Records are keyed by their RunSpec and the prepared file by its dataset, source and subset, so a
record written (or committed, or copied back from a GPU box) before the prepared file it was
trained on must still count as done: a fresh clone prepares the data after checking the reports'
records out. The sweep rule's data input is ``ancient`` once its marker exists, and absent when
every record of the sweep exists; without that Snakemake would plan every committed record again
("Updated input files").

The tests plan with ``sweep_grouping: method`` (:data:`GROUPING`): the mechanics do not depend on the
grouping, and the smoke profile's ``data`` grouping makes table15 one job, where these tests need several.
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
GROUPING = "method"


def _dry_run(workdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            str(workdir),
            "-n",
            "--cores",
            "2",
            "table15",
            "--configfile",
            str(REPO / "workflow/config/smoke.yaml"),
            "--config",
            f"sweep_grouping={GROUPING}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _planned(stdout: str) -> dict[str, list[str]]:
    """rule name -> the outputs it would make, from a dry run's job listing."""
    return {rule: [j["output"] for j in jobs] for rule, jobs in _jobs(stdout).items()}


def _jobs(stdout: str) -> dict[str, list[dict[str, str]]]:
    """rule name -> its planned jobs' ``input`` and ``output`` lines, from a dry run's listing."""
    out: dict[str, list[dict[str, str]]] = {}
    rule = None
    for line in stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):", line.strip())
        if m:
            rule = m.group(1)
            out.setdefault(rule, []).append({"input": "", "output": ""})
        elif rule and line.strip().startswith(("input:", "output:")):
            field, value = line.strip().split(":", 1)
            out[rule][-1][field] = value.strip()
    return out


def _sweep_records(marker: str) -> list[str]:
    """The record paths (relative to the workdir) of the smoke config's sweep with this marker."""
    from labeldp import sweeps
    from tests.helpers import repo_config

    cfg = repo_config("smoke.yaml", sweep_grouping=GROUPING)
    sw = sweeps.workflow_sweeps(cfg)
    return [r.record_path for r in sw[marker].runs]


def _write(path: Path, text: str, t: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (t, t))


def test_records_older_than_the_prepared_data_are_not_redone(tmp_path):
    """Finished sweeps (marker and records) older than the data are not planned again; a sweep
    whose records all exist but whose marker is missing is planned to write its marker, its data
    ancient (not a reason to run); the sweep with a missing record is trained."""
    first = _dry_run(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    plan = _planned(first.stdout)
    markers = plan.get("sweep", [])
    assert len(markers) >= 3, first.stdout[-3000:]
    data_outputs = [p for r in ("fetch", "make_standin", "prepare") for p in plan.get(r, [])]
    assert any(p.endswith(".npz") for p in data_outputs)
    old = time.time() - 3600
    finished, records_only, missing = markers[:-2], markers[-2], markers[-1]
    for m in finished:  # marker and every record, an hour BEFORE the data was prepared
        _write(tmp_path / m, "{}", old)
        for rec in _sweep_records(m):
            _write(tmp_path / rec, "{}", old)
    for rec in _sweep_records(records_only):  # records there, marker missing
        _write(tmp_path / rec, "{}", old)
    for i, rel in enumerate(data_outputs):  # newer than every record; prepared files newer than manifests
        _write(tmp_path / rel, "x", time.time() - 60 + i)

    second = _dry_run(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    again = {j["output"]: j for j in _jobs(second.stdout).get("sweep", [])}
    assert set(again) == {records_only, missing}, (
        f"finished sweeps older than the prepared data were planned again: {sorted(set(again) - {records_only, missing})[:3]}"
    )
    assert again[records_only]["input"].endswith(".npz") and again[missing]["input"].endswith(".npz")
    assert not any(r in _planned(second.stdout) for r in ("fetch", "make_standin", "prepare"))


def test_a_missing_record_is_trained_when_the_data_is_prepared_again(tmp_path):
    """Re-preparing the data must not hide a missing record's job.

    With every input ancient(), Snakemake 9 masks a job behind an upstream job that has to run
    and then skips it, so `snakemake <targets>` re-prepared the data and exited 0 without training
    (it happened when the data mirror was switched). Here the raw manifest is made newer than the
    prepared file, so prepare must run: the sweep with a missing record must be planned with it,
    and the finished ones must not be.
    """
    first = _dry_run(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    plan = _planned(first.stdout)
    markers = plan.get("sweep", [])
    assert len(markers) >= 2, first.stdout[-3000:]
    prepared = [p for p in plan.get("prepare", []) if p.endswith(".npz")]
    manifests = [p for r in ("fetch", "make_standin") for p in plan.get(r, [])]
    assert prepared and manifests
    done, missing = markers[:-1], markers[-1]
    now = time.time()
    for m in done:
        _write(tmp_path / m, "{}", now - 3600)
        for rec in _sweep_records(m):
            _write(tmp_path / rec, "{}", now - 3600)
    for rel, t in [*((p, now - 60) for p in prepared), *((m, now - 30) for m in manifests)]:
        _write(tmp_path / rel, "x", t)  # manifests NEWER than the prepared files

    second = _dry_run(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    again = _planned(second.stdout)
    assert again.get("prepare"), "the test's premise: prepare has to run again"
    assert missing in again.get("sweep", []), "the sweep with a missing record was dropped from the run"
    assert again.get("sweep", []) == [missing], "finished sweeps were planned again"


def test_switching_the_data_mirror_does_not_fetch_again(tmp_path, mirror):
    """Where the raw bytes come from is not a rerun trigger: they are checked against pinned
    checksums whatever the source, so a verified fetch stays done when the mirror is switched
    off or moved (it used to be a param of the fetch rule, and Snakemake redid the fetch)."""
    cmd = [
        SNAKEMAKE,
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--cores",
        "1",
        "fetch_mnist",
        "--configfile",
        str(REPO / "workflow/config/smoke.yaml"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "LABELDP_DATA_MIRROR"}
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env=dict(env, LABELDP_DATA_MIRROR=str(mirror))
    )
    assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = tmp_path / "another_mirror"
    elsewhere.mkdir()
    for label, run_env in [("no mirror", env), ("another mirror", dict(env, LABELDP_DATA_MIRROR=str(elsewhere)))]:
        dry = subprocess.run([*cmd, "-n"], capture_output=True, text=True, timeout=600, env=run_env)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert "fetch" not in _planned(dry.stdout), f"{label}: the fetch was planned again:\n{dry.stdout[-2000:]}"


def test_a_committed_table_does_not_hide_its_missing_records(tmp_path):
    """A fresh clone has the report's tables but no Snakemake metadata, so the tables are newer than
    anything Snakemake compares them with. The target still asks for its sweeps' markers: a sweep
    with a missing record is trained and the table rebuilt; with every marker there, nothing is."""
    first = _dry_run(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    plan = _planned(first.stdout)
    markers, tables = plan.get("sweep", []), plan.get("table", [])
    assert len(markers) >= 2 and tables, first.stdout[-3000:]
    data_outputs = [p for r in ("fetch", "make_standin", "prepare") for p in plan.get(r, [])]
    now = time.time()
    for i, rel in enumerate(data_outputs):
        _write(tmp_path / rel, "x", now - 3600 + i)
    done, missing = markers[:-1], markers[-1]
    for m in done:
        _write(tmp_path / m, "{}", now - 1800)
        for rec in _sweep_records(m):
            _write(tmp_path / rec, "{}", now - 1800)
    for rec in _sweep_records(missing)[:-1]:  # one record short, no marker
        _write(tmp_path / rec, "{}", now - 1800)
    for out in ", ".join(tables).split(", "):  # the committed table: newer than every record
        _write(tmp_path / out, "committed", now - 60)

    second = _dry_run(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    again = _planned(second.stdout)
    assert again.get("sweep", []) == [missing], second.stdout[-3000:]
    assert again.get("table"), "the table was not rebuilt after its sweep"

    _write(tmp_path / _sweep_records(missing)[-1], "{}", now - 1800)
    _write(tmp_path / missing, "{}", now - 1800)
    third = _dry_run(tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "Nothing to be done" in third.stdout, third.stdout[-3000:]
