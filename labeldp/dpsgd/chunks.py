"""Sums over a batch in chunks: the one copy of the pad-chunk-scan the fast steps share.

On the CPU the tapped forward is fastest in chunks of about 64 rows (the im2col patches stay in
cache; ``benchmarks/results/dpsgd_step_cpu.md``). :func:`sum_over_chunks` pads a batch (a pytree of
arrays with a common leading axis, PRNG key arrays included) to a multiple of the chunk size, runs
``fn`` on each chunk under ``lax.scan`` and adds up its outputs. Padded rows must contribute nothing:
callers pass a 0/1 mask, which is padded with zeros; a key array is padded with copies of its first
key (key arrays have no zeros), which padded rows never use.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

__all__ = ["sum_over_chunks"]

PyTree = Any


def _pad_rows(a: jax.Array, pad: int) -> jax.Array:
    if pad == 0:
        return a
    if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
        return jnp.concatenate([a, jnp.take(a, jnp.zeros((pad,), jnp.int32), axis=0)])
    return jnp.concatenate([a, jnp.zeros((pad, *a.shape[1:]), a.dtype)])


def sum_over_chunks(fn: Callable[..., PyTree], batch: tuple, *, chunk_size: int | None) -> PyTree:
    """``sum_c fn(*chunk_c)`` over chunks of ``chunk_size`` rows of ``batch``.

    Args:
      fn: maps one chunk (the elements of ``batch``, each cut to ``chunk_size`` rows) to a pytree
        of arrays of fixed shapes (sums: clipped gradients, losses, counts).
      batch: a tuple of pytrees whose leaves share the leading (row) axis.
      chunk_size: rows per chunk; ``None`` or at least the batch: one call on the whole batch.

    Returns:
      The sum of ``fn``'s outputs over the chunks.
    """
    rows = jax.tree_util.tree_leaves(batch)[0].shape[0]
    if chunk_size is None or chunk_size >= rows:
        return fn(*batch)
    c = int(chunk_size)
    n = -(-rows // c)
    chunks = jax.tree_util.tree_map(
        lambda a: _pad_rows(jnp.asarray(a), n * c - rows).reshape((n, c, *a.shape[1:])), batch
    )
    out_shape = jax.eval_shape(fn, *jax.tree_util.tree_map(lambda a: a[0], chunks))
    init = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)

    def body(carry, chunk):
        return jax.tree_util.tree_map(jnp.add, carry, fn(*chunk)), None

    total, _ = jax.lax.scan(body, init, chunks)
    return total
