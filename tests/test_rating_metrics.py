"""The softmax-expected rating's RMSE (001 Table 3)."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.rating_metrics import class_values_of, expected_value_rmse


def test_the_rmse_is_that_of_the_softmax_expected_value():
    logits = np.log(np.array([[0.5, 0.5, 0.0 + 1e-300, 1e-300, 1e-300], [0.0 + 1e-300, 1e-300, 1e-300, 0.25, 0.75]]))
    values = [1, 2, 3, 4, 5]
    labels = np.array([2, 4])  # true ratings 3 and 5; expected 1.5 and 4.75
    assert expected_value_rmse(logits, labels, values) == pytest.approx(np.sqrt((1.5**2 + 0.25**2) / 2))


def test_confident_correct_logits_have_zero_error_and_uniform_logits_predict_the_mean():
    labels = np.array([0, 3, 4, 1])
    assert expected_value_rmse(100.0 * np.eye(5)[labels], labels, [1, 2, 3, 4, 5]) == pytest.approx(0.0, abs=1e-9)
    uniform = expected_value_rmse(np.zeros((4, 5)), labels, [1, 2, 3, 4, 5])
    assert uniform == pytest.approx(np.sqrt(np.mean((3.0 - (labels + 1)) ** 2)))


def test_disagreeing_shapes_are_refused():
    with pytest.raises(ValueError, match="disagree"):
        expected_value_rmse(np.zeros((3, 4)), np.zeros(3, int), [1, 2, 3, 4, 5])


def test_only_data_with_class_values_has_them():
    class Data:
        metadata = {"class_values": [1, 2]}

    assert class_values_of(Data()).tolist() == [1.0, 2.0]
    assert class_values_of(object()) is None
