"""The smoke profile through Snakemake, end to end: content of the outputs, resume, bad input."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labeldp.methods import registry

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
SMOKE = REPO / "workflow/config/smoke.yaml"
TABLES = [
    "table2",
    "table3",
    "table5_mnist",
    "table5_cifar10",
    "table13",
    "table14",
    "table15",
    "table6",
    "table6_fashion_mnist",
    "table7",
    "tableG3",
    "hybrid_table1",
    "hybrid_table2",
    "hybrid_table3",
    "hybrid_table5",
    "table11",
    "lpmst_table4_mnist",
    "lpmst_table4_fashion_mnist",
    "lpmst_table1",
    "lpmst_table2",
    "lpmst_table5",
    "figure2_sweep",
    "pro_figure4_sweep",
    "pro_figure4_fashion_mnist_sweep",
    "table12_k2",
    "table12_k5",
    "table12_k10",
    "table12_delta",
    "table12",
    "lpmst_figure2_priors",
    "lpmst_figure2_priors_fashion_mnist",
    "lpmst_figure4a_sweep",
    "lpmst_figure4b_sweep",
]
FIGURES = ["figure3", "figure4", "figure4_honest", "figure5a", "figure5a_honest"]
HYBRID_FIGURES = ["hybrid_figure2", "hybrid_figure3", "hybrid_figure4"]  # 002's figures, from the Hybrid tables
NOT_RUN = {
    "tables": ["hybrid_table4", "lpmst_table3"],  # proprietary data or not in the registry
    "figures": ["hybrid_figure3_pcvr", "figure5b"],
}
STANDIN_DATASETS = (
    "cifar10",
    "cifar100",
    "cifar10_simclr",
    "kmnist",
    "criteo_search",
    "census1940",
    "criteo_attribution",
    "criteo_pctr",
)


def _smk(workdir: Path, *args: str, mirror: Path, check=True, timeout=2400, extra_config=()):
    cmd = [
        SNAKEMAKE,
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "2",
        "--rerun-incomplete",
        *args,
        "--configfile",
        str(SMOKE),
        *extra_config,
    ]
    env = dict(os.environ, LABELDP_DATA_MIRROR=str(mirror))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def _incomplete(work: Path) -> set[str]:
    """Output paths Snakemake has marked as started but not finished (its persistence keeps
    one file per path under .snakemake/incomplete, named by the urlsafe base64 of the path,
    split into '@'-prefixed chunks when long)."""
    import base64

    root = work / ".snakemake" / "incomplete"
    out = set()
    if not root.exists():
        return out
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f == "migration_underway":
                continue
            rel = Path(dirpath, f).relative_to(root).parts
            b64 = "".join(p[1:] if p.startswith("@") else p for p in rel)
            try:
                out.add(base64.urlsafe_b64decode(b64.encode()).decode())
            except Exception:  # a marker being written right now
                continue
    return out


def _rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_smoke_profile_runs_every_target_and_resumes(tmp_path, mirror):
    work = tmp_path / "w"
    work.mkdir()
    # 1. a partial run (data only), then the whole DAG killed part-way, then resumed.
    _smk(work, "fetch_mnist", mirror=mirror)
    manifest = work / "data/raw/mnist/MANIFEST.json"
    m_time = manifest.stat().st_mtime_ns
    cmd = [
        SNAKEMAKE,
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(work),
        "--cores",
        "2",
        "--configfile",
        str(SMOKE),
    ]
    proc = subprocess.Popen(
        cmd,
        env=dict(os.environ, LABELDP_DATA_MIRROR=str(mirror)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    first = None
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        recs = (
            sorted(
                r
                for r in (work / "results/smoke").rglob("*.json")
                if not {"ssl", ".sweeps", "examples"} & set(r.relative_to(work).parts)
            )
            if (work / "results/smoke").exists()
            else []
        )
        # a record counts as a finished job once Snakemake has also cleared its incomplete
        # marker (the runner writes the file just before its process exits)
        done = [r for r in recs if str(r.relative_to(work)) not in _incomplete(work)]
        if done:
            first = done[0]
            break
        time.sleep(0.2)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert first is not None, "no result record appeared"
    first_time = first.stat().st_mtime_ns
    _smk(work, "--unlock", mirror=mirror)  # a SIGKILLed Snakemake leaves its lock behind
    _smk(work, mirror=mirror)
    assert manifest.stat().st_mtime_ns == m_time, "fetch was redone"
    assert first.stat().st_mtime_ns == first_time, "a finished training job was redone"
    again = _smk(work, "-n", mirror=mirror)
    assert "Nothing to be done" in again.stdout + again.stderr

    # 2. every table and figure exists with content built from records.
    rep = work / "reports/smoke"
    for t in TABLES:
        for ext in ("md", "csv", "tex"):
            assert (rep / "tables" / f"{t}.{ext}").stat().st_size > 0
    for f in FIGURES:
        for ext in ("md", "csv", "png", "pdf"):
            assert (rep / "figures" / f"{f}.{ext}").stat().st_size > 0
    for f in HYBRID_FIGURES:  # 002 Figures 2-4: every series has a regenerated point and 002's value beside it
        for ext in ("md", "csv", "png", "pdf"):
            assert (rep / "figures" / f"{f}.{ext}").stat().st_size > 0
        rows = _rows(rep / "figures" / f"{f}.csv")
        assert {r["series"] for r in rows} == {"RR", "DP-SGD", "Hybrid"}, rows
        assert all(r["status"] == "ok" and r["paper"] for r in rows), rows
        assert "STAND-IN DATA" in (rep / "figures" / f"{f}.md").read_text()
    for kind, names in NOT_RUN.items():  # proprietary data: "not run" with the reason, never a number of ours
        for name in names:
            text = (rep / kind / f"{name}.md").read_text()
            assert "Not run: " in text and ("proprietary" in text or "not in the data registry" in text), text
            assert all(r["status"] == "not run" and r["reason"] for r in _rows(rep / kind / f"{name}.csv"))
            assert all((rep / "figures" / f"{name}.{e}").stat().st_size > 0 for e in ("png", "pdf"))
    assert len(_rows(rep / "tables/hybrid_table4.csv")) == 21  # every published cell of 002 Table 4, beside "not run"
    for t in TABLES:  # every table also has its accuracy-vs-eps plot
        for ext in ("png", "pdf"):
            assert (rep / "figures" / f"{t}.{ext}").stat().st_size > 0
    score = (rep / "scorecard.md").read_text()
    assert "## Per table" in score and "| table5_mnist | 5a |" in score and "claims" in score
    claims = _rows(rep / "scorecard_claims.csv")
    assert {c["claim"] for c in claims} >= {"pro_beats_dpsgd_and_baselines_small_eps", "rr_beats_pro_eps2"}
    assert all(c["verdict"] in ("holds", "fails", "not evaluable") for c in claims)
    html = work / "report.html"
    _smk(work, "--report", str(html), mirror=mirror)
    text = html.read_text(errors="replace")
    assert html.stat().st_size > 10_000 and "scorecard" in text and "table5_mnist" in text
    rows = _rows(rep / "tables/table5_mnist.csv")
    np_row = next(r for r in rows if r["column"] == "nonprivate")
    assert np_row["status"] == "ok" and float(np_row["mean"]) > 20.0, np_row  # chance is 10%
    for r in rows:
        if r["column"] == "nonprivate":
            continue
        expected = "ok" if registry.is_implemented(r["method"]) else "not run"
        assert r["status"] == expected, r
        assert r["paper"], r  # every Table 5a cell has a published value beside it
    md = (rep / "tables/table5_mnist.md").read_text()
    assert "Non-private reference:" in md and "profile: smoke" in md and "git revision:" in md
    # stand-in data is flagged wherever used
    assert "SYNTHETIC" in (rep / "tables/table5_cifar10.md").read_text()
    assert "SYNTHETIC" not in md
    # Criteo Attribution (Table 7, user level) on the stand-in: RR, DP-SGD and LabelDP-Pro ran, paper beside
    t7 = [r for r in _rows(rep / "tables/table7.csv") if r["column"] != "nonprivate"]
    assert t7 and all(r["status"] == "ok" and 0.0 <= float(r["mean"]) <= 1.0 and r["paper"] for r in t7), t7
    assert "privacy unit: **user**" in (rep / "tables/table7.md").read_text()
    # 000 Table 11 from the records of the smoke tables' runs: every timed method has a number on this machine
    t11 = _rows(rep / "tables/table11.csv")
    assert any(r["status"] == "ok" and float(r["mean"]) > 0 for r in t11) and all(
        r["paper"] for r in t11 if r["method"] == "dpsgd"
    ), t11
    assert "STAND-IN DATA" in (rep / "tables/table11.md").read_text()  # CIFAR-10 and Criteo are stand-ins here
    # 002 (Hybrid): relative AUC loss against the table's non-private runs, 002's values beside
    # (Table 3: user-level Hybrid and its baselines at the cap k = 2)
    for t in ("hybrid_table1", "hybrid_table2", "hybrid_table3", "hybrid_table5"):
        rows = [r for r in _rows(rep / f"tables/{t}.csv") if r["column"] != "nonprivate"]
        assert rows and all(r["status"] == "ok" and r["paper"] for r in rows), (t, rows)
        assert "relative AUC loss" in (rep / f"tables/{t}.md").read_text()
    # 000 Table 6: SimCLR features (pre-trained by the same rules on the CIFAR-10 stand-in and on real
    # FashionMNIST), every method ran on them, PATE-FM is quoted, the encoder is stated
    for t, dataset in (("table6", "cifar10"), ("table6_fashion_mnist", "fashion_mnist")):
        rows = [r for r in _rows(rep / f"tables/{t}.csv") if r["column"] != "pate_fm"]
        assert rows and all(r["status"] == "ok" and 0.0 <= float(r["mean"]) <= 100.0 for r in rows), (t, rows)
        text = (rep / f"tables/{t}.md").read_text()
        assert "features: SimCLR ResNet-18" in text and "linear probe" in text, text[:3000]
        assert ("SYNTHETIC" in text) == (t == "table6")
        pre = list((work / "results/smoke/ssl").glob(f"{dataset}-*/*/pretrain.json"))
        assert len(pre) == 1 and json.loads(pre[0].read_text())["loss_curve"], pre
    quoted = {float(r["epsilon"]): r for r in _rows(rep / "tables/table6.csv") if r["column"] == "pate_fm"}
    assert quoted[0.18]["status"] == "quoted" and float(quoted[0.18]["paper"]) == 73.4
    assert "quoted: 73.4" in (rep / "tables/table6.md").read_text()
    # 003's regression outputs: every randomizer ran on the synthetic stand-ins, and says so
    for f in FIGURES:
        rows = _rows(rep / f"figures/{f}.csv")
        assert rows and all(r["status"] == "ok" and float(r["test_mse_mean"]) > 0 for r in rows), rows
        assert "STAND-IN DATA" in (rep / f"figures/{f}.md").read_text()
    # 003 Figure 2, exact from its record: the paper's RR-on-Bins numbers and an unbiased randomizer off [0, 2]
    ex = (rep / "figures/unbiased_figure2.md").read_text()
    assert "Phi(0) = 0.396, Phi(1) = Phi(2) = 0.720" in ex and "0 inside [0, 2]" in ex
    assert all((rep / "figures" / f"unbiased_figure2.{e}").stat().st_size > 0 for e in ("csv", "png", "pdf"))
    # 001 Table 4 (both halves, `lpmst_table4`): LP-1ST / LP-2ST / LP-3ST and the non-private model with 001's
    # recipe; 001's values beside LP-1ST, LP-2ST and the non-private model (001 prints no LP-3ST here)
    for t in ("lpmst_table4_mnist", "lpmst_table4_fashion_mnist"):
        rows = _rows(rep / f"tables/{t}.csv")
        assert {r["column"] for r in rows} == {"lp_1st", "lp_2st", "lp_3st", "nonprivate"}, rows
        assert all(r["status"] == "ok" and 0.0 <= float(r["mean"]) <= 100.0 for r in rows), rows
        assert all(bool(r["paper"]) == (r["column"] != "lp_3st") for r in rows), rows
    # 000 Table 12 from its sweeps' cells: every row has an eps* bracket (or an open one) and the paper's beside
    t12 = _rows(rep / "tables/table12.csv")
    assert [r["key"] for r in t12] == ["K=2", "K=5", "K=10", "delta=1/n", "delta=1/n^1.1", "delta=1/n^1.2"], t12
    assert all(r["status"] == "ok" and r["eps_star"] and r["paper"] for r in t12), t12
    k2 = [json.loads(p.read_text()) for p in (work / "results/smoke/mnist_k2").rglob("*.json")]
    assert k2 and all(r["dataset"]["view"] == "mnist_k2" for r in k2)  # MNIST's digits 0 and 1
    deltas = {
        r["config"]["run_spec"]["variant"]: r["privacy"]["delta"]
        for p in (work / "results/smoke/mnist/labeldp_pro").rglob("*.json")
        for r in [json.loads(p.read_text())]
    }
    assert deltas["delta_inv_n1.2"] == pytest.approx(60000**-1.2) and deltas["default"] == 1e-5, deltas
    # 000 Figure 2: every lambda's curves (gradient norm and loss along training) from its records
    f2 = _rows(rep / "figures/figure2.csv")
    assert {r["column"] for r in f2} == {"lambda1", "lambda085", "lambda075", "lambda05"}
    assert all(r["status"] == "ok" and float(r["grad_norm"]) >= 0 and float(r["loss"]) > 0 for r in f2), f2
    assert all((rep / "figures" / f"figure2.{e}").stat().st_size > 0 for e in ("md", "png", "pdf"))
    # 000 Figure 4: confusion matrices (test set) at initialisation and after RR at eps 0.1 and 1.6
    for f, n_test in (("pro_figure4", None), ("pro_figure4_fashion_mnist", 2000)):
        rows = _rows(rep / f"figures/{f}.csv")
        assert [p for p in dict.fromkeys(r["panel"] for r in rows)] == [
            "initialisation",
            "RR, eps = 0.1",
            "RR, eps = 1.6",
        ]
        for panel in ("initialisation", "RR, eps = 0.1", "RR, eps = 1.6"):
            counts = [int(r["count"]) for r in rows if r["panel"] == panel]
            assert len(counts) == 100 and (n_test is None or sum(counts) == n_test), (f, panel)
    # 001 Figure 1 (a): LP-1ST / LP-2ST / LP-3ST against eps per dataset, from the LP-MST tables
    f1 = _rows(rep / "figures/lpmst_figure1a.csv")
    assert {r["series"] for r in f1} == {"LP-1ST", "LP-2ST", "LP-3ST"} and len({r["panel"] for r in f1}) == 4
    assert all(r["status"] == "ok" for r in f1) and all(r["paper"] for r in f1 if r["series"] != "LP-3ST"), f1
    # 001 Figure 1 (b): RRWithPrior against RR from Table 6's records, on both feature datasets
    f1b = _rows(rep / "figures/lpmst_figure1b.csv")
    assert {r["series"] for r in f1b} == {"RRWithPrior, k-means priors", "RR (uniform prior)"} and len(f1b) == 6, f1b
    assert all(r["status"] == "ok" for r in f1b), f1b
    # 001 Figure 2: the private k-means histogram priors' test accuracy against eps, one curve per C (smoke: the
    # FashionMNIST panel runs C = 10 only); a real measurement on FashionMNIST, a stand-in's on CIFAR-10
    f2 = _rows(rep / "figures/lpmst_figure2.csv")
    ran = [r for r in f2 if r["status"] == "ok"]
    assert {(r["panel_title"], r["series"]) for r in ran} == {
        *(("CIFAR-10, SimCLR features", f"C = {c}") for c in (10, 50, 100, 500)),
        ("FashionMNIST, SimCLR features", "C = 10"),
    }, f2
    assert all(0.0 <= float(r["value"]) <= 100.0 for r in ran) and all(
        (rep / f"figures/lpmst_figure2.{e}").stat().st_size > 0 for e in ("png", "pdf")
    )
    # 001 Figure 3: LP-1ST's and LP-2ST's test accuracy after every epoch of every stage (LP-2ST: two stages)
    f3 = _rows(rep / "figures/lpmst_figure3.csv")
    assert {r["column"] for r in f3} == {"lp_1st", "lp_2st"} and all(r["status"] == "ok" for r in f3), f3
    assert {r["stage"] for r in f3 if r["column"] == "lp_2st"} == {"1", "2"}
    # 001 Figure 4: a heat map per sweep over its two axes (smoke: 2 x 2 and 2 x 1 points on the CIFAR-10 stand-in)
    f4 = _rows(rep / "figures/lpmst_figure4.csv")
    assert all(r["status"] == "ok" for r in f4) and len(f4) == 6, f4
    assert {(r["x_axis"], r["y_axis"]) for r in f4} == {
        ("stage1_fraction", "temperature"),
        ("mixup_alpha1", "mixup_alpha2"),
    }
    assert "STAND-IN DATA" in (rep / "figures/lpmst_figure4.md").read_text()
    # 001 Figure 5: every LP-2ST run of both sweeps, binned by its stage-1 top-k accuracy at k = filter_k
    f5 = _rows(rep / "figures/lpmst_figure5.csv")
    # 5 distinct runs: (b)'s point at mixup 8 / 4 is (a)'s run at the default split and temperature
    assert len(f5) == 5 and all(r["status"] == "ok" and 0 <= float(r["stage1_top_k_accuracy_pct"]) <= 100 for r in f5)
    assert all((rep / f"figures/lpmst_figure{n}.{e}").stat().st_size > 0 for n in (4, 5) for e in ("png", "pdf"))
    # 001 Tables 1 (CIFAR-10), 2 (CIFAR-100) and 5 (KMNIST) on the stand-ins, said so; Table 1's pre-trained
    # columns say not run; Table 2 has numbers of ours in every column, 001's values beside them
    for t in ("lpmst_table1", "lpmst_table2", "lpmst_table5"):
        assert "SYNTHETIC" in (rep / f"tables/{t}.md").read_text()
    t2 = _rows(rep / "tables/lpmst_table2.csv")
    assert {r["column"] for r in t2} == {"lp_1st", "lp_2st", "nonprivate"}
    assert all(r["status"] == "ok" and r["paper"] for r in t2), t2
    t1 = _rows(rep / "tables/lpmst_table1.csv")
    assert {r["status"] for r in t1 if r["column"].endswith("_pretrain")} == {"not run"}
    assert all(r["status"] == "ok" for r in t1 if not r["column"].endswith("_pretrain")), t1
    g3 = (rep / "tables/tableG3.md").read_text()
    assert "(2.38)" in g3 and "STAND-IN DATA" in g3  # the paper's values beside ours

    # the label-canary audit ran for every classification column, and its check passed
    audit_rows = _rows(rep / "audit/audit.csv")
    assert len(audit_rows) == 7 and all(r["status"] == "ok" for r in audit_rows), audit_rows
    assert all(0.0 <= float(r["audited_lower_bound"]) <= float(r["epsilon_label_substitution"]) for r in audit_rows)
    assert (rep / "audit/audit.passed").exists() and "Label-canary privacy audit" in (
        rep / "audit/audit.md"
    ).read_text()

    # 3. the records are complete and honest
    # run records (the SimCLR pre-training's own files under results/smoke/ssl and the sweeps'
    # markers under results/smoke/.sweeps are not run records)
    recs = [
        json.loads(p.read_text())
        for p in (work / "results/smoke").rglob("*.json")
        if not {"ssl", ".sweeps", "examples"} & set(p.relative_to(work).parts)
    ]
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
    proc = _smk(work, "fetch_mnist", mirror=bad, check=False, timeout=300)
    assert proc.returncode != 0
    log = (work / "logs/smoke/fetch/mnist.log").read_text()
    assert "t10k-labels-idx1-ubyte.gz" in log and "ec29112dd5afa0611ce80d1b7f02629c" in log  # expected md5
    raw = work / "data/raw/mnist"
    leftover = [p.name for p in raw.iterdir()] if raw.exists() else []
    assert not any("t10k-labels" in n or n.endswith(".part") or "MANIFEST" in n for n in leftover), leftover
    shutil.copy(mirror / "mnist" / "t10k-labels-idx1-ubyte.gz", target)
    _smk(work, "fetch_mnist", mirror=bad, timeout=300)
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
