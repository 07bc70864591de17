"""The rules the converged projection's solvers share (:mod:`labeldp.denoisers.hull_converged`,
:mod:`labeldp.denoisers.hull_gram`): the vertex weights (clipping to C, the mask, the per-example
1/n), the stopping tolerance's scale and FISTA's step 1 / (1.05 L) from power iteration.
"""

from __future__ import annotations

import jax.numpy as jnp

from labeldp.denoisers.coefficient_sets import valid_entries

__all__ = ["fista_step_size", "lipschitz_constant", "stopping_scale", "vertex_weights"]


def lipschitz_constant(maps, shape, dtype, mask, iters):
    """``L = 2 lambda_max(G^T G)`` of the objective ``||G alpha - g||^2``, by ``iters`` power iterations
    on the maps ``maps.g`` / ``maps.gt`` over the valid coefficients."""
    u = valid_entries(shape, mask).astype(dtype)
    u = u / jnp.linalg.norm(u)
    lam = jnp.zeros((), dtype)
    for _ in range(iters):
        w = maps.gt(maps.g(u))
        lam = jnp.vdot(u, w)
        u = w / jnp.maximum(jnp.linalg.norm(w), 1e-30)
    return 2.0 * lam


def fista_step_size(maps, shape, dtype, mask, power_iters, step):
    """``1 / (1.05 L)`` with L from power iteration, or ``step`` when 0 < step < that (a larger
    fixed step would void FISTA's convergence, so it is capped)."""
    auto = 1.0 / (1.05 * jnp.maximum(lipschitz_constant(maps, shape, dtype, mask, power_iters), 1e-30))
    return jnp.where(step > 0, jnp.minimum(jnp.asarray(step, dtype), auto), auto)


def stopping_scale(norms, w, mask, per_example: bool):
    """The squared norm of the largest (clipped) vertex, before the per-example 1/n: the scale of
    the stopping tolerance (C^2 once any vertex reaches C), free of the noise and the labels."""
    eff = norms * w
    if per_example:
        n_real = jnp.sum(mask > 0) if mask is not None else norms.shape[0]
        eff = eff * jnp.maximum(n_real, 1).astype(eff.dtype)
    return jnp.maximum(jnp.max(eff) ** 2, 1e-30)


def vertex_weights(norms, mask, opts_key):
    vertices, clip_norm, per_example = opts_key
    n, k = norms.shape
    w = jnp.ones((n, k), norms.dtype)
    if vertices == "clipped":
        w = jnp.minimum(1.0, clip_norm / jnp.maximum(norms, 1e-30))
    if mask is not None:
        w = w * (mask > 0)[:, None].astype(w.dtype)
    if per_example:
        n_real = jnp.sum(mask > 0) if mask is not None else n
        w = w / jnp.maximum(n_real, 1).astype(w.dtype)
    return w
