"""Tables under an honest selection, from hand-made records: a held-out selection column beside the paper's, and a
column read at each run's honest stopping epoch (labeldp.selection, labeldp.heldout_stopping)."""

from pathlib import Path

import pytest

from labeldp import plan, records
from labeldp.report import tables

from tests.helpers import repo_config
from tests.helpers import write_table_record as _write


def test_held_out_selection_and_test_selection_pick_different_planted_points(table5_cfg):
    """A planted grid: lr 0.1 has the better test accuracy, lr 0.2 the better held-out (noisy
    label) accuracy; the paper's column picks lr 0.1, the held-out column lr 0.2."""
    cfg = table5_cfg
    tcfg = cfg["tables"]["table5_mnist"]
    cfg["variants"].setdefault("dpsgd", {})["heldout10"] = {"validation_fraction": 0.1}
    tcfg["columns"] = [
        {"id": "dpsgd", "label": "DP-SGD", "method": "dpsgd"},
        {
            "id": "dpsgd_heldout",
            "label": "DP-SGD (held-out)",
            "method": "dpsgd",
            "variant": "heldout10",
            "selection_metric": "validation_noisy_accuracy_pct",
        },
    ]
    test_acc = {0.1: 90.0, 0.2: 85.0}
    val_acc = {0.1: 40.0, 0.2: 45.0}
    for col in plan.columns(tcfg):
        for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
            lr = run.spec.hparams["learning_rate"]
            _write(cfg, run, test_acc[lr])
            if col.id == "dpsgd_heldout":
                rec = records.read_record(run.record_path)
                rec["metrics"]["validation_noisy_accuracy_pct"] = val_acc[lr]
                Path(run.record_path).unlink()
                records.write_record(run.record_path, rec)
    res = tables.build_table(cfg, "table5_mnist")
    assert res.cells[("dpsgd", 0.1)].best_hparams == {"learning_rate": 0.1}
    assert res.cells[("dpsgd_heldout", 0.1)].best_hparams == {"learning_rate": 0.2}
    assert res.cells[("dpsgd_heldout", 0.1)].mean == pytest.approx(85.0)  # its TEST accuracy is reported


def _plant_stopped(cfg, table, col_id, eps, details_of):
    """Planted records of a stopped column: final test accuracy 50 (never the cell), ``details_of(run)``'s curves."""
    col = {c.id: c for c in plan.columns(cfg["tables"][table])}[col_id]
    for run in plan.cell_runs(cfg, table, col, eps):
        _write(cfg, run, 50.0)
        rec = records.read_record(run.record_path)
        rec["details"] = details_of(run)
        records.write_record(run.record_path, rec)


@pytest.fixture
def stopped_cfg(tmp_path):
    c = repo_config("protocol_cpu.yaml", results_dir=str(tmp_path / "results"))
    c["tables"]["alibi_official_recipe_cpu"].update(epsilons=[1.0], seeds=[0, 1])
    c["grids"][c["grid"]]["alibi_official"]["learning_rate"] = [0.1, 0.2]
    return c


def test_a_stopped_column_is_read_and_chosen_at_each_runs_held_out_epoch_beside_the_papers_cell(stopped_cfg):
    """lr 0.1's held-out curves peak higher (choose it) though lr 0.2's test curves do; each seed stops on its own
    curve; the paper's cell is 5a's test accuracy."""
    curves = {
        (0.1, 0): ([90.0, 93.0, 97.0], [30.0, 40.0, 35.0]),  # stops at epoch 2: 93
        (0.1, 1): ([91.0, 99.0, 92.0], [41.0, 30.0, 30.0]),  # stops at epoch 1: 91
        (0.2, 0): ([98.0, 99.0, 99.5], [20.0, 25.0, 39.0]),
        (0.2, 1): ([98.0, 99.0, 99.5], [39.0, 25.0, 20.0]),
    }

    def details(run):
        test, held_out = curves[(run.spec.hparams["learning_rate"], run.spec.seed)]
        return {"test_accuracy_by_epoch": test, "validation_noisy_accuracy_by_epoch": held_out}

    _plant_stopped(stopped_cfg, "alibi_official_recipe_cpu", "alibi_official_heldout_stop", 1.0, details)
    res = tables.build_table(stopped_cfg, "alibi_official_recipe_cpu")
    cell = res.cells[("alibi_official_heldout_stop", 1.0)]
    assert cell.best_hparams["learning_rate"] == 0.1
    assert cell.mean == pytest.approx((93.0 + 91.0) / 2) and cell.n_seeds == 2
    assert cell.paper == 94.1  # 000 Table 5a, ALIBI on MNIST at eps 1
    assert "column `alibi_official_heldout_stop`: each run's model at its honest stopping epoch" in (
        tables.render_markdown(res)
    )
    tidy = {r["column"]: r for r in tables.tidy_rows(res)}  # the CSV says what each column reads and how it chose
    assert (tidy["alibi_official_heldout_stop"]["selection"], tidy["alibi_official"]["selection"]) == (
        "held-out",
        "paper",
    )
    assert tidy["alibi_official_heldout_stop"]["column_metric"] == "heldout_stopped_test_accuracy_pct"
    assert tidy["alibi_official"]["column_metric"] == tidy["alibi_official"]["metric"] == "test_accuracy_pct"


def test_a_stopped_columns_record_without_its_curves_names_the_record_and_the_fix(stopped_cfg):
    _plant_stopped(
        stopped_cfg,
        "alibi_official_recipe_cpu",
        "alibi_official_heldout_stop",
        1.0,
        lambda run: {"test_accuracy_by_epoch": [90.0, 93.0]},
    )
    with pytest.raises(
        ValueError, match=r"record mnist/alibi/official_recipe_heldout_curve/eps1.*test_curve_diagnostic"
    ):
        tables.build_table(stopped_cfg, "alibi_official_recipe_cpu")
