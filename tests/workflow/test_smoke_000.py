"""The smoke DAG's outputs of 000 (LabelDP-Pro): its tables and figures, built from records (the DAG runs once
per session: tests/workflow/smoke_dag.py)."""

from __future__ import annotations

import json

import pytest

from tests.workflow.smoke_dag import csv_rows

from labeldp.methods import registry

pytestmark = [pytest.mark.slow, pytest.mark.smoke_dag]  # every test here reads the session's smoke DAG


def test_table5a_has_every_cell_or_not_run_beside_the_paper(smoke_dag):
    """000 Table 5a on real MNIST, the stand-in flagged where used, and Tables 7 and 11."""
    rep = smoke_dag.reports
    rows = csv_rows(rep / "tables/table5_mnist.csv")
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
    t7 = [r for r in csv_rows(rep / "tables/table7.csv") if r["column"] != "nonprivate"]
    assert t7 and all(r["status"] == "ok" and 0.0 <= float(r["mean"]) <= 1.0 and r["paper"] for r in t7), t7
    assert "privacy unit: **user**" in (rep / "tables/table7.md").read_text()
    # 000 Table 11 from the records of the smoke tables' runs: every timed method has a number on this machine
    t11 = csv_rows(rep / "tables/table11.csv")
    assert any(r["status"] == "ok" and float(r["mean"]) > 0 for r in t11) and all(
        r["paper"] for r in t11 if r["method"] == "dpsgd"
    ), t11
    assert "STAND-IN DATA" in (rep / "tables/table11.md").read_text()  # CIFAR-10 and Criteo are stand-ins here


def test_table6_runs_on_simclr_features_and_quotes_pate_fm(smoke_dag):
    """000 Table 6: every method on SimCLR features of both datasets, PATE-FM quoted, the encoder stated."""
    work, rep = smoke_dag.work, smoke_dag.reports
    # 000 Table 6: SimCLR features (pre-trained by the same rules on the CIFAR-10 stand-in and on real
    # FashionMNIST), every method ran on them, PATE-FM is quoted, the encoder is stated
    for t, dataset in (("table6", "cifar10"), ("table6_fashion_mnist", "fashion_mnist")):
        rows = [r for r in csv_rows(rep / f"tables/{t}.csv") if r["column"] != "pate_fm"]
        assert rows and all(r["status"] == "ok" and 0.0 <= float(r["mean"]) <= 100.0 for r in rows), (t, rows)
        text = (rep / f"tables/{t}.md").read_text()
        assert "features: SimCLR ResNet-18" in text and "linear probe" in text, text[:3000]
        assert ("SYNTHETIC" in text) == (t == "table6")
        pre = list((work / "results/smoke/ssl").glob(f"{dataset}-*/*/pretrain.json"))
        assert len(pre) == 1 and json.loads(pre[0].read_text())["loss_curve"], pre
    quoted = {float(r["epsilon"]): r for r in csv_rows(rep / "tables/table6.csv") if r["column"] == "pate_fm"}
    assert quoted[0.18]["status"] == "quoted" and float(quoted[0.18]["paper"]) == 73.4
    assert "quoted: 73.4" in (rep / "tables/table6.md").read_text()


def test_table12_and_figures_2_and_4_come_from_their_records(smoke_dag):
    """000 Table 12's eps* brackets, Figure 2's curves and Figure 4's confusion matrices."""
    work, rep = smoke_dag.work, smoke_dag.reports
    # 000 Table 12 from its sweeps' cells: every row has an eps* bracket (or an open one) and the paper's beside
    t12 = csv_rows(rep / "tables/table12.csv")
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
    f2 = csv_rows(rep / "figures/figure2.csv")
    assert {r["column"] for r in f2} == {"lambda1", "lambda085", "lambda075", "lambda05"}
    assert all(r["status"] == "ok" and float(r["grad_norm"]) >= 0 and float(r["loss"]) > 0 for r in f2), f2
    assert all((rep / "figures" / f"figure2.{e}").stat().st_size > 0 for e in ("md", "png", "pdf"))
    # 000 Figure 4: confusion matrices (test set) at initialisation and after RR at eps 0.1 and 1.6
    for f, n_test in (("pro_figure4", None), ("pro_figure4_fashion_mnist", 2000)):
        rows = csv_rows(rep / f"figures/{f}.csv")
        assert [p for p in dict.fromkeys(r["panel"] for r in rows)] == [
            "initialisation",
            "RR, eps = 0.1",
            "RR, eps = 1.6",
        ]
        for panel in ("initialisation", "RR, eps = 0.1", "RR, eps = 1.6"):
            counts = [int(r["count"]) for r in rows if r["panel"] == panel]
            assert len(counts) == 100 and (n_test is None or sum(counts) == n_test), (f, panel)
