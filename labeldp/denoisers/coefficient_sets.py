"""The coefficient sets of the converged hull projection (:mod:`labeldp.denoisers.hull_converged`).

Two sets for the coefficients ``alpha`` (n, K) of the per-example per-class vertices (000 Sections
3.2-3.3): ``joint``, one simplex over all n*K entries (000 Section 3.2 as written), and
``per_example``, a product of n K-simplices (each ``alpha_i`` a soft label of example i; 000 Section
3.3's label-smoothing reading). Here: Euclidean projection onto either set, the Frank-Wolfe duality
gap that certifies a point's suboptimality over it, and the label-free start points (the set's
uniform point, or the model's own predicted probabilities). Masked rows (padding) are not part of
either set.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from labeldp.denoisers.simplex import project_simplex

__all__ = [
    "project_rows_simplex",
    "project_onto_set",
    "frank_wolfe_gap",
    "valid_entries",
    "uniform_point",
    "start_point",
]


def project_rows_simplex(v: jax.Array, *, mask: jax.Array | None = None) -> jax.Array:
    """Projects each row of ``v`` (n, K) onto the K-simplex; rows with ``mask == 0`` become 0."""
    n, k = v.shape
    m = jnp.ones((n, k), bool) if mask is None else jnp.broadcast_to((jnp.asarray(mask) > 0)[:, None], (n, k))
    return jax.vmap(lambda r, mr: project_simplex(r, mask=mr))(v, m)


def project_onto_set(v, mask, per_example: bool):
    """Euclidean projection of ``v`` (n, K) onto the set (``per_example``: per-row simplices)."""
    if per_example:
        return project_rows_simplex(v, mask=mask)
    m2 = None if mask is None else jnp.broadcast_to((mask > 0)[:, None], v.shape)
    return project_simplex(v, mask=m2)


def valid_entries(shape, mask):
    """(n, K) bool: the entries that belong to the set (rows with ``mask == 0`` excluded)."""
    return jnp.ones(shape, bool) if mask is None else jnp.broadcast_to((mask > 0)[:, None], shape)


def frank_wolfe_gap(
    grad: jax.Array, alpha: jax.Array, *, mask: jax.Array | None = None, per_example: bool = False
) -> jax.Array:
    """The Frank-Wolfe duality gap ``<grad, alpha> - min_{s in set} <grad, s>`` (>= ``F(alpha) - F*``
    for convex ``F`` with gradient ``grad`` at ``alpha`` in the set).

    Args:
      grad: the objective's gradient at ``alpha``, (n, K).
      alpha: a point of the set.
      mask: optional (n,) 0/1; masked rows are not part of the set.
      per_example: the set is a product of per-row K-simplices (else one simplex).

    Returns:
      The gap (a scalar >= 0 up to rounding).
    """
    valid = valid_entries(grad.shape, mask)
    big = jnp.finfo(grad.dtype).max
    inner = jnp.sum(jnp.where(valid, grad * alpha, 0.0))
    if per_example:
        row_min = jnp.min(jnp.where(valid, grad, big), axis=1)
        row_ok = jnp.any(valid, axis=1)
        return inner - jnp.sum(jnp.where(row_ok, row_min, 0.0))
    return inner - jnp.min(jnp.where(valid, grad, big))


def uniform_point(shape, mask, per_example: bool, dtype):
    """The set's uniform point (the paper's implicit start)."""
    n, k = shape
    valid = valid_entries(shape, mask).astype(dtype)
    if per_example:
        return valid / k
    return valid / jnp.maximum(jnp.sum(valid), 1.0)


def start_point(kind, logits, mask, per_example: bool):
    """The start point: ``uniform``, or ``predicted`` = softmax(logits) (per example; / its sum for
    ``joint``). No label is read."""
    if kind == "uniform":
        return uniform_point(logits.shape, mask, per_example, logits.dtype)
    p = jax.nn.softmax(logits, axis=-1) * valid_entries(logits.shape, mask).astype(logits.dtype)
    if per_example:
        return p
    return p / jnp.maximum(jnp.sum(p), 1e-30)
