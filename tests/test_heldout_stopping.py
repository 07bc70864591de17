"""The honest stopping epoch (labeldp.heldout_stopping): chosen on the held-out release, read on the test curve."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.heldout_stopping import (
    STOPPED_SELECTION_METRIC,
    STOPPED_TEST_METRIC,
    stopped_metric,
    stopping_epoch,
)


def test_the_stopping_epoch_is_the_first_best_of_the_held_out_curve():
    rng = np.random.default_rng(0)
    for _ in range(100):
        curve = list(rng.integers(0, 5, size=rng.integers(1, 20)).astype(float))  # ties are common
        epoch = stopping_epoch(curve)
        assert curve[epoch - 1] == max(curve)
        assert all(c < max(curve) for c in curve[: epoch - 1])  # no earlier epoch is as good


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [[1.0, 2.0]]])
def test_a_curve_that_is_empty_nonfinite_or_not_flat_is_refused(bad):
    with pytest.raises(ValueError, match="non-empty list of finite"):
        stopping_epoch(bad)


def test_the_stopped_metrics_read_both_curves_at_the_held_out_epoch_not_the_test_best():
    # the test set's best epoch is 3 (96.5); the released held-out labels' best is epoch 4
    details = {
        "test_accuracy_by_epoch": [90.0, 93.0, 96.5, 95.0, 92.0],
        "validation_noisy_accuracy_by_epoch": [20.0, 22.0, 23.0, 24.0, 21.0],
    }
    assert stopped_metric(details, metric=STOPPED_TEST_METRIC) == 95.0
    assert stopped_metric(details, metric=STOPPED_SELECTION_METRIC) == 24.0


@pytest.mark.parametrize(
    "details",
    [
        {"test_accuracy_by_epoch": [90.0, 93.0]},  # a run without the held-out curve
        {"validation_noisy_accuracy_by_epoch": [20.0, 22.0]},  # ... without the test curve
        {"test_accuracy_by_epoch": [90.0, 93.0], "validation_noisy_accuracy_by_epoch": [20.0]},  # lengths differ
        {"test_accuracy_by_epoch": {"stage1": [90.0]}, "validation_noisy_accuracy_by_epoch": [20.0]},  # staged
    ],
)
def test_a_record_without_both_curves_of_one_length_names_the_fix(details):
    with pytest.raises(ValueError, match="validation_fraction and test_curve_diagnostic: true"):
        stopped_metric(details, metric=STOPPED_TEST_METRIC)


def test_an_unknown_metric_is_refused():
    with pytest.raises(ValueError, match="unknown stopped metric"):
        stopped_metric(
            {"test_accuracy_by_epoch": [1.0], "validation_noisy_accuracy_by_epoch": [1.0]}, metric="test_auc"
        )
