"""User-level LabelDP-Pro projection for binary labels: projection onto a zonotope.

Set-up (000 Section 6 with K = 2, as in Table 7). A user u contributes k examples with binary
labels ``y in {0, 1}^k``; the per-user gradient (000 Section 6: "we compute per-user gradients
and use them to replace the per-example gradients") is

    G(y) = sum_i g_i(y_i) = a + sum_i y_i d_i = a + D y,
    a = sum_i g_i(0),   d_i = g_i(1) - g_i(0),   D = [d_1 ... d_k]   (d x k),

where ``g_i(c)`` is example i's gradient at label c. This is exact for ANY loss and model:
each ``g_i`` takes only the two values ``g_i(0), g_i(1)``, so it is affine on ``{0, 1}``. (For
binary cross-entropy on one logit f, ``g_i(c) = (sigmoid(f_i) - c) grad f_i``, so ``d_i =
-grad_theta f(theta, x_i)``.) None of ``a, D`` reads a label.

The convex hull of the 2^k labellings' gradients is the zonotope

    conv{G(y) : y in {0, 1}^k} = Z = {a + D t : t in [0, 1]^k} = a + sum_i [0, 1] d_i,

the Minkowski sum of k segments. Proof: (subset) every ``G(y) = a + D y`` has ``y`` in the
cube and Z, the affine image of the cube, is convex. (superset) any ``a + D t`` equals
``E[G(Y)]`` for independent ``Y_i ~ Bernoulli(t_i)``, i.e. the convex combination of the 2^k
vertices with product weights ``w_y = prod_i t_i^{y_i} (1 - t_i)^{1 - y_i}``
(:func:`product_weights`). The same identity for K classes gives the Minkowski sum of the
per-example K-simplices' hulls, i.e. :mod:`labeldp.denoisers.hull_converged`'s
``coefficient_set='per_example'`` restricted to one user's examples.

Projecting a noisy vector ``v`` onto Z is therefore the box-constrained least squares problem

    min_{t in [0, 1]^k} F(t) = ||a + D t - v||^2,

solved by :func:`project_onto_zonotope` with FISTA (Beck & Teboulle 2009) with function-value
restart (O'Donoghue & Candes 2015), or plain projected gradient, step ``1 / L`` with ``L = 2
lambda_max(D^T D)`` computed exactly (``eigvalsh`` of the smaller of ``D^T D`` and ``D D^T``).
The projection onto the box is a clip. The stopping certificate is the Frank-Wolfe gap
``<grad F(t), t> - sum_i min(grad F(t)_i, 0) >= F(t) - min F``; since ``||p - p*||^2 <= F(t) -
min F`` for the projected point ``p = a + D t`` and the exact projection ``p*``, a gap below
``tol * S^2`` puts ``p`` within ``sqrt(tol) S`` of ``p*``, with ``S = sum_i ||d_i|| >=
diam(Z)``. Box least squares satisfies the Luo & Tseng (1992) error bound, so projected
gradient converges linearly even when ``D^T D`` is singular (``d < k``); FISTA with restart is
the default because it needs fewer iterations in practice (measured: under 1,000
for k <= 10, d <= 7, to a gap of 1e-15 S^2). Everything is written for one user and
``vmap``-ed over leading batch axes; it runs under ``jax.jit``.
:func:`project_onto_zonotope_reference` is an exact small-problem reference (scipy's bounded
variable least squares, an active-set method) for tests.

What 000 says, and what this module is. 000 Section 6 says only that per-user gradients replace
per-example gradients in DP-SGD and LabelDP-Pro; it does not say what LabelDP-Pro projects
onto at the user level, whether the vertices are clipped, or how AltConv's alternative batch is
formed for users (PROTOCOL: "AltConv over an alternative batch of users", a project decision).
At the item level (000 Table 1, Section 3.2, Appendix C) the vertices are the *unclipped*
per-example per-class gradients. The natural user-level analogue replaces them with the
per-user per-labelling gradients ``G_u(y)``, y in ``[K]^k`` (K^k vertices per user); for K = 2
one user's hull is the zonotope Z_u above, which is what this module projects onto. Two
batch-level sets are built from it (neither is in the paper):

* the Minkowski (soft-label) set ``(1/n) sum_u Z_u``, which contains the mean unclipped per-user
  gradient at the true labels, is itself a zonotope: ``a = (1/n) sum_u a_u`` and the n*k
  generators ``d_{u,i} / n`` stacked -- :func:`project_onto_zonotope` with ``D`` of shape
  (d, n k);
* the joint hull ``conv(union_u Z_u)`` (000 Section 3.2's single simplex over all vertices)
  is a different, larger set, not implemented here.

Clipping (open question). DP-SGD clips each per-user gradient as one unit:
``clip(G(y)) = c(y) G(y)`` with ``c(y) = min(1, C / ||G(y)||)``, which is NOT affine in y, so
the hull of the clipped per-user gradients is in general not a zonotope. What holds:
``clip(G(y)) = c(y) G(y) + (1 - c(y)) 0``, so ``conv{clip(G(y))}`` lies in ``conv(Z u {0})
= {s z : s in [0, 1], z in Z}``; the two sets coincide with Z when no point of Z has norm above
C. Projecting onto the hull of clipped vertices exactly needs the 2^k vertices
(:func:`labelling_gradients`, 1024 per user at k = 10) and a simplex solver. This module
implements the unclipped zonotope; which set the user-level LabelDP-Pro should use is left to
the caller.

Privacy: post-processing. ``a`` and ``D`` depend on the features and the model only (never on
a label), so projecting a DP noisy gradient onto Z keeps its guarantee.
"""

from __future__ import annotations

import functools
import itertools
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "ZonotopeProjection",
    "zonotope_from_endpoints",
    "labellings",
    "labelling_gradients",
    "product_weights",
    "box_frank_wolfe_gap",
    "project_onto_zonotope",
    "project_onto_zonotope_reference",
    "MOMENTA",
]

MOMENTA = ("nesterov", "none")
#: Largest k for which :func:`labellings` / :func:`labelling_gradients` enumerate 2^k rows.
MAX_ENUMERATED_K = 16


class ZonotopeProjection(NamedTuple):
    """Result of :func:`project_onto_zonotope` (leading axes: the batch axes of the inputs).

    Attributes:
      projected: ``a + D t``, (..., d).
      t: the box coefficients in ``[0, 1]^k``, (..., k): a soft label per example (the
        probability of label 1).
      objective: ``||a + D t - v||^2``, (...).
      gap: the Frank-Wolfe gap at ``t`` (>= objective - optimum), (...).
      iterations: iterations run, (...).
      step_size: ``1 / L`` with ``L = 2 lambda_max(D^T D)``, (...).
    """

    projected: jax.Array
    t: jax.Array
    objective: jax.Array
    gap: jax.Array
    iterations: jax.Array
    step_size: jax.Array


# ------------------------------------------------------------------------------------ the set


def zonotope_from_endpoints(grads_label0: jax.Array, grads_label1: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(a, D)`` of a user's zonotope from the per-example gradients at labels 0 and 1.

    Args:
      grads_label0: (..., k, d) ``g_i(0)`` for the user's k examples.
      grads_label1: (..., k, d) ``g_i(1)``.

    Returns:
      ``a = sum_i g_i(0)`` of shape (..., d) and ``D = [g_i(1) - g_i(0)]_i`` of shape (..., d, k).
    """
    g0 = jnp.asarray(grads_label0)
    g1 = jnp.asarray(grads_label1)
    if g0.shape != g1.shape or g0.ndim < 2:
        raise ValueError(
            f"grads_label0 and grads_label1 must both have shape (..., k, d), got {g0.shape} and {g1.shape}."
        )
    return jnp.sum(g0, axis=-2), jnp.swapaxes(g1 - g0, -1, -2)


def labellings(k: int) -> np.ndarray:
    """All ``2^k`` binary labellings as a (2^k, k) int array (row j: the bits of j, lowest first)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_ENUMERATED_K:
        raise ValueError(f"k must be an integer in [1, {MAX_ENUMERATED_K}] to enumerate 2^k labellings, got {k!r}.")
    return np.array(list(itertools.product((0, 1), repeat=int(k))), dtype=np.int64)[:, ::-1].copy()


def labelling_gradients(a: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The per-user gradient ``G(y) = a + D y`` of every labelling, (2^k, d) rows (order of
    :func:`labellings`): the vertex set whose convex hull is the zonotope."""
    a = np.asarray(a, dtype=np.float64)
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or a.shape != (D.shape[0],):
        raise ValueError(f"a must have shape (d,) and D shape (d, k), got {a.shape} and {D.shape}.")
    return a[None, :] + labellings(D.shape[1]) @ D.T


def product_weights(t: np.ndarray) -> np.ndarray:
    """Convex weights on the 2^k labellings whose combination of vertices is ``a + D t``.

    ``w_y = prod_i t_i^{y_i} (1 - t_i)^{1 - y_i}`` (independent Bernoulli(t_i) labels; order of
    :func:`labellings`): non-negative, summing to 1, and ``sum_y w_y G(y) = a + D t``.
    """
    t = np.asarray(t, dtype=np.float64)
    if t.ndim != 1 or np.any(t < 0) or np.any(t > 1):
        raise ValueError(
            f"t must be a 1-D array in [0, 1]^k, got shape {t.shape} and range "
            f"[{t.min() if t.size else 0}, {t.max() if t.size else 0}]."
        )
    y = labellings(t.shape[0])
    return np.prod(np.where(y == 1, t[None, :], 1.0 - t[None, :]), axis=1)


def box_frank_wolfe_gap(grad: jax.Array, t: jax.Array) -> jax.Array:
    """``<grad, t> - min_{s in [0,1]^k} <grad, s> = sum_i (grad_i t_i - min(grad_i, 0))``.

    For a convex F with gradient ``grad`` at ``t`` in the box this bounds ``F(t) - min F``.

    Args:
      grad: (..., k). t: (..., k) in the box.

    Returns:
      (...) gaps (>= 0 up to rounding).
    """
    return jnp.sum(grad * t - jnp.minimum(grad, 0.0), axis=-1)


# ------------------------------------------------------------------------------ the iteration


class _State(NamedTuple):
    t: jax.Array
    t_prev: jax.Array
    theta: jax.Array  # FISTA's t_k (momentum sequence)
    obj: jax.Array
    gap: jax.Array
    it: jax.Array


def _lipschitz(D: jax.Array) -> jax.Array:
    """``2 lambda_max(D^T D)``, exactly, from the smaller Gram matrix."""
    d, k = D.shape
    gram = D.T @ D if k <= d else D @ D.T
    return 2.0 * jnp.linalg.eigvalsh(gram)[-1]


def _solve_one(v, a, D, t0, tol, *, steps: int, momentum: bool):
    hi = jax.lax.Precision.HIGHEST
    r0 = a - v
    lip = _lipschitz(D)
    eta = 1.0 / jnp.maximum(lip, jnp.finfo(D.dtype).tiny)
    scale = jnp.square(jnp.sum(jnp.linalg.norm(D, axis=0)))
    thr = tol * scale

    def grad_obj(t):
        r = r0 + jnp.matmul(D, t, precision=hi)
        return 2.0 * jnp.matmul(D.T, r, precision=hi), jnp.sum(r * r)

    g0, f0 = grad_obj(t0)
    st0 = _State(t0, t0, jnp.ones((), t0.dtype), f0, box_frank_wolfe_gap(g0, t0), jnp.zeros((), jnp.int32))

    def body(st: _State) -> _State:
        if momentum:
            theta_next = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * st.theta * st.theta))
            y = st.t + ((st.theta - 1.0) / theta_next) * (st.t - st.t_prev)
        else:
            theta_next = st.theta
            y = st.t
        gy, _ = grad_obj(y)
        t = jnp.clip(y - eta * gy, 0.0, 1.0)
        g, f = grad_obj(t)
        theta_new = jnp.where(f > st.obj, jnp.ones_like(theta_next), theta_next)  # restart
        return _State(t, st.t, theta_new, f, box_frank_wolfe_gap(g, t), st.it + 1)

    st = jax.lax.while_loop(lambda s: (s.it < steps) & (s.gap > thr), body, st0)
    projected = a + jnp.matmul(D, st.t, precision=hi)
    return ZonotopeProjection(projected, st.t, st.obj, st.gap, st.it, eta)


@functools.partial(jax.jit, static_argnames=("steps", "momentum"))
def _solve_batch(v, a, D, t0, tol, *, steps: int, momentum: bool):
    return jax.vmap(functools.partial(_solve_one, steps=steps, momentum=momentum), in_axes=(0, 0, 0, 0, None))(
        v, a, D, t0, tol
    )


def project_onto_zonotope(
    v: jax.Array,
    a: jax.Array,
    D: jax.Array,
    *,
    steps: int = 500,
    tol: float = 0.0,
    momentum: Literal["nesterov", "none"] = "nesterov",
    init: jax.Array | None = None,
) -> ZonotopeProjection:
    """Euclidean projection of ``v`` onto the zonotope ``{a + D t : t in [0, 1]^k}``, batched.

    Solves ``min_{t in [0,1]^k} ||a + D t - v||^2`` by FISTA with function-value restart
    (``momentum="nesterov"``, default) or projected gradient descent (``"none"``), step ``1/L``,
    ``L = 2 lambda_max(D^T D)`` (exact), from ``t = 1/2`` (the zonotope's centre) or ``init``.
    Stops after ``steps`` iterations or once the Frank-Wolfe gap is at most ``tol * S^2``, ``S =
    sum_i ||d_i||`` (then ``||projected - exact projection|| <= sqrt(tol) S``); ``tol = 0`` runs
    all ``steps``. A zero generator column (a padded example) is harmless.

    Guarantee: post-processing of ``v`` (``a`` and ``D`` are label-free; module docstring); the
    output is always in the zonotope (``t`` is clipped to the box every step), and
    ``objective - min <= gap``.

    Args:
      v: (..., d) vectors to project (e.g. noisy per-user gradients).
      a: (..., d) offsets ``sum_i g_i(0)``, broadcastable against ``v``'s batch axes.
      D: (..., d, k) generators ``g_i(1) - g_i(0)`` as columns.
      steps: iteration cap (static), >= 1.
      tol: relative gap tolerance, >= 0.
      momentum: ``"nesterov"`` (FISTA) or ``"none"`` (PGD).
      init: optional (..., k) start in the box (clipped to it).

    Returns:
      :class:`ZonotopeProjection` with the batch axes of the broadcast inputs.
    """
    if momentum not in MOMENTA:
        raise ValueError(f"momentum must be one of {list(MOMENTA)}, got {momentum!r}.")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1 (iteration cap), got {steps!r}.")
    tol_f = float(tol)
    if not np.isfinite(tol_f) or tol_f < 0:
        raise ValueError(f"tol must be a finite float >= 0 (0 runs all steps), got {tol!r}.")
    v = jnp.asarray(v)
    a = jnp.asarray(a)
    D = jnp.asarray(D)
    if D.ndim < 2 or v.ndim < 1 or a.ndim < 1:
        raise ValueError(f"v and a must be (..., d) and D (..., d, k), got shapes {v.shape}, {a.shape}, {D.shape}.")
    d, k = D.shape[-2:]
    if v.shape[-1] != d or a.shape[-1] != d:
        raise ValueError(
            f"v, a and D must agree on d: v {v.shape}, a {a.shape}, D {D.shape} (D is (..., d, k), generators "
            "as columns; transpose a (..., k, d) stack with jnp.swapaxes(D, -1, -2))."
        )
    dtype = jnp.result_type(v, a, D, jnp.float32)
    try:
        batch = jnp.broadcast_shapes(v.shape[:-1], a.shape[:-1], D.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the batch axes of v {v.shape[:-1]}, a {a.shape[:-1]} and D {D.shape[:-2]} do not broadcast."
        ) from None
    if init is None:
        t0 = jnp.full((*batch, k), 0.5, dtype)
    else:
        t0 = jnp.clip(jnp.broadcast_to(jnp.asarray(init, dtype), (*batch, k)), 0.0, 1.0)
    n = int(np.prod(batch, dtype=np.int64))
    vb = jnp.broadcast_to(v.astype(dtype), (*batch, d)).reshape(n, d)
    ab = jnp.broadcast_to(a.astype(dtype), (*batch, d)).reshape(n, d)
    Db = jnp.broadcast_to(D.astype(dtype), (*batch, d, k)).reshape(n, d, k)
    res = _solve_batch(
        vb, ab, Db, t0.reshape(n, k), jnp.asarray(tol_f, dtype), steps=int(steps), momentum=momentum == "nesterov"
    )
    return ZonotopeProjection(*(x.reshape(*batch, *x.shape[1:]) for x in res))


def project_onto_zonotope_reference(v: np.ndarray, a: np.ndarray, D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact projection for one small problem (float64, scipy): a reference for tests.

    ``scipy.optimize.lsq_linear(D, v - a, bounds=(0, 1), method="bvls")``: bounded-variable least
    squares (Stark & Parker 1995), an active-set method that terminates at an exact minimiser.

    Args:
      v: (d,). a: (d,). D: (d, k).

    Returns:
      ``(projected, t)``: ``a + D t`` (d,) and ``t`` (k,) in the box.
    """
    from scipy.optimize import lsq_linear  # pylint: disable=g-import-not-at-top

    v = np.asarray(v, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or v.shape != (D.shape[0],) or a.shape != (D.shape[0],):
        raise ValueError(f"v and a must have shape (d,) and D (d, k), got {v.shape}, {a.shape}, {D.shape}.")
    res = lsq_linear(D, v - a, bounds=(0.0, 1.0), method="bvls", tol=1e-14, lsq_solver="exact")
    t = np.clip(res.x, 0.0, 1.0)
    return a + D @ t, t
