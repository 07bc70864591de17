"""K-ary randomized response and RR-Debiased (the unbiased RR loss).

* 001 -- Ghazi et al. (2021), "Deep learning with label differential privacy":
  RR (eq. 1), LP-RR-SGD (Algorithm 5, eq. 7).
* 000 -- LabelDP-Pro (Appendix D.1: RR-Debiased).

``rr_debiased_loss`` and ``rr_debiased_weights`` are array-API agnostic and
also run on (and under ``jax.jit`` with) ``jax.numpy`` arrays. Re-exported by
:mod:`labeldp.mechanisms.classification`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from labeldp.mechanisms.classification_validation import (
    ArrayLike,
    check_epsilon,
    check_labels,
    check_num_classes,
    check_rng,
    namespace,
)

__all__ = [
    "randomized_response",
    "randomized_response_matrix",
    "rr_debiased_weights",
    "rr_debiased_loss",
]


# ---------------------------------------------------------------------------
# Randomized response (001 eq. 1).
# ---------------------------------------------------------------------------


def rr_probabilities(num_outputs: ArrayLike, epsilon: float):
    """(keep, other) = (e^eps, 1) / (e^eps + k - 1), overflow-free."""
    e_minus = math.exp(-epsilon)
    keep = 1.0 / (1.0 + (np.asarray(num_outputs, dtype=np.float64) - 1.0) * e_minus)
    return keep, keep * e_minus


def randomized_response_matrix(*, num_classes: int, epsilon: float) -> np.ndarray:
    """Transition matrix of K-ary randomized response (001 eq. 1).

    Args:
      num_classes: K, the number of labels.
      epsilon: the privacy parameter.

    Returns:
      A (K, K) float64 matrix ``P`` with ``P[y, out] = Pr[RR(y) = out]``:
      ``e^eps / (e^eps + K - 1)`` on the diagonal and ``1 / (e^eps + K - 1)``
      off it.
    """
    k = check_num_classes(num_classes)
    eps = check_epsilon(epsilon)
    keep, other = rr_probabilities(k, eps)
    mat = np.full((k, k), float(other))
    np.fill_diagonal(mat, float(keep))
    return mat


def randomized_response(labels: ArrayLike, *, num_classes: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """K-ary randomized response (001 eq. 1; Warner 1965).

    Keeps each label with probability ``e^eps / (e^eps + K - 1)`` and otherwise
    outputs one of the other ``K - 1`` labels uniformly at random.

    Privacy: ``epsilon``-DP with respect to each label, hence
    ``epsilon``-label-DP for the whole data set (each label is queried once).

    Args:
      labels: (n,) integer labels in ``[0, K)``.
      num_classes: K.
      epsilon: the privacy parameter, > 0.
      rng: the only source of randomness.

    Returns:
      (n,) int64 noisy labels.
    """
    k = check_num_classes(num_classes)
    eps = check_epsilon(epsilon)
    y = check_labels(labels, k)
    rng = check_rng(rng)
    keep_prob, _ = rr_probabilities(k, eps)
    n = y.shape[0]
    keep = rng.random(n) < keep_prob
    # Uniform over the other K - 1 labels: draw r in [0, K-2], skip y.
    r = np.minimum(np.floor(rng.random(n) * (k - 1)).astype(np.int64), k - 2)
    other = r + (r >= y)
    return np.where(keep, y, other)


# ---------------------------------------------------------------------------
# RR-Debiased / LP-RR-SGD (000 Appendix D.1; 001 Algorithm 5, eq. 7).
# ---------------------------------------------------------------------------


def rr_debiased_weights(noisy_labels: ArrayLike, *, num_classes: int, epsilon: float, dtype: Any = None):
    """Weights ``W`` of the unbiased RR loss: ``loss_hat = sum_k W[:, k] l(k)``.

    With ``p = K / (e^eps + K - 1)`` (000 Appendix D.1),
    ``W = (onehot(yhat) - p / K) / (1 - p)``, i.e. ``1 - p = (e^eps - 1) /
    (e^eps + K - 1)`` and ``p / K = 1 / (e^eps + K - 1)`` as in 001 eq. (7).

    Works with numpy and jax.numpy arrays (also under ``jax.jit``); the result
    lives in the array module of ``noisy_labels``.

    Args:
      noisy_labels: (...,) integer labels output by :func:`randomized_response`
        with the same ``num_classes`` and ``epsilon``.
      num_classes: K.
      epsilon: the RR privacy parameter, > 0.
      dtype: floating dtype of the result (default: the module's default float).

    Returns:
      (..., K) weights.
    """
    k = check_num_classes(num_classes)
    eps = check_epsilon(epsilon)
    xp = namespace(noisy_labels)
    if xp is np:
        check_labels(np.ravel(noisy_labels), k, name="noisy_labels")
    e_minus = math.exp(-eps)
    p = k * e_minus / (1.0 + (k - 1.0) * e_minus)  # = K / (e^eps + K - 1)
    labels = xp.asarray(noisy_labels)
    onehot = labels[..., None] == xp.arange(k)
    if dtype is None:
        dtype = xp.float64 if xp is np else xp.zeros(()).dtype
    onehot = xp.asarray(onehot, dtype=dtype)
    return (onehot - p / k) / (1.0 - p)


def rr_debiased_loss(per_class_losses: ArrayLike, noisy_labels: ArrayLike, *, num_classes: int, epsilon: float):
    """Unbiased loss for labels randomized by K-ary RR (RR-Debiased).

    000 Appendix D.1 / 001 Algorithm 5 (LP-RR-SGD, eq. 7): with
    ``p = K / (e^eps + K - 1)``,

        loss_hat = (l(yhat) - p / K * sum_k l(k)) / (1 - p),

    so that ``E_{yhat ~ RR(y)}[loss_hat] = l(y)`` exactly. The same identity
    holds for gradients, so differentiating this loss gives eq. (7).

    Privacy: post-processing of the RR labels (``epsilon``-label-DP).

    Works with numpy and jax.numpy arrays (and under ``jax.jit``).

    Args:
      per_class_losses: (..., K) losses ``l(f(x), k)`` for every class ``k``.
      noisy_labels: (...,) RR labels.
      num_classes: K (must match ``per_class_losses.shape[-1]``).
      epsilon: the RR privacy parameter, > 0.

    Returns:
      (...,) debiased losses.
    """
    k = check_num_classes(num_classes)
    xp = namespace(per_class_losses, noisy_labels)
    per_class_losses = xp.asarray(per_class_losses)
    if per_class_losses.ndim < 1 or per_class_losses.shape[-1] != k:
        raise ValueError(
            "per_class_losses must have num_classes entries on its last axis, got "
            f"shape {tuple(per_class_losses.shape)} for num_classes={k}."
        )
    if tuple(per_class_losses.shape[:-1]) != tuple(np.shape(noisy_labels)):
        raise ValueError(
            "noisy_labels must have the shape of per_class_losses without its "
            f"last axis: got {tuple(np.shape(noisy_labels))} and "
            f"{tuple(per_class_losses.shape)}."
        )
    weights = rr_debiased_weights(noisy_labels, num_classes=k, epsilon=epsilon, dtype=per_class_losses.dtype)
    return xp.sum(weights * per_class_losses, axis=-1)
