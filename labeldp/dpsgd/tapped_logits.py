"""A logits function with the per-class gradient rows LabelDP-Pro's projection needs, fast.

LabelDP-Pro's projection (000 Algorithm 1, Appendix C) works with the vertices
``grad_theta l(theta, (x_i, kappa))`` for every example i of the alternative batch and every
class kappa: the jacobian and Gram solvers materialise them as rows of ``G^T``, and every solver
clips or scales by their norms. The denoisers compute those rows with ``vmap(jacrev)``, which
on CPU runs the slow per-example convolution gradients the book-keeping DP-SGD step avoids
(:mod:`labeldp.dpsgd.clipping`). :class:`TappedLogits` is the model's deterministic logits
function that also carries ``jacobian_rows(params, x, mask)``, the same rows from one forward
pass through the model's :class:`~labeldp.dpsgd.tape.Tape` and one vector-Jacobian product per
class at the logits (each class's output gradients, then ``a^T g`` per layer). The denoisers use
a logits function's ``jacobian_rows`` when it has one
(:func:`labeldp.denoisers.linear_maps.jacobian_matrix`).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from labeldp.dpsgd.tape import Tape, check_coverage, leaf_path

__all__ = ["TappedLogits", "tapped_jacobian_rows"]

PyTree = Any


def tapped_jacobian_rows(
    tapped_fn: Callable[[PyTree, jax.Array, Tape], jax.Array],
    params: PyTree,
    x: jax.Array,
    mask: jax.Array | None = None,
) -> jax.Array:
    """Rows ``i*K + kappa`` = ``grad_theta -log softmax(f(theta, x_i))_kappa`` raveled as
    ``jax.flatten_util.ravel_pytree(params)``; masked rows zero. Equal to
    :func:`labeldp.denoisers.jacobian_matrix` up to float32 rounding.

    Args:
      tapped_fn: the model's tapped forward (dense and im2col layers only; no embeddings).
      params: parameters. x: inputs (n, ...). mask: optional (n,) 0/1.

    Returns:
      ``(n*K, d)``.

    Raises:
      ValueError: the forward has an embedding layer (its rows would be vocabulary-sized), or
        does not route every parameter through the tape.
    """
    shape_tape = Tape(None)
    out_shape = jax.eval_shape(lambda p, xx: tapped_fn(p, xx, shape_tape), params, x)
    check_coverage(params, shape_tape.layers)
    if any(r.kind != "linear" for r in shape_tape.layers.values()):
        raise ValueError("tapped_jacobian_rows supports dense and convolution layers only")
    n, k = out_shape.shape
    probes = {p: jnp.zeros(s, jnp.float32) for p, s in shape_tape.output_shapes.items()}

    def forward(pr):
        tape = Tape(pr)
        logits = tapped_fn(params, x, tape)
        return logits, {p: r.inputs for p, r in tape.layers.items()}

    logits, vjp_fn, inputs = jax.vjp(forward, probes, has_aux=True)
    probs = jax.nn.softmax(logits, axis=-1)
    # d(-log softmax(z)_kappa)/dz = softmax(z) - e_kappa, per row, for each class kappa
    cotangents = probs[None, :, :] - jnp.eye(k, dtype=probs.dtype)[:, None, :]  # (K, n, K)
    out_grads = jax.vmap(lambda ct: vjp_fn(ct)[0])(cotangents)  # {path: (K, n, T, C)}
    leaves = {}
    for path, meta in shape_tape.layers.items():
        a, g = inputs[path], out_grads[path]  # (n, T, Kin), (K, n, T, C)
        c = g.shape[-1]
        g_rows = jnp.transpose(g, (1, 2, 0, 3)).reshape(n, g.shape[2], k * c)  # (n, T, K*C): one batched matmul
        kernel = jnp.einsum("ntk,ntm->nkm", a, g_rows, precision=jax.lax.Precision.HIGHEST)
        kernel = jnp.transpose(kernel.reshape(n, a.shape[-1], k, c), (0, 2, 1, 3))
        leaves[(*path, "kernel")] = kernel.reshape(n, k, -1)
        if meta.has_bias:
            leaves[(*path, "bias")] = jnp.transpose(jnp.sum(g, axis=2), (1, 0, 2))
    order = [leaf_path(kp) for kp, _ in jax.tree_util.tree_leaves_with_path(params)]  # ravel_pytree's order
    rows = jnp.concatenate([leaves[p] for p in order], axis=-1)
    if mask is not None:
        rows = rows * jnp.asarray(mask, rows.dtype)[:, None, None]
    return rows.reshape(n * k, -1)


class TappedLogits:
    """A deterministic logits function ``f(params, x) -> (n, K)`` (the model's own) that carries
    :meth:`jacobian_rows` (:func:`tapped_jacobian_rows`). Hashable by identity: build one per
    step, so the denoisers' compiled functions are reused across steps.

    Args:
      logits_fn: the model's deterministic logits ``f(params, x)``.
      tapped_fn: its tapped forward ``(params, x, tape) -> logits``.
    """

    def __init__(
        self,
        logits_fn: Callable[[PyTree, jax.Array], jax.Array],
        tapped_fn: Callable[[PyTree, jax.Array, Tape], jax.Array],
    ):
        self._logits_fn = logits_fn
        self._tapped_fn = tapped_fn

    def __call__(self, params: PyTree, x: jax.Array) -> jax.Array:
        return self._logits_fn(params, x)

    def jacobian_rows(self, params: PyTree, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        """The ``(n*K, d)`` per-class gradient rows (:func:`tapped_jacobian_rows`)."""
        return tapped_jacobian_rows(self._tapped_fn, params, x, mask)
