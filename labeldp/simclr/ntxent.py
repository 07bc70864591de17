"""The NT-Xent loss of SimCLR (Chen et al. 2020, Section 2.1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["nt_xent"]


def nt_xent(z1: jax.Array, z2: jax.Array, *, temperature: float) -> jax.Array:
    """Normalized temperature-scaled cross entropy over 2N projections.

    Row i of ``z1`` and row i of ``z2`` are the two views of one image (a positive pair); every other
    of the 2N - 2 projections is a negative. With cosine similarities ``s`` and ``tau``:
    ``l(i, j) = -log(exp(s_ij / tau) / sum_{k != i} exp(s_ik / tau))``, averaged over all 2N anchors.

    Args:
      z1: (N, D) projections of the first views.
      z2: (N, D) projections of the second views.
      temperature: tau > 0.

    Returns:
      The scalar mean loss.
    """
    z = jnp.concatenate([z1, z2], axis=0).astype(jnp.float32)
    z = z / jnp.maximum(jnp.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    n = z1.shape[0]
    logits = (z @ z.T) / temperature
    logits = jnp.where(jnp.eye(2 * n, dtype=bool), -jnp.inf, logits)  # no self-pairs
    positives = jnp.concatenate([jnp.arange(n, 2 * n), jnp.arange(0, n)])
    log_prob = jax.nn.log_softmax(logits, axis=1)
    return -jnp.mean(log_prob[jnp.arange(2 * n), positives])
