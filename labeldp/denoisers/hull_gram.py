"""The converged convex-hull projection solved in the coefficients' Gram space (``solver="gram"``).

Same problem and stopping rule as :mod:`labeldp.denoisers.hull_converged`: minimise
``F(alpha) = ||G alpha - g||^2`` over the coefficient set, stop at the first iterate whose
Frank-Wolfe gap is at most ``tol * V^2``. Here ``G^T`` (n*K rows of the parameters' size) is
materialised once per call and turned into ``Q = G^T G`` (n*K x n*K) and ``b = G^T g``; every
iteration then works on n*K numbers, with no pass through the network and no product with the
d-dimensional ``G``:

* ``F(alpha) = alpha^T Q alpha - 2 b^T alpha + ||g||^2``; its gradient is ``2 (Q alpha - b)``;
  the loop tracks ``F - ||g||^2`` so that restarts compare numbers free of the noise's norm
  (at small eps ``||g||^2`` dwarfs every change of ``F``).
* ``algorithm="fista"``: the iterates of the ``jacobian`` solver (FISTA with function-value restart,
  step ``1 / (1.05 L)``, ``L = 2 lambda_max(Q)`` by power iteration), up to rounding.
* ``algorithm="pairwise_frank_wolfe"`` (joint simplex only): pairwise Frank-Wolfe (Lacoste-Julien
  & Jaggi 2015): move mass from the worst vertex in the support to the Frank-Wolfe vertex, with the
  exact line search of a quadratic; each iteration costs two columns of ``Q``; linear convergence on
  a polytope. Its certificate is the same Frank-Wolfe gap.

Building ``Q`` costs ``(n K)^2 d`` multiply-adds in one dense product, against ``2 n K d`` per
FISTA iteration of the ``jacobian`` solver as matrix-vector products, so it pays when the solver
runs more than about ``n K / 2`` iterations or when the matrix-vector products are memory-bound
(``benchmarks/bench_hull_solvers.py`` measures it). The output ``G alpha`` is one product with
``G^T`` at the end.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp

from labeldp.denoisers.coefficient_sets import (
    frank_wolfe_gap,
    project_onto_set,
    start_point,
    uniform_point,
    valid_entries,
)
from labeldp.denoisers.linear_maps import HIGHEST, jacobian_rows, LinearMaps
from labeldp.denoisers.hull_rules import fista_step_size, stopping_scale, vertex_weights

ALGORITHMS = ("fista", "pairwise_frank_wolfe")

__all__ = ["ALGORITHMS", "solve_gram"]


class _GramState(NamedTuple):
    alpha: jax.Array  # (m,)
    qa: jax.Array  # Q alpha
    alpha_prev: jax.Array
    qa_prev: jax.Array
    t: jax.Array
    robj: jax.Array  # F(alpha) - ||g||^2 = alpha^T Q alpha - 2 b^T alpha
    gap: jax.Array
    it: jax.Array


def _gap(qa, b, alpha, shape, mask, per_example):
    return frank_wolfe_gap((2.0 * (qa - b)).reshape(shape), alpha.reshape(shape), mask=mask, per_example=per_example)


def _robj(alpha, qa, b):
    return jnp.vdot(alpha, qa) - 2.0 * jnp.vdot(b, alpha)


def _matvec(q, v):
    return jnp.matmul(q, v, precision=HIGHEST)


def _fista_step(q, b, shape, mask, per_example, eta, st: _GramState) -> _GramState:
    t_next = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * st.t * st.t))
    mom = (st.t - 1.0) / t_next
    y = st.alpha + mom * (st.alpha - st.alpha_prev)
    hg_y = (st.qa - b) + mom * (st.qa - st.qa_prev)  # Q y - b, by linearity
    alpha = project_onto_set((y - 2.0 * eta * hg_y).reshape(shape), mask, per_example).reshape(-1)
    qa = _matvec(q, alpha)
    robj = _robj(alpha, qa, b)
    gap = _gap(qa, b, alpha, shape, mask, per_example)
    t_new = jnp.where(robj > st.robj, jnp.ones_like(t_next), t_next)  # function-value restart
    return _GramState(alpha, qa, st.alpha, st.qa, t_new, robj, gap, st.it + 1)


def _pairwise_fw_step(q, b, shape, mask, per_example, eta, st: _GramState) -> _GramState:
    del eta, per_example
    valid = valid_entries(shape, mask).reshape(-1)
    grad = 2.0 * (st.qa - b)
    big = jnp.finfo(grad.dtype).max
    s = jnp.argmin(jnp.where(valid, grad, big))  # the Frank-Wolfe vertex
    a = jnp.argmax(jnp.where(valid & (st.alpha > 0), grad, -big))  # the away vertex (in the support)
    slope = grad[s] - grad[a]  # <grad, e_s - e_a> <= 0
    curv = q[s, s] + q[a, a] - 2.0 * q[s, a]  # (e_s - e_a)^T Q (e_s - e_a) >= 0
    gamma_max = st.alpha[a]
    gamma = jnp.where(curv > 0, jnp.clip(-slope / (2.0 * jnp.maximum(curv, 1e-30)), 0.0, gamma_max), gamma_max)
    gamma = jnp.where(s == a, 0.0, gamma)
    alpha = st.alpha.at[s].add(gamma).at[a].add(-gamma)
    alpha = alpha.at[a].set(jnp.where(gamma == gamma_max, 0.0, alpha[a]))  # a drop step leaves the support exactly
    qa = st.qa + gamma * (q[:, s] - q[:, a])
    robj = _robj(alpha, qa, b)
    gap = _gap(qa, b, alpha, shape, mask, False)
    return _GramState(alpha, qa, st.alpha, st.qa, st.t, robj, gap, st.it + 1)


@functools.partial(jax.jit, static_argnames=("f", "opts_key", "start", "max_steps", "power_iters", "algorithm"))
def solve_gram(f, params, x, mask, g, tol, smoothing, step, *, opts_key, start, max_steps, power_iters, algorithm):
    """One projection in Gram space; the same contract as ``hull_converged._solve_jacobian``.

    Returns:
      ``(G alpha~ flat, state, initial objective, step, smoothing bias norm, scale)`` with the
      state's ``obj`` the full objective ``F(alpha)``.
    """
    per_example = opts_key[2]
    jt = jacobian_rows(f, params, x, mask)  # (m, d)
    n, k = jax.eval_shape(f, params, x).shape
    shape = (n, k)
    g_flat, _ = jax.flatten_util.ravel_pytree(g)
    norms = jnp.linalg.norm(jt, axis=1).reshape(n, k)
    w2 = vertex_weights(norms, mask, opts_key)
    scale = stopping_scale(norms, w2, mask, per_example)
    jw = w2.reshape(-1)[:, None] * jt  # rows of (G diag(w))^T
    q = jnp.matmul(jw, jw.T, precision=HIGHEST)
    b = jnp.matmul(jw, g_flat, precision=HIGHEST)
    gsq = jnp.vdot(g_flat, g_flat)
    # 1 / (1.05 L) by the same power iteration, on Q: coefficient-space maps with G^T G = Q
    eta = fista_step_size(
        LinearMaps(gt=lambda u: _matvec(q, u).reshape(shape), g=lambda u: u.reshape(-1)),
        shape,
        q.dtype,
        mask,
        power_iters,
        step,
    )
    alpha0 = start_point(start, f(params, x), mask, per_example).reshape(-1)
    qa0 = _matvec(q, alpha0)
    robj0 = _robj(alpha0, qa0, b)
    st0 = _GramState(
        alpha0,
        qa0,
        alpha0,
        qa0,
        jnp.ones((), q.dtype),
        robj0,
        _gap(qa0, b, alpha0, shape, mask, per_example),
        jnp.zeros((), jnp.int32),
    )
    stepper = _fista_step if algorithm == "fista" else _pairwise_fw_step
    thr = tol * scale
    st = jax.lax.while_loop(
        lambda s: (s.it < max_steps) & (s.gap > thr), lambda s: stepper(q, b, shape, mask, per_example, eta, s), st0
    )
    beta = uniform_point(shape, mask, per_example, q.dtype).reshape(-1)
    out = jnp.matmul(smoothing * st.alpha + (1.0 - smoothing) * beta, jw, precision=HIGHEST)
    bias = (1.0 - smoothing) * jnp.linalg.norm(jnp.matmul(beta, jw, precision=HIGHEST))
    return out, st, robj0 + gsq, eta, bias, scale, st.robj + gsq
