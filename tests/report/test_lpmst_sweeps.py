"""001 Figures 4 and 5 from records (labeldp.report.lpmst_sweeps): heat maps of seed means over two grid
axes, and the final accuracy binned by the stage-1 model's top-k accuracy at k = filter_k."""

from __future__ import annotations

import pytest

from labeldp import plan, records
from labeldp.report import lpmst_sweeps
from tests.helpers import repo_config
from tests.helpers import write_table_record as _write


def _config(tmp_path):
    cfg = repo_config(results_dir=str(tmp_path / "results"))
    cfg["seeds"] = [0, 1]
    base = {"learning_rate": [0.4], "epochs": [1], "batch_size": [64]}
    cfg["grids"]["full"]["lpmst_figure4a"] = {
        **base,
        "mixup_alpha1": [8.0, 16.0],
        "mixup_alpha2": [4.0],
        "stage1_fraction": [0.4, 0.6],
        "temperature": [0.5, 1.0],
    }
    cfg["grids"]["full"]["lpmst_figure4b"] = {**base, "mixup_alpha1": [0.0, 8.0], "mixup_alpha2": [4.0]}
    return cfg


def _plant(cfg, table, accuracy, top_k=None, filter_k=2):
    col = plan.columns(cfg["tables"][table])[0]
    runs = plan.cell_runs(cfg, table, col, 2.0)
    for run in runs:
        _write(cfg, run, accuracy(run.spec.hparams, run.spec.seed))
        if top_k is not None:
            rec = records.read_record(run.record_path)
            rec["details"] = {"filter_k": filter_k, "stage1_test_top_k_accuracy_pct": top_k(run.spec.hparams)}
            records.write_record(run.record_path, rec)
    return runs


def test_each_cell_of_the_heat_map_is_its_points_seed_mean_best_over_the_other_axes(tmp_path):
    cfg = _config(tmp_path)

    def acc(hp, seed):  # mixup 16 is worse everywhere; the seeds differ by 2 points
        return (
            50
            + 10 * hp["stage1_fraction"]
            + 20 * hp["temperature"]
            - (5 if hp["mixup_alpha1"] == 16.0 else 0)
            + 2 * seed
        )

    runs = _plant(cfg, "lpmst_figure4a_sweep", acc)
    assert len(runs) == 2 * 2 * 2 * 2  # the split, the temperature, mixup 1, the seeds
    rows = lpmst_sweeps.heatmap_rows(cfg, "lpmst_figure4")
    (a_rows, b_rows) = ([r for r in rows if r["table"] == t] for t in ("lpmst_figure4a_sweep", "lpmst_figure4b_sweep"))
    assert {(r["x"], r["y"]): r["test_accuracy_pct"] for r in a_rows} == pytest.approx(
        {(f, t): 50 + 10 * f + 20 * t + 1 for f in (0.4, 0.6) for t in (0.5, 1.0)}
    )
    assert all(
        r["n_seeds"] == 2 and r["std"] == pytest.approx(1.0) and "mixup_alpha1=8.0" in r["other_axes"] for r in a_rows
    )
    # Figure 4 (b)'s point at mixup 8 / 4 IS (a)'s run at the default split 0.4 and temperature 1 (one run id for
    # one computation), so (b) shows that point already; its other point has no record yet
    assert [(r["x"], r["y"], r["test_accuracy_pct"]) for r in b_rows] == [(8.0, 4.0, pytest.approx(75.0))]
    text = lpmst_sweeps._heatmap_markdown(cfg, "lpmst_figure4", rows)
    assert "| temperature \\ stage1_fraction | 0.4 | 0.6 |" in text and "16 of 16 planned runs" in text
    assert "2 of 4 planned runs" in text


def test_a_panel_without_records_says_not_run(tmp_path):
    rows = lpmst_sweeps.heatmap_rows(_config(tmp_path), "lpmst_figure4")
    assert [r["status"] for r in rows] == ["not run", "not run"] and all("no record" in r["reason"] for r in rows)


def test_the_violins_bin_each_run_by_its_stage1_top_k_accuracy_at_filter_k(tmp_path):
    cfg = _config(tmp_path)
    cfg["tables"]["lpmst_figure5"]["violin_bins"] = [0, 50, 80, 100]
    # filter_k = 2: the second entry of the top-k list is the x value
    _plant(
        cfg,
        "lpmst_figure4b_sweep",
        lambda hp, seed: 60.0 + hp["mixup_alpha1"] + seed,
        top_k=lambda hp: [10.0, 45.0 if hp["mixup_alpha1"] == 0.0 else 100.0, 100.0],
    )
    rows = lpmst_sweeps.violin_rows(cfg, "lpmst_figure5")
    assert sorted((r["bin"], r["stage1_top_k_accuracy_pct"], r["test_accuracy_pct"]) for r in rows) == [
        ("[0, 50)", 45.0, 60.0),
        ("[0, 50)", 45.0, 61.0),
        ("[80, 100]", 100.0, 68.0),
        ("[80, 100]", 100.0, 69.0),
    ]
    assert all(r["filter_k"] == 2 for r in rows)


def test_without_top_k_records_the_violins_say_not_run(tmp_path):
    cfg = _config(tmp_path)
    _plant(cfg, "lpmst_figure4b_sweep", lambda hp, seed: 60.0)  # records that predate the top-k accuracies
    (row,) = lpmst_sweeps.violin_rows(cfg, "lpmst_figure5")
    assert row["status"] == "not run" and "top-k" in row["reason"] and row["n_records_without_top_k"] == 4
