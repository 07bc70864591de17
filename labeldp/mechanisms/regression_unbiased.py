"""Optimal unbiased label randomizers for regression (003 Algorithms 1-4, Section 3.1, App. C).

* :func:`feasible_output_set` -- 003 Algorithm 2: an evenly spaced output grid whose ends are
  the smallest and largest outputs of debiased RR, so the LP of Algorithm 1 is feasible
  (003 Proposition 7).
* :func:`optimal_unbiased_randomizer` -- 003 Algorithm 1: the ``eps``-DP randomizer on a
  finite output set with ``E[M(y)] = y`` for every ``y`` that minimises the noisy squared
  loss ``E_{y ~ P} E (M(y) - y)^2``, solved as an LP with HiGHS.
* :func:`estimate_prior` -- 003 Algorithm 4: a Laplace-noised label histogram, clipped at 0
  and normalised.
* :func:`label_randomizer` -- 003 Algorithm 3: ``eps1`` for the prior, ``eps2`` for the
  randomizer; ``(eps1 + eps2)``-label-DP in total (basic composition).
* :func:`unbiased_randomized_rounding` -- 003 Section 3.1: maps real labels to the two
  neighbouring grid points so that ``E[URR(y)] = y``.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from labeldp.mechanisms.regression_bins import debiased_rr_outputs, rr_on_bins
from labeldp.mechanisms.regression_core import (
    DiscreteRandomizer,
    labels_to_index,
    validate_epsilon,
    validate_probs,
    validate_support,
)
from labeldp.mechanisms.regression_unbiased_lp import polish_randomizer, solve_unbiased_lp

__all__ = [
    "feasible_output_set",
    "optimal_unbiased_randomizer",
    "prior_noise_scale",
    "noisy_histogram",
    "estimate_prior",
    "LabelRandomizerResult",
    "label_randomizer",
    "unbiased_randomized_rounding",
    "randomized_rounding_matrix",
]


# --------------------------------------------------------------------------------------
# Algorithm 2: the output grid.
# --------------------------------------------------------------------------------------


def feasible_output_set(support, *, epsilon: float, num_outputs: int) -> np.ndarray:
    """``FeasibleOutputSet_eps`` (003 Algorithm 2).

    ``L = ((e^eps + k - 1) min Y - sum Y) / (e^eps - 1)``,
    ``U = ((e^eps + k - 1) max Y - sum Y) / (e^eps - 1)`` (the extreme outputs of eps-dbRR,
    003 Definition 23) and ``num_outputs`` evenly spaced values from ``L`` to ``U``.

    Args:
      support: strictly increasing label values ``Y`` (``k`` of them).
      epsilon: the privacy parameter of the randomizer (the LP's ``eps``), > 0.
      num_outputs: ``n >= 2``, the grid size.

    Returns:
      The grid ``(L, L + Delta, ..., U)``, shape ``(n,)``; for a single label ``y`` (where
      ``L = U = y``) the one-point grid ``(y,)``.
    """
    eps = validate_epsilon(epsilon)
    sup = validate_support(support)
    n = _validate_num_outputs(num_outputs)
    if sup.size == 1:
        return sup.copy()
    ends = debiased_rr_outputs(sup, epsilon=eps)
    return np.linspace(ends[0], ends[-1], n)


def _validate_num_outputs(num_outputs) -> int:
    if isinstance(num_outputs, bool) or int(num_outputs) != num_outputs or int(num_outputs) < 2:
        raise ValueError(f"num_outputs must be an integer >= 2 (003 Algorithm 2), got {num_outputs!r}.")
    return int(num_outputs)


def optimal_unbiased_randomizer(
    support, probs, *, epsilon: float, num_outputs: Optional[int] = None, outputs=None
) -> DiscreteRandomizer:
    """``ComputeOptUnbiasedRand_eps(P, Y_hat)`` (003 Algorithm 1) for the squared loss.

    Solves, over ``M[y, i] = Pr[M(y) = o_i]``::

        min  sum_y p_y sum_i M[y, i] (o_i - y)^2
        s.t. M >= 0,  sum_i M[y, i] = 1,  M[y', i] <= e^eps M[y, i] (y != y'),
             sum_i M[y, i] o_i = y                                   (unbiasedness)

    with ``scipy.optimize.linprog(method="highs")``, in coordinates where the labels span
    [0, 1] (DP, unbiasedness and the argmin are invariant under affine relabelling; the loss
    scales by the squared span), by column generation over the outputs (LPs on subsets of the
    outputs until every output's reduced cost is non-negative: the same optimum as one LP on
    all outputs, much faster on fine grids; see ``solve_unbiased_lp``). The solution is then
    polished so that rows sum to 1, the bias is 0 and the DP ratio is at most ``e^eps`` up to
    floating-point rounding.

    Guarantee: ``eps``-label-DP and unbiased, ``E[M(y)] = y`` for every ``y`` in ``support``.

    Args:
      support: strictly increasing label values (``k`` of them).
      probs: prior over ``support`` (sums to 1). Labels with zero prior are still constrained.
      epsilon: privacy parameter, > 0.
      num_outputs: size of the grid ``feasible_output_set(support, epsilon=epsilon,
        num_outputs=num_outputs)`` (003 Algorithm 2); default ``k`` (the paper's Census run uses
        a mesh of 52 for 52 labels, 003 Table G.3).
      outputs: an explicit strictly increasing output set ``Y_hat`` instead of the grid.

    Returns:
      A :class:`DiscreteRandomizer` over all the given outputs (unused ones have a zero
      column).

    Raises:
      ValueError: for bad arguments, or if the LP is infeasible for explicit ``outputs``.
    """
    eps = validate_epsilon(epsilon)
    sup = validate_support(support)
    p = validate_probs(probs, size=sup.size)
    if outputs is not None and num_outputs is not None:
        raise ValueError("Pass either num_outputs (the Algorithm 2 grid) or outputs, not both.")
    if outputs is None:
        outs = feasible_output_set(sup, epsilon=eps, num_outputs=sup.size if num_outputs is None else num_outputs)
        outs = np.unique(outs)
    else:
        outs = validate_support(outputs, name="outputs")
    name = "optimal unbiased"
    if sup.size == 1:
        matrix = (outs == sup[0]).astype(float)[None, :]
        if matrix.sum() != 1.0:
            raise ValueError("With a single label the only unbiased randomizer outputs it; include it in outputs.")
        return DiscreteRandomizer(support=sup, outputs=outs, matrix=matrix, probs=p, epsilon=eps, name=name)
    lo, span = sup[0], sup[-1] - sup[0]
    z, o = (sup - lo) / span, (outs - lo) / span
    matrix = polish_randomizer(solve_unbiased_lp(p, z, o, eps), z, o, eps)
    return DiscreteRandomizer(support=sup, outputs=outs, matrix=matrix, probs=p, epsilon=eps, name=name)


# --------------------------------------------------------------------------------------
# Algorithm 4: the private prior.
# --------------------------------------------------------------------------------------


def prior_noise_scale(epsilon: float) -> float:
    """Laplace scale ``2 / eps`` of 003 Algorithm 4.

    Changing one label moves one count down by 1 and another up by 1, so the histogram has
    L1 sensitivity 2 (003 Definition 16) and ``Lap(2 / eps)`` per bin is ``eps``-DP
    (003 Definition 18).
    """
    return 2.0 / validate_epsilon(epsilon)


def noisy_histogram(labels, *, support, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Label counts over ``support`` plus i.i.d. ``Lap(2 / eps)`` noise (``eps``-DP; 003 Alg. 4).

    Args:
      labels: array of values in ``support``.
      support: strictly increasing label values.
      epsilon: privacy parameter, > 0.
      rng: the only source of randomness.

    Returns:
      The noisy counts ``h_y + Lap(2 / eps)``, shape ``(k,)`` (may be negative).
    """
    scale = prior_noise_scale(epsilon)
    sup = validate_support(support)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator, e.g. np.random.default_rng(0).")
    idx = labels_to_index(labels, sup).ravel()
    counts = np.bincount(idx, minlength=sup.size).astype(float)
    return counts + rng.laplace(0.0, scale, size=sup.size)


def estimate_prior(labels, *, support, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """``M^Lap_eps`` (003 Algorithm 4): private estimate of the label distribution.

    ``h'_y = max(h_y + Lap(2 / eps), 0)`` and ``p'_y = h'_y / sum h'``. If every noisy count is
    clipped to 0 (possible only for tiny data sets) the uniform distribution is returned, a
    post-processing choice the paper leaves open.

    Guarantee: ``eps``-DP with respect to changing one label (clipping and normalising are
    post-processing of :func:`noisy_histogram`).

    Args:
      labels: array of values in ``support``.
      support: strictly increasing label values.
      epsilon: privacy parameter, > 0.
      rng: the only source of randomness.

    Returns:
      A probability vector over ``support`` (non-negative, sums to 1).
    """
    noisy = np.maximum(noisy_histogram(labels, support=support, epsilon=epsilon, rng=rng), 0.0)
    total = noisy.sum()
    if total <= 0:
        return np.full(noisy.size, 1.0 / noisy.size)
    return noisy / total


# --------------------------------------------------------------------------------------
# Algorithm 3: the full label randomizer.
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LabelRandomizerResult:
    """Output of :func:`label_randomizer`.

    Attributes:
      noisy_labels: the randomized labels, shape of the input.
      randomizer: the :class:`DiscreteRandomizer` applied to every label.
      prior: the private prior estimate it was optimised for.
      epsilon: total privacy cost ``eps1 + eps2``.
    """

    noisy_labels: np.ndarray
    randomizer: DiscreteRandomizer
    prior: np.ndarray
    epsilon: float


def label_randomizer(
    labels,
    *,
    support,
    epsilon1: float,
    epsilon2: float,
    num_outputs: Optional[int] = None,
    rng: np.random.Generator,
    randomizer: str = "optimal_unbiased",
) -> LabelRandomizerResult:
    """``LabelRandomizer_{eps1, eps2}`` (003 Algorithm 3).

    ``P' = M^Lap_eps1(labels)`` (:func:`estimate_prior`), ``Y_hat = FeasibleOutputSet_eps2(Y)``,
    ``M = ComputeOptUnbiasedRand_eps2(P', Y_hat)`` and ``y_hat_i = M(y_i)``. (The paper's
    listing writes ``FeasibleOutputSet_eps1``; Proposition 7 is about the LP's own ``eps``, so
    the grid is built with ``eps2``: with ``eps1`` it would be far wider and coarser.)

    Guarantee: ``(eps1 + eps2)``-label-DP: the prior is ``eps1``-DP and, given the prior, each
    label is randomized once by an ``eps2``-DP randomizer (basic composition).

    Args:
      labels: array of values in ``support`` (round real labels first with
        :func:`unbiased_randomized_rounding`).
      support: strictly increasing label values.
      epsilon1: budget for the prior, > 0.
      epsilon2: budget for the randomizer, > 0.
      num_outputs: grid size for Algorithm 2 (default ``len(support)``).
      rng: the only source of randomness.
      randomizer: ``"optimal_unbiased"`` (003) or ``"rr_on_bins"`` ([GKK+23], same prior step).

    Returns:
      A :class:`LabelRandomizerResult`.
    """
    eps1 = validate_epsilon(epsilon1, name="epsilon1")
    eps2 = validate_epsilon(epsilon2, name="epsilon2")
    sup = validate_support(support)
    labels_to_index(labels, sup)  # fail early with a clear message
    prior = estimate_prior(labels, support=sup, epsilon=eps1, rng=rng)
    if randomizer == "optimal_unbiased":
        mech = optimal_unbiased_randomizer(sup, prior, epsilon=eps2, num_outputs=num_outputs)
    elif randomizer == "rr_on_bins":
        mech = rr_on_bins(sup, prior, epsilon=eps2)
    else:
        raise ValueError(f"randomizer must be 'optimal_unbiased' or 'rr_on_bins', got {randomizer!r}.")
    return LabelRandomizerResult(
        noisy_labels=mech.sample(labels, rng), randomizer=mech, prior=prior, epsilon=eps1 + eps2
    )


# --------------------------------------------------------------------------------------
# Section 3.1: unbiased randomized rounding.
# --------------------------------------------------------------------------------------


def _rounding_weights(y: np.ndarray, sup: np.ndarray):
    """Lower index and probability of rounding up for each value (values in ``[sup[0], sup[-1]]``)."""
    if sup.size == 1:
        return np.zeros(y.shape, dtype=np.int64), np.zeros(y.shape)
    lo = np.clip(np.searchsorted(sup, y, side="right") - 1, 0, sup.size - 2)
    up = (y - sup[lo]) / (sup[lo + 1] - sup[lo])
    return lo, np.clip(up, 0.0, 1.0)


def _validate_in_hull(y, sup, name="labels"):
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} must be finite.")
    if np.any((y < sup[0]) | (y > sup[-1])):
        raise ValueError(
            f"{name} must lie in [min(support), max(support)] = [{sup[0]:g}, {sup[-1]:g}]; "
            "clip them or extend the support grid."
        )


def unbiased_randomized_rounding(labels, *, support, rng: np.random.Generator) -> np.ndarray:
    """``URR_Y~`` (003 Section 3.1): round each label to a neighbouring support point, unbiasedly.

    For ``y_1 <= y <= y_2`` consecutive support points, returns ``y_1`` w.p.
    ``(y_2 - y) / (y_2 - y_1)`` and ``y_2`` w.p. ``(y - y_1) / (y_2 - y_1)``, so
    ``E[URR(y)] = y``; labels already on the grid are returned unchanged. Not a DP mechanism by
    itself: compose it with an unbiased DP randomizer on ``support`` (the composition is
    unbiased and has the randomizer's DP guarantee).

    Args:
      labels: real labels in ``[min(support), max(support)]``.
      support: strictly increasing grid containing both ends of the label range.
      rng: the only source of randomness.

    Returns:
      A float array of the shape of ``labels`` with values in ``support``.
    """
    sup = validate_support(support)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator, e.g. np.random.default_rng(0).")
    y = np.asarray(labels, dtype=float)
    _validate_in_hull(y, sup)
    lo, up = _rounding_weights(y, sup)
    if sup.size == 1:
        return np.full(y.shape, sup[0])
    go_up = rng.random(y.shape) < up
    return sup[lo + go_up.astype(np.int64)]


def randomized_rounding_matrix(values, *, support) -> DiscreteRandomizer:
    """The transition matrix of :func:`unbiased_randomized_rounding` on finitely many inputs.

    Args:
      values: strictly increasing real inputs in ``[min(support), max(support)]``.
      support: the rounding grid.

    Returns:
      A :class:`DiscreteRandomizer` from ``values`` to ``support`` (``epsilon=None``: rounding
      alone is not private).
    """
    sup = validate_support(support)
    vals = validate_support(values, name="values")
    _validate_in_hull(vals, sup, name="values")
    lo, up = _rounding_weights(vals, sup)
    matrix = np.zeros((vals.size, sup.size))
    rows = np.arange(vals.size)
    matrix[rows, lo] += 1.0 - up
    if sup.size > 1:
        matrix[rows, lo + 1] += up
    return DiscreteRandomizer(
        support=vals, outputs=sup, matrix=matrix, epsilon=None, name="unbiased randomized rounding"
    )
