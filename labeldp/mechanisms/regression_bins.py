"""Randomized response on bins for regression: optimal RR-on-Bins and debiased RR.

RR-on-Bins (003 Definition 22, from Ghazi et al. 2023, "Regression with label differential
privacy", [GKK+23]) maps every label ``y`` to a bin value ``Phi(y)`` among ``m`` distinct
output values and releases ``Phi(y)`` with probability ``e^eps / (e^eps + m - 1)``, otherwise
one of the other ``m - 1`` values uniformly. Every column of its transition matrix takes only
the values ``e^eps q`` and ``q`` with ``q = 1 / (e^eps + m - 1)``, so it is ``eps``-label-DP
for any ``Phi``.

Debiased RR (003 Definition 23) is the RR-on-Bins with one bin per label and
``Phi(y) = ((e^eps + k - 1) y - sum_{y'} y') / (e^eps - 1)``, chosen so that
``E[M(y)] = y``: it is the unbiased baseline that 003 uses to place the output grid
(Algorithm 2, Proposition 7).
"""

from __future__ import annotations

import math

import numpy as np

from labeldp.mechanisms.regression_core import (
    DiscreteRandomizer,
    validate_epsilon,
    validate_probs,
    validate_support,
)

__all__ = [
    "rr_on_bins",
    "rr_on_bins_from_map",
    "rr_on_bins_loss_by_num_bins",
    "debiased_rr",
    "debiased_rr_outputs",
]


def _rr_probabilities(epsilon: float, m: int):
    """``(e^eps q, q)`` with ``q = 1 / (e^eps + m - 1)``, computed without overflowing ``e^eps``."""
    t = math.exp(-epsilon)  # in (0, 1)
    keep = 1.0 / (1.0 + (m - 1) * t)
    return keep, t * keep


def rr_on_bins_from_map(
    support, *, epsilon: float, label_outputs, probs=None, name: str = "RR-on-Bins"
) -> DiscreteRandomizer:
    """The randomizer ``RR-on-Bins^Phi_eps`` for a given map ``Phi`` (003 Definition 22).

    Guarantee: ``eps``-label-DP for every ``Phi`` (each column takes only the values
    ``e^eps q`` and ``q``).

    Args:
      support: strictly increasing label values ``y_1 < ... < y_k``.
      epsilon: privacy parameter, > 0.
      label_outputs: ``Phi(y_i)`` for each support value (shape ``(k,)``); the output set is
        the set of distinct values, ``m = len(np.unique(label_outputs))``.
      probs: optional prior over ``support`` stored on the result.
      name: name stored on the result.

    Returns:
      A :class:`DiscreteRandomizer` with ``outputs = np.unique(label_outputs)``.
    """
    eps = validate_epsilon(epsilon)
    sup = validate_support(support)
    phi = np.asarray(label_outputs, dtype=float)
    if phi.shape != sup.shape or not np.all(np.isfinite(phi)):
        raise ValueError(f"label_outputs must be finite with one value per support entry, shape {sup.shape}.")
    outputs, phi_idx = np.unique(phi, return_inverse=True)
    keep, other = _rr_probabilities(eps, outputs.size)
    matrix = np.full((sup.size, outputs.size), other)
    matrix[np.arange(sup.size), phi_idx] = keep
    p = None if probs is None else validate_probs(probs, size=sup.size)
    return DiscreteRandomizer(
        support=sup, outputs=outputs, matrix=matrix, probs=p, epsilon=eps, name=name, label_to_output=phi_idx
    )


def debiased_rr_outputs(support, *, epsilon: float) -> np.ndarray:
    """``Phi(y) = ((e^eps + k - 1) y - sum_{y'} y') / (e^eps - 1)`` for each ``y`` (003 Def. 23)."""
    eps = validate_epsilon(epsilon)
    sup = validate_support(support)
    # Written as y + (k y - sum y') / (e^eps - 1), which is the same and rounds better.
    return sup + (sup.size * sup - sup.sum()) / math.expm1(eps)


def debiased_rr(support, *, epsilon: float, probs=None) -> DiscreteRandomizer:
    """Debiased randomized response, ``eps``-dbRR (003 Definition 23), the unbiased RR baseline.

    RR over the relabelled outputs ``Phi(y)`` of :func:`debiased_rr_outputs`: output
    ``Phi(y)`` w.p. ``e^eps / (e^eps + k - 1)``, any other ``Phi(y')`` w.p. ``1 / (e^eps + k - 1)``.
    Then ``E[M(y)] = q ((e^eps - 1) Phi(y) + sum_{y'} Phi(y')) = y`` because
    ``sum_{y'} Phi(y') = sum_{y'} y'``.

    Guarantee: ``eps``-label-DP; unbiased.

    Args:
      support: strictly increasing label values.
      epsilon: privacy parameter, > 0.
      probs: optional prior stored on the result (for :meth:`noisy_label_loss`).

    Returns:
      A :class:`DiscreteRandomizer` with ``k`` outputs.
    """
    return rr_on_bins_from_map(
        support,
        epsilon=epsilon,
        label_outputs=debiased_rr_outputs(support, epsilon=epsilon),
        probs=probs,
        name="debiased RR",
    )


# --------------------------------------------------------------------------------------
# Optimal RR-on-Bins for the squared loss.
# --------------------------------------------------------------------------------------


def _bin_costs(p: np.ndarray, z: np.ndarray, lam: float):
    """Cost and best output of every contiguous bin ``[l, r)`` of the sorted labels.

    ``cost[l, r] = min_v v^2 + lam sum_{l <= t < r} p_t (v - z_t)^2`` (``+inf`` for ``l >= r``)
    with minimiser ``v = lam S / (1 + lam P)`` and minimum ``lam T - lam^2 S^2 / (1 + lam P)``,
    where ``P, S, T`` are the bin's sums of ``p``, ``p z`` and ``p z^2``.
    """
    prefix = lambda x: np.concatenate([[0.0], np.cumsum(x)])
    cp, cs, ct = prefix(p), prefix(p * z), prefix(p * z * z)
    P = cp[None, :] - cp[:, None]
    S = cs[None, :] - cs[:, None]
    T = ct[None, :] - ct[:, None]
    denom = 1.0 + lam * P
    cost = np.maximum(lam * T - lam * lam * S * S / denom, 0.0)
    best = lam * S / denom
    k1 = p.size + 1
    invalid = np.arange(k1)[:, None] >= np.arange(k1)[None, :]
    cost[invalid] = np.inf
    return cost, best


def _partition_dp(cost: np.ndarray):
    """``best[j] = min`` total cost of splitting all labels into ``j`` contiguous non-empty bins.

    Returns ``(best, argmins)`` with ``best`` of shape ``(k + 1,)`` (``best[0] = inf``) and
    ``argmins[j][r]`` the start of the last bin in an optimal ``j``-bin split of the first ``r``.
    """
    k = cost.shape[0] - 1
    prev = np.full(k + 1, np.inf)
    prev[0] = 0.0
    best = np.full(k + 1, np.inf)
    argmins = [None]
    for j in range(1, k + 1):
        total = prev[:, None] + cost  # total[l, r]: first l labels in j - 1 bins, then bin [l, r)
        arg = np.argmin(total, axis=0)
        cur = total[arg, np.arange(k + 1)]
        argmins.append(arg)
        best[j] = cur[k]
        prev = cur
    return best, argmins


def rr_on_bins_loss_by_num_bins(support, probs, *, epsilon: float) -> np.ndarray:
    """The optimal noisy label loss of RR-on-Bins with exactly ``m`` bins, for ``m = 1..k``.

    Returns:
      An array ``loss`` of shape ``(k,)``, ``loss[m - 1]`` for ``m`` bins (see :func:`rr_on_bins`).
    """
    eps = validate_epsilon(epsilon)
    sup = validate_support(support)
    p = validate_probs(probs, size=sup.size)
    mu = float(p @ sup)
    z = sup - mu
    lam = math.expm1(eps)
    cost, _ = _bin_costs(p, z, lam)
    best, _ = _partition_dp(cost)
    var = float(p @ (z * z))
    return np.array([_rr_probabilities(eps, m)[1] * (m * var + best[m]) for m in range(1, sup.size + 1)])


def rr_on_bins(support, probs, *, epsilon: float) -> DiscreteRandomizer:
    """The RR-on-Bins randomizer with the smallest noisy squared loss for ``probs`` ([GKK+23]).

    Derivation (squared loss ``g(o, y) = (o - y)^2``; ``mu = E_p[y]``, ``V = Var_p[y]``,
    ``lam = e^eps - 1``, ``q_m = 1 / (e^eps + m - 1)``). For bins ``B_1..B_m`` with outputs
    ``o_1..o_m``, every label puts ``q_m`` on each output plus an extra ``lam q_m`` on its own::

        G = q_m sum_y p_y sum_j (o_j - y)^2 + lam q_m sum_j sum_{y in B_j} p_y (o_j - y)^2
          = q_m [ m V + sum_j c(B_j, o_j) ],   c(B, o) = (o - mu)^2 + lam sum_{y in B} p_y (o - y)^2,

    using ``sum_y p_y (o - y)^2 = (o - mu)^2 + V``. So although every label's loss involves all
    outputs, for a fixed ``m`` the objective separates over bins: the best output of a bin is
    ``o(B) = (mu + lam sum_B p_y y) / (1 + lam P(B))`` and ``c(B) = lam T - lam^2 S^2 / (1 + lam P)``
    in coordinates centred at ``mu`` (``P, S, T`` the bin's sums of ``p, p z, p z^2``, ``z = y - mu``).
    Optimal bins are contiguous: for fixed outputs each label's term ``lam p_y (o_j - y)^2`` is
    smallest for the nearest output, and moving labels to it keeps the ``(o_j - mu)^2`` terms;
    an output left with no label can be dropped without increasing ``G``, since adding an empty
    bin helps only if ``sum_j c(B_j) > lam V``, while ``c(B_j) <= lam sum_{B_j} p_y (y - mu)^2``.
    A dynamic program over the sorted labels gives the best split into exactly ``m`` bins for
    every ``m`` (``O(k^3)``), and the result is the best ``m`` (ties: fewest bins).

    Guarantee: ``eps``-label-DP (003 Definition 22).

    Args:
      support: strictly increasing label values.
      probs: prior over ``support`` (sums to 1).
      epsilon: privacy parameter, > 0.

    Returns:
      A :class:`DiscreteRandomizer` with ``m`` outputs (the bin values, increasing) and
      ``label_to_output`` the bin of each label.
    """
    eps = validate_epsilon(epsilon)
    sup = validate_support(support)
    p = validate_probs(probs, size=sup.size)
    k = sup.size
    mu = float(p @ sup)
    z = sup - mu
    lam = math.expm1(eps)
    cost, best_out = _bin_costs(p, z, lam)
    best, argmins = _partition_dp(cost)
    var = float(p @ (z * z))
    losses = np.array([_rr_probabilities(eps, m)[1] * (m * var + best[m]) for m in range(1, k + 1)])
    # (rr_on_bins_loss_by_num_bins returns the same array.)
    m_star = int(np.flatnonzero(losses <= losses.min() * (1.0 + 1e-12) + 1e-300)[0]) + 1
    # Backtrack the bins of the m_star-bin optimum.
    bounds = [k]
    r = k
    for j in range(m_star, 0, -1):
        r = int(argmins[j][r])
        bounds.append(r)
    bounds = bounds[::-1]  # 0 = b_0 < b_1 < ... < b_m = k
    phi = np.empty(k)
    for l, r in zip(bounds[:-1], bounds[1:]):
        phi[l:r] = mu + best_out[l, r]
    return rr_on_bins_from_map(sup, epsilon=eps, label_outputs=phi, probs=p, name="RR-on-Bins")
