"""The smoke profile through Snakemake, end to end: resume, every output, the records, bad input.

The DAG runs once per session (tests/workflow/smoke_dag.py, started in the background by tests/conftest.py);
the content of each paper's outputs is checked in ``test_smoke_000.py``, ``test_smoke_001.py`` and
``test_smoke_002_003.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.workflow.smoke_dag import (
    FIGURES,
    HYBRID_FIGURES,
    NOT_RUN,
    REPO,
    SNAKEMAKE,
    STANDIN_DATASETS,
    TABLES,
    csv_rows,
    run_records,
    run_snakemake,
)


@pytest.mark.slow
@pytest.mark.smoke_dag
def test_the_smoke_dag_resumes_after_a_kill_without_redoing_finished_jobs(smoke_dag):
    """A partial run, a SIGKILL once the first record is written, then a resumed run: nothing finished is
    redone, and afterwards Snakemake has nothing left to do."""
    assert not smoke_dag.fetch_redone, "fetch was redone"
    assert not smoke_dag.first_record_redone, "a finished training job was redone"
    assert "Nothing to be done" in smoke_dag.dry_run_after


@pytest.mark.slow
@pytest.mark.smoke_dag
def test_every_table_and_figure_exists_and_the_not_run_ones_say_why(smoke_dag):
    """Every target's files, "not run" with its reason where the data is proprietary or missing, the scorecard and the HTML report."""
    rep = smoke_dag.reports
    for t in TABLES:
        for ext in ("md", "csv", "tex"):
            assert (rep / "tables" / f"{t}.{ext}").stat().st_size > 0
    for f in FIGURES:
        for ext in ("md", "csv", "png", "pdf"):
            assert (rep / "figures" / f"{f}.{ext}").stat().st_size > 0
    for kind, names in NOT_RUN.items():  # proprietary data: "not run" with the reason, never a number of ours
        for name in names:
            text = (rep / kind / f"{name}.md").read_text()
            assert "Not run: " in text and "proprietary" in text, text
            assert all(r["status"] == "not run" and r["reason"] for r in csv_rows(rep / kind / f"{name}.csv"))
            assert all((rep / "figures" / f"{name}.{e}").stat().st_size > 0 for e in ("png", "pdf"))
    for t in TABLES:  # every table also has its accuracy-vs-eps plot
        for ext in ("png", "pdf"):
            assert (rep / "figures" / f"{t}.{ext}").stat().st_size > 0
    score = (rep / "scorecard.md").read_text()
    assert "## Per table" in score and "| table5_mnist | 5a |" in score and "claims" in score
    claims = csv_rows(rep / "scorecard_claims.csv")
    assert {c["claim"] for c in claims} >= {"pro_beats_dpsgd_and_baselines_small_eps", "rr_beats_pro_eps2"}
    assert all(c["verdict"] in ("holds", "fails", "not evaluable") for c in claims)
    html = smoke_dag.report_html
    text = html.read_text(errors="replace")
    assert html.stat().st_size > 10_000 and "scorecard" in text and "table5_mnist" in text


@pytest.mark.slow
@pytest.mark.smoke_dag
def test_the_label_canary_audit_ran_for_every_classification_column(smoke_dag):
    """The audit's check passed for every column; its seven runs trained in one job (one MNIST data file)."""
    rep = smoke_dag.reports
    audit_rows = csv_rows(rep / "audit/audit.csv")
    assert len(audit_rows) == 7 and all(r["status"] == "ok" for r in audit_rows), audit_rows
    (marker,) = (smoke_dag.work / "results/smoke/audit/.sweeps").rglob("*.json")
    audited = json.loads(marker.read_text())["records"]
    assert len(audited) == 7 and all((smoke_dag.work / r).exists() for r in audited)
    assert all(0.0 <= float(r["audited_lower_bound"]) <= float(r["epsilon_label_substitution"]) for r in audit_rows)
    assert (rep / "audit/audit.passed").exists() and "Label-canary privacy audit" in (
        rep / "audit/audit.md"
    ).read_text()


@pytest.mark.slow
@pytest.mark.smoke_dag
def test_every_record_is_complete_and_honest(smoke_dag):
    """Every run record: eps under every relation, packages, the data's source, each method's own budget split."""
    work = smoke_dag.work
    recs = [json.loads(p.read_text()) for p in run_records(work)]
    markers = [json.loads(p.read_text()) for p in (work / "results/smoke/.sweeps").rglob("*.json")]
    in_sweeps = [r for m in markers for r in m["records"]]  # the training records (the audit's runs are its own)
    assert markers and len(in_sweeps) == len(set(in_sweeps)) and all((work / r).exists() for r in in_sweeps)
    assert recs
    for rec in recs:
        assert rec["privacy"]["epsilon"] is not None and "valid" in rec["privacy"]
        assert rec["privacy"]["epsilon_by_relation"]  # eps under every relation it has a guarantee for
        if rec["method"] in ("dpsgd", "labeldp_pro", "dpsgd_opacus"):
            assert set(rec["privacy"]["epsilon_by_relation"]) == {"add_or_remove", "label_substitution"}
        assert rec["environment"]["packages"]["jax"]
        assert rec["dataset"]["source"] == (
            "synthetic_standin" if rec["dataset"]["name"] in STANDIN_DATASETS else "official"
        )
        if rec["method"] in ("hybrid", "hybrid_rr", "hybrid_dpsgd", "hybrid_user_level"):
            d = rec["details"]
            assert abs(d["epsilon1"] + d["epsilon2"] - rec["config"]["run_spec"]["epsilon"]) < 1e-9
        if rec["method"] == "hybrid_user_level":
            assert rec["privacy"]["privacy_unit"] == "user" and rec["privacy"]["epsilon"] <= 3.0 + 1e-6
        if rec["dataset"]["name"] == "criteo_attribution" and rec["config"]["run_spec"]["options"].get(
            "examples_per_user"
        ):
            assert rec["privacy"]["privacy_unit"] == "user"
        if rec["method"].startswith("hybrid") and rec["dataset"]["name"] == "criteo_attribution":
            # 002 Tables 2 and 3 run on 002's random 80/20 row split (labeldp/data/views.py)
            assert rec["dataset"]["view"] == "criteo_attribution_random_80_20"
            assert rec["config"]["run_spec"]["dataset"] == "criteo_attribution_random_80_20"
        if rec["method"] == "rr_with_prior":  # 000 Table 9's split of eps, composed back to eps
            d = rec["details"]
            table9 = {0.18: 0.05, 1.6: 0.1}
            assert d["prior_epsilon"] == table9[rec["config"]["run_spec"]["epsilon"]]
            assert abs(d["prior_epsilon"] + d["rr_epsilon"] - rec["privacy"]["epsilon"]) < 1e-9
        if rec["dataset"]["name"].endswith("_simclr"):
            assert rec["dataset"]["encoder"]["sha256"] and rec["dataset"]["encoder"]["pretrain"]
        if rec["method"] in ("rr_on_bins", "optimal_unbiased"):
            d = rec["details"]
            assert d["epsilon1"] > 0 and abs(d["epsilon1"] + d["epsilon2"] - rec["privacy"]["epsilon"]) < 1e-9


@pytest.mark.slow
def test_corrupted_mirror_fails_fetch_and_leaves_nothing(tmp_path, mirror):
    bad = tmp_path / "mirror"
    shutil.copytree(mirror / "mnist", bad / "mnist")
    target = bad / "mnist" / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(target.read_bytes())
    data[100] ^= 0xFF
    target.write_bytes(bytes(data))
    work = tmp_path / "w"
    work.mkdir()
    proc = run_snakemake(work, "fetch_mnist", mirror=bad, check=False, timeout=300)
    assert proc.returncode != 0
    log = (work / "logs/smoke/fetch/mnist.log").read_text()
    assert "t10k-labels-idx1-ubyte.gz" in log and "ec29112dd5afa0611ce80d1b7f02629c" in log  # expected md5
    raw = work / "data/raw/mnist"
    leftover = [p.name for p in raw.iterdir()] if raw.exists() else []
    assert not any("t10k-labels" in n or n.endswith(".part") or "MANIFEST" in n for n in leftover), leftover
    shutil.copy(mirror / "mnist" / "t10k-labels-idx1-ubyte.gz", target)
    run_snakemake(work, "fetch_mnist", mirror=bad, timeout=300)
    assert (work / "data/raw/mnist/MANIFEST.json").exists()


def test_dry_run_lists_every_target(tmp_path):
    proc = subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            str(tmp_path),
            "-n",
            "--cores",
            "1",
            "--list-target-rules",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    listed = set(proc.stdout.split())
    for t in (
        TABLES
        + FIGURES
        + [
            "all",
            "audit",
            "unbiased_figure2",
            "lpmst_table4",
            "table12",
            "table12_sweeps",
            *HYBRID_FIGURES,
            *NOT_RUN["tables"],
            *NOT_RUN["figures"],
            "figure2",
            "lpmst_figure2",
            "lpmst_figure1b",
            "lpmst_figure4",
            "lpmst_figure5",
            "pro_figure4",
            "pro_figure4_fashion_mnist",
        ]
        + [
            f"fetch_{d}"
            for d in (
                "mnist",
                "fashion_mnist",
                "kmnist",
                "cifar10",
                "cifar100",
                "criteo_attribution",
                "criteo_search",
                "census1940",
            )
        ]
    ):
        assert t in listed, t


def test_bad_config_fails_before_any_job(tmp_path):
    proc = subprocess.run(
        [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "--cores", "1", "--config", "delta=2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "delta" in proc.stdout + proc.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()


def test_a_batch_larger_than_the_data_fails_before_any_job(tmp_path):
    overlay = tmp_path / "small.yaml"
    overlay.write_text("datasets:\n  mnist: {subset: 32, standin: false}\n")
    proc = subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--cores",
            "1",
            "--configfile",
            str(REPO / "workflow/config/smoke.yaml"),
            str(overlay),
            "--",
            "table2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "lower batch_size in grids.smoke" in proc.stdout + proc.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()
