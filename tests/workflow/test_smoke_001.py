"""The smoke DAG's outputs of 001 (RRWithPrior / LP-MST): its tables and figures, built from records."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.workflow.smoke_dag import csv_rows

pytestmark = [pytest.mark.slow, pytest.mark.smoke_dag]  # every test here reads the session's smoke DAG


def test_lpmst_tables_and_figures_have_their_numbers(smoke_dag):
    """001 Tables 1, 3, 4, 5 and Figures 1-5, stand-ins said so."""
    rep = smoke_dag.reports
    # 001 Table 4 (both halves, `lpmst_table4`): LP-1ST / LP-2ST / LP-3ST and the non-private model with 001's
    # recipe; 001's values beside LP-1ST, LP-2ST and the non-private model (001 prints no LP-3ST here)
    for t in ("lpmst_table4_mnist", "lpmst_table4_fashion_mnist"):
        rows = csv_rows(rep / f"tables/{t}.csv")
        assert {r["column"] for r in rows} == {"lp_1st", "lp_2st", "lp_3st", "nonprivate"}, rows
        assert all(r["status"] == "ok" and 0.0 <= float(r["mean"]) <= 100.0 for r in rows), rows
        assert all(bool(r["paper"]) == (r["column"] != "lp_3st") for r in rows), rows
    # 001 Figure 1 (a): LP-1ST / LP-2ST / LP-3ST against eps per dataset, from the LP-MST tables
    f1 = csv_rows(rep / "figures/lpmst_figure1a.csv")
    assert {r["series"] for r in f1} == {"LP-1ST", "LP-2ST", "LP-3ST"} and len({r["panel"] for r in f1}) == 5
    assert all(r["status"] == "ok" for r in f1) and all(r["paper"] for r in f1 if r["series"] != "LP-3ST"), f1
    # 001 Figure 1 (b): RRWithPrior against RR from Table 6's records, on both feature datasets
    f1b = csv_rows(rep / "figures/lpmst_figure1b.csv")
    assert {r["series"] for r in f1b} == {"RRWithPrior, k-means priors", "RR (uniform prior)"} and len(f1b) == 6, f1b
    assert all(r["status"] == "ok" for r in f1b), f1b
    # 001 Figure 2: the private k-means histogram priors' test accuracy against eps, one curve per C (smoke: the
    # FashionMNIST panel runs C = 10 only); a real measurement on FashionMNIST, a stand-in's on CIFAR-10
    f2 = csv_rows(rep / "figures/lpmst_figure2.csv")
    ran = [r for r in f2 if r["status"] == "ok"]
    assert {(r["panel_title"], r["series"]) for r in ran} == {
        *(("CIFAR-10, SimCLR features", f"C = {c}") for c in (10, 50, 100, 500)),
        ("FashionMNIST, SimCLR features", "C = 10"),
    }, f2
    assert all(0.0 <= float(r["value"]) <= 100.0 for r in ran) and all(
        (rep / f"figures/lpmst_figure2.{e}").stat().st_size > 0 for e in ("png", "pdf")
    )
    # 001 Figure 3: LP-1ST's and LP-2ST's test accuracy after every epoch of every stage (LP-2ST: two stages)
    f3 = csv_rows(rep / "figures/lpmst_figure3.csv")
    assert {r["column"] for r in f3} == {"lp_1st", "lp_2st"} and all(r["status"] == "ok" for r in f3), f3
    assert {r["stage"] for r in f3 if r["column"] == "lp_2st"} == {"1", "2"}
    # 001 Figure 4: a heat map per sweep over its two axes (smoke: 2 x 2 and 2 x 1 points on the CIFAR-10 stand-in)
    f4 = csv_rows(rep / "figures/lpmst_figure4.csv")
    assert all(r["status"] == "ok" for r in f4) and len(f4) == 6, f4
    assert {(r["x_axis"], r["y_axis"]) for r in f4} == {
        ("stage1_fraction", "temperature"),
        ("mixup_alpha1", "mixup_alpha2"),
    }
    assert "STAND-IN DATA" in (rep / "figures/lpmst_figure4.md").read_text()
    # 001 Figure 5: every LP-2ST run of both sweeps, binned by its stage-1 top-k accuracy at k = filter_k
    f5 = csv_rows(rep / "figures/lpmst_figure5.csv")
    # 5 distinct runs: (b)'s point at mixup 8 / 4 is (a)'s run at the default split and temperature
    assert len(f5) == 5 and all(r["status"] == "ok" and 0 <= float(r["stage1_top_k_accuracy_pct"]) <= 100 for r in f5)
    assert all((rep / f"figures/lpmst_figure{n}.{e}").stat().st_size > 0 for n in (4, 5) for e in ("png", "pdf"))
    # 001 Tables 1 (CIFAR-10), 2 (CIFAR-100) and 5 (KMNIST) on the stand-ins, said so; Table 1's pre-trained
    # columns start from the CIFAR-100 pre-training; Table 2 has numbers of ours in every column, 001's values beside them
    for t in ("lpmst_table1", "lpmst_table2", "lpmst_table5"):
        assert "SYNTHETIC" in (rep / f"tables/{t}.md").read_text()
    t2 = csv_rows(rep / "tables/lpmst_table2.csv")
    assert {r["column"] for r in t2} == {"lp_1st", "lp_2st", "nonprivate"}
    assert all(r["status"] == "ok" and r["paper"] for r in t2), t2
    t1 = csv_rows(rep / "tables/lpmst_table1.csv")
    assert {r["column"] for r in t1} >= {"lp_1st_pretrain", "lp_2st_pretrain"}, t1
    assert all(r["status"] == "ok" and r["paper"] for r in t1 if r["column"].endswith("_pretrain")), t1
    assert all(r["status"] == "ok" for r in t1), t1
    # their records say which pre-training they started from, and it is the state file the pre-training wrote
    states = list((smoke_dag.work / "results/smoke/pretrained").glob("cifar100_cifar_cnn/*/state.msgpack"))
    assert len(states) == 1, states
    pre = json.loads((states[0].parent / "pretrain.json").read_text())
    assert pre["dataset"]["name"] == "cifar100" and pre["dataset"]["synthetic_standin"] is True
    sha = hashlib.sha256(states[0].read_bytes()).hexdigest()
    started = [
        json.loads(p.read_text())
        for v in ("lp_mst/recipe001_cifar_t1_c100", "lp_2st/recipe001_cifar_c100")
        for p in (smoke_dag.work / "results/smoke/cifar10" / v).rglob("seed*.json")
    ]
    assert len(started) == 2 and all(r["details"]["init_from"]["state_sha256"] == sha for r in started), started
    # 001 Table 3 (MovieLens-1M, NCF) on the stand-in: an RMSE per column beside 001's, said so
    t3 = csv_rows(rep / "tables/lpmst_table3.csv")
    assert {r["column"] for r in t3} == {"lp_1st", "lp_2st", "nonprivate"}, t3
    assert all(r["status"] == "ok" and 0.0 < float(r["mean"]) < 4.0 and r["paper"] for r in t3), t3
    assert "SYNTHETIC" in (rep / "tables/lpmst_table3.md").read_text()
