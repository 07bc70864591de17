"""What the report modules share about metrics: which are errors, which are derived."""

from __future__ import annotations

__all__ = ["LOWER_IS_BETTER", "DERIVED_METRICS"]

#: Metrics (errors) for which the best configuration and the best cell of a row have the lowest
#: mean; the scorecard's winner/loser claims read them the same way.
LOWER_IS_BETTER = ("test_mse", "test_rmse", "noisy_label_mse", "validation_noisy_mse", "relative_auc_loss_pct")
#: Metrics derived from a record's metric and the table's non-private cell (paper 002):
#: ``relative_auc_loss_pct = 100 ((1 - AUC) - (1 - AUC_np)) / (1 - AUC_np)`` from ``test_auc``.
DERIVED_METRICS = {"relative_auc_loss_pct": "test_auc"}
