"""Shared pieces of the regression label randomizers (paper 003).

The common result type :class:`DiscreteRandomizer` describes a label randomizer with a
finite input set (the label ``support``) and a finite output set by its transition matrix
``matrix[y, o] = Pr[M(y) = outputs[o]]``. Every finite randomizer of the regression suite
(RR-on-Bins, debiased RR, the optimal unbiased randomizer of 003 Algorithm 1, clipped
discrete Laplace / staircase, unbiased randomized rounding) is returned as one, so that
privacy, bias and noisy label loss can be checked exactly, by enumeration.

Formal guarantee checked by :meth:`DiscreteRandomizer.epsilon_dp_ratio`: the randomizer is
``eps``-label-DP (003 Definition 2, local form) iff for every output ``o`` and labels
``y, y'``: ``Pr[M(y) = o] <= e^eps * Pr[M(y') = o]``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

__all__ = [
    "DiscreteRandomizer",
    "validate_epsilon",
    "validate_support",
    "validate_probs",
    "labels_to_index",
]


# --------------------------------------------------------------------------------------
# Input validation.
# --------------------------------------------------------------------------------------


def validate_epsilon(epsilon: float, *, name: str = "epsilon") -> float:
    """Returns ``epsilon`` as a float, raising ``ValueError`` unless it is finite and > 0."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, got {epsilon!r}.") from None
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be a positive finite number (pure eps-DP needs eps > 0), got {epsilon!r}.")
    return value


def validate_support(support, *, name: str = "support") -> np.ndarray:
    """Returns ``support`` as a 1-D float array; it must be finite, non-empty, strictly increasing.

    Raises:
      ValueError: naming ``name`` and the fix (``np.unique(...)`` sorts and de-duplicates).
    """
    arr = np.asarray(support, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of label values, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values.")
    if arr.size > 1 and not np.all(np.diff(arr) > 0):
        raise ValueError(f"{name} must be strictly increasing (sorted, without duplicates); pass np.unique({name}).")
    return arr


def validate_probs(probs, *, size: int, name: str = "probs", atol: float = 1e-6) -> np.ndarray:
    """Returns ``probs`` as a float array of length ``size`` that is a probability vector.

    Entries must be finite and >= 0 and sum to 1 within ``atol``; the returned vector is
    renormalised to sum to exactly 1 (up to rounding).

    Raises:
      ValueError: if the shape is wrong, an entry is negative or not finite, or the sum is off.
    """
    arr = np.asarray(probs, dtype=float)
    if arr.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},) (one probability per support value), got {arr.shape}.")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and non-negative.")
    total = float(arr.sum())
    if abs(total - 1.0) > atol:
        raise ValueError(f"{name} must sum to 1 (got {total:.9g}); divide by its sum first.")
    return arr / total


def labels_to_index(labels, support: np.ndarray, *, name: str = "labels") -> np.ndarray:
    """Maps each label to the index of the equal value in the sorted ``support``.

    Args:
      labels: array-like of label values, any shape.
      support: strictly increasing 1-D array.
      name: argument name used in error messages.

    Returns:
      An integer array of the shape of ``labels``.

    Raises:
      ValueError: if a label is not (up to 1e-12 relative rounding) an element of ``support``.
    """
    y = np.asarray(labels, dtype=float)
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} must be finite.")
    idx = np.searchsorted(support, y)
    idx_lo = np.clip(idx - 1, 0, support.size - 1)
    idx_hi = np.clip(idx, 0, support.size - 1)
    pick = np.where(np.abs(support[idx_lo] - y) <= np.abs(support[idx_hi] - y), idx_lo, idx_hi)
    scale = max(1.0, float(np.max(np.abs(support))))
    bad = np.abs(support[pick] - y) > 1e-12 * scale
    if np.any(bad):
        example = y[bad].ravel()[0]
        raise ValueError(
            f"{name} must take values in the support; {int(bad.sum())} value(s) are not in it "
            f"(e.g. {example!r}). Round continuous labels first with unbiased_randomized_rounding."
        )
    return pick.astype(np.int64)


# --------------------------------------------------------------------------------------
# The common result type.
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DiscreteRandomizer:
    """A label randomizer with finite input and output sets, given by its transition matrix.

    Attributes:
      support: sorted input label values, shape ``(k,)``.
      outputs: output values, shape ``(n,)`` (sorted for all randomizers built here).
      matrix: ``matrix[i, j] = Pr[M(support[i]) = outputs[j]]``, shape ``(k, n)``.
      probs: the prior over ``support`` the randomizer was optimised for (``None`` for
        prior-free randomizers such as Laplace, staircase or debiased RR).
      epsilon: the privacy parameter it was built for (``None`` if it is not a DP mechanism,
        e.g. unbiased randomized rounding).
      name: a short human-readable name.
      label_to_output: for RR-on-Bins style randomizers, ``Phi`` as an index array: the
        output index that ``support[i]`` is mapped to; ``None`` otherwise.
    """

    support: np.ndarray
    outputs: np.ndarray
    matrix: np.ndarray
    probs: Optional[np.ndarray] = None
    epsilon: Optional[float] = None
    name: str = ""
    label_to_output: Optional[np.ndarray] = None

    def __post_init__(self):
        support = np.asarray(self.support, dtype=float)
        outputs = np.asarray(self.outputs, dtype=float)
        matrix = np.asarray(self.matrix, dtype=float)
        if matrix.shape != (support.size, outputs.size):
            raise ValueError(
                f"matrix must have shape (len(support), len(outputs)) = {(support.size, outputs.size)}, "
                f"got {matrix.shape}."
            )
        for arr in (support, outputs, matrix):
            arr.setflags(write=False)
        object.__setattr__(self, "support", support)
        object.__setattr__(self, "outputs", outputs)
        object.__setattr__(self, "matrix", matrix)
        if self.probs is not None:
            probs = np.asarray(self.probs, dtype=float)
            probs.setflags(write=False)
            object.__setattr__(self, "probs", probs)
        if self.label_to_output is not None:
            phi = np.asarray(self.label_to_output, dtype=np.int64)
            phi.setflags(write=False)
            object.__setattr__(self, "label_to_output", phi)

    # -- exact properties -------------------------------------------------------------

    def expected_outputs(self) -> np.ndarray:
        """Returns ``E[M(y)]`` for every ``y`` in ``support`` (shape ``(k,)``)."""
        return self.matrix @ self.outputs

    def bias(self) -> np.ndarray:
        """Returns ``E[M(y)] - y`` for every ``y`` in ``support``."""
        return self.expected_outputs() - self.support

    def is_unbiased(self, tol: float = 1e-9) -> bool:
        """Whether ``|E[M(y)] - y| <= tol * max(1, max|support|)`` for all ``y`` (003 Section 3.1)."""
        scale = max(1.0, float(np.max(np.abs(self.support))))
        return bool(np.max(np.abs(self.bias())) <= tol * scale)

    def epsilon_dp_ratio(self) -> float:
        """Returns the smallest ``eps`` for which the randomizer is ``eps``-DP.

        That is ``max_o max_{y, y'} log(Pr[M(y)=o] / Pr[M(y')=o])`` over the columns with
        positive mass; ``inf`` if some column is zero for one label and positive for another.
        """
        col_max = self.matrix.max(axis=0)
        col_min = self.matrix.min(axis=0)
        used = col_max > 0
        if not np.any(used):
            return 0.0
        if np.any(col_min[used] <= 0):
            return math.inf
        return float(np.max(np.log(col_max[used]) - np.log(col_min[used])))

    def noisy_label_loss(self, probs=None) -> float:
        """Returns ``E_{y ~ probs, o ~ M(y)} (o - y)^2`` (003 Definition 4 with ``g(o, y) = (o - y)^2``).

        Args:
          probs: prior over ``support``; defaults to the prior the randomizer was built for.

        Raises:
          ValueError: if neither ``probs`` nor ``self.probs`` is available.
        """
        if probs is None:
            if self.probs is None:
                raise ValueError("noisy_label_loss needs a prior: pass probs=... (one entry per support value).")
            p = self.probs
        else:
            p = validate_probs(probs, size=self.support.size)
        sq = (self.outputs[None, :] - self.support[:, None]) ** 2
        return float(p @ np.sum(self.matrix * sq, axis=1))

    def compact(self) -> "DiscreteRandomizer":
        """Returns the same randomizer without the outputs that no label can produce."""
        used = self.matrix.max(axis=0) > 0
        phi = None
        if self.label_to_output is not None:
            phi = np.cumsum(used)[self.label_to_output] - 1
        return dataclasses.replace(self, outputs=self.outputs[used], matrix=self.matrix[:, used], label_to_output=phi)

    # -- sampling ---------------------------------------------------------------------

    def sample(self, labels, rng: np.random.Generator) -> np.ndarray:
        """Draws ``M(y)`` independently for every label.

        Args:
          labels: array-like of values in ``support`` (any shape).
          rng: the only source of randomness.

        Returns:
          A float array of the shape of ``labels`` with values in ``outputs``.
        """
        if not isinstance(rng, np.random.Generator):
            raise ValueError("rng must be a numpy.random.Generator, e.g. np.random.default_rng(0).")
        idx = labels_to_index(labels, self.support)
        flat = idx.ravel()
        cum = np.cumsum(self.matrix, axis=1)
        cum[:, -1] = np.maximum(cum[:, -1], 1.0)  # guard against rows summing to 1 - 1e-16
        u = rng.random(flat.size)
        out_idx = np.empty(flat.size, dtype=np.int64)
        order = np.argsort(flat, kind="stable")
        rows, starts = np.unique(flat[order], return_index=True)
        for row, sel in zip(rows, np.split(order, starts[1:])):
            out_idx[sel] = np.searchsorted(cum[row], u[sel], side="right")
        out_idx = np.minimum(out_idx, self.outputs.size - 1)
        return self.outputs[out_idx].reshape(idx.shape)
