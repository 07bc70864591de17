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
import math
from typing import Optional

import numpy as np
from scipy import optimize, sparse

from labeldp.mechanisms.regression_bins import debiased_rr_outputs, rr_on_bins
from labeldp.mechanisms.regression_core import (
    DiscreteRandomizer,
    labels_to_index,
    validate_epsilon,
    validate_probs,
    validate_support,
)

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


# --------------------------------------------------------------------------------------
# Algorithm 1: the LP.
# --------------------------------------------------------------------------------------


def _unbiased_lp_cost(p, z, o):
    """The ``k x n`` cost ``p_y (o_i - z_y)^2`` of Algorithm 1, scaled so that its maximum is 1."""
    cost = p[:, None] * (o[None, :] - z[:, None]) ** 2
    return cost / max(float(cost.max()), 1e-300)


_LP_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
_INFEASIBLE_MESSAGE = (
    "The unbiased LP (003 Algorithm 1) is infeasible for these outputs: the output set "
    "must reach beyond the labels; include the ends of feasible_output_set (003 Proposition 7).")


def _check_lp_status(res):
    if res.status == 2:
        raise ValueError(_INFEASIBLE_MESSAGE)
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed on the unbiased LP: {res.message}")


def _solve_lp_on_columns(cost, z, o, eps):
    """Algorithm 1 on the outputs ``o`` (costs ``cost``, ``k x n``); returns the matrix and the duals.

    Each column is written as ``M[:, i] = m_i + d[:, i]`` with ``0 <= d[y, i] <= (e^eps - 1) m_i``:
    a column satisfies all ``k^2`` pairwise DP constraints iff it has this form (``m_i`` is its
    minimum), so the LP has ``k n + n`` variables, ``k n`` inequality rows and the ``2 k``
    equality rows (row sums, unbiasedness). Half the rows of the two-sided form
    ``m_i <= M[y, i] <= e^eps m_i`` (:func:`_solve_unbiased_lp_full`), and several times faster
    for HiGHS' simplex.

    Returns:
      ``(matrix, duals)``: the ``k x n`` solution and the ``2 k`` duals of the equality rows
      (``scipy`` marginals: the derivative of the optimum in the right-hand side).
    """
    k, n = cost.shape
    big = math.exp(eps)
    kn = k * n
    c = np.concatenate([cost.ravel(), cost.sum(axis=0)])
    rows = np.repeat(np.arange(k), n)
    d_cols = np.arange(kn)
    m_cols = kn + np.tile(np.arange(n), k)
    both = (np.concatenate([rows, rows]), np.concatenate([d_cols, m_cols]))
    a_eq = sparse.vstack([
        sparse.csr_matrix((np.ones(2 * kn), both), shape=(k, kn + n)),
        sparse.csr_matrix((np.tile(o, 2 * k), both), shape=(k, kn + n)),
    ]).tocsr()
    b_eq = np.concatenate([np.ones(k), z])
    # d[y, i] - (e^eps - 1) m_i <= 0.
    a_ub = sparse.csr_matrix(
        (np.concatenate([np.ones(kn), np.full(kn, 1.0 - big)]),
         (np.concatenate([d_cols, d_cols]), np.concatenate([d_cols, m_cols]))),
        shape=(kn, kn + n))
    res = optimize.linprog(c, A_ub=a_ub, b_ub=np.zeros(kn), A_eq=a_eq, b_eq=b_eq, bounds=(0, None),
                           method="highs", options=_LP_OPTIONS)
    _check_lp_status(res)
    matrix = res.x[:kn].reshape(k, n) + res.x[kn:][None, :]
    return matrix, np.asarray(res.eqlin.marginals, dtype=float)


def _column_reduced_costs(cost, duals, o, eps):
    """The most negative reduced cost of each output column (the pricing step).

    With ``R[y, i] = cost[y, i] - pi_y - mu_y o_i`` (``pi``, ``mu`` the duals of the row-sum and
    unbiasedness rows), the cheapest DP column of minimum 1 at output ``i`` puts ``e^eps`` where
    ``R < 0`` and 1 elsewhere, so its reduced cost is ``sum_y max(R, 0) + e^eps min(R, 0)``. The
    columns of a DP randomizer are such columns times ``m_i`` with ``sum_i m_i <= 1``, so the
    LP optimum on all outputs is at least (dual objective) ``+ min(0, min_i rc_i)``.
    """
    k = cost.shape[0]
    red = cost - duals[:k, None] - duals[k:, None] * o[None, :]
    return np.where(red < 0.0, math.exp(eps) * red, red).sum(axis=0)


def _solve_unbiased_lp(p, z, o, eps, *, initial_columns=64, tol=1e-10, max_rounds=100):
    """Solves Algorithm 1 in normalised coordinates; returns the (approximate) ``k x n`` matrix.

    Column generation over the outputs: an optimal randomizer needs few outputs (at most
    ``2 k`` when outputs are free, 003 Theorem 6; on the grid the optimal vertices use a small
    fraction of a fine mesh, ``benchmarks/results/unbiased_lp_cpu.md``), so the LP is solved
    on a subset of the grid (``initial_columns`` evenly spaced outputs, both ends included),
    every grid output is priced with the subset's duals (:func:`_column_reduced_costs`), the most promising
    outputs with a negative reduced cost are added, and this repeats until none is below
    ``-tol``. Then the subset's optimum is optimal on the whole grid up to ``tol`` (in the
    normalised cost, whose maximum is 1; the bound in :func:`_column_reduced_costs`), the same
    certificate a solve on the whole grid gives up to its dual tolerance. Infeasibility is
    decided exactly: the subset contains both ends of the grid, and if any unbiased DP
    randomizer on the grid exists, unbiased randomized rounding of its outputs onto the two
    ends is one on the ends (unbiased post-processing keeps DP and the mean). After
    ``max_rounds`` rounds the LP is solved on the whole grid.
    """
    k, n = p.size, o.size
    cost = _unbiased_lp_cost(p, z, o)
    cols = np.unique(np.round(np.linspace(0, n - 1, min(n, max(int(initial_columns), 2)))).astype(np.int64))
    for _ in range(max_rounds):
        sub, duals = _solve_lp_on_columns(cost[:, cols], z, o[cols], eps)
        if cols.size == n:
            break
        rc = _column_reduced_costs(cost, duals, o, eps)
        rc[cols] = np.inf
        cand = np.flatnonzero(rc < -tol)
        if cand.size == 0:
            break
        cand = cand[np.argsort(rc[cand], kind="stable")[: max(cols.size // 2, 8)]]
        cols = np.union1d(cols, cand)
    else:
        cols = np.arange(n)
        sub, _ = _solve_lp_on_columns(cost, z, o, eps)
    matrix = np.zeros((k, n))
    matrix[:, cols] = sub
    return matrix


def _solve_unbiased_lp_full(p, z, o, eps):
    """Algorithm 1 as one LP on the whole grid, two-sided form (the solver before column generation).

    The ``k^2 n`` pairwise constraints ``M[y', i] <= e^eps M[y, i]`` are written with one
    extra variable per output, ``m_i <= M[y, i] <= e^eps m_i`` (``2 k n`` constraints): a column
    satisfies all pairwise constraints iff such an ``m_i`` exists (take its minimum). Kept as
    the reference that :func:`_solve_unbiased_lp` is tested and benchmarked against
    (``benchmarks/bench_unbiased_lp.py``); same optimum, far slower on large grids.
    """
    k, n = p.size, o.size
    big = math.exp(eps)
    cost = np.concatenate([_unbiased_lp_cost(p, z, o).ravel(), np.zeros(n)])
    rows = np.repeat(np.arange(k), n)
    cols = np.arange(k * n)
    a_eq = sparse.vstack([
        sparse.csr_matrix((np.ones(k * n), (rows, cols)), shape=(k, k * n + n)),
        sparse.csr_matrix((np.tile(o, k), (rows, cols)), shape=(k, k * n + n)),
    ]).tocsr()
    b_eq = np.concatenate([np.ones(k), z])
    col_of = np.tile(np.arange(n), k)
    r = np.arange(k * n)
    # m_i - M[y, i] <= 0  and  M[y, i] - e^eps m_i <= 0.
    a_ub = sparse.csr_matrix(
        (np.concatenate([np.ones(k * n), -np.ones(k * n), np.ones(k * n), -big * np.ones(k * n)]),
         (np.concatenate([r, r, k * n + r, k * n + r]),
          np.concatenate([k * n + col_of, cols, cols, k * n + col_of]))),
        shape=(2 * k * n, k * n + n))
    res = optimize.linprog(cost, A_ub=a_ub, b_ub=np.zeros(2 * k * n), A_eq=a_eq, b_eq=b_eq,
                           bounds=(0, None), method="highs", options=_LP_OPTIONS)
    _check_lp_status(res)
    return res.x[: k * n].reshape(k, n)


def _polish(matrix, z, o, eps, *, max_rounds=60):
    """Makes an LP solution satisfy the constraints to rounding error, keeping it optimal.

    Interior-point / simplex solutions meet the constraints only to the solver tolerance, and
    a ratio check ``Pr[o|y] <= e^eps Pr[o|y']`` is unforgiving for tiny entries. Each used
    column is rewritten as ``m_i * s_{y,i}`` with ``s`` in ``{1, e^eps}`` for entries at the
    lower / upper DP bound (the column's signature, 003 Definition 10) and a free entry
    otherwise; the free parameters are then moved by the least-norm step that satisfies the
    row sums and the unbiasedness equations exactly (the true vertex satisfies them, so the
    step is of the order of the solver tolerance), clipping free entries into
    ``[m_i, e^eps m_i]``.
    """
    k, n = matrix.shape
    big = math.exp(eps)
    mat = np.clip(matrix, 0.0, None)
    col_max = mat.max(axis=0)
    active = np.flatnonzero(col_max > 1e-9)
    mat[:, np.setdiff1d(np.arange(n), active)] = 0.0
    sub = mat[:, active]
    target = np.concatenate([np.ones(k), z])
    best = None
    for tau in (1e-6, 1e-8, 0.0):
        base = np.maximum(sub.min(axis=0), sub.max(axis=0) / big)
        ratio = sub / base[None, :]
        lower = ratio <= 1.0 + tau
        upper = (ratio >= big * (1.0 - tau)) & ~lower
        free = ~(lower | upper)
        coef = np.where(upper, big, 1.0) * ~free
        x_m = base.copy()
        x_s = sub[free].copy()
        fr, fc = np.nonzero(free)
        for _ in range(max_rounds):
            cur = coef * x_m[None, :]
            cur[fr, fc] = x_s
            resid = target - np.concatenate([cur.sum(axis=1), cur @ o[active]])
            if np.max(np.abs(resid)) <= 1e-14:
                break
            # Jacobian of (row sums, row means) w.r.t. (m, free entries).
            jac_m = np.concatenate([coef, coef * o[active][None, :]], axis=0)
            jac_s = np.zeros((2 * k, fr.size))
            jac_s[fr, np.arange(fr.size)] = 1.0
            jac_s[k + fr, np.arange(fr.size)] = o[active][fc]
            step = np.linalg.lstsq(np.concatenate([jac_m, jac_s], axis=1), resid, rcond=None)[0]
            x_m = x_m + step[: active.size]
            x_s = np.clip(x_s + step[active.size:], x_m[fc], big * x_m[fc])
        cur = coef * x_m[None, :]
        cur[fr, fc] = x_s
        err = np.max(np.abs(target - np.concatenate([cur.sum(axis=1), cur @ o[active]])))
        if np.all(x_m > 0) and (best is None or err < best[0]):
            best = (err, cur)
        if err <= 1e-12:
            break
    if best is None or best[0] > 1e-9:
        raise RuntimeError("Could not polish the LP solution to an exactly feasible randomizer.")
    out = np.zeros((k, n))
    out[:, active] = best[1]
    return out


def optimal_unbiased_randomizer(support, probs, *, epsilon: float, num_outputs: Optional[int] = None,
                                outputs=None) -> DiscreteRandomizer:
    """``ComputeOptUnbiasedRand_eps(P, Y_hat)`` (003 Algorithm 1) for the squared loss.

    Solves, over ``M[y, i] = Pr[M(y) = o_i]``::

        min  sum_y p_y sum_i M[y, i] (o_i - y)^2
        s.t. M >= 0,  sum_i M[y, i] = 1,  M[y', i] <= e^eps M[y, i] (y != y'),
             sum_i M[y, i] o_i = y                                   (unbiasedness)

    with ``scipy.optimize.linprog(method="highs")``, in coordinates where the labels span
    [0, 1] (DP, unbiasedness and the argmin are invariant under affine relabelling; the loss
    scales by the squared span), by column generation over the outputs (LPs on subsets of the
    outputs until every output's reduced cost is non-negative: the same optimum as one LP on
    all outputs, much faster on fine grids; see ``_solve_unbiased_lp``). The solution is then
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
    matrix = _polish(_solve_unbiased_lp(p, z, o, eps), z, o, eps)
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


def label_randomizer(labels, *, support, epsilon1: float, epsilon2: float, num_outputs: Optional[int] = None,
                     rng: np.random.Generator, randomizer: str = "optimal_unbiased") -> LabelRandomizerResult:
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
    return LabelRandomizerResult(noisy_labels=mech.sample(labels, rng), randomizer=mech, prior=prior,
                                 epsilon=eps1 + eps2)


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
            "clip them or extend the support grid.")


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
    return DiscreteRandomizer(support=vals, outputs=sup, matrix=matrix, epsilon=None,
                              name="unbiased randomized rounding")
