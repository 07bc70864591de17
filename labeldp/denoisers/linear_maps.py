"""The loss map ``L`` of 000 Appendix C and its linear maps ``G^T`` (a JVP) and ``G`` (its
transpose), matrix-free or materialised (``solver="jacobian"``), and the shared small helpers
(pytree arithmetic, loop and solver resolution). See :mod:`labeldp.denoisers`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Literal, NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp

PyTree = Any
LogitsFn = Callable[[PyTree, jax.Array], jax.Array]
"""A deterministic logits function ``f(params, x) -> (n, K)``; must be hashable (it is a static
argument of the jitted kernels), e.g. ``ModelSpec.logits`` or a module-level function."""

LoopKind = Literal["auto", "fori", "python"]
SolverKind = Literal["auto", "matrix_free", "jacobian", "gram"]
SOLVERS = ("auto", "matrix_free", "jacobian", "gram")
"""``gram`` (the coefficients' Gram matrix ``G^T G``, :mod:`labeldp.denoisers.hull_gram`) serves
only the converged projection (a variant with ``projection_tol``); the paper form refuses it."""

JACOBIAN_MAX_BYTES = 2 * 1024**3
"""``solver="auto"`` materialises ``G^T`` only when it takes at most this many bytes (2 GiB)."""

JACOBIAN_MIN_STEPS = 50
"""``solver="auto"`` materialises ``G^T`` only for at least this many projection iterations:
building it costs about as much as 22-36 matrix-free iterations, each later iteration is 2.5-4.5x
cheaper (MNIST CNN on the 2-core CPU, n2 = 128-1024, FISTA with the ``auto`` step,
``benchmarks/results/projection_solver_cpu.md``; not measured on a GPU or for the CIFAR CNN)."""

tree_map = jax.tree_util.tree_map


def tree_vdot(a: PyTree, b: PyTree) -> jax.Array:
    leaves = [jnp.vdot(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))]
    return functools.reduce(jnp.add, leaves)


def tree_sqnorm(a: PyTree) -> jax.Array:
    return tree_vdot(a, a)


def tree_axpy(alpha: jax.Array, x: PyTree, y: PyTree) -> PyTree:
    """alpha * x + y, leafwise."""
    return tree_map(lambda xi, yi: (alpha * xi + yi).astype(yi.dtype), x, y)


def tree_sub(a: PyTree, b: PyTree) -> PyTree:
    return tree_map(jnp.subtract, a, b)


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


class LinearMaps(NamedTuple):
    gt: Callable[[PyTree], jax.Array]  # v (params-shaped) -> G^T v, shape (n, K)
    g: Callable[[jax.Array], PyTree]  # u (n, K) -> G u (params-shaped)


def linearize_losses(f: LogitsFn, params: PyTree, x: jax.Array, mask: jax.Array | None) -> LinearMaps:
    """Linearizes ``L`` once; returns G^T (the jvp) and G (its transpose)."""
    _, jvp_fn = jax.linearize(lambda p: per_class_losses(f, p, x, mask), params)
    transpose = jax.linear_transpose(jvp_fn, params)
    return LinearMaps(gt=jvp_fn, g=lambda u: transpose(u)[0])


def param_bytes(params: PyTree) -> int:
    return int(sum(leaf.size * jnp.dtype(leaf.dtype).itemsize for leaf in jax.tree_util.tree_leaves(params)))


def check_solver(solver: str) -> None:
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
    check_solver(solver)
    if solver == "gram":
        raise ValueError(
            "solver 'gram' serves only the converged projection (set projection_tol, "
            "labeldp.denoisers.hull_gram); the paper form's PGD takes 'jacobian', 'matrix_free' or 'auto'"
        )
    if solver == "auto":
        fits = int(n) * int(k) * param_bytes(params) <= JACOBIAN_MAX_BYTES
        return "jacobian" if fits and int(steps) >= JACOBIAN_MIN_STEPS else "matrix_free"
    return solver


@functools.partial(jax.jit, static_argnames=("f",))
def jacobian_rows(f, params, x, mask):
    custom = getattr(f, "jacobian_rows", None)  # e.g. labeldp.dpsgd.tapped_logits.TappedLogits
    if custom is not None:
        return custom(params, x, mask)

    def one(xi):
        one_row = jax.tree_util.tree_map(lambda a: a[None], xi)  # features: an array or a pytree of arrays
        return jax.jacrev(lambda p: -jax.nn.log_softmax(f(p, one_row), axis=-1)[0])(params)

    leaves = jax.tree_util.tree_leaves(jax.vmap(one)(x))  # each (n, K, *leaf shape)
    n, k = leaves[0].shape[:2]
    rows = jnp.concatenate([leaf.reshape(n, k, -1) for leaf in leaves], axis=-1)
    if mask is not None:
        rows = rows * mask[:, None, None].astype(rows.dtype)
    return rows.reshape(n * k, -1)


def jacobian_matrix(f: LogitsFn, params: PyTree, x: jax.Array, *, mask: jax.Array | None = None) -> jax.Array:
    """``G^T`` materialised: row ``i*K + kappa`` is ``grad_theta l(theta, (x_i, kappa))`` raveled.

    The columns follow ``jax.flatten_util.ravel_pytree(params)``; masked rows are zero (000
    Appendix C's ``G``, transposed, with the masking of :func:`per_class_losses`). A logits
    function that carries ``f.jacobian_rows(params, x, mask)`` computes them itself (the
    book-keeping rows of :class:`labeldp.dpsgd.tapped_logits.TappedLogits`); otherwise each
    example's rows come from ``jax.jacrev``, vmapped.

    Args:
      f: logits function ``f(params, x) -> (n, K)``; must treat examples independently.
      params: model parameters.
      x: inputs (n, ...).
      mask: optional (n,) 0/1 weights.

    Returns:
      (n*K, d) array.
    """
    mask = None if mask is None else jnp.asarray(mask, jnp.float32)
    return jacobian_rows(f, params, x, mask)


@functools.partial(jax.jit, static_argnames=("f",))
def apply_gram(f, params, x, mask, u):
    return linearize_losses(f, params, x, mask).g(u)


HIGHEST = jax.lax.Precision.HIGHEST  # no TF32 for the dense products on GPUs


def jacobian_maps(jt: jax.Array, n: int, k: int) -> LinearMaps:
    """G^T v and G u as products with the materialised (nK, d) matrix ``jt`` (flat vectors)."""
    return LinearMaps(
        gt=lambda v: jnp.matmul(jt, v, precision=HIGHEST).reshape(n, k),
        g=lambda u: jnp.matmul(u.reshape(-1), jt, precision=HIGHEST),
    )
