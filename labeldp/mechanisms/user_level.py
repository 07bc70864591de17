"""User-level label DP: a user's k labels together are the protected unit.

000 Section 6 (Table 7, Criteo Attribution): "We use group privacy (see e.g.
Vadhan, 2017) for randomized responses. For DP-SGD and LabelDP-Pro, we compute
per-user gradients and use them to replace the per-example gradients used in
traditional item-level DP-SGD. This inherently offers privacy guarantees at
the user level." Two neighbouring data sets differ in the labels of ONE user
(all k of them at once, features fixed: user-level label substitution), or
-- the papers' DP-SGD convention -- by one user's whole contribution
(user-level add/remove).

This module holds the pieces of both routes:

* Randomized response (:func:`rr_group_epsilon`,
  :func:`user_randomized_response`): every one of a user's (at most) k labels
  gets RR at ``epsilon / k``. The k-fold product of RR(eps/k) channels is
  exactly ``epsilon``-DP for the user's label vector: the check
  :func:`max_user_log_ratio` computes its worst-case log likelihood ratio
  exactly (and ``tests/mechanisms/test_user_level.py`` by brute force).
* DP-SGD / LabelDP-Pro live in the one DP-SGD engine: ``labeldp.dpsgd`` with
  ``unit="user"`` sums a user's per-example gradients and clips the sum to norm
  C as one unit; users (not examples) are Poisson-sampled at
  ``q = users_per_batch / num_users`` and the run is accounted by
  :func:`labeldp.methods.private_training.account_run` with ``n = num_users``
  (:mod:`labeldp.tasks.ads`). Changing all k labels of one user moves one
  clipped vector by at most 2C: dp_accounting's REPLACE_ONE at the user level.

Conventions as in :mod:`labeldp.mechanisms.classification`: data positional,
options keyword-only, randomness only from an explicit
``numpy.random.Generator``, invalid input raises ``ValueError`` naming the
argument and the fix.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from labeldp.mechanisms.classification import (
    check_epsilon,
    check_labels,
    check_num_classes,
    check_rng,
    group_privacy,
    randomized_response,
    randomized_response_matrix,
)

ArrayLike = Any

__all__ = [
    "rr_group_epsilon",
    "user_randomized_response",
    "max_user_log_ratio",
]


def _check_positive_int(value: Any, name: str, hint: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 ({hint}), got {value!r}.")
    return int(value)


# ---------------------------------------------------------------------------
# Randomized response with group privacy (000 Section 6).
# ---------------------------------------------------------------------------


def rr_group_epsilon(*, epsilon: float, k: int) -> float:
    """Per-label RR budget for a user-level ``epsilon``: ``epsilon / k``.

    000 Section 6 uses group privacy for RR: a user contributes ``k`` labels,
    each randomized once and independently, so per-label ``epsilon / k`` gives
    user-level ``k * (epsilon / k) = epsilon`` (pure DP composes additively; no
    delta). Computed with
    :func:`labeldp.mechanisms.classification.group_privacy` (``delta = 0``).

    Args:
      epsilon: the user-level budget, > 0.
      k: the most labels any user contributes (000: k in {2, 5, 10}), >= 1.

    Returns:
      The per-label epsilon, ``epsilon / k``.
    """
    kk = _check_positive_int(k, "k", "labels per user")
    return group_privacy(epsilon=epsilon, delta=0.0, group_size=kk).epsilon


def user_randomized_response(
    labels: ArrayLike, user_ids: ArrayLike, *, epsilon: float, k: int, num_classes: int, rng: np.random.Generator
) -> np.ndarray:
    """K-ary RR at ``epsilon / k`` on every label: user-level ``epsilon``-label-DP.

    Each row is randomized once by
    :func:`labeldp.mechanisms.classification.randomized_response` with
    ``epsilon / k``. A user with ``m <= k`` rows is thus ``m epsilon / k <=
    epsilon``-DP for their labels together (basic composition; exact worst
    case in :func:`max_user_log_ratio`). Rows count, not distinct examples:
    a user re-sampled with replacement up to k rows (000 Section 6) has each
    copy randomized independently, and all k copies are charged.

    Guarantee: ``epsilon``-DP (delta = 0) under changing all the labels of one
    user, provided no user has more than ``k`` rows (checked).

    Args:
      labels: (n,) integer labels in ``[0, num_classes)``.
      user_ids: (n,) integer user ids (any values; rows with equal ids belong to
        the same user).
      epsilon: the user-level budget, > 0.
      k: the cap on rows per user, >= 1.
      num_classes: K.
      rng: the only source of randomness.

    Returns:
      (n,) int64 noisy labels, aligned with ``labels``.
    """
    kk = _check_positive_int(k, "k", "labels per user")
    num_classes = check_num_classes(num_classes)
    y = check_labels(labels, num_classes)
    users = np.asarray(user_ids)
    if users.shape != y.shape:
        raise ValueError(f"user_ids must have one entry per label, shape {y.shape}, got {users.shape}.")
    if users.size and users.dtype.kind not in "iu":
        raise ValueError(
            f"user_ids must be integers, got dtype {users.dtype}; map user keys "
            "to integers first (e.g. numpy.unique(keys, return_inverse=True))."
        )
    if users.size:
        ids, counts = np.unique(users, return_counts=True)
        worst = int(np.argmax(counts))
        if counts[worst] > kk:
            raise ValueError(
                f"user {ids[worst].item()!r} has {counts[worst]} labels but k={kk}: every "
                f"user must contribute at most k labels for the epsilon/k split to "
                "give user-level epsilon. Cap each user at k rows first (or raise "
                "k)."
            )
    rng = check_rng(rng)
    return randomized_response(y, num_classes=num_classes, epsilon=rr_group_epsilon(epsilon=epsilon, k=kk), rng=rng)


def max_user_log_ratio(*, epsilon: float, k: int, num_classes: int) -> float:
    """Exact user-level privacy loss of k independent RR(eps/k) labels.

    For the product channel ``P(z | y) = prod_i R[y_i, z_i]`` with ``R`` the
    K-ary RR matrix at ``epsilon / k``, returns

        max_{y, y' in [K]^k, z in [K]^k} log P(z | y) / P(z | y').

    Exact by the structure: the log ratio is ``sum_i log R[y_i, z_i] /
    R[y'_i, z_i]`` and every coordinate's triple ``(y_i, y'_i, z_i)`` can be
    chosen independently, so the maximum is ``k`` times the one-label maximum
    ``max_{a, b, z} log R[a, z] / R[b, z]``, read off the matrix (for RR:
    ``epsilon / k``, at ``a = z != b``). Hence the result is ``epsilon`` up to
    rounding: RR(eps/k) on each of k labels is ``epsilon``-DP for the user and
    not better (the bound is attained when all k labels change).

    Args:
      epsilon: the user-level budget, > 0.
      k: labels per user, >= 1.
      num_classes: K.

    Returns:
      The maximum log likelihood ratio (a float, ``<= epsilon`` within 1e-12).
    """
    kk = _check_positive_int(k, "k", "labels per user")
    num_classes = check_num_classes(num_classes)
    check_epsilon(epsilon)
    mat = randomized_response_matrix(num_classes=num_classes, epsilon=rr_group_epsilon(epsilon=epsilon, k=kk))
    logm = np.log(mat)  # RR has full support
    per_label = float(np.max(logm.max(axis=0) - logm.min(axis=0)))
    return kk * per_label
