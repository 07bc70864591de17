"""The honest stopping epoch: each run's epoch chosen on the RR-released held-out labels, never on the test set.

000 D.2 reports the final model; ALIBI's official loop also prints the best epoch's TEST accuracy, which is a
choice on the test set. A held-out run (:mod:`labeldp.selection`) whose method reports its model's
log-probabilities at the held-out rows after every epoch (ALIBI's ``test_curve_diagnostic``) records the
accuracy against the cell's one RR release of the held-out labels after every epoch
(``details.validation_noisy_accuracy_by_epoch``) beside the test accuracy after every epoch
(``details.test_accuracy_by_epoch``). The stopping epoch is the first with the best held-out accuracy.

Privacy (label substitution, 000 Definition 2): the choice is post-processing of the run (which reads the fitting
rows' labels) and of the release (which reads the held-out rows' labels); they read disjoint examples, so the
model at the chosen epoch is ``max(eps_run, validation_epsilon)``-label-DP, the eps the run's record states
(:func:`labeldp.selection.with_validation_release`). The test accuracy is only read at the chosen epoch.

A table column reads a record at its stopping epoch through the record metrics of :data:`STOPPED_METRICS` (the
column's ``metric`` and ``selection_metric``), computed from the record's own curves when the table is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "STOPPED_TEST_METRIC",
    "STOPPED_SELECTION_METRIC",
    "STOPPED_METRICS",
    "STOPPED_COLUMN_TEXT",
    "stopping_epoch",
    "stopped_metric",
]

#: A column's ``metric``: the test accuracy of each run's model at its honest stopping epoch.
STOPPED_TEST_METRIC = "heldout_stopped_test_accuracy_pct"
#: The matching ``selection_metric``: the noisy held-out accuracy there (the best over the run's epochs).
STOPPED_SELECTION_METRIC = "heldout_stopped_validation_noisy_accuracy_pct"
#: Each stopped metric and the per-epoch curve of the record's details it is read from.
STOPPED_METRICS = {
    STOPPED_TEST_METRIC: "test_accuracy_by_epoch",
    STOPPED_SELECTION_METRIC: "validation_noisy_accuracy_by_epoch",
}
#: What a table header says of a column whose ``metric`` is :data:`STOPPED_TEST_METRIC`.
STOPPED_COLUMN_TEXT = (
    "each run's model at its honest stopping epoch (the first with the best accuracy against the cell's one RR "
    "release of the held-out labels; post-processing, so the eps shown holds; labeldp/heldout_stopping.py): "
    "the test accuracy there, the configuration chosen on the held-out accuracy there"
)


def stopping_epoch(validation_by_epoch: Sequence[float]) -> int:
    """The 1-based epoch with the best noisy held-out accuracy (the first of equals).

    Args:
      validation_by_epoch: the accuracy against the released held-out labels after epoch 1, 2, ...

    Returns:
      The chosen epoch, counted from 1.

    Raises:
      ValueError: an empty curve, or one with a non-finite value.
    """
    curve = np.asarray(validation_by_epoch, dtype=float)
    if curve.ndim != 1 or curve.size == 0 or not np.all(np.isfinite(curve)):
        raise ValueError(f"a held-out curve must be a non-empty list of finite accuracies, got {validation_by_epoch!r}")
    return int(np.argmax(curve)) + 1


def stopped_metric(details: Mapping[str, Any], *, metric: str) -> float:
    """One of :data:`STOPPED_METRICS` of a run, read at its :func:`stopping_epoch`.

    Args:
      details: the record's ``details`` (its per-epoch test and held-out curves).
      metric: a key of :data:`STOPPED_METRICS`.

    Returns:
      The metric's curve at the run's stopping epoch.

    Raises:
      ValueError: an unknown metric, or details without both curves of one length (a run that is not a held-out
        run of a method reporting its per-epoch held-out log-probabilities: ALIBI with ``test_curve_diagnostic``
        and ``validation_fraction``).
    """
    if metric not in STOPPED_METRICS:
        raise ValueError(f"unknown stopped metric {metric!r}; known: {sorted(STOPPED_METRICS)}")
    held_out = details.get("validation_noisy_accuracy_by_epoch")
    test = details.get("test_accuracy_by_epoch")
    if not isinstance(held_out, list) or not isinstance(test, list) or len(held_out) != len(test):
        raise ValueError(
            f"{metric} needs details.validation_noisy_accuracy_by_epoch and details.test_accuracy_by_epoch, lists of "
            "one length: run the column's variant with validation_fraction and test_curve_diagnostic: true"
        )
    return float(details[STOPPED_METRICS[metric]][stopping_epoch(held_out) - 1])
