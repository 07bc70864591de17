"""003's regression outputs from hand-made records: the two selection protocols, Table G.3 next
to the paper's values, and the stand-in marking."""

from __future__ import annotations

import csv

import pytest

from labeldp import plan, records
from labeldp.report import scorecard
from labeldp.report.regression import main_regression

from tests.helpers import planted_record, repo_config


def _write(run, *, test_mse, val_mse, source="synthetic_standin", lp=0.5):
    spec = run.spec
    details = {
        "epsilon1": 0.002,
        "epsilon2": spec.epsilon - 0.002,
        "randomizer_build_seconds": lp,
        "mesh_size": spec.hparams.get("mesh_size"),
        "joint_histogram": {"label_edges": [0, 1, 2], "noisy_edges": [0, 1, 2], "counts": [[1, 0], [0, 1]]},
    }
    metrics = {"test_mse": test_mse, "validation_noisy_mse": val_mse, "noisy_label_mse": 3.0, "diverged": False}
    rec = planted_record(
        run,
        metrics=metrics,
        source=source,
        n_train=100,
        n_test=20,
        delta=0.0,
        relation="label_substitution",
        details=details,
    )
    records.write_record(run.record_path, rec)


@pytest.fixture
def cfg(tmp_path):
    c = repo_config(results_dir=str(tmp_path / "results"))
    c["seeds"] = [0, 1]
    for t in ("figure5a", "figure5a_honest", "tableG3"):
        c["tables"][t]["seeds"] = [0, 1]
    c["tables"]["figure5a"]["epsilons"] = c["tables"]["figure5a_honest"]["epsilons"] = [1.0]
    c["grids"]["full"]["regression_census"] = {"learning_rate": [0.1, 0.2], "epochs": [1], "batch_size": [8]}
    return c


def _fill(cfg, table, col_id, by_lr):
    col = {c.id: c for c in plan.columns(cfg["tables"][table])}[col_id]
    for run in plan.cell_runs(cfg, table, col, 1.0):
        _write(run, **by_lr[run.spec.hparams["learning_rate"]])


def _rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_paper_protocol_selects_on_test_and_honest_on_noisy_validation(cfg, tmp_path):
    # lr 0.1: best test MSE, worse noisy validation; lr 0.2: the opposite
    _fill(
        cfg,
        "figure5a",
        "optimal_unbiased",
        {0.1: {"test_mse": 1.0, "val_mse": 9.0}, 0.2: {"test_mse": 2.0, "val_mse": 5.0}},
    )
    out = tmp_path / "fig"
    main_regression(cfg, "figure5a", out)
    main_regression(cfg, "figure5a_honest", out)
    paper = {r["column"]: r for r in _rows(out / "figure5a.csv")}["optimal_unbiased"]
    honest = {r["column"]: r for r in _rows(out / "figure5a_honest.csv")}["optimal_unbiased"]
    assert float(paper["test_mse_mean"]) == 1.0 and "lr0.1" in paper["selected_hparams"]
    assert float(honest["test_mse_mean"]) == 2.0 and "lr0.2" in honest["selected_hparams"]
    assert "honest protocol" in (out / "figure5a_honest.md").read_text()
    assert "selects on the test set" in (out / "figure5a.md").read_text()
    # the scorecard counts the paper's protocol and the honest one apart (labeldp.report.metrics.selection_kind)
    assert (paper["selection"], paper["selection_metric"]) == ("paper", "test_mse")
    assert (honest["selection"], honest["selection_metric"]) == ("held-out", "validation_noisy_mse")
    scored = scorecard.score_cells(_rows(out / "figure5a.csv") + _rows(out / "figure5a_honest.csv"), {})
    assert {(r["table"], r["selection"]) for r in scored} == {("figure5a", "paper"), ("figure5a_honest", "held-out")}
    for t in ("figure5a", "figure5a_honest"):
        assert (out / f"{t}.png").stat().st_size > 0 and (out / f"{t}.pdf").exists()


def test_missing_methods_say_not_run(cfg, tmp_path):
    _fill(cfg, "figure5a", "laplace", {0.1: {"test_mse": 1.0, "val_mse": 1.0}, 0.2: {"test_mse": 2.0, "val_mse": 2.0}})
    main_regression(cfg, "figure5a", tmp_path)
    text = (tmp_path / "figure5a.md").read_text()
    assert "not run: no result records" in text


def test_standin_data_is_named_in_every_output(cfg, tmp_path):
    _fill(cfg, "figure5a", "laplace", {0.1: {"test_mse": 1.0, "val_mse": 1.0}, 0.2: {"test_mse": 2.0, "val_mse": 2.0}})
    main_regression(cfg, "figure5a", tmp_path)
    assert "STAND-IN DATA" in (tmp_path / "figure5a.md").read_text()
    assert {r["data_source"] for r in _rows(tmp_path / "figure5a.csv") if r["status"] == "ok"} == {"synthetic_standin"}


def test_table_g3_shows_the_papers_values_beside_ours(cfg, tmp_path):
    for col in ("rr_on_bins", "unbiased_mesh52", "unbiased_mesh416", "unbiased_mesh1664"):
        _fill(cfg, "tableG3", col, {0.1: {"test_mse": 130.0, "val_mse": 1.0}, 0.2: {"test_mse": 140.0, "val_mse": 2.0}})
    main_regression(cfg, "tableG3", tmp_path, tmp_path / "plots")
    text = (tmp_path / "tableG3.md").read_text()
    assert "(2.38)" in text and "(161)" in text and "(134.44)" in text and "(172.44)" in text
    assert (tmp_path / "tableG3.tex").exists() and (tmp_path / "plots" / "tableG3.png").exists()
