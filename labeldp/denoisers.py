"""Gradient denoisers of LabelDP-Pro (000 Table 1, Sections 3.2-3.4, Appendix C).

A denoiser maps the privatized gradient ``g~`` of DP-SGD (000 Algorithm 1, line 5) to a
denoised gradient using only *features* (never labels): it projects ``g~`` onto the span or
the convex hull of the per-example per-class gradients

    G = [grad_theta l(theta, (x_i, kappa))]_{i in I, kappa in [K]}     (d x nK),

with ``l(theta, (x, kappa)) = -log softmax(f(theta, x))_kappa`` (cross-entropy). ``G`` is never
materialised: with ``L(theta) = [l(theta, (x_i, kappa))]_{i, kappa}`` (an (n, K) array), ``G^T``
is the Jacobian of ``L``, so ``G^T v`` is a Jacobian-vector product (forward mode) and ``G u``
a vector-Jacobian product (reverse mode), exactly as in 000 Appendix C. Each call linearizes
``L`` once (``jax.linearize``) and transposes the linear map (``jax.linear_transpose``), so an
iteration of the projection is two linear-map applications, with no new forward pass.

Two projections:

* :func:`span_projection` -- least-squares projection onto ``span(G)`` by conjugate gradients
  on the normal equations ``(G^T G) a = G^T g`` (in the numerically preferable CGLS form).
* :func:`convex_hull_projection` -- ``min_{alpha in simplex} ||G alpha - g||^2`` by projected
  gradient descent ``alpha <- Proj_simplex(alpha - 2 eta G^T (G alpha - g))`` (000 Section 3.2)
  with the sort-based simplex projection of Wang & Carreira-Perpinan (2013), followed by the
  coefficient smoothing ``alpha~ = lambda alpha + (1 - lambda) / (nK)`` of 000 Section 3.3; the
  output is ``G alpha~``.

Choices the paper leaves open (000 Appendix C gives only the two subroutines):

* initialisation ``alpha_0``: the uniform point ``1/(nK)`` of the simplex (``init=`` takes a
  warm start instead);
* the step size ``eta`` is used as given, *not* rescaled (000 Appendix D.2 searches
  ``eta in {0.01, 0.02, 0.05}`` and 100/200/500 steps); ``step_size="auto"`` instead uses
  ``1/L`` with ``L = 2 lambda_max(G^T G)`` estimated by power iteration (an option, not the
  paper's);
* ``momentum="nesterov"`` (FISTA with function-value restart, O'Donoghue & Candes 2015) is an
  option; the default is the paper's plain PGD.

Loops. 000 Appendix D.4 runs the iterations in ``jax.lax.fori_loop`` inside ``jit`` (GPU). On
XLA's CPU backend a while loop around a convolutional JVP/VJP is about 10x slower than the same
iterations unrolled (``/work/shared/MACHINE_NOTES.md``; re-measured by
``benchmarks/bench_step.py``), so every iterative routine takes ``loop="auto" | "fori" |
"python"``: ``fori`` is one jitted ``lax.fori_loop``/``while_loop``; ``python`` drives a jitted,
unrolled chunk of ``chunk`` iterations from a Python loop (the linearization is redone once per
chunk); ``auto`` is ``python`` on the CPU backend and ``fori`` elsewhere. Under an outer
``jax.jit`` trace the Python driver is impossible, so ``auto`` then means ``fori`` and
``python`` raises.

Solvers. ``solver="matrix_free"`` applies ``G`` and ``G^T`` as above: every iteration re-runs
the linearized network over the n examples. ``solver="jacobian"`` materialises ``G^T`` once per
call as an (nK, d) matrix (the per-example per-class gradients, one reverse pass per example and
class, the cost of about K per-example-gradient batches) and then each iteration is two dense
matrix-vector products; the iterates are the same up to floating-point rounding (tested). For a
convolutional network a matrix-vector product with ``G^T`` is far cheaper than a JVP through
the convolutions, so ``jacobian`` wins when the matrix fits in memory and more than about 40
iterations run (measured on the MNIST CNN on a CPU: ``benchmarks/bench_projection_solver.py``). ``solver="auto"`` picks ``jacobian``
when the matrix takes at most ``JACOBIAN_MAX_BYTES`` and at least ``JACOBIAN_MIN_STEPS``
iterations run, ``matrix_free`` otherwise. Materialising row by
row assumes ``f`` treats examples independently (no batch statistics), which DP-SGD's
per-example clipping assumes already.

Masks. Padding rows of a Poisson batch (``mask == 0``) contribute no column to ``G``: for the
span their columns are zero, for the convex hull their coefficients are pinned to 0 (the
simplex, its uniform point and the smoothing are over the real rows only).

Denoisers (000 Table 1): :func:`noop`, :func:`self_span`, :func:`self_conv`, :func:`alt_conv`
build :class:`Denoiser` objects with one call signature; ``breaks_amplification`` is True for
SelfSpan/SelfConv (000 Section 3.4: their output depends on which examples were sampled, so the
accountant must not use amplification by subsampling).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Literal, NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp

__all__ = [
    "LogitsFn",
    "per_class_losses",
    "project_simplex",
    "span_projection",
    "convex_hull_projection",
    "simplex_least_squares",
    "SimplexLSResult",
    "estimate_lipschitz",
    "resolve_loop",
    "resolve_solver",
    "jacobian_matrix",
    "JACOBIAN_MAX_BYTES",
    "JACOBIAN_MIN_STEPS",
    "SolverKind",
    "SOLVERS",
    "Denoiser",
    "NoOp",
    "SelfSpan",
    "SelfConv",
    "AltConv",
    "noop",
    "self_span",
    "self_conv",
    "alt_conv",
    "make_denoiser",
    "DENOISERS",
]

PyTree = Any
LogitsFn = Callable[[PyTree, jax.Array], jax.Array]
"""A deterministic logits function ``f(params, x) -> (n, K)``; must be hashable (it is a static
argument of the jitted kernels), e.g. ``ModelSpec.logits`` or a module-level function."""

LoopKind = Literal["auto", "fori", "python"]
SolverKind = Literal["auto", "matrix_free", "jacobian"]
SOLVERS = ("auto", "matrix_free", "jacobian")

JACOBIAN_MAX_BYTES = 2 * 1024**3
"""``solver="auto"`` materialises ``G^T`` only when it takes at most this many bytes (2 GiB)."""

JACOBIAN_MIN_STEPS = 50
"""``solver="auto"`` materialises ``G^T`` only for at least this many projection iterations:
building it costs about as much as 22-36 matrix-free iterations, each later iteration is 2.5-4.5x
cheaper (MNIST CNN on the 2-core CPU, n2 = 128-1024, FISTA with the ``auto`` step,
``benchmarks/results/projection_solver_cpu.md``; not measured on a GPU or for the CIFAR CNN)."""

_tree_map = jax.tree_util.tree_map


# --------------------------------------------------------------------------------------------
# Small pytree helpers
# --------------------------------------------------------------------------------------------


def _tree_vdot(a: PyTree, b: PyTree) -> jax.Array:
    leaves = [jnp.vdot(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))]
    return functools.reduce(jnp.add, leaves)


def _tree_sqnorm(a: PyTree) -> jax.Array:
    return _tree_vdot(a, a)


def _tree_axpy(alpha: jax.Array, x: PyTree, y: PyTree) -> PyTree:
    """alpha * x + y, leafwise."""
    return _tree_map(lambda xi, yi: (alpha * xi + yi).astype(yi.dtype), x, y)


def _tree_sub(a: PyTree, b: PyTree) -> PyTree:
    return _tree_map(jnp.subtract, a, b)


def _is_tracer(*trees: PyTree) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for t in trees for leaf in jax.tree_util.tree_leaves(t))


def resolve_loop(loop: LoopKind, *trees: PyTree) -> Literal["fori", "python"]:
    """Resolves ``loop="auto"`` by backend (``python`` on CPU, ``fori`` on GPU/TPU).

    Args:
      loop: ``"auto"``, ``"fori"`` or ``"python"``.
      *trees: the arrays the loop will run on; if any is a tracer (we are inside an outer
        ``jit``), ``auto`` resolves to ``fori`` and ``python`` is an error.

    Returns:
      ``"fori"`` or ``"python"``.
    """
    if loop not in ("auto", "fori", "python"):
        raise ValueError(f"loop must be 'auto', 'fori' or 'python', got {loop!r}")
    traced = _is_tracer(*trees)
    if loop == "python" and traced:
        raise ValueError("loop='python' cannot run under an outer jax.jit trace; use 'fori' or 'auto'")
    if loop == "auto":
        return "fori" if traced or jax.default_backend() != "cpu" else "python"
    return loop


# --------------------------------------------------------------------------------------------
# The loss map L and its linear maps G^T (jvp) and G (transpose of the jvp)
# --------------------------------------------------------------------------------------------


def per_class_losses(f: LogitsFn, params: PyTree, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """The raw-loss map ``L(theta) = -log_softmax(f(theta, x))`` of 000 Appendix C.

    Args:
      f: logits function ``f(params, x) -> (n, K)``.
      params: model parameters.
      x: inputs, leading dimension n.
      mask: optional (n,) 0/1 weights; masked rows give zero losses (zero columns of G).

    Returns:
      (n, K) array of ``l(theta, (x_i, kappa))``.
    """
    losses = -jax.nn.log_softmax(f(params, x), axis=-1)
    if mask is not None:
        losses = losses * jnp.asarray(mask, losses.dtype)[:, None]
    return losses


class _LinearMaps(NamedTuple):
    gt: Callable[[PyTree], jax.Array]  # v (params-shaped) -> G^T v, shape (n, K)
    g: Callable[[jax.Array], PyTree]  # u (n, K) -> G u (params-shaped)


def _linear_maps(f: LogitsFn, params: PyTree, x: jax.Array, mask: jax.Array | None) -> _LinearMaps:
    """Linearizes ``L`` once; returns G^T (the jvp) and G (its transpose)."""
    _, jvp_fn = jax.linearize(lambda p: per_class_losses(f, p, x, mask), params)
    transpose = jax.linear_transpose(jvp_fn, params)
    return _LinearMaps(gt=jvp_fn, g=lambda u: transpose(u)[0])


def _param_bytes(params: PyTree) -> int:
    return int(sum(leaf.size * jnp.dtype(leaf.dtype).itemsize for leaf in jax.tree_util.tree_leaves(params)))


def _check_solver(solver: str) -> None:
    if solver not in SOLVERS:
        raise ValueError(f"projection solver must be one of {list(SOLVERS)}, got {solver!r}")


def resolve_solver(
    solver: SolverKind, n: int, k: int, params: PyTree, steps: int
) -> Literal["matrix_free", "jacobian"]:
    """Resolves ``solver="auto"``: ``jacobian`` when the (n*k, d) matrix ``G^T`` (in the
    parameters' dtype) takes at most :data:`JACOBIAN_MAX_BYTES` and at least
    :data:`JACOBIAN_MIN_STEPS` iterations run, else ``matrix_free``. Building it briefly holds
    about twice the matrix (the per-leaf Jacobians and their concatenation). The choice depends
    on shapes only, never on data.

    Args:
      solver: ``"auto"``, ``"matrix_free"`` or ``"jacobian"``.
      n: rows of the batch projected onto (padding rows included).
      k: number of classes.
      params: model parameters (their total size d).
      steps: projection iterations per call.

    Returns:
      ``"matrix_free"`` or ``"jacobian"``.
    """
    _check_solver(solver)
    if solver == "auto":
        fits = int(n) * int(k) * _param_bytes(params) <= JACOBIAN_MAX_BYTES
        return "jacobian" if fits and int(steps) >= JACOBIAN_MIN_STEPS else "matrix_free"
    return solver


@functools.partial(jax.jit, static_argnames=("f",))
def _jacobian_rows(f, params, x, mask):
    def one(xi):
        return jax.jacrev(lambda p: -jax.nn.log_softmax(f(p, xi[None]), axis=-1)[0])(params)

    leaves = jax.tree_util.tree_leaves(jax.vmap(one)(x))  # each (n, K, *leaf shape)
    n, k = leaves[0].shape[:2]
    rows = jnp.concatenate([leaf.reshape(n, k, -1) for leaf in leaves], axis=-1)
    if mask is not None:
        rows = rows * mask[:, None, None].astype(rows.dtype)
    return rows.reshape(n * k, -1)


def jacobian_matrix(f: LogitsFn, params: PyTree, x: jax.Array, *, mask: jax.Array | None = None) -> jax.Array:
    """``G^T`` materialised: row ``i*K + kappa`` is ``grad_theta l(theta, (x_i, kappa))`` raveled.

    The columns follow ``jax.flatten_util.ravel_pytree(params)``; masked rows are zero (000
    Appendix C's ``G``, transposed, with the masking of :func:`per_class_losses`).

    Args:
      f: logits function ``f(params, x) -> (n, K)``; must treat examples independently.
      params: model parameters.
      x: inputs (n, ...).
      mask: optional (n,) 0/1 weights.

    Returns:
      (n*K, d) array.
    """
    mask = None if mask is None else jnp.asarray(mask, jnp.float32)
    return _jacobian_rows(f, params, x, mask)


_HIGHEST = jax.lax.Precision.HIGHEST  # no TF32 for the dense products on GPUs


def _jacobian_maps(jt: jax.Array, n: int, k: int) -> _LinearMaps:
    """G^T v and G u as products with the materialised (nK, d) matrix ``jt`` (flat vectors)."""
    return _LinearMaps(
        gt=lambda v: jnp.matmul(jt, v, precision=_HIGHEST).reshape(n, k),
        g=lambda u: jnp.matmul(u.reshape(-1), jt, precision=_HIGHEST),
    )


# --------------------------------------------------------------------------------------------
# Simplex projection (Wang & Carreira-Perpinan 2013)
# --------------------------------------------------------------------------------------------


def project_simplex(v: jax.Array, *, mask: jax.Array | None = None) -> jax.Array:
    """Euclidean projection onto the probability simplex (Wang & Carreira-Perpinan 2013).

    ``argmin_w ||w - v||`` s.t. ``w >= 0, sum(w) = 1``, by sorting: with ``u`` = ``v`` sorted
    descending, ``rho = max{j : u_j - (sum_{r<=j} u_r - 1)/j > 0}``, ``tau = (sum_{r<=rho} u_r -
    1)/rho`` and ``w = max(v - tau, 0)``.

    Args:
      v: any-shaped array; the projection is over all its entries jointly.
      mask: optional boolean/0-1 array of ``v``'s shape; masked-out entries are fixed to 0 and
        the simplex is over the remaining entries (at least one must remain).

    Returns:
      The projection, same shape and dtype as ``v``.
    """
    shape = v.shape
    flat = v.reshape(-1)
    if mask is None:
        valid = jnp.ones(flat.shape, bool)
    else:
        valid = jnp.broadcast_to(jnp.asarray(mask) > 0, shape).reshape(-1)
    n_valid = jnp.sum(valid)
    lowest = jnp.finfo(flat.dtype).min
    u = -jnp.sort(-jnp.where(valid, flat, lowest))  # descending; masked entries last
    j = jnp.arange(1, flat.size + 1, dtype=flat.dtype)
    in_range = jnp.arange(flat.size) < n_valid
    cssv = jnp.cumsum(jnp.where(in_range, u, 0.0))
    cond = in_range & (u - (cssv - 1.0) / j > 0)
    rho = jnp.maximum(jnp.sum(cond), 1)
    tau = (cssv[rho - 1] - 1.0) / rho.astype(flat.dtype)
    w = jnp.where(valid, jnp.maximum(flat - tau, 0.0), 0.0)
    return w.reshape(shape).astype(v.dtype)


def _uniform_alpha(n: int, k: int, mask: jax.Array | None, dtype) -> jax.Array:
    if mask is None:
        return jnp.full((n, k), 1.0 / (n * k), dtype)
    m = (jnp.asarray(mask) > 0).astype(dtype)
    return jnp.broadcast_to(m[:, None] / (jnp.maximum(jnp.sum(m), 1.0) * k), (n, k))


# --------------------------------------------------------------------------------------------
# Span projection: CGLS (CG on the normal equations)
# --------------------------------------------------------------------------------------------


class _CGState(NamedTuple):
    a: jax.Array  # coefficients (n, K)
    r: PyTree  # residual g - G a
    s: jax.Array  # G^T r
    p: jax.Array  # search direction
    gamma: jax.Array  # ||s||^2
    k: jax.Array  # iterations done


def _cg_init(maps: _LinearMaps, g: PyTree) -> _CGState:
    s = maps.gt(g)
    gamma = jnp.sum(s * s)
    return _CGState(a=jnp.zeros_like(s), r=g, s=s, p=s, gamma=gamma, k=jnp.zeros((), jnp.int32))


def _cg_iter(maps: _LinearMaps, st: _CGState, threshold: jax.Array) -> _CGState:
    active = st.gamma > threshold
    q = maps.g(st.p)
    qq = _tree_sqnorm(q)
    step = jnp.where(active & (qq > 0), st.gamma / jnp.where(qq > 0, qq, 1.0), 0.0)
    a = st.a + step * st.p
    r = _tree_axpy(-step, q, st.r)
    s = maps.gt(r)
    gamma_new = jnp.sum(s * s)
    beta = jnp.where(st.gamma > 0, gamma_new / jnp.where(st.gamma > 0, st.gamma, 1.0), 0.0)
    p = s + beta * st.p
    keep = lambda new, old: jnp.where(active, new, old)
    return _CGState(
        a=a,
        r=r,
        s=keep(s, st.s),
        p=keep(p, st.p),
        gamma=keep(gamma_new, st.gamma),
        k=st.k + active.astype(jnp.int32),
    )


def _cg_threshold(gamma0: jax.Array, tol: float) -> jax.Array:
    return (tol * tol) * gamma0


@functools.partial(jax.jit, static_argnames=("f", "iters", "tol"))
def _span_fori(f, params, x, mask, g, iters, tol):
    maps = _linear_maps(f, params, x, mask)
    st = _cg_init(maps, g)
    thr = _cg_threshold(st.gamma, tol)
    st = jax.lax.while_loop(
        lambda s: (s.k < iters) & (s.gamma > thr), lambda s: _cg_iter(maps, s, thr), st
    )
    return maps.g(st.a), st.k, jnp.sqrt(st.gamma)


@functools.partial(jax.jit, static_argnames=("f",))
def _span_init(f, params, x, mask, g):
    return _cg_init(_linear_maps(f, params, x, mask), g)


@functools.partial(jax.jit, static_argnames=("f", "n_iters"))
def _span_chunk(f, params, x, mask, st, thr, n_iters):
    maps = _linear_maps(f, params, x, mask)
    for _ in range(n_iters):
        st = _cg_iter(maps, st, thr)
    return st


@functools.partial(jax.jit, static_argnames=("f",))
def _apply_g(f, params, x, mask, u):
    return _linear_maps(f, params, x, mask).g(u)


def span_projection(
    f: LogitsFn,
    params: PyTree,
    x: jax.Array,
    g: PyTree,
    *,
    mask: jax.Array | None = None,
    iters: int = 100,
    tol: float = 1e-6,
    loop: LoopKind = "auto",
    chunk: int = 10,
) -> PyTree:
    """Least-squares projection of ``g`` onto ``span{grad_theta l(theta, (x_i, kappa))}``.

    000 Table 1 (SelfSpan). Solves ``min_a ||G a - g||`` by conjugate gradients on the normal
    equations ``(G^T G) a = G^T g`` in the CGLS form (same iterates as CG on the normal
    equations, better rounding), with ``G^T v`` a JVP and ``G u`` a VJP of the linearized loss
    map (000 Appendix C); ``G`` is never materialised. Returns ``G a``.

    Args:
      f: logits function ``f(params, x) -> (n, K)`` (hashable).
      params: model parameters theta.
      x: inputs (n, ...), features only.
      g: target gradient, a pytree shaped like ``params``.
      mask: optional (n,) 0/1; masked rows contribute no column.
      iters: maximum CG iterations (exact convergence can take up to rank(G) <= nK).
      tol: stop when ``||G^T (g - G a)|| <= tol * ||G^T g||``.
      loop: ``"auto"``, ``"fori"`` (``lax.while_loop``) or ``"python"`` (jitted unrolled chunks
        of ``chunk`` iterations; the tolerance is checked between chunks).
      chunk: iterations per jitted chunk in ``python`` mode.

    Returns:
      The projection ``G a``, shaped like ``params``.
    """
    mode = resolve_loop(loop, params, x, g)
    mask = None if mask is None else jnp.asarray(mask, jnp.float32)
    if mode == "fori":
        return _span_fori(f, params, x, mask, g, iters=int(iters), tol=float(tol))[0]
    st = _span_init(f, params, x, mask, g)
    thr = _cg_threshold(st.gamma, tol)
    done = 0
    while done < iters:
        n = min(int(chunk), int(iters) - done)
        st = _span_chunk(f, params, x, mask, st, thr, n_iters=n)
        done += n
        if not bool(st.gamma > thr):
            break
    return _apply_g(f, params, x, mask, st.a)


# --------------------------------------------------------------------------------------------
# Convex-hull projection: PGD on the simplex
# --------------------------------------------------------------------------------------------


class _PGDState(NamedTuple):
    alpha: jax.Array  # current iterate (n, K)
    g_alpha: PyTree  # G alpha
    alpha_prev: jax.Array  # previous iterate (momentum only)
    g_alpha_prev: PyTree
    t: jax.Array  # FISTA t_k
    obj: jax.Array  # ||G alpha - g||^2


class SimplexLSResult(NamedTuple):
    """Result of :func:`simplex_least_squares`.

    Attributes:
      alpha: final coefficients (n, K) on the simplex (not smoothed).
      g_alpha: ``G alpha`` (params-shaped).
      objectives: (steps,) array, ``objectives[t] = ||G alpha_{t+1} - g||^2``.
      initial_objective: ``||G alpha_0 - g||^2``.
      step_size: the step size used (resolved when ``"auto"``).
    """

    alpha: jax.Array
    g_alpha: PyTree
    objectives: jax.Array
    initial_objective: jax.Array
    step_size: jax.Array


def _pgd_init(maps: _LinearMaps, g: PyTree, alpha0: jax.Array) -> _PGDState:
    g_alpha = maps.g(alpha0)
    obj = _tree_sqnorm(_tree_sub(g_alpha, g))
    return _PGDState(alpha0, g_alpha, alpha0, g_alpha, jnp.ones((), alpha0.dtype), obj)


def _pgd_iter(maps: _LinearMaps, g: PyTree, mask2d, st: _PGDState, eta, momentum: bool) -> _PGDState:
    if momentum:
        t_next = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * st.t * st.t))
        m = (st.t - 1.0) / t_next
        y = st.alpha + m * (st.alpha - st.alpha_prev)
        g_y = _tree_map(lambda a, b: a + m * (a - b), st.g_alpha, st.g_alpha_prev)  # G y by linearity
    else:
        y, g_y = st.alpha, st.g_alpha
    grad = 2.0 * maps.gt(_tree_sub(g_y, g))  # 2 G^T (G y - g)
    alpha = project_simplex(y - eta * grad, mask=mask2d)
    g_alpha = maps.g(alpha)
    obj = _tree_sqnorm(_tree_sub(g_alpha, g))
    if momentum:
        t_new = jnp.where(obj > st.obj, jnp.ones_like(t_next), t_next)  # function-value restart
        return _PGDState(alpha, g_alpha, st.alpha, st.g_alpha, t_new, obj)
    return _PGDState(alpha, g_alpha, st.alpha_prev, st.g_alpha_prev, st.t, obj)


def _power_step(maps: _LinearMaps, u: jax.Array) -> tuple[jax.Array, jax.Array]:
    w = maps.gt(maps.g(u))
    lam = jnp.vdot(u, w)
    return w / jnp.maximum(jnp.linalg.norm(w), 1e-30), lam


def _unit_start(shape, dtype, mask) -> jax.Array:
    """The power iteration's start: uniform over the real rows, unit norm."""
    u = jnp.ones(shape, dtype)
    if mask is not None:
        u = u * mask[:, None]
    return u / jnp.linalg.norm(u)


def _power_start(f, params, x, mask):
    s = jax.eval_shape(lambda p: per_class_losses(f, p, x, mask), params)
    return _unit_start(s.shape, s.dtype, mask)


_power_start_jit = jax.jit(_power_start, static_argnames=("f",))


def _power_loop(maps: _LinearMaps, u: jax.Array, iters: int) -> jax.Array:
    """``2 lambda_max(G^T G)`` after ``iters`` power iterations from ``u`` (one ``fori_loop``)."""
    _, lam = jax.lax.fori_loop(0, iters, lambda _, c: _power_step(maps, c[0]), (u, jnp.zeros((), u.dtype)))
    return 2.0 * lam


@functools.partial(jax.jit, static_argnames=("f", "iters"))
def _lipschitz_fori(f, params, x, mask, iters):
    return _power_loop(_linear_maps(f, params, x, mask), _power_start(f, params, x, mask), iters)


@functools.partial(jax.jit, static_argnames=("f", "n_iters"))
def _lipschitz_chunk(f, params, x, mask, u, n_iters):
    maps = _linear_maps(f, params, x, mask)
    lam = jnp.zeros((), u.dtype)
    for _ in range(n_iters):
        u, lam = _power_step(maps, u)
    return u, 2.0 * lam


def estimate_lipschitz(
    f: LogitsFn,
    params: PyTree,
    x: jax.Array,
    *,
    mask: jax.Array | None = None,
    iters: int = 30,
    loop: LoopKind = "auto",
    chunk: int = 10,
    solver: SolverKind = "matrix_free",
) -> jax.Array:
    """Estimates ``L = 2 lambda_max(G^T G)``, the Lipschitz constant of the PGD objective's gradient.

    Power iteration on ``G^T G`` from the uniform vector (each iteration one VJP and one JVP of
    the linearized loss map, or two products with the materialised ``G^T``).

    Args:
      f: logits function. params: parameters. x: inputs (n, ...). mask: optional (n,) 0/1.
      iters: power iterations.
      loop, chunk: as in :func:`simplex_least_squares`.
      solver: as in :func:`simplex_least_squares`, but the default here is ``"matrix_free"``
        (no matrix is built for a one-off estimate).

    Returns:
      Scalar estimate (from below; :func:`simplex_least_squares` with ``step_size="auto"``
      uses ``1 / (1.05 L)``).
    """
    mask = None if mask is None else jnp.asarray(mask, jnp.float32)
    n, k = jax.eval_shape(f, params, x).shape
    if resolve_solver(solver, n, k, params, iters) == "jacobian":
        jt = _jacobian_rows(f, params, x, mask)
        return _lipschitz_jacobian(jt, mask, n=n, k=k, iters=int(iters))
    if resolve_loop(loop, params, x, mask) == "fori":
        return _lipschitz_fori(f, params, x, mask, iters=int(iters))
    u = _power_start_jit(f, params, x, mask)
    lam = jnp.zeros((), u.dtype)
    done = 0
    while done < iters:
        c = min(int(chunk), int(iters) - done)
        u, lam = _lipschitz_chunk(f, params, x, mask, u, n_iters=c)
        done += c
    return lam


def _resolve_alpha0(init, n, k, mask, dtype):
    if init is None:
        return _uniform_alpha(n, k, mask, dtype)
    a0 = jnp.asarray(init, dtype).reshape(n, k)
    m2 = None if mask is None else jnp.broadcast_to((jnp.asarray(mask) > 0)[:, None], (n, k))
    return project_simplex(a0, mask=m2)


def _pgd_loop(maps: _LinearMaps, g: PyTree, mask, alpha0, eta, steps: int, momentum: bool):
    """``steps`` PGD/FISTA iterations in one ``lax.fori_loop``; returns (alpha, G alpha, objectives, obj0)."""
    n, k = alpha0.shape
    m2 = None if mask is None else jnp.broadcast_to(mask[:, None] > 0, (n, k))
    st = _pgd_init(maps, g, alpha0)
    obj0 = st.obj
    hist = jnp.zeros((steps,), st.obj.dtype)

    def body(i, carry):
        st, hist = carry
        st = _pgd_iter(maps, g, m2, st, eta, momentum)
        return st, hist.at[i].set(st.obj)

    st, hist = jax.lax.fori_loop(0, steps, body, (st, hist))
    return st.alpha, st.g_alpha, hist, obj0


def _pgd_core_fori(f, params, x, mask, g, alpha0, eta, steps, momentum):
    return _pgd_loop(_linear_maps(f, params, x, mask), g, mask, alpha0, eta, steps, momentum)


_pgd_fori = jax.jit(_pgd_core_fori, static_argnames=("f", "steps", "momentum"))


@functools.partial(jax.jit, static_argnames=("steps", "momentum"))
def _pgd_jacobian(jt, g_flat, mask, alpha0, eta, steps, momentum):
    n, k = alpha0.shape
    return _pgd_loop(_jacobian_maps(jt, n, k), g_flat, mask, alpha0, eta, steps, momentum)


@functools.partial(jax.jit, static_argnames=("n", "k", "iters"))
def _lipschitz_jacobian(jt, mask, n, k, iters):
    return _power_loop(_jacobian_maps(jt, n, k), _unit_start((n, k), jt.dtype, mask), iters)


@functools.partial(jax.jit, static_argnames=("f",))
def _pgd_start(f, params, x, mask, g, alpha0):
    return _pgd_init(_linear_maps(f, params, x, mask), g, alpha0)


@functools.partial(jax.jit, static_argnames=("f", "n_iters", "momentum"))
def _pgd_chunk(f, params, x, mask, g, st, eta, n_iters, momentum):
    maps = _linear_maps(f, params, x, mask)
    m2 = None if mask is None else jnp.broadcast_to(mask[:, None] > 0, st.alpha.shape)
    objs = []
    for _ in range(n_iters):
        st = _pgd_iter(maps, g, m2, st, eta, momentum)
        objs.append(st.obj)
    return st, jnp.stack(objs)


def simplex_least_squares(
    f: LogitsFn,
    params: PyTree,
    x: jax.Array,
    g: PyTree,
    *,
    steps: int = 200,
    step_size: float | Literal["auto"] = 0.02,
    mask: jax.Array | None = None,
    init: jax.Array | None = None,
    momentum: Literal["none", "nesterov"] = "none",
    loop: LoopKind = "auto",
    chunk: int = 10,
    solver: SolverKind = "auto",
) -> SimplexLSResult:
    """Solves ``min_{alpha in simplex} ||G alpha - g||^2`` by projected gradient descent.

    000 Section 3.2: ``alpha_{t+1} = Proj_simplex(alpha_t - 2 eta G^T (G alpha_t - g))`` with
    ``G u`` and ``G^T v`` from the linearized loss map (000 Appendix C). Each iteration costs
    one JVP and one VJP; the objective of every iterate comes for free.

    Args:
      f: logits function ``f(params, x) -> (n, K)`` (hashable).
      params: model parameters theta.
      x: inputs (n, ...).
      g: target (noisy) gradient, shaped like ``params``.
      steps: number of PGD iterations (000 Table 11 uses 200).
      step_size: ``eta``, used unscaled as in the paper (grid {0.01, 0.02, 0.05}); ``"auto"``
        uses ``1 / (1.05 L)`` with ``L`` from :func:`estimate_lipschitz` (10 extra JVP/VJP pairs).
      mask: optional (n,) 0/1; masked rows get coefficient 0.
      init: optional warm start (n, K) (projected onto the simplex); default uniform.
      momentum: ``"none"`` (the paper's PGD) or ``"nesterov"`` (FISTA with function-value
        restart; the same per-iteration cost).
      loop: ``"auto"``, ``"fori"`` or ``"python"`` (see the module docstring; the
        ``jacobian`` solver always runs one ``fori`` loop of matrix-vector products).
      chunk: iterations per jitted chunk in ``python`` mode.
      solver: ``"auto"``, ``"matrix_free"`` or ``"jacobian"`` (see the module docstring).

    Returns:
      A :class:`SimplexLSResult`.
    """
    return _simplex_least_squares(f, params, x, g, steps=steps, step_size=step_size, mask=mask, init=init,
                                  momentum=momentum, loop=loop, chunk=chunk, solver=solver)[0]


def _simplex_least_squares(f, params, x, g, *, steps, step_size, mask, init, momentum, loop, chunk, solver):
    """:func:`simplex_least_squares`, also returning ``apply_g(u) = G u`` for the solver used."""
    if momentum not in ("none", "nesterov"):
        raise ValueError(f"momentum must be 'none' or 'nesterov', got {momentum!r}")
    use_m = momentum == "nesterov"
    mode = resolve_loop(loop, params, x, g)
    mask = None if mask is None else jnp.asarray(mask, jnp.float32)
    out_shape = jax.eval_shape(f, params, x).shape
    n, k = out_shape
    dtype = jnp.result_type(*jax.tree_util.tree_leaves(g))
    alpha0 = _resolve_alpha0(init, n, k, mask, dtype)
    if isinstance(step_size, str) and step_size != "auto":
        raise ValueError(f"step_size must be a float or 'auto', got {step_size!r}")
    steps = int(steps)
    if resolve_solver(solver, n, k, params, steps) == "jacobian":
        jt = _jacobian_rows(f, params, x, mask)
        g_flat, unravel = jax.flatten_util.ravel_pytree(g)
        if step_size == "auto":
            eta = 1.0 / (1.05 * jnp.maximum(_lipschitz_jacobian(jt, mask, n=n, k=k, iters=10), 1e-30))
        else:
            eta = jnp.asarray(step_size, dtype)
        a, ga, hist, obj0 = _pgd_jacobian(jt, g_flat, mask, alpha0, eta, steps=steps, momentum=use_m)

        def apply_g(u):
            return unravel(jnp.matmul(u.reshape(-1), jt, precision=_HIGHEST))

        return SimplexLSResult(a, unravel(ga), hist, obj0, eta), apply_g

    def apply_g(u):
        return _apply_g(f, params, x, mask, u)

    if step_size == "auto":
        # 10 power iterations: on the MNIST CNN the estimate is within 0.5% of the 60-iteration
        # value (5899 / 6287 / 6314 at 5 / 10 / 30 iterations), inside the 1.05 safety factor.
        lip = estimate_lipschitz(f, params, x, mask=mask, iters=10, loop=mode, chunk=chunk, solver="matrix_free")
        eta = 1.0 / (1.05 * jnp.maximum(lip, 1e-30))
    else:
        eta = jnp.asarray(step_size, dtype)
    if mode == "fori":
        a, ga, hist, obj0 = _pgd_fori(f, params, x, mask, g, alpha0, eta, steps=steps, momentum=use_m)
        return SimplexLSResult(a, ga, hist, obj0, eta), apply_g
    st = _pgd_start(f, params, x, mask, g, alpha0)
    obj0 = st.obj
    hists = []
    done = 0
    while done < steps:
        c = min(int(chunk), steps - done)
        st, h = _pgd_chunk(f, params, x, mask, g, st, eta, n_iters=c, momentum=use_m)
        hists.append(h)
        done += c
    hist = jnp.concatenate(hists) if hists else jnp.zeros((0,), dtype)
    return SimplexLSResult(st.alpha, st.g_alpha, hist, obj0, eta), apply_g


def _smooth(alpha: jax.Array, smoothing: float, mask: jax.Array | None) -> jax.Array:
    n, k = alpha.shape
    return smoothing * alpha + (1.0 - smoothing) * _uniform_alpha(n, k, mask, alpha.dtype)


def convex_hull_projection(
    f: LogitsFn,
    params: PyTree,
    x: jax.Array,
    g: PyTree,
    *,
    steps: int = 200,
    step_size: float | Literal["auto"] = 0.02,
    smoothing: float = 0.75,
    mask: jax.Array | None = None,
    init: jax.Array | None = None,
    momentum: Literal["none", "nesterov"] = "none",
    loop: LoopKind = "auto",
    chunk: int = 10,
    solver: SolverKind = "auto",
) -> tuple[PyTree, jax.Array]:
    """Projects ``g`` onto the convex hull of the per-example per-class gradients, smoothed.

    000 Sections 3.2-3.3 and Appendix C: ``alpha`` from :func:`simplex_least_squares`, then
    ``alpha~ = smoothing * alpha + (1 - smoothing) * beta`` with ``beta`` uniform ``1/(nK)``
    over the real rows, and the output ``G alpha~``.

    Args:
      f: logits function ``f(params, x) -> (n, K)`` (hashable).
      params: model parameters theta.
      x: inputs (n, ...) (features only).
      g: target (noisy) gradient, shaped like ``params``.
      steps: PGD iterations (paper: 100/200/500, Table 11 uses 200).
      step_size: PGD step ``eta`` (paper grid {0.01, 0.02, 0.05}, unscaled) or ``"auto"``.
      smoothing: ``lambda`` of 000 Section 3.3 (0.75 works best there; 1 disables smoothing).
      mask: optional (n,) 0/1; masked rows get coefficient 0 and are not vertices.
      init: optional warm-start coefficients (n, K).
      momentum: ``"none"`` (paper) or ``"nesterov"`` (FISTA, optional).
      loop: ``"auto"``, ``"fori"`` or ``"python"``.
      chunk: iterations per jitted chunk in ``python`` mode.
      solver: ``"auto"``, ``"matrix_free"`` or ``"jacobian"`` (see the module docstring).

    Returns:
      ``(projected, alpha)``: ``projected = G alpha~`` shaped like ``params``, and the
      un-smoothed simplex coefficients ``alpha`` of shape (n, K).
    """
    res, apply_g = _simplex_least_squares(
        f, params, x, g, steps=steps, step_size=step_size, mask=mask, init=init,
        momentum=momentum, loop=loop, chunk=chunk, solver=solver,
    )
    m = None if mask is None else jnp.asarray(mask, jnp.float32)
    return apply_g(_smooth(res.alpha, float(smoothing), m)), res.alpha


# --------------------------------------------------------------------------------------------
# Denoisers (000 Table 1)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Denoiser:
    """Base class: a gradient denoiser of 000 Table 1.

    Call signature (common to all)::

        denoiser(noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None)
            -> (denoised_grad, info)

    where ``x``/``mask`` are the features and 0/1 mask of the current (padded) batch I^G and
    ``x_alt``/``alt_mask`` those of the alternative batch I^P (AltConv only); labels are never
    passed. ``info`` is a dict of scalar diagnostics.

    Attributes:
      name: ``noop``, ``self_span``, ``self_conv`` or ``alt_conv``.
      breaks_amplification: True when the output depends on which examples are in I^G, so
        accounting must not use amplification by subsampling (000 Section 3.4, Table 1).
      uses_alt_batch: True when the training loop must supply ``x_alt``.
    """

    name: str = dataclasses.field(init=False, default="base")
    breaks_amplification: bool = dataclasses.field(init=False, default=False)
    uses_alt_batch: bool = dataclasses.field(init=False, default=False)

    def host_loop(self, *trees: PyTree) -> bool:
        """True when this denoiser runs a Python-driven loop (cannot be inside a jit)."""
        return False

    def projection_solver(self, *, rows: int, k: int, params: PyTree) -> str | None:
        """The convex-hull solver this denoiser uses on ``rows`` examples of ``k`` classes
        (:func:`resolve_solver`), or None when it runs no convex-hull projection."""
        del rows, k, params
        return None

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class NoOp(Denoiser):
    """NOOP: returns the noisy gradient (plain DP-SGD)."""

    name: str = dataclasses.field(init=False, default="noop")

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        del logits_fn, params, x, mask, x_alt, alt_mask
        return noisy_grad, {}


@dataclasses.dataclass(frozen=True)
class SelfSpan(Denoiser):
    """SELFSPAN: projection onto the span of the batch's per-example per-class gradients.

    Attributes:
      iters, tol, loop, chunk: see :func:`span_projection`.
    """

    iters: int = 100
    tol: float = 1e-6
    loop: LoopKind = "auto"
    chunk: int = 10
    name: str = dataclasses.field(init=False, default="self_span")
    breaks_amplification: bool = dataclasses.field(init=False, default=True)

    def host_loop(self, *trees: PyTree) -> bool:
        return resolve_loop(self.loop, *trees) == "python"

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        del x_alt, alt_mask
        out = span_projection(
            logits_fn, params, x, noisy_grad, mask=mask, iters=self.iters, tol=self.tol,
            loop=self.loop, chunk=self.chunk,
        )
        return out, {}


@dataclasses.dataclass(frozen=True)
class _ConvBase(Denoiser):
    steps: int = 200
    step_size: float | str = 0.02
    smoothing: float = 0.75
    momentum: str = "none"
    loop: LoopKind = "auto"
    chunk: int = 10
    solver: SolverKind = "auto"

    def __post_init__(self):
        _check_solver(self.solver)

    def projection_solver(self, *, rows: int, k: int, params: PyTree) -> str | None:
        return resolve_solver(self.solver, rows, k, params, self.steps)

    def host_loop(self, *trees: PyTree) -> bool:
        return resolve_loop(self.loop, *trees) == "python"

    def _project(self, noisy_grad, logits_fn, params, x, mask):
        res, apply_g = _simplex_least_squares(
            logits_fn, params, x, noisy_grad, steps=self.steps, step_size=self.step_size,
            mask=mask, init=None, momentum=self.momentum, loop=self.loop, chunk=self.chunk, solver=self.solver,
        )
        m = None if mask is None else jnp.asarray(mask, jnp.float32)
        out = apply_g(_smooth(res.alpha, float(self.smoothing), m))
        obj = res.objectives[-1] if self.steps > 0 else res.initial_objective
        return out, {"projection_objective": obj, "projection_objective_init": res.initial_objective,
                     "alpha_max": jnp.max(res.alpha)}


@dataclasses.dataclass(frozen=True)
class SelfConv(_ConvBase):
    """SELFCONV: projection onto the convex hull of the batch's per-example per-class gradients.

    Attributes:
      steps, step_size, smoothing, momentum, loop, chunk, solver: see :func:`convex_hull_projection`.
    """

    name: str = dataclasses.field(init=False, default="self_conv")
    breaks_amplification: bool = dataclasses.field(init=False, default=True)

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        del x_alt, alt_mask
        return self._project(noisy_grad, logits_fn, params, x, mask)


@dataclasses.dataclass(frozen=True)
class AltConv(_ConvBase):
    """ALTCONV: projection onto the convex hull of an independent alternative batch I^P.

    The training loop samples I^P (``alt_batch_size`` examples, ``None`` = n1, independent of
    I^G) and passes its features as ``x_alt``; compatible with amplification (000 Section 3.4).

    Attributes:
      alt_batch_size: n2 (``None``: the expected batch size n1).
      steps, step_size, smoothing, momentum, loop, chunk, solver: see :func:`convex_hull_projection`.
    """

    alt_batch_size: int | None = None
    name: str = dataclasses.field(init=False, default="alt_conv")
    uses_alt_batch: bool = dataclasses.field(init=False, default=True)

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        del x, mask
        if x_alt is None:
            raise ValueError("alt_conv needs the alternative batch features x_alt")
        return self._project(noisy_grad, logits_fn, params, x_alt, alt_mask)


def noop() -> NoOp:
    """NOOP denoiser (DP-SGD)."""
    return NoOp()


def self_span(*, iters: int = 100, tol: float = 1e-6, loop: LoopKind = "auto", chunk: int = 10) -> SelfSpan:
    """SELFSPAN denoiser (000 Table 1); ``breaks_amplification=True``."""
    return SelfSpan(iters=iters, tol=tol, loop=loop, chunk=chunk)


def self_conv(
    *, steps: int = 200, step_size: float | str = 0.02, smoothing: float = 0.75,
    momentum: str = "none", loop: LoopKind = "auto", chunk: int = 10, solver: SolverKind = "auto",
) -> SelfConv:
    """SELFCONV denoiser (000 Table 1); ``breaks_amplification=True``."""
    return SelfConv(steps=steps, step_size=step_size, smoothing=smoothing, momentum=momentum, loop=loop, chunk=chunk,
                    solver=solver)


def alt_conv(
    *, steps: int = 200, step_size: float | str = 0.02, smoothing: float = 0.75,
    momentum: str = "none", alt_batch_size: int | None = None, loop: LoopKind = "auto", chunk: int = 10,
    solver: SolverKind = "auto",
) -> AltConv:
    """ALTCONV denoiser (000 Table 1, the paper's default); amplification-compatible."""
    return AltConv(steps=steps, step_size=step_size, smoothing=smoothing, momentum=momentum,
                   alt_batch_size=alt_batch_size, loop=loop, chunk=chunk, solver=solver)


DENOISERS: dict[str, Callable[..., Denoiser]] = {
    "noop": noop,
    "self_span": self_span,
    "self_conv": self_conv,
    "alt_conv": alt_conv,
}


def make_denoiser(name: str, **options: Any) -> Denoiser:
    """Builds a denoiser by name (``noop``, ``self_span``, ``self_conv``, ``alt_conv``)."""
    if name not in DENOISERS:
        raise ValueError(f"unknown denoiser {name!r}; known: {sorted(DENOISERS)}")
    return DENOISERS[name](**options)
