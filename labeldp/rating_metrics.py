"""The test RMSE of a classifier over ratings (001 Table 3).

001 Appendix B treats MovieLens' ratings as classes and, "during evaluation, [outputs] the average rating
according to the softmax probabilities output by the trained model": the prediction is
``sum_c softmax(logits)_c * value_c`` and Table 3 prints the root mean squared error of that prediction
against the true rating.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["class_values_of", "expected_value_rmse"]


def class_values_of(data: Any) -> np.ndarray | None:
    """The value each class stands for (a prepared file's ``metadata["class_values"]``), or None where the
    classes are not ordered values (images)."""
    values = (getattr(data, "metadata", None) or {}).get("class_values")
    return None if values is None else np.asarray(values, dtype=np.float64)


def expected_value_rmse(logits: np.ndarray, labels: np.ndarray, class_values: Sequence[float]) -> float:
    """RMSE of the softmax-expected value against each example's true class's value.

    Args:
      logits: ``(n, K)`` model outputs.
      labels: ``(n,)`` true classes in ``0..K-1``.
      class_values: ``(K,)`` the value of each class (MovieLens: 1-5 stars).

    Returns:
      ``sqrt(mean_i (softmax(logits_i) . values - values[labels_i])^2)``.

    Raises:
      ValueError: the shapes do not agree.
    """
    logits = np.asarray(logits, dtype=np.float64)
    values = np.asarray(class_values, dtype=np.float64)
    labels = np.asarray(labels)
    if logits.ndim != 2 or logits.shape[1] != values.shape[0] or labels.shape != (logits.shape[0],):
        raise ValueError(f"logits {logits.shape}, labels {labels.shape} and class values {values.shape} disagree")
    z = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return float(np.sqrt(np.mean((probs @ values - values[labels]) ** 2)))
