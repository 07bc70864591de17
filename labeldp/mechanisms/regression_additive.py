"""Additive-noise label randomizers of 003 Appendix F: Laplace and staircase, continuous and discrete.

For labels in ``[lower, upper]`` changing one label moves it by at most the sensitivity
``Delta = upper - lower`` (003 Definition 16). Adding noise from

* ``Lap(Delta / eps)`` (003 Definition 18, continuous Laplace),
* ``DLap(Delta / eps)`` on the integers (003 Definition 17, discrete Laplace),
* the continuous staircase density ``h_gamma`` (003 Definition 20, [GV14]),
* the discrete staircase pmf ``p_r`` (003 Definition 19, [GV14]),

is ``eps``-label-DP: for every output ``o`` and labels ``y, y'`` in ``[lower, upper]`` the
density (or pmf) ratio ``f(o - y) / f(o - y') <= e^eps``. Clipping the output to
``[lower, upper]`` (``clip=True``) is post-processing and keeps the guarantee; it makes the
mechanism biased near the ends of the range. Without clipping all four mechanisms are
unbiased, ``E[y + Z] = y``, because every noise density / pmf is symmetric about 0.

The paper does not fix the staircase shape parameters. We use the variance-minimising ones
(the paper's noisy label loss is the squared error, which for additive noise is its variance):
``gamma`` minimising ``Var`` of the continuous staircase ([GV14] give the closed form
:func:`staircase_gamma_closed_form`), and ``r`` in ``{1..Delta}`` minimising the variance of
the discrete staircase, found by enumeration. For ``Delta = 1`` the discrete staircase is the
discrete Laplace ``DLap(1 / eps)``.

The noise distributions (:class:`AdditiveNoise`, :func:`laplace_noise`, :func:`staircase_noise`,
:func:`staircase_gamma_closed_form`) are in :mod:`labeldp.mechanisms.regression_additive_noise`; this
module holds the label mechanisms and the exact transition matrices of the discrete variants, and
re-exports the noise names.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np
from labeldp.mechanisms.regression_additive_noise import (  # the noise distributions (their own module)
    LAPLACE,
    STAIRCASE,
    AdditiveNoise,
    laplace_noise,
    staircase_gamma_closed_form,
    staircase_noise,
)
from labeldp.mechanisms.regression_core import (
    DiscreteRandomizer,
    validate_support,
)

__all__ = [
    "AdditiveNoise",
    "laplace_noise",
    "staircase_noise",
    "staircase_gamma_closed_form",
    "laplace_mechanism",
    "staircase_mechanism",
    "TruncatedTransition",
    "laplace_transition_matrix",
    "staircase_transition_matrix",
]


# --------------------------------------------------------------------------------------
# Mechanisms on labels.
# --------------------------------------------------------------------------------------


def _validate_range(lower, upper, *, discrete: bool):
    lo, hi = float(lower), float(upper)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError("lower and upper must be finite.")
    if hi <= lo:
        raise ValueError(f"upper must be > lower (got lower={lower!r}, upper={upper!r}).")
    if discrete and (lo != round(lo) or hi != round(hi)):
        raise ValueError("discrete=True needs integer lower and upper; use discrete=False for real labels.")
    return lo, hi


def _validate_labels(labels, lo, hi, *, discrete: bool) -> np.ndarray:
    y = np.asarray(labels, dtype=float)
    if not np.all(np.isfinite(y)):
        raise ValueError("labels must be finite.")
    if np.any((y < lo) | (y > hi)):
        raise ValueError(
            f"labels must lie in [lower, upper] = [{lo:g}, {hi:g}] (the sensitivity is upper - lower); "
            "clip them first or widen the range."
        )
    if discrete and np.any(y != np.round(y)):
        raise ValueError("discrete=True needs integer labels; use discrete=False for real labels.")
    return y


def _additive_mechanism(kind, labels, *, epsilon, lower, upper, discrete, clip, rng):
    lo, hi = _validate_range(lower, upper, discrete=discrete)
    y = _validate_labels(labels, lo, hi, discrete=discrete)
    make = laplace_noise if kind == LAPLACE else staircase_noise
    noise = make(epsilon=epsilon, sensitivity=hi - lo, discrete=discrete)
    out = y + noise.sample(y.shape, rng)
    if clip:
        out = np.clip(out, lo, hi)
    return out


def laplace_mechanism(
    labels,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    discrete: bool = False,
    clip: bool = False,
    rng: np.random.Generator,
) -> np.ndarray:
    """Laplace label randomizer: ``y + Lap((upper - lower) / eps)`` (003 Definitions 17, 18).

    Guarantee: each output is ``eps``-label-DP for labels in ``[lower, upper]`` (sensitivity
    ``upper - lower``); ``clip`` is post-processing. Unbiased (``E = y``) when ``clip=False``.

    Args:
      labels: array of labels in ``[lower, upper]`` (integers if ``discrete``).
      epsilon: privacy parameter, > 0.
      lower, upper: the label range (integers if ``discrete``).
      discrete: add discrete Laplace noise ``DLap`` (integer labels, integer outputs).
      clip: clip the noisy labels to ``[lower, upper]``.
      rng: the only source of randomness.

    Returns:
      Noisy labels, a float array of the shape of ``labels``.
    """
    return _additive_mechanism(
        LAPLACE, labels, epsilon=epsilon, lower=lower, upper=upper, discrete=discrete, clip=clip, rng=rng
    )


def staircase_mechanism(
    labels,
    *,
    epsilon: float,
    lower: float,
    upper: float,
    discrete: bool = False,
    clip: bool = False,
    rng: np.random.Generator,
) -> np.ndarray:
    """Additive staircase label randomizer (003 Definitions 19, 20; [GV14]).

    Adds staircase noise calibrated to sensitivity ``upper - lower`` with the
    variance-minimising shape (see :func:`staircase_noise`).

    Guarantee: ``eps``-label-DP for labels in ``[lower, upper]``; ``clip`` is post-processing.
    Unbiased when ``clip=False`` (the noise is symmetric).

    Args:
      labels: array of labels in ``[lower, upper]`` (integers if ``discrete``).
      epsilon: privacy parameter, > 0.
      lower, upper: the label range (integers if ``discrete``).
      discrete: use the discrete staircase (integer labels and outputs).
      clip: clip the noisy labels to ``[lower, upper]``.
      rng: the only source of randomness.

    Returns:
      Noisy labels, a float array of the shape of ``labels``.
    """
    return _additive_mechanism(
        STAIRCASE, labels, epsilon=epsilon, lower=lower, upper=upper, discrete=discrete, clip=clip, rng=rng
    )


# --------------------------------------------------------------------------------------
# Exact transition matrices of the discrete variants.
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TruncatedTransition:
    """The transition matrix of an unclipped discrete additive mechanism on a finite window.

    The outputs of an unclipped mechanism are all integers; ``matrix`` holds
    ``Pr[M(y) = o]`` exactly for ``o`` in the window ``outputs``, and ``tail_mass[i]`` the
    exact probability that ``M(support[i])`` falls outside it, so each row of ``matrix`` plus
    ``tail_mass`` sums to 1. The DP ratio is exact on the window (and, the noise being
    additive with a log-Lipschitz pmf, the same bound holds for every integer output).

    Attributes:
      support: input labels, shape ``(k,)``.
      outputs: the integer output window, shape ``(n,)``.
      matrix: ``(k, n)`` probabilities.
      tail_mass: ``(k,)`` probability outside the window.
      epsilon: the privacy parameter.
      name: a short name.
    """

    support: np.ndarray
    outputs: np.ndarray
    matrix: np.ndarray
    tail_mass: np.ndarray
    epsilon: float
    name: str = ""

    def epsilon_dp_ratio(self) -> float:
        """``max`` over window outputs and label pairs of the log probability ratio."""
        mx, mn = self.matrix.max(axis=0), self.matrix.min(axis=0)
        used = mx > 0
        if np.any(mn[used] <= 0):
            return math.inf
        return float(np.max(np.log(mx[used]) - np.log(mn[used])))


def _discrete_transition(kind, support, *, epsilon, lower, upper, clip, window):
    lo, hi = _validate_range(lower, upper, discrete=True)
    if support is None:
        support = np.arange(lo, hi + 1)
    sup = validate_support(support)
    _validate_labels(sup, lo, hi, discrete=True)
    make = laplace_noise if kind == LAPLACE else staircase_noise
    noise = make(epsilon=epsilon, sensitivity=hi - lo, discrete=True)
    if clip:
        outputs = np.arange(lo, hi + 1)
        z = outputs[None, :] - sup[:, None]
        matrix = noise.pdf(z)
        matrix[:, 0] = noise.cdf(lo - sup)  # Pr[y + Z <= lower]
        matrix[:, -1] = noise.cdf(sup - hi)  # Pr[y + Z >= upper] = Pr[Z <= y - upper]
        return DiscreteRandomizer(
            support=sup, outputs=outputs, matrix=matrix, epsilon=noise.epsilon, name=f"clipped discrete {kind}"
        )
    if window is None:
        window = int(math.ceil((hi - lo) * 28.0 / noise.epsilon))  # tail mass of order 1e-12
    window = int(window)
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}.")
    outputs = np.arange(lo - window, hi + window + 1)
    matrix = noise.pdf(outputs[None, :] - sup[:, None])
    tail = noise.cdf(outputs[0] - 1.0 - sup) + (1.0 - noise.cdf(outputs[-1] - sup))
    return TruncatedTransition(
        support=sup,
        outputs=outputs,
        matrix=matrix,
        tail_mass=tail,
        epsilon=noise.epsilon,
        name=f"discrete {kind} (window)",
    )


def laplace_transition_matrix(
    support=None, *, epsilon: float, lower: int, upper: int, clip: bool, window: Optional[int] = None
):
    """Exact transition matrix of the discrete Laplace mechanism (003 Definition 17).

    Args:
      support: integer labels in ``[lower, upper]`` (default: all integers ``lower..upper``).
      epsilon: privacy parameter, > 0.
      lower, upper: integer label range; the sensitivity is ``upper - lower``.
      clip: if true the outputs are the integers ``lower..upper`` (a :class:`DiscreteRandomizer`);
        otherwise a :class:`TruncatedTransition` on ``lower - window .. upper + window``.
      window: half-width beyond the range for ``clip=False`` (default: tail mass about 1e-12).

    Returns:
      A :class:`DiscreteRandomizer` (``clip=True``) or :class:`TruncatedTransition`.
    """
    return _discrete_transition(LAPLACE, support, epsilon=epsilon, lower=lower, upper=upper, clip=clip, window=window)


def staircase_transition_matrix(
    support=None, *, epsilon: float, lower: int, upper: int, clip: bool, window: Optional[int] = None
):
    """Exact transition matrix of the discrete staircase mechanism (003 Definition 19).

    Same arguments and return types as :func:`laplace_transition_matrix`.
    """
    return _discrete_transition(STAIRCASE, support, epsilon=epsilon, lower=lower, upper=upper, clip=clip, window=window)
