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
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np
from labeldp.mechanisms.regression_core import (
    DiscreteRandomizer,
    validate_epsilon,
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

_LAPLACE = "laplace"
_STAIRCASE = "staircase"


# --------------------------------------------------------------------------------------
# Noise distributions.
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AdditiveNoise:
    """A zero-mean, symmetric noise distribution calibrated to ``(epsilon, sensitivity)``.

    Attributes:
      kind: ``"laplace"`` or ``"staircase"``.
      discrete: integer-valued noise (pmf) if true, real-valued (density) otherwise.
      epsilon: the privacy parameter.
      sensitivity: ``Delta = upper - lower`` (an integer >= 1 for discrete noise).
      param: Laplace: the scale ``b = Delta / eps``; continuous staircase: ``gamma`` in (0, 1);
        discrete staircase: the integer ``r`` in ``{1, ..., Delta}``.
    """

    kind: str
    discrete: bool
    epsilon: float
    sensitivity: float
    param: float

    # -- density / pmf ----------------------------------------------------------------

    def pdf(self, z) -> np.ndarray:
        """Density (continuous) or pmf (discrete; 0 off the integers) of the noise at ``z``."""
        z = np.asarray(z, dtype=float)
        t = np.abs(z)
        eps, delta = self.epsilon, self.sensitivity
        if self.kind == _LAPLACE and not self.discrete:
            b = self.param
            return np.exp(-t / b) / (2.0 * b)
        if self.kind == _LAPLACE:
            alpha = math.exp(-1.0 / self.param)
            val = (1.0 - alpha) / (1.0 + alpha) * np.power(alpha, t)
            return np.where(t == np.round(t), val, 0.0)
        beta = math.exp(-eps)
        if not self.discrete:
            gamma = self.param
            a = (1.0 - beta) / (2.0 * delta * (gamma + beta * (1.0 - gamma)))
            k = np.floor(t / delta)
            j = t - k * delta
            return a * np.power(beta, k) * np.where(j < gamma * delta, 1.0, beta)
        r = int(self.param)
        d = int(delta)
        a = _discrete_staircase_a(beta, r, d)
        ti = np.round(t)
        k = np.floor_divide(ti, d)
        j = ti - k * d
        val = a * np.power(beta, k) * np.where(j < r, 1.0, beta)
        return np.where(t == ti, val, 0.0)

    def cdf(self, z) -> np.ndarray:
        """``Pr[Z <= z]`` (for discrete noise ``z`` is floored to an integer first)."""
        z = np.asarray(z, dtype=float)
        if self.discrete:
            z = np.floor(z)
            neg = z < 0
            # Pr[Z <= z] = Pr[Z >= -z] for z < 0, and 1 - Pr[Z >= z + 1] otherwise.
            return np.where(neg, self._sf_nonneg(np.where(neg, -z, 0.0)),
                            1.0 - self._sf_nonneg(np.where(neg, 0.0, z + 1.0)))
        t = np.abs(z)
        if self.kind == _LAPLACE:
            upper_tail = 0.5 * np.exp(-t / self.param)
        else:
            beta = math.exp(-self.epsilon)
            gamma, delta = self.param, self.sensitivity
            a = (1.0 - beta) / (2.0 * delta * (gamma + beta * (1.0 - gamma)))
            k = np.floor(t / delta)
            j = t - k * delta
            bk = np.power(beta, k)
            partial = a * bk * (np.minimum(j, gamma * delta) + beta * np.maximum(j - gamma * delta, 0.0))
            upper_tail = 0.5 - (0.5 * (1.0 - bk) + partial)
        return np.where(z < 0, upper_tail, 1.0 - upper_tail)

    def _sf_nonneg(self, t) -> np.ndarray:
        """``Pr[Z >= t]`` for integer ``t >= 0`` (discrete noise only)."""
        t = np.asarray(t, dtype=float)
        if self.kind == _LAPLACE:
            alpha = math.exp(-1.0 / self.param)
            return np.where(t == 0, 1.0 / (1.0 + alpha), np.power(alpha, t) / (1.0 + alpha))
        beta = math.exp(-self.epsilon)
        r, d = int(self.param), int(self.sensitivity)
        a = _discrete_staircase_a(beta, r, d)
        w = np.where(np.arange(d) < r, 1.0, beta)
        tail_w = np.cumsum(w[::-1])[::-1]  # tail_w[J] = sum_{j >= J} w_j
        k = np.floor_divide(t, d)
        jj = (t - k * d).astype(np.int64)
        bk = np.power(beta, k)
        return a * (bk * tail_w[jj] + bk * beta / (1.0 - beta) * w.sum())

    # -- moments ----------------------------------------------------------------------

    def variance(self) -> float:
        """``E[Z^2]`` in closed form (the mean is 0 by symmetry)."""
        eps, delta = self.epsilon, self.sensitivity
        if self.kind == _LAPLACE and not self.discrete:
            return 2.0 * self.param**2
        if self.kind == _LAPLACE:
            alpha = math.exp(-1.0 / self.param)
            return 2.0 * alpha / (1.0 - alpha) ** 2
        beta = math.exp(-eps)
        s0, s1, s2 = _geometric_power_sums(beta)
        if not self.discrete:
            return _continuous_staircase_variance(self.param, beta, delta, s0, s1, s2)
        return float(_discrete_staircase_variances(beta, int(delta), s0, s1, s2)[int(self.param) - 1])

    # -- sampling ---------------------------------------------------------------------

    def sample(self, shape, rng: np.random.Generator) -> np.ndarray:
        """Draws i.i.d. noise of the given ``shape`` using only ``rng``."""
        if not isinstance(rng, np.random.Generator):
            raise ValueError("rng must be a numpy.random.Generator, e.g. np.random.default_rng(0).")
        shape = tuple(np.atleast_1d(shape).astype(int)) if not isinstance(shape, tuple) else shape
        size = int(np.prod(shape)) if shape else 1
        if self.kind == _LAPLACE and not self.discrete:
            out = rng.laplace(0.0, self.param, size=size)
        elif self.kind == _LAPLACE:
            # The difference of two i.i.d. geometric variables on {0, 1, ...} with ratio alpha
            # is the discrete Laplace distribution with pmf proportional to alpha^|z|.
            p = -math.expm1(-1.0 / self.param)  # 1 - alpha
            out = (rng.geometric(p, size=size) - rng.geometric(p, size=size)).astype(float)
        elif not self.discrete:
            out = self._sample_continuous_staircase(size, rng)
        else:
            out = self._sample_discrete_staircase(size, rng)
        return out.reshape(shape)

    def _sample_continuous_staircase(self, size: int, rng: np.random.Generator) -> np.ndarray:
        # [GV14]: |Z| = Delta * (G + gamma * U) with prob. gamma / (gamma + (1 - gamma) beta),
        # else Delta * (G + gamma + (1 - gamma) U); G geometric with ratio beta, random sign.
        beta = math.exp(-self.epsilon)
        gamma, delta = self.param, self.sensitivity
        g = rng.geometric(1.0 - beta, size=size) - 1
        first = rng.random(size) < gamma / (gamma + (1.0 - gamma) * beta)
        u = rng.random(size)
        sign = np.where(rng.random(size) < 0.5, -1.0, 1.0)
        mag = np.where(first, g + gamma * u, g + gamma + (1.0 - gamma) * u) * delta
        return sign * mag

    def _sample_discrete_staircase(self, size: int, rng: np.random.Generator) -> np.ndarray:
        # One-sided X = K Delta + J with Pr ∝ beta^K w_J and a random sign gives mass 2x too much
        # to 0 relative to the pmf; rejecting half of the zeros fixes it (acceptance >= 1/2).
        beta = math.exp(-self.epsilon)
        r, d = int(self.param), int(self.sensitivity)
        w = np.where(np.arange(d) < r, 1.0, beta)
        out = np.empty(size)
        todo = np.arange(size)
        while todo.size:
            n = todo.size
            k = rng.geometric(1.0 - beta, size=n) - 1
            j = rng.choice(d, size=n, p=w / w.sum())
            x = (k * d + j).astype(float)
            sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
            accept = (x != 0) | (rng.random(n) < 0.5)
            out[todo[accept]] = sign[accept] * x[accept]
            todo = todo[~accept]
        return out


def _discrete_staircase_a(beta: float, r: int, d: int) -> float:
    """``a(r)`` of 003 Definition 19 (the pmf at 0)."""
    return (1.0 - beta) / (2.0 * r + 2.0 * beta * (d - r) - (1.0 - beta))


def _geometric_power_sums(beta: float):
    """``sum_k beta^k k^p`` for ``p = 0, 1, 2`` (k >= 0)."""
    one = 1.0 - beta
    return 1.0 / one, beta / one**2, beta * (1.0 + beta) / one**3


def _continuous_staircase_variance(gamma, beta, delta, s0, s1, s2):
    # E[Z^2] = 2 a sum_k beta^k [int_{k D}^{(k+gamma) D} x^2 dx + beta int_{(k+gamma) D}^{(k+1) D} x^2 dx].
    gamma = np.asarray(gamma, dtype=float)
    a = (1.0 - beta) / (2.0 * delta * (gamma + beta * (1.0 - gamma)))
    c2 = 3.0 * (gamma + beta * (1.0 - gamma))
    c1 = 3.0 * (gamma**2 + beta * (1.0 - gamma**2))
    c0 = gamma**3 + beta * (1.0 - gamma**3)
    return 2.0 * a * delta**3 / 3.0 * (c2 * s2 + c1 * s1 + c0 * s0)


def _discrete_staircase_variances(beta, d, s0, s1, s2) -> np.ndarray:
    """Variance of the discrete staircase noise for every ``r = 1..d`` (index ``r - 1``)."""
    r = np.arange(1, d + 1)[:, None]
    j = np.arange(d)[None, :]
    w = np.where(j < r, 1.0, beta)
    per_j = d**2 * s2 + 2.0 * d * j * s1 + j**2 * s0
    a = (1.0 - beta) / (2.0 * r[:, 0] + 2.0 * beta * (d - r[:, 0]) - (1.0 - beta))
    return 2.0 * a * np.sum(w * per_j, axis=1)


def staircase_gamma_closed_form(epsilon: float) -> float:
    """The variance-minimising ``gamma`` of the continuous staircase ([GV14], cost ``x^2``).

    ``gamma* = -b / (1 - b) + (b - 2 b^2 + 2 b^4 - b^5)^(1/3) / (2^(1/3) (1 - b)^2)``, ``b = e^-eps``.
    It does not depend on the sensitivity.
    """
    eps = validate_epsilon(epsilon)
    b = math.exp(-eps)
    return -b / (1.0 - b) + (b - 2 * b**2 + 2 * b**4 - b**5) ** (1.0 / 3.0) / (2 ** (1.0 / 3.0) * (1.0 - b) ** 2)


def laplace_noise(*, epsilon: float, sensitivity: float, discrete: bool = False) -> AdditiveNoise:
    """Laplace noise ``Lap(Delta / eps)`` (003 Def. 18) or ``DLap(Delta / eps)`` (003 Def. 17).

    Args:
      epsilon: privacy parameter, > 0.
      sensitivity: ``Delta`` > 0 (an integer for discrete noise).
      discrete: integer-valued noise if true.

    Returns:
      An :class:`AdditiveNoise`; adding it to a quantity of sensitivity ``Delta`` is ``eps``-DP.
    """
    eps = validate_epsilon(epsilon)
    delta = _validate_sensitivity(sensitivity, discrete=discrete)
    return AdditiveNoise(kind=_LAPLACE, discrete=bool(discrete), epsilon=eps, sensitivity=delta,
                         param=delta / eps)


def staircase_noise(*, epsilon: float, sensitivity: float, discrete: bool = False,
                    param: Optional[float] = None) -> AdditiveNoise:
    """Staircase noise (003 Definitions 19, 20; [GV14]) with the variance-minimising shape.

    Args:
      epsilon: privacy parameter, > 0.
      sensitivity: ``Delta`` > 0 (an integer >= 1 for discrete noise).
      discrete: integer-valued noise if true.
      param: override the shape: ``gamma`` in (0, 1) (continuous) or ``r`` in ``{1..Delta}``
        (discrete). Default: the value minimising the noise variance.

    Returns:
      An :class:`AdditiveNoise`; adding it to a quantity of sensitivity ``Delta`` is ``eps``-DP
      (any shape parameter gives ``eps``-DP; the default minimises the squared error).
    """
    eps = validate_epsilon(epsilon)
    delta = _validate_sensitivity(sensitivity, discrete=discrete)
    beta = math.exp(-eps)
    if discrete:
        d = int(delta)
        if param is None:
            variances = _discrete_staircase_variances(beta, d, *_geometric_power_sums(beta))
            param = int(np.argmin(variances)) + 1
        elif int(param) != param or not 1 <= int(param) <= d:
            raise ValueError(f"param (the staircase r) must be an integer in [1, {d}], got {param!r}.")
        return AdditiveNoise(kind=_STAIRCASE, discrete=True, epsilon=eps, sensitivity=delta, param=int(param))
    if param is None:
        param = min(max(staircase_gamma_closed_form(eps), 1e-12), 1.0 - 1e-12)
    elif not 0.0 < float(param) < 1.0:
        raise ValueError(f"param (the staircase gamma) must lie in (0, 1), got {param!r}.")
    return AdditiveNoise(kind=_STAIRCASE, discrete=False, epsilon=eps, sensitivity=delta, param=float(param))


def _validate_sensitivity(sensitivity: float, *, discrete: bool) -> float:
    delta = float(sensitivity)
    if not math.isfinite(delta) or delta <= 0:
        raise ValueError(f"sensitivity (upper - lower) must be positive and finite, got {sensitivity!r}.")
    if discrete and delta != round(delta):
        raise ValueError(f"discrete noise needs an integer sensitivity (upper - lower), got {sensitivity!r}.")
    return delta


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
            "clip them first or widen the range.")
    if discrete and np.any(y != np.round(y)):
        raise ValueError("discrete=True needs integer labels; use discrete=False for real labels.")
    return y


def _additive_mechanism(kind, labels, *, epsilon, lower, upper, discrete, clip, rng):
    lo, hi = _validate_range(lower, upper, discrete=discrete)
    y = _validate_labels(labels, lo, hi, discrete=discrete)
    make = laplace_noise if kind == _LAPLACE else staircase_noise
    noise = make(epsilon=epsilon, sensitivity=hi - lo, discrete=discrete)
    out = y + noise.sample(y.shape, rng)
    if clip:
        out = np.clip(out, lo, hi)
    return out


def laplace_mechanism(labels, *, epsilon: float, lower: float, upper: float, discrete: bool = False,
                      clip: bool = False, rng: np.random.Generator) -> np.ndarray:
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
    return _additive_mechanism(_LAPLACE, labels, epsilon=epsilon, lower=lower, upper=upper,
                               discrete=discrete, clip=clip, rng=rng)


def staircase_mechanism(labels, *, epsilon: float, lower: float, upper: float, discrete: bool = False,
                        clip: bool = False, rng: np.random.Generator) -> np.ndarray:
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
    return _additive_mechanism(_STAIRCASE, labels, epsilon=epsilon, lower=lower, upper=upper,
                               discrete=discrete, clip=clip, rng=rng)


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
    make = laplace_noise if kind == _LAPLACE else staircase_noise
    noise = make(epsilon=epsilon, sensitivity=hi - lo, discrete=True)
    if clip:
        outputs = np.arange(lo, hi + 1)
        z = outputs[None, :] - sup[:, None]
        matrix = noise.pdf(z)
        matrix[:, 0] = noise.cdf(lo - sup)                # Pr[y + Z <= lower]
        matrix[:, -1] = noise.cdf(sup - hi)                # Pr[y + Z >= upper] = Pr[Z <= y - upper]
        return DiscreteRandomizer(support=sup, outputs=outputs, matrix=matrix,
                                  epsilon=noise.epsilon, name=f"clipped discrete {kind}")
    if window is None:
        window = int(math.ceil((hi - lo) * 28.0 / noise.epsilon))  # tail mass of order 1e-12
    window = int(window)
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}.")
    outputs = np.arange(lo - window, hi + window + 1)
    matrix = noise.pdf(outputs[None, :] - sup[:, None])
    tail = noise.cdf(outputs[0] - 1.0 - sup) + (1.0 - noise.cdf(outputs[-1] - sup))
    return TruncatedTransition(support=sup, outputs=outputs, matrix=matrix, tail_mass=tail,
                               epsilon=noise.epsilon, name=f"discrete {kind} (window)")


def laplace_transition_matrix(support=None, *, epsilon: float, lower: int, upper: int, clip: bool,
                              window: Optional[int] = None):
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
    return _discrete_transition(_LAPLACE, support, epsilon=epsilon, lower=lower, upper=upper,
                                clip=clip, window=window)


def staircase_transition_matrix(support=None, *, epsilon: float, lower: int, upper: int, clip: bool,
                                window: Optional[int] = None):
    """Exact transition matrix of the discrete staircase mechanism (003 Definition 19).

    Same arguments and return types as :func:`laplace_transition_matrix`.
    """
    return _discrete_transition(_STAIRCASE, support, epsilon=epsilon, lower=lower, upper=upper,
                                clip=clip, window=window)
