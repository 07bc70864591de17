"""Euclidean projection onto the probability simplex (Wang & Carreira-Perpinan 2013) and the
uniform point of the coefficient set. See :mod:`labeldp.denoisers`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


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


def uniform_alpha(n: int, k: int, mask: jax.Array | None, dtype) -> jax.Array:
    if mask is None:
        return jnp.full((n, k), 1.0 / (n * k), dtype)
    m = (jnp.asarray(mask) > 0).astype(dtype)
    return jnp.broadcast_to(m[:, None] / (jnp.maximum(jnp.sum(m), 1.0) * k), (n, k))
