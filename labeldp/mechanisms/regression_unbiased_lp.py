"""The LP of 003 Algorithm 1 (the optimal unbiased randomizer), solved with HiGHS.

Split from :mod:`labeldp.mechanisms.regression_unbiased`, whose
:func:`~labeldp.mechanisms.regression_unbiased.optimal_unbiased_randomizer` is the public entry
point: :func:`solve_unbiased_lp` (column generation over the outputs), the whole-grid solver
:func:`_solve_unbiased_lp_full` it replaced (kept for ``benchmarks/bench_unbiased_lp.py``), and
:func:`polish_randomizer`, which makes a solution meet the constraints to rounding error. All work in
normalised coordinates (labels spanning [0, 1]).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, sparse


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
    "must reach beyond the labels; include the ends of feasible_output_set (003 Proposition 7)."
)


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
    a_eq = sparse.vstack(
        [
            sparse.csr_matrix((np.ones(2 * kn), both), shape=(k, kn + n)),
            sparse.csr_matrix((np.tile(o, 2 * k), both), shape=(k, kn + n)),
        ]
    ).tocsr()
    b_eq = np.concatenate([np.ones(k), z])
    # d[y, i] - (e^eps - 1) m_i <= 0.
    a_ub = sparse.csr_matrix(
        (
            np.concatenate([np.ones(kn), np.full(kn, 1.0 - big)]),
            (np.concatenate([d_cols, d_cols]), np.concatenate([d_cols, m_cols])),
        ),
        shape=(kn, kn + n),
    )
    res = optimize.linprog(
        c, A_ub=a_ub, b_ub=np.zeros(kn), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs", options=_LP_OPTIONS
    )
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


def solve_unbiased_lp(p, z, o, eps, *, initial_columns=64, tol=1e-10, max_rounds=100):
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
    the reference that :func:`solve_unbiased_lp` is tested and benchmarked against
    (``benchmarks/bench_unbiased_lp.py``); same optimum, far slower on large grids.
    """
    k, n = p.size, o.size
    big = math.exp(eps)
    cost = np.concatenate([_unbiased_lp_cost(p, z, o).ravel(), np.zeros(n)])
    rows = np.repeat(np.arange(k), n)
    cols = np.arange(k * n)
    a_eq = sparse.vstack(
        [
            sparse.csr_matrix((np.ones(k * n), (rows, cols)), shape=(k, k * n + n)),
            sparse.csr_matrix((np.tile(o, k), (rows, cols)), shape=(k, k * n + n)),
        ]
    ).tocsr()
    b_eq = np.concatenate([np.ones(k), z])
    col_of = np.tile(np.arange(n), k)
    r = np.arange(k * n)
    # m_i - M[y, i] <= 0  and  M[y, i] - e^eps m_i <= 0.
    a_ub = sparse.csr_matrix(
        (
            np.concatenate([np.ones(k * n), -np.ones(k * n), np.ones(k * n), -big * np.ones(k * n)]),
            (
                np.concatenate([r, r, k * n + r, k * n + r]),
                np.concatenate([k * n + col_of, cols, cols, k * n + col_of]),
            ),
        ),
        shape=(2 * k * n, k * n + n),
    )
    res = optimize.linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(2 * k * n),
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=(0, None),
        method="highs",
        options=_LP_OPTIONS,
    )
    _check_lp_status(res)
    return res.x[: k * n].reshape(k, n)


def polish_randomizer(matrix, z, o, eps, *, max_rounds=60):
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
            x_s = np.clip(x_s + step[active.size :], x_m[fc], big * x_m[fc])
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
