"""001 Figure 3's curves (labeldp.report.learning_curves): the stages' per-epoch accuracy, in order."""

from __future__ import annotations

from labeldp.report.learning_curves import epoch_curve


def test_both_lp_mst_record_forms_give_the_stages_epochs_in_order():
    mst = {"per_stage": [{"test_accuracy_by_epoch": [10.0, 20.0]}, {"test_accuracy_by_epoch": [30.0]}]}
    two = {"test_accuracy_by_epoch": {"stage2": [30.0], "stage1": [10.0, 20.0]}}
    assert epoch_curve(mst) == epoch_curve(two) == [(1, 10.0), (1, 20.0), (2, 30.0)]


def test_records_without_the_curves_give_none():
    assert epoch_curve({}) is None
    assert epoch_curve({"per_stage": [{"test_accuracy_pct": 50.0}]}) is None
