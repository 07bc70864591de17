"""001 Figure 3's curves (labeldp.report.learning_curves): the stages' per-epoch accuracy, in order."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from labeldp import plan, records
from labeldp.report import learning_curves
from labeldp.report.learning_curves import epoch_curve, epochs_within, heldout_stopping
from tests.helpers import repo_config, write_table_record


def test_both_lp_mst_record_forms_give_the_stages_epochs_in_order():
    mst = {"per_stage": [{"test_accuracy_by_epoch": [10.0, 20.0]}, {"test_accuracy_by_epoch": [30.0]}]}
    two = {"test_accuracy_by_epoch": {"stage2": [30.0], "stage1": [10.0, 20.0]}}
    assert epoch_curve(mst) == epoch_curve(two) == [(1, 10.0), (1, 20.0), (2, 30.0)]


def test_records_without_the_curves_give_none():
    assert epoch_curve({}) is None
    assert epoch_curve({"per_stage": [{"test_accuracy_pct": 50.0}]}) is None


def test_alibis_single_list_is_one_stage():
    assert epoch_curve({"test_accuracy_by_epoch": [10.0, 20.0]}) == [(1, 10.0), (1, 20.0)]


def test_epochs_within_are_exactly_the_maximal_runs_inside_the_band():
    rng = np.random.default_rng(0)
    for _ in range(50):
        accs = list(80 + 6 * rng.standard_normal(rng.integers(1, 60)))
        runs = epochs_within(accs, 82.5, tolerance=2.0)
        inside = {e for r in runs for e in r}
        assert inside == {e for e, a in enumerate(accs, start=1) if abs(a - 82.5) <= 2.0}
        # maximal and ordered: consecutive runs are separated by at least one epoch outside the band
        assert all(a.stop < b.start for a, b in zip(runs, runs[1:]))


def test_the_band_is_inclusive_and_empty_when_no_epoch_is_inside():
    assert epochs_within([80.5, 84.5, 90.0, 84.0], 82.5, tolerance=2.0) == [range(1, 3), range(4, 5)]
    assert epochs_within([50.0, 60.0], 82.5, tolerance=2.0) == []


def _rendered_alibi_curve(tmp_path, *details_by_seed) -> tuple[str, list[dict[str, str]]]:
    """The ALIBI curve figure's markdown and eps-1 CSV rows (protocol_cpu.yaml) over planted records at eps 1 (eps 0.5
    has none), seed ``s`` with ``details_by_seed[s]``."""
    cfg = repo_config("protocol_cpu.yaml", results_dir=str(tmp_path / "results"))
    table, figure = "alibi_official_recipe_curve_cpu", "alibi_official_recipe_curve_figure_cpu"
    cfg["tables"][table]["seeds"] = list(range(len(details_by_seed)))
    (col,) = plan.columns(cfg["tables"][table])
    for run in plan.cell_runs(cfg, table, col, 1.0):
        write_table_record(cfg, run, 92.0)
        rec = records.read_record(run.record_path)
        rec["details"] = details_by_seed[run.spec.seed]
        records.write_record(run.record_path, rec)
    assert learning_curves.main_learning_curves(cfg, figure, tmp_path / "out", None) == 0
    with open(tmp_path / "out" / f"{figure}.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["status"] for r in rows if r["epsilon"] == "0.5"] == ["not run"]  # its panel says so, no number
    return (tmp_path / "out" / f"{figure}.md").read_text(), [r for r in rows if r["epsilon"] == "1.0"]


def test_a_diagnostic_curve_states_the_paper_and_the_epochs_inside_its_band(tmp_path):
    md, _ = _rendered_alibi_curve(tmp_path, {"test_accuracy_by_epoch": [90.0, 93.0, 96.5, 95.0, 92.0]})
    # 000 Table 5a's ALIBI at eps 1 is 94.1: epochs 2 and 4 lie within 2 points, 3 (96.5) and 5 (92.0) do not
    assert (
        "| 1 | ALIBI, official recipe (test curve recorded) | 1 | 5 (5) | 96.50 (3) | 92.00 | 94.1 | 2 of 5: 2, 4 | - ("
        in md
    )
    assert "| 0.5 | ALIBI, official recipe (test curve recorded) | not run: no record of the cell" in md


def test_the_honest_stopping_epoch_is_chosen_on_the_released_held_out_labels_not_the_test_set(tmp_path):
    # the test set's best epoch is 3; the released held-out labels' best is 4 (a planted disagreement)
    details = {
        "test_accuracy_by_epoch": [90.0, 93.0, 96.5, 95.0, 92.0],
        "validation_noisy_accuracy_by_epoch": [20.0, 22.0, 23.0, 24.0, 21.0],
    }
    md, _ = _rendered_alibi_curve(tmp_path, details)
    assert "| 96.50 (3) | 92.00 | 94.1 | 2 of 5: 2, 4 | 95.00 (4) |" in md


def test_two_seeds_stop_each_on_their_own_curve_in_the_table_and_the_csv(tmp_path):
    seed0 = {"test_accuracy_by_epoch": [90.0, 95.0, 93.0], "validation_noisy_accuracy_by_epoch": [20.0, 30.0, 25.0]}
    seed1 = {"test_accuracy_by_epoch": [80.0, 85.0, 99.0], "validation_noisy_accuracy_by_epoch": [40.0, 20.0, 21.0]}
    md, rows = _rendered_alibi_curve(tmp_path, seed0, seed1)
    assert "| 87.50 (2; 1) |" in md  # (95 + 80) / 2 at epochs 2 and 1
    assert {(r["heldout_stopping_epochs"], r["heldout_stopping_test_accuracy_pct"]) for r in rows} == {("2; 1", "87.5")}
    assert [float(r["test_accuracy_pct"]) for r in rows] == [85.0, 90.0, 96.0]  # the seed means
    assert [float(r["validation_noisy_accuracy_pct"]) for r in rows] == [30.0, 25.0, 23.0]


def test_each_seed_stops_on_its_own_held_out_curve_and_a_missing_curve_is_said():
    tests = [[90.0, 95.0, 93.0], [80.0, 85.0, 99.0]]
    # seed 0's held-out labels pick epoch 2, seed 1's epoch 1 (its test-best epoch 3 is not chosen);
    # the seed MEAN of the held-out curves would pick epoch 1 for both: a different answer
    heldout = [[20.0, 30.0, 25.0], [40.0, 20.0, 21.0]]
    assert heldout_stopping(tests, heldout=heldout) == ([2, 1], (95.0 + 80.0) / 2, "")
    assert heldout_stopping(tests, heldout=[[20.0, 30.0, 30.0], [21.0, 21.0, 20.0]])[0] == [
        2,
        1,
    ]  # ties: the first epoch
    assert heldout_stopping(tests, heldout=[heldout[0], None]) == ([], None, "held-out curve in 1 of 2 seeds")
    assert heldout_stopping(tests, heldout=[heldout[0], [1.0]])[2] == "held-out curve in 1 of 2 seeds"
    assert heldout_stopping(tests, heldout=[None, None]) == ([], None, "no held-out curve in the records")
    assert (
        heldout_stopping(tests, heldout=[heldout[0], [1.0, float("nan"), 2.0]])[2] == "held-out curve in 1 of 2 seeds"
    )
    with pytest.raises(ValueError):  # a seed without its held-out entry
        heldout_stopping(tests, heldout=[heldout[0]])
