"""The additive noise distributions of 003 Appendix F: Laplace and staircase, continuous and discrete.

:class:`AdditiveNoise` (density / pmf, cdf, closed-form variance, sampler) and its constructors,
calibrated to ``(eps, Delta)``:

* :func:`laplace_noise`: ``Lap(Delta / eps)`` (003 Definition 18) or ``DLap(Delta / eps)`` on the
  integers (003 Definition 17);
* :func:`staircase_noise`: the continuous staircase density ``h_gamma`` (003 Definition 20, [GV14]) or
  the discrete staircase pmf ``p_r`` (003 Definition 19, [GV14]), with the variance-minimising shape:
  ``gamma`` from [GV14]'s closed form :func:`staircase_gamma_closed_form`, ``r`` in ``{1..Delta}`` by
  enumeration of the closed-form variances.

The label mechanisms built on them (and the exact transition matrices of the discrete variants) are
in :mod:`labeldp.mechanisms.regression_additive`, which re-exports every public name here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np
from labeldp.mechanisms.regression_core import validate_epsilon

__all__ = [
    "AdditiveNoise",
    "laplace_noise",
    "staircase_noise",
    "staircase_gamma_closed_form",
]

LAPLACE = "laplace"
STAIRCASE = "staircase"


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
        if self.kind == LAPLACE and not self.discrete:
            b = self.param
            return np.exp(-t / b) / (2.0 * b)
        if self.kind == LAPLACE:
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
            return np.where(
                neg, self._sf_nonneg(np.where(neg, -z, 0.0)), 1.0 - self._sf_nonneg(np.where(neg, 0.0, z + 1.0))
            )
        t = np.abs(z)
        if self.kind == LAPLACE:
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
        if self.kind == LAPLACE:
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
        if self.kind == LAPLACE and not self.discrete:
            return 2.0 * self.param**2
        if self.kind == LAPLACE:
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
        if self.kind == LAPLACE and not self.discrete:
            out = rng.laplace(0.0, self.param, size=size)
        elif self.kind == LAPLACE:
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
    return AdditiveNoise(kind=LAPLACE, discrete=bool(discrete), epsilon=eps, sensitivity=delta, param=delta / eps)


def staircase_noise(
    *, epsilon: float, sensitivity: float, discrete: bool = False, param: Optional[float] = None
) -> AdditiveNoise:
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
        return AdditiveNoise(kind=STAIRCASE, discrete=True, epsilon=eps, sensitivity=delta, param=int(param))
    if param is None:
        param = min(max(staircase_gamma_closed_form(eps), 1e-12), 1.0 - 1e-12)
    elif not 0.0 < float(param) < 1.0:
        raise ValueError(f"param (the staircase gamma) must lie in (0, 1), got {param!r}.")
    return AdditiveNoise(kind=STAIRCASE, discrete=False, epsilon=eps, sensitivity=delta, param=float(param))


def _validate_sensitivity(sensitivity: float, *, discrete: bool) -> float:
    delta = float(sensitivity)
    if not math.isfinite(delta) or delta <= 0:
        raise ValueError(f"sensitivity (upper - lower) must be positive and finite, got {sensitivity!r}.")
    if discrete and delta != round(delta):
        raise ValueError(f"discrete noise needs an integer sensitivity (upper - lower), got {sensitivity!r}.")
    return delta
