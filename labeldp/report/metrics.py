"""What the report modules share about metrics: which are errors, which are derived, how a record gives one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labeldp.heldout_stopping import STOPPED_METRICS, STOPPED_SELECTION_METRIC, stopped_metric

__all__ = [
    "LOWER_IS_BETTER",
    "DERIVED_METRICS",
    "HELDOUT_SELECTION_METRICS",
    "selection_metric",
    "selection_kind",
    "record_metric",
]

#: Metrics (errors) for which the best configuration and the best cell of a row have the lowest
#: mean; the scorecard's winner/loser claims read them the same way.
LOWER_IS_BETTER = ("test_mse", "test_rmse", "noisy_label_mse", "validation_noisy_mse", "relative_auc_loss_pct")
#: Metrics derived from a record's metric and the table's non-private cell (paper 002):
#: ``relative_auc_loss_pct = 100 ((1 - AUC) - (1 - AUC_np)) / (1 - AUC_np)`` from ``test_auc``.
DERIVED_METRICS = {"relative_auc_loss_pct": "test_auc"}
#: Selection metrics read on RR-released held-out labels (labeldp.selection, labeldp.heldout_stopping), never the test set.
HELDOUT_SELECTION_METRICS = ("validation_noisy_accuracy_pct", "validation_noisy_mse", STOPPED_SELECTION_METRIC)


def selection_metric(
    tcfg: Mapping[str, Any], column_cfg: Mapping[str, Any] | None, *, default: str | None = None
) -> str:
    """The metric a cell's configuration is chosen on: the column's ``selection_metric``, the table's, or
    ``default`` (the metric the cell reports; the non-private cell of a relative-AUC table reports
    ``test_auc``), else the table's ``metric`` (the paper's selection on the test set)."""
    return (column_cfg or {}).get("selection_metric") or tcfg.get("selection_metric") or default or tcfg["metric"]


def selection_kind(tcfg: Mapping[str, Any], column_cfg: Mapping[str, Any] | None = None) -> str:
    """Whether a cell's configuration is chosen the papers' way or honestly.

    Args:
      tcfg: the table's config (its ``selection_metric``, if any, applies to every column).
      column_cfg: the column's config (its ``selection_metric`` overrides the table's).

    Returns:
      ``"held-out"`` when the selection metric in force reads RR-released held-out labels
      (:data:`HELDOUT_SELECTION_METRICS`: a held-out column beside the paper's, or a whole honest table such as
      003's ``*_honest`` figures), else ``"paper"`` (the papers' protocol: the best test mean, 000 D.2, or the best
      test MSE, 003).
    """
    return "held-out" if selection_metric(tcfg, column_cfg, default="") in HELDOUT_SELECTION_METRICS else "paper"


def record_metric(record: Mapping[str, Any], *, metric: str) -> float:
    """A record's own value of ``metric`` (not one of :data:`DERIVED_METRICS`, which need another cell).

    Args:
      record: a result record (:mod:`labeldp.records`).
      metric: a key of its ``metrics``, or one of :data:`labeldp.heldout_stopping.STOPPED_METRICS` (read from its
        per-epoch curves at the run's honest stopping epoch).

    Returns:
      The value; NaN when the record's ``metrics`` lack it (a diverged or older run: never averaged, see callers).

    Raises:
      ValueError: a stopped metric of a record without its curves (names the record and the fix).
    """
    if metric in STOPPED_METRICS:
        try:
            return stopped_metric(record["details"], metric=metric)
        except ValueError as e:
            raise ValueError(f"record {record['run_id']}: {e}") from None
    value = record["metrics"].get(metric)
    return float("nan") if value is None else float(value)
