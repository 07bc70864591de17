"""One GPU shared by several training jobs through Snakemake (issue 17): `--resources
gpu_slots=N` bounds the jobs per GPU and gives each a 0.9 / N share of its memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from labeldp.config import gpu_slots_env
from labeldp.plan import ConfigError
from tests.helpers import REPO

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


@pytest.mark.parametrize("slots, fraction", [(1, "0.90"), (2, "0.45"), (4, "0.22"), (7, "0.12"), (90, "0.01")])
def test_each_job_gets_its_share_of_the_gpu_and_the_shares_fit(slots, fraction):
    env = gpu_slots_env(slots)
    assert env == f"XLA_PYTHON_CLIENT_MEM_FRACTION={fraction} "
    assert slots * float(fraction) <= 0.9 + 1e-12


def test_no_gpu_slots_means_no_memory_fraction():
    assert gpu_slots_env(None) == ""


@pytest.mark.parametrize("bad", [0, -1, 91, 2.5, "4", True])
def test_bad_gpu_slots_is_refused_with_the_fix(bad):
    with pytest.raises(ConfigError, match="gpu_slots"):
        gpu_slots_env(bad)


def test_gpu_profile_bounds_jobs_per_gpu_with_gpu_slots():
    profile = yaml.safe_load((REPO / "workflow/profiles/gpu/config.yaml").read_text())
    assert any(r.startswith("gpu_slots=") for r in profile["resources"])
    rules = (REPO / "workflow/rules/train.smk").read_text() + (REPO / "workflow/rules/audit.smk").read_text()
    # the training rules (sweep, and train for one record) and the audit's (audit_sweep, audit_run)
    assert rules.count("gpu_slots=1") == 4 and rules.count("{JOB_ENV}") == 4


def _dry_run(tmp_path, *extra):
    return subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            str(tmp_path),
            "-n",
            "-p",
            "--cores",
            "4",
            "table15",
            *extra,
            "--configfile",
            str(REPO / "workflow/config/smoke.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_training_jobs_run_with_the_share_only_when_gpu_slots_is_given(tmp_path):
    shared = _dry_run(tmp_path, "--resources", "gpu_slots=2")
    assert shared.returncode == 0, shared.stderr[-3000:]
    train_cmds = [
        l.split("Shell command:")[-1].strip() for l in shared.stdout.splitlines() if "labeldp.sweep_runner" in l
    ]
    assert train_cmds and all(
        c.startswith("XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 JAX_COMPILATION_CACHE_DIR=") for c in train_cmds
    )
    alone = _dry_run(tmp_path)
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert "labeldp.sweep_runner" in alone.stdout and "XLA_PYTHON_CLIENT_MEM_FRACTION" not in alone.stdout


def test_zero_gpu_slots_fails_before_any_job(tmp_path):
    proc = _dry_run(tmp_path, "--resources", "gpu_slots=0")
    assert proc.returncode != 0
    assert "gpu_slots" in proc.stdout + proc.stderr and "positive integer" in proc.stdout + proc.stderr
