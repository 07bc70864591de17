"""Input validation shared by the classification label randomizers.

Checks for ``epsilon``, ``num_classes``, ``rng``, integer labels and prior
rows (probability vectors, with the tolerance ``PRIOR_ATOL``), broadcasting
of one prior to every example, and ``namespace`` (numpy or jax.numpy) for
the array-API agnostic functions. Invalid input raises ``ValueError`` naming
the argument and the fix. Re-exported by
:mod:`labeldp.mechanisms.classification`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

ArrayLike = Any

__all__ = [
    "ArrayLike",
]


# Tolerance on |sum(prior) - 1|. Loose enough for float32 softmax outputs;
# priors only rank labels (RRTop-k / RRWithPrior) or re-weight a likelihood
# (ALIBI), so this slack has no effect on the privacy guarantee.
PRIOR_ATOL = 1e-4


# ---------------------------------------------------------------------------
# Validation helpers.
# ---------------------------------------------------------------------------


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite float, got {epsilon!r}.") from None
    if not math.isfinite(eps) or eps <= 0.0:
        raise ValueError(
            f"{name} must be a positive finite float (the label-DP budget), got "
            f"{epsilon!r}. For a non-private baseline use the true labels instead "
            "of a randomizer."
        )
    return eps


def check_num_classes(num_classes: int) -> int:
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}.")
    return int(num_classes)


def check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), got {type(rng).__name__}."
        )
    return rng


def check_labels(labels: ArrayLike, num_classes: int, name: str = "labels") -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of integer class ids, got shape {arr.shape}.")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(
            f"{name} must have an integer dtype (class ids in 0..num_classes-1), "
            f"got dtype {arr.dtype}; cast with labels.astype(int)."
        )
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= num_classes):
        raise ValueError(
            f"{name} must lie in [0, num_classes - 1] = [0, {num_classes - 1}], "
            f"got values in [{arr.min()}, {arr.max()}]; check num_classes or "
            "re-index the labels."
        )
    return arr


def check_prior_rows(priors: ArrayLike, name: str = "priors") -> np.ndarray:
    """Validates an array whose last axis is a probability vector."""
    arr = np.asarray(priors, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[-1] < 2:
        raise ValueError(f"{name} must have shape (K,) or (n, K) with K >= 2, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and non-negative (probabilities); got negative or non-finite entries.")
    sums = arr.sum(axis=-1)
    if np.any(np.abs(sums - 1.0) > PRIOR_ATOL):
        worst = float(np.max(np.abs(sums - 1.0)))
        raise ValueError(
            f"each row of {name} must sum to 1 (|sum - 1| <= {PRIOR_ATOL}); the "
            f"worst row is off by {worst:.3g}. Normalise with "
            "priors / priors.sum(-1, keepdims=True)."
        )
    return arr


def broadcast_priors(priors: np.ndarray, n: int, name: str) -> np.ndarray:
    if priors.ndim == 1:
        return np.broadcast_to(priors, (n, priors.shape[0]))
    if priors.shape[0] != n:
        raise ValueError(f"{name} must have one row per label: got {priors.shape[0]} rows for {n} labels.")
    return priors


def namespace(*arrays: Any):
    """Returns the array module (numpy or jax.numpy) of the given arrays."""
    for a in arrays:
        if type(a).__module__.startswith("jax"):
            import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

            return jnp
    for a in arrays:
        get_ns = getattr(a, "__array_namespace__", None)
        if get_ns is not None:
            return get_ns()
    return np
