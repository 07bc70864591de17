"""The convex-hull projection solved to a stated tolerance (issue: LabelDP-Pro that denoises).

Same problem as :mod:`labeldp.denoisers.hull` (000 Sections 3.2-3.3), with the choices the paper
leaves open made so that the projection converges and denoises:

* ``vertices``: ``"raw"`` (000 Appendix C: the per-example per-class gradients as they are) or
  ``"clipped"`` (each clipped to DP-SGD's norm C, so the clipped clean batch gradient, the mean of
  clipped per-example gradients at the true labels, lies in the hull, as 000 Section 3.1's
  argument needs). Clipping scales columns: ``G_c = G diag(s)``, ``s = min(1, C / ||G e_j||)``;
  only the n*K column norms are needed, so the matrix-free solver still never holds ``G``.
* ``coefficient_set``: ``"joint"`` (one simplex over all n*K vertices, 000 Section 3.2 as
  written) or ``"per_example"`` (one K-simplex per example with ``G / n``: ``alpha_i`` is a soft
  label of example i and ``G alpha`` the mean gradient under soft labels; 000 Section 3.3's
  label-smoothing reading). Smoothing mixes with the uniform point of the chosen set.
* ``start``: ``"uniform"`` (the paper's implicit start) or ``"predicted"``: the model's own
  predicted probabilities ``softmax(f(x))`` (per example; divided by n for ``joint``). No label is
  read. With raw vertices ``G alpha_0 = 0`` exactly (the cross-entropy gradient averaged over
  the model's own predictive distribution vanishes).
* stopping: FISTA (Beck & Teboulle 2009) with function-value restart (O'Donoghue & Candes 2015)
  and step ``1 / (1.05 L)``, ``L = 2 lambda_max(G^T G)`` by power iteration (or a fixed step),
  stopped when the
  Frank-Wolfe duality gap ``<grad F(alpha), alpha> - min_{s in set} <grad F(alpha), s>``, an upper
  bound on ``F(alpha) - F*`` for the convex ``F(alpha) = ||G alpha - g||^2``, falls below
  ``tol * V^2``, or after ``max_steps`` iterations. ``V`` is the largest (clipped) vertex norm
  (C once a vertex reaches it; the per-example set's 1/n left out), a scale free of the noise
  and the labels: since ``||G alpha - G alpha*||^2 <= F(alpha) - F*``, the output is then within
  ``sqrt(tol) V`` of the exact projection (3 % of C at tol 1e-3). Relative to ``||g~||^2``, which
  the noise dominates at small eps, the same tolerance would certify almost nothing. The gap costs no extra product: the
  iteration keeps ``G^T (G alpha - g)``, and FISTA's extrapolated gradient follows by linearity.

Solvers (as in :mod:`labeldp.denoisers`): ``jacobian`` materialises ``G^T`` once and runs one
``lax.while_loop`` of dense products; ``matrix_free`` drives jitted chunks of JVP/VJP iterations
from Python, each iteration guarded by the gap, so both stop at the first iterate within tolerance;
``gram`` builds ``G^T G`` once and iterates on the n*K coefficients alone
(:mod:`labeldp.denoisers.hull_gram`), with FISTA or (``algorithm="pairwise_frank_wolfe"``) pairwise
Frank-Wolfe.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal, NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp

from labeldp.denoisers.linear_maps import (
    HIGHEST,
    LogitsFn,
    PyTree,
    jacobian_rows,
    linearize_losses,
    LinearMaps,
    param_bytes,
    tree_sqnorm,
    tree_sub,
    JACOBIAN_MAX_BYTES,
    SOLVERS,
)
from labeldp.denoisers.hull_gram import ALGORITHMS, solve_gram
from labeldp.denoisers.hull_rules import fista_step_size, stopping_scale, vertex_weights
from labeldp.denoisers.coefficient_sets import (
    frank_wolfe_gap,
    project_onto_set,
    project_rows_simplex,
    start_point,
    uniform_point,
)

VERTICES = ("clipped", "raw")
COEFFICIENT_SETS = ("joint", "per_example")
STARTS = ("predicted", "uniform")

__all__ = [
    "HullOptions",
    "HullResult",
    "converged_hull_projection",
    "frank_wolfe_gap",
    "project_rows_simplex",
    "column_norms",
    "VERTICES",
    "COEFFICIENT_SETS",
    "STARTS",
]


@dataclasses.dataclass(frozen=True)
class HullOptions:
    """How the convex-hull projection is set up and solved.

    Attributes:
      vertices: ``"clipped"`` (to ``clip_norm``) or ``"raw"``.
      clip_norm: C, required for clipped vertices.
      coefficient_set: ``"joint"`` or ``"per_example"``.
      start: ``"predicted"`` or ``"uniform"``.
      tol: stop when the Frank-Wolfe gap is at most ``tol * V^2`` (V: the largest vertex norm).
      max_steps: iteration cap.
      smoothing: lambda of 000 Section 3.3 (1 disables it).
      solver: ``"auto"`` (``jacobian`` when ``G^T`` takes at most ``JACOBIAN_MAX_BYTES``),
        ``"jacobian"``, ``"matrix_free"`` or ``"gram"`` (``G^T G`` built once; ``auto`` never picks it).
      algorithm: ``"fista"`` or ``"pairwise_frank_wolfe"`` (``gram`` solver, joint set only).
      chunk: iterations per jitted chunk of the matrix-free solver (each iteration runs only while
        the gap is above the tolerance; the host checks between chunks whether to launch another).
      power_iters: power iterations for ``L``.
      step_size: a fixed FISTA step instead of ``1 / (1.05 L)`` (000 D.2's grid {0.01, 0.02,
        0.05}; sensible only for the per-example set, where ``G / n`` makes L small); capped at
        ``1 / (1.05 L)``.
    """

    vertices: str = "clipped"
    clip_norm: float | None = None
    coefficient_set: str = "joint"
    start: str = "predicted"
    tol: float = 1e-3
    max_steps: int = 500
    smoothing: float = 1.0
    solver: str = "auto"
    algorithm: str = "fista"
    chunk: int = 10
    power_iters: int = 10
    step_size: float | None = None

    def __post_init__(self):
        if self.vertices not in VERTICES:
            raise ValueError(f"vertices must be one of {list(VERTICES)}, got {self.vertices!r}")
        if self.vertices == "clipped" and not (self.clip_norm is not None and float(self.clip_norm) > 0):
            raise ValueError("vertices='clipped' needs clip_norm > 0 (DP-SGD's clipping norm C)")
        if self.coefficient_set not in COEFFICIENT_SETS:
            raise ValueError(f"coefficient_set must be one of {list(COEFFICIENT_SETS)}, got {self.coefficient_set!r}")
        if self.start not in STARTS:
            raise ValueError(f"projection start must be one of {list(STARTS)}, got {self.start!r}")
        if not float(self.tol) >= 0:
            raise ValueError(f"projection tolerance must be >= 0, got {self.tol!r}")
        if int(self.max_steps) < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps!r}")
        if not 0.0 <= float(self.smoothing) <= 1.0:
            raise ValueError(f"smoothing must be in [0, 1], got {self.smoothing!r}")
        if self.step_size is not None and not float(self.step_size) > 0:
            raise ValueError(f"step_size must be > 0 or None (1/L), got {self.step_size!r}")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {list(SOLVERS)}, got {self.solver!r}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"projection algorithm must be one of {list(ALGORITHMS)}, got {self.algorithm!r}")
        if self.algorithm == "pairwise_frank_wolfe" and (self.solver != "gram" or self.coefficient_set != "joint"):
            raise ValueError(
                "algorithm 'pairwise_frank_wolfe' runs in Gram space over one joint simplex: "
                "set solver='gram' and coefficient_set='joint'"
            )


class HullResult(NamedTuple):
    """Result of :func:`converged_hull_projection`.

    Attributes:
      projected: ``G alpha~`` (smoothed), shaped like ``g``.
      alpha: the solver's (unsmoothed) coefficients, (n, K).
      objective: ``||G alpha - g||^2`` at the end; objective_init: at the start.
      gap: the final Frank-Wolfe gap (>= objective - optimum); gap_relative: ``gap / V^2``.
      iterations: iterations run (a scalar array).
      step_size: 1 / (1.05 L).
      smoothing_bias_norm: ``||(1 - lambda) G beta||``, the part of the output that does not
        depend on ``g``.
      solver: the solver used.
    """

    projected: PyTree
    alpha: jax.Array
    objective: jax.Array
    objective_init: jax.Array
    gap: jax.Array
    gap_relative: jax.Array
    iterations: jax.Array
    step_size: jax.Array
    smoothing_bias_norm: jax.Array
    solver: str


# -------------------------------------------------------------------------------- the iteration


class _State(NamedTuple):
    alpha: jax.Array
    ga: PyTree  # G alpha
    half_grad: jax.Array  # G^T (G alpha - g)
    alpha_prev: jax.Array
    half_grad_prev: jax.Array
    t: jax.Array
    obj: jax.Array
    gap: jax.Array
    it: jax.Array


def _scaled_maps(maps: LinearMaps, w: jax.Array) -> LinearMaps:
    """``G diag(w)``: clipping and the per-example 1/n as a column scaling."""
    return LinearMaps(gt=lambda v: w * maps.gt(v), g=lambda u: maps.g(w * u))


def _state0(maps, g, alpha0, mask, per_example):
    ga = maps.g(alpha0)
    hg = maps.gt(tree_sub(ga, g))
    obj = tree_sqnorm(tree_sub(ga, g))
    gap = frank_wolfe_gap(2.0 * hg, alpha0, mask=mask, per_example=per_example)
    return _State(alpha0, ga, hg, alpha0, hg, jnp.ones((), alpha0.dtype), obj, gap, jnp.zeros((), jnp.int32))


def _step(maps, g, mask, per_example, eta, st: _State) -> _State:
    t_next = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * st.t * st.t))
    mom = (st.t - 1.0) / t_next
    y = st.alpha + mom * (st.alpha - st.alpha_prev)
    hg_y = st.half_grad + mom * (st.half_grad - st.half_grad_prev)  # G^T (G y - g), by linearity
    alpha = project_onto_set(y - 2.0 * eta * hg_y, mask, per_example)
    ga = maps.g(alpha)
    r = tree_sub(ga, g)
    hg = maps.gt(r)
    obj = tree_sqnorm(r)
    gap = frank_wolfe_gap(2.0 * hg, alpha, mask=mask, per_example=per_example)
    t_new = jnp.where(obj > st.obj, jnp.ones_like(t_next), t_next)  # function-value restart
    return _State(alpha, ga, hg, st.alpha, st.half_grad, t_new, obj, gap, st.it + 1)


# ---------------------------------------------------------------------------- jacobian solver


@functools.partial(jax.jit, static_argnames=("f", "opts_key", "start", "max_steps", "power_iters"))
def _solve_jacobian(f, params, x, mask, g, tol, smoothing, step, *, opts_key, start, max_steps, power_iters):
    per_example = opts_key[2]
    jt = jacobian_rows(f, params, x, mask)  # (nK, d)
    n, k = jax.eval_shape(f, params, x).shape
    g_flat, _ = jax.flatten_util.ravel_pytree(g)
    norms = jnp.linalg.norm(jt, axis=1).reshape(n, k)
    w2 = vertex_weights(norms, mask, opts_key)
    scale = stopping_scale(norms, w2, mask, per_example)
    w = w2.reshape(-1)
    maps = LinearMaps(
        gt=lambda v: (w * jnp.matmul(jt, v, precision=HIGHEST)).reshape(n, k),
        g=lambda u: jnp.matmul(w * u.reshape(-1), jt, precision=HIGHEST),
    )
    eta = fista_step_size(maps, (n, k), jt.dtype, mask, power_iters, step)
    alpha0 = start_point(start, f(params, x), mask, per_example)
    st0 = _state0(maps, g_flat, alpha0, mask, per_example)
    thr = tol * scale
    st = jax.lax.while_loop(
        lambda s: (s.it < max_steps) & (s.gap > thr), lambda s: _step(maps, g_flat, mask, per_example, eta, s), st0
    )
    beta = uniform_point((n, k), mask, per_example, jt.dtype)
    out = maps.g(smoothing * st.alpha + (1.0 - smoothing) * beta)
    bias = (1.0 - smoothing) * jnp.linalg.norm(maps.g(beta))
    return out, st, st0.obj, eta, bias, scale


# ------------------------------------------------------------------------- matrix-free solver


@functools.partial(jax.jit, static_argnames=("f", "chunk_n"))
def _norms_chunk(f, params, x, mask, chunk_n):
    del chunk_n
    rows = jacobian_rows(f, params, x, mask)
    return jnp.linalg.norm(rows, axis=1)


def column_norms(
    f: LogitsFn, params: PyTree, x: jax.Array, *, mask: jax.Array | None = None, chunk: int = 32
) -> jax.Array:
    """``||grad_theta l(theta, (x_i, kappa))||`` for every (i, kappa), (n, K), computed ``chunk``
    examples at a time (never holding all of ``G``).

    A logits function may carry its own exact ``f.column_norms(params, x, mask=None)`` that
    avoids dense per-example gradients (the ads model's: :func:`labeldp.ads.model.two_class_logits`);
    it is used when present."""
    custom = getattr(f, "column_norms", None)
    if custom is not None:
        return custom(params, x, mask=mask)
    n, k = jax.eval_shape(f, params, x).shape
    out = []
    for s in range(0, n, chunk):
        xm = None if mask is None else mask[s : s + chunk]
        xs = jax.tree_util.tree_map(lambda a: a[s : s + chunk], x)
        out.append(_norms_chunk(f, params, xs, xm, chunk_n=min(chunk, n - s)).reshape(-1, k))
    return jnp.concatenate(out, axis=0)


@functools.partial(jax.jit, static_argnames=("f", "opts_key", "start", "power_iters"))
def _mf_init(f, params, x, mask, g, w, step, *, opts_key, start, power_iters):
    per_example = opts_key[2]
    maps = _scaled_maps(linearize_losses(f, params, x, mask), w)
    eta = fista_step_size(maps, w.shape, w.dtype, mask, power_iters, step)
    alpha0 = start_point(start, f(params, x), mask, per_example)
    return _state0(maps, g, alpha0, mask, per_example), eta


@functools.partial(jax.jit, static_argnames=("f", "per_example", "n_iters"))
def _mf_chunk(f, params, x, mask, g, w, eta, st, thr, *, per_example, n_iters):
    """Up to ``n_iters`` FISTA iterations; each runs only while the gap is above ``thr`` (a
    conditional, so the stop is at the first iterate that meets the tolerance, as in the jacobian
    solver's loop, not at the chunk's end)."""
    maps = _scaled_maps(linearize_losses(f, params, x, mask), w)
    step = functools.partial(_step, maps, g, mask, per_example, eta)
    for _ in range(n_iters):
        st = jax.lax.cond(st.gap > thr, step, lambda s: s, st)
    return st


@functools.partial(jax.jit, static_argnames=("f",))
def _mf_output(f, params, x, mask, w, alpha, beta, smoothing):
    maps = _scaled_maps(linearize_losses(f, params, x, mask), w)
    bias = (1.0 - smoothing) * jnp.sqrt(tree_sqnorm(maps.g(beta)))
    return maps.g(smoothing * alpha + (1.0 - smoothing) * beta), bias


def _solve_matrix_free(f, params, x, mask, g, opts: HullOptions, key):
    per_example = key[2]
    norms = column_norms(f, params, x, mask=mask)  # for the clip factors and the tolerance's scale
    w = vertex_weights(norms, mask, key)
    scale = stopping_scale(norms, w, mask, per_example)
    st, eta = _mf_init(
        f,
        params,
        x,
        mask,
        g,
        w,
        float(opts.step_size or 0.0),
        opts_key=key,
        start=opts.start,
        power_iters=int(opts.power_iters),
    )
    obj0 = st.obj
    thr = float(opts.tol) * float(scale)
    while int(st.it) < int(opts.max_steps) and float(st.gap) > float(thr):
        c = min(int(opts.chunk), int(opts.max_steps) - int(st.it))
        st = _mf_chunk(
            f, params, x, mask, g, w, eta, st, jnp.asarray(thr, st.gap.dtype), per_example=per_example, n_iters=c
        )
    beta = uniform_point(w.shape, mask, per_example, w.dtype)
    out, bias = _mf_output(f, params, x, mask, w, st.alpha, beta, float(opts.smoothing))
    return out, st, obj0, eta, bias, scale


def resolve_hull_solver(solver: str, n: int, k: int, params: PyTree) -> Literal["jacobian", "matrix_free", "gram"]:
    """``auto`` -> ``jacobian`` when ``G^T`` (n*k rows of the parameters' size) takes at most
    ``JACOBIAN_MAX_BYTES``, else ``matrix_free`` (shapes only, never data); an explicit solver as
    it is."""
    if solver != "auto":
        return solver  # type: ignore[return-value]
    return "jacobian" if int(n) * int(k) * param_bytes(params) <= JACOBIAN_MAX_BYTES else "matrix_free"


def converged_hull_projection(
    f: LogitsFn, params: PyTree, x: jax.Array, g: PyTree, *, options: HullOptions, mask: jax.Array | None = None
) -> HullResult:
    """Projects ``g`` onto the convex hull of (clipped) per-example per-class gradients, to tolerance.

    Guarantee: a post-processing of ``g`` given the features ``x`` and ``params`` (no label is
    read), so it keeps the privacy of ``g``. The returned ``alpha`` satisfies
    ``F(alpha) - min F <= gap`` (the Frank-Wolfe certificate), with ``gap <= tol * V^2`` unless
    ``max_steps`` stopped it first (``HullResult.gap_relative`` says which).

    Args:
      f: logits function ``f(params, x) -> (n, K)`` (hashable).
      params: model parameters.
      x: inputs (n, ...), features only.
      g: the noisy gradient, shaped like ``params``.
      options: :class:`HullOptions`.
      mask: optional (n,) 0/1; masked rows are not vertices.

    Returns:
      :class:`HullResult`.
    """
    mask = None if mask is None else jnp.asarray(mask, jnp.float32)
    n, k = jax.eval_shape(f, params, x).shape
    key = (options.vertices, float(options.clip_norm or 0.0), options.coefficient_set == "per_example")
    solver = resolve_hull_solver(options.solver, n, k, params)
    if solver == "gram":
        _, unravel = jax.flatten_util.ravel_pytree(g)
        out, st, obj0, eta, bias, scale, obj = solve_gram(
            f,
            params,
            x,
            mask,
            g,
            float(options.tol),
            float(options.smoothing),
            float(options.step_size or 0.0),
            opts_key=key,
            start=options.start,
            max_steps=int(options.max_steps),
            power_iters=int(options.power_iters),
            algorithm=options.algorithm,
        )
        return HullResult(
            projected=unravel(out),
            alpha=st.alpha.reshape(n, k),
            objective=obj,
            objective_init=obj0,
            gap=st.gap,
            gap_relative=st.gap / scale,
            iterations=st.it,
            step_size=eta,
            smoothing_bias_norm=bias,
            solver=solver,
        )
    if solver == "jacobian":
        flat, unravel = jax.flatten_util.ravel_pytree(g)
        del flat
        out, st, obj0, eta, bias, scale = _solve_jacobian(
            f,
            params,
            x,
            mask,
            g,
            float(options.tol),
            float(options.smoothing),
            float(options.step_size or 0.0),
            opts_key=key,
            start=options.start,
            max_steps=int(options.max_steps),
            power_iters=int(options.power_iters),
        )
        out = unravel(out)
    else:
        out, st, obj0, eta, bias, scale = _solve_matrix_free(f, params, x, mask, g, options, key)
    return HullResult(
        projected=out,
        alpha=st.alpha,
        objective=st.obj,
        objective_init=obj0,
        gap=st.gap,
        gap_relative=st.gap / scale,
        iterations=st.it,
        step_size=eta,
        smoothing_bias_norm=bias,
        solver=solver,
    )
