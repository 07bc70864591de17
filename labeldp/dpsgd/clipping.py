"""Per-unit clipped gradient sums ``sum_i clip_C(g_i)``: two formulations of the same function.

DP-SGD's only per-example quantity is ``sum_i g_i min(1, C / ||g_i||)`` over the units i of a
batch (an example, or the k examples of one user summed). Two ways to compute it:

* ``"vmap_grad"`` (the reference): ``jax.vmap(jax.value_and_grad(loss))`` materialises every
  unit's full gradient pytree, then clips and sums. Works for every model (dropout included).
* ``"bookkeeping"``: one forward pass with the model's :mod:`tape <labeldp.dpsgd.tape>` and one
  backward pass to the layers' outputs; each layer's per-unit gradient norm follows from its
  inputs and output gradients (``||a||^2 ||g||^2`` for a dense row, the ghost Gram products or the
  materialised ``a^T g`` for convolution rows, whichever is smaller), and the clipped sum is one
  reweighted matmul per layer (Bu et al., "Differentially private optimization on large model at
  small cost", ICML 2023, Algorithm 1). Convolutions run as im2col matmuls and the batch is
  processed in chunks of ``chunk_size`` units (``lax.scan``), which keeps the patches in cache.
  Needs a model with a ``tapped`` forward; dropout masks come from the same per-row keys as the
  reference's (:func:`row_dropout_keys`).

Both return the same sum and statistics up to float32 rounding (tests/dpsgd/test_clipping.py
checks it on every tapped model); the privacy analysis does not depend on which ran, since the
mechanism (clip to C, add N(0, sigma^2 C^2)) is the same function of the batch.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import jax
import jax.numpy as jnp

from labeldp.dpsgd.step_types import LossFn, PyTree, TrainLogitsFn, leading_shape
from labeldp.dpsgd.chunks import sum_over_chunks
from labeldp.dpsgd.tape import Tape, check_coverage, leaf_path, row_keys

__all__ = [
    "FORMULATIONS",
    "ClippingFormulation",
    "resolve_formulation",
    "default_chunk_size",
    "vmap_clipped_sum",
    "bookkeeping_clipped_sum",
    "TappedFn",
]

ClippingFormulation = Literal["auto", "vmap_grad", "bookkeeping"]
FORMULATIONS = ("vmap_grad", "bookkeeping")
TappedFn = Callable[[PyTree, jax.Array, Tape], jax.Array]

_tree_map = jax.tree_util.tree_map


def resolve_formulation(requested: str, *, tapped_available: bool, backend: str | None = None) -> str:
    """The formulation that runs.

    ``"auto"`` picks ``"bookkeeping"`` on the CPU backend when the model has a tapped forward
    (3.7x faster for the MNIST CNN there: ``benchmarks/results/dpsgd_step_cpu.md``), else ``"vmap_grad"``
    (not yet measured against book-keeping on a GPU, so the reference stays the default there).

    Raises:
      ValueError: an unknown name, or ``"bookkeeping"`` for a model without a tapped forward.
    """
    if requested == "auto":
        backend = backend or jax.default_backend()
        return "bookkeeping" if (tapped_available and backend == "cpu") else "vmap_grad"
    if requested not in FORMULATIONS:
        raise ValueError(f"clipping formulation must be 'auto' or one of {FORMULATIONS}, got {requested!r}")
    if requested == "bookkeeping" and not tapped_available:
        raise ValueError(
            "clipping formulation 'bookkeeping' needs a model with a `tapped` forward (labeldp.dpsgd.tape); "
            "this model has none (models with dropout have none): use 'vmap_grad' or 'auto'"
        )
    return requested


def default_chunk_size(backend: str | None = None) -> int | None:
    """Units per chunk of the book-keeping formulation: 64 on CPU (fastest of 16-256 measured for
    000's MNIST CNN), ``None`` (the whole batch at once) elsewhere."""
    return 64 if (backend or jax.default_backend()) == "cpu" else None


def _unit_view(x, y, mask, unit: str):
    """Flattens user units (U, k, ...) to examples; returns (x, y, example mask, U, k)."""
    if unit == "example":
        return x, y, mask, mask.shape[0], 1
    u, k = mask.shape[:2]
    flat = lambda a: a.reshape((u * k, *a.shape[2:]))  # noqa: E731
    return _tree_map(flat, x), flat(y), mask.reshape(-1), u, k


def _stats(losses_ex, ex_mask, unit_mask, norms, clip_norm, u, k):
    ex_unit = jnp.repeat(unit_mask, k)
    return {
        "loss_sum": jnp.sum(losses_ex * ex_mask * ex_unit),
        "num_examples": jnp.sum(ex_mask * ex_unit),
        "num_units": jnp.sum(unit_mask),
        "num_clipped": jnp.sum(unit_mask * (norms > clip_norm)),
        "norm_sum": jnp.sum(unit_mask * norms),
    }


def _clip_scale(norms, unit_mask, clip_norm):
    c = jnp.asarray(clip_norm, norms.dtype)
    return unit_mask * jnp.minimum(1.0, c / jnp.maximum(norms, 1e-30))


def vmap_clipped_sum(
    *, logits_fn: TrainLogitsFn, loss_fn: LossFn, unit: str, clip_norm: float, params: PyTree, x, y, mask, key
) -> tuple[PyTree, dict]:
    """The reference: per-unit gradients by ``vmap(value_and_grad)``, clipped and summed.

    Args:
      logits_fn: training-mode logits ``f(params, x, rng)``; loss_fn: per-example loss.
      unit: ``"example"`` (x (B, ...), mask (B,)) or ``"user"`` (x (U, k, ...), mask (U, k)).
      clip_norm: C. params: parameters. x, y, mask: the (padded) batch. key: dropout key (one
        per unit, split from it).

    Returns:
      ``(sum_i clip_C(g_i), stats)``; stats holds sums over real units (loss_sum, num_examples,
      num_units, num_clipped, norm_sum).
    """
    if unit == "example":
        x = _tree_map(lambda a: a[:, None], x)
        y = y[:, None]
        mask = mask[:, None]

    def unit_loss(p, xu, yu, mu, ku):
        logits = logits_fn(p, xu, ku)
        losses = jax.vmap(loss_fn)(logits, yu)
        return jnp.sum(losses * mu.astype(losses.dtype))

    keys = jax.random.split(key, leading_shape(x, 1)[0])
    losses, grads = jax.vmap(jax.value_and_grad(unit_loss), in_axes=(None, 0, 0, 0, 0))(params, x, y, mask, keys)
    unit_mask = (jnp.sum(mask, axis=1) > 0).astype(jnp.float32)
    sq = sum(jnp.sum(jnp.square(g.reshape(g.shape[0], -1)), axis=1) for g in jax.tree_util.tree_leaves(grads))
    norms = jnp.sqrt(sq)
    scale = _clip_scale(norms, unit_mask, clip_norm)
    total = _tree_map(lambda g: jnp.tensordot(scale.astype(g.dtype), g, axes=1), grads)
    stats = {
        "loss_sum": jnp.sum(losses * unit_mask),
        "num_examples": jnp.sum(mask * unit_mask[:, None]),
        "num_units": jnp.sum(unit_mask),
        "num_clipped": jnp.sum(unit_mask * (norms > clip_norm)),
        "norm_sum": jnp.sum(unit_mask * norms),
    }
    return total, stats


def _layer_norms_and_sums(meta, rows, out_grad, u: int):
    """Per-unit squared norms of one layer's gradient, and a function of the clip scale giving
    its clipped sum ``{leaf: array}``."""
    if meta.kind == "embed":
        idx = rows.reshape(u, -1)
        g = out_grad.reshape(u, idx.shape[1], -1)
        if idx.shape[1] == 1:
            sq = jnp.sum(jnp.square(g), axis=(1, 2))
        else:  # rows hit twice by one unit add up before the norm
            same = (idx[:, :, None] == idx[:, None, :]).astype(g.dtype)
            sq = jnp.sum(same * jnp.einsum("utd,usd->uts", g, g), axis=(1, 2))

        def sums(scale):
            upd = (g * scale[:, None, None]).reshape(-1, g.shape[-1])
            return {"embedding": jnp.zeros(meta.param_shape, g.dtype).at[idx.reshape(-1)].add(upd)}

        return sq, sums

    a = rows.reshape(u, -1, rows.shape[-1])
    g = out_grad.reshape(u, -1, out_grad.shape[-1])
    t, kdim, cdim = a.shape[1], a.shape[2], g.shape[2]
    per_unit = None
    if t == 1:
        sq = jnp.sum(jnp.square(a[:, 0]), axis=1) * jnp.sum(jnp.square(g[:, 0]), axis=1)
    elif t * t <= kdim * cdim:  # ghost norm: <a a^T, g g^T>
        sq = jnp.sum(jnp.einsum("utk,usk->uts", a, a) * jnp.einsum("utc,usc->uts", g, g), axis=(1, 2))
    else:  # book-keeping: the per-unit gradient a^T g is the smaller object
        per_unit = jnp.einsum("utk,utc->ukc", a, g)
        sq = jnp.sum(jnp.square(per_unit), axis=(1, 2))
    gb = jnp.sum(g, axis=1) if meta.has_bias else None
    if gb is not None:
        sq = sq + jnp.sum(jnp.square(gb), axis=1)

    def sums(scale):
        if per_unit is not None:
            kernel = jnp.einsum("u,ukc->kc", scale, per_unit)
        else:
            kernel = jnp.einsum("utk,utc->kc", a, g * scale[:, None, None])
        out = {"kernel": kernel.reshape(meta.param_shape)}
        if gb is not None:
            out["bias"] = scale @ gb
        return out

    return sq, sums


def _bookkeeping_chunk(tapped_fn: TappedFn, loss_fn: LossFn, unit: str, clip_norm: float, params, x, y, mask, keys):
    xf, yf, ex_mask, u, k = _unit_view(x, y, mask, unit)
    keys = keys.reshape((u * k, *keys.shape[2:]))  # one dropout key per row
    shape_tape = Tape(None)
    jax.eval_shape(lambda p, xx: tapped_fn(p, xx, shape_tape), params, xf)
    check_coverage(params, shape_tape.layers)
    probes = {path: jnp.zeros(s, jnp.float32) for path, s in shape_tape.output_shapes.items()}

    def summed_loss(pr):
        tape = Tape(pr, dropout_keys=keys)
        logits = tapped_fn(params, xf, tape)
        losses = jax.vmap(loss_fn)(logits, yf)
        return jnp.sum(losses * ex_mask), (losses, {p: r.inputs for p, r in tape.layers.items()})

    (_, (losses, inputs)), out_grads = jax.value_and_grad(summed_loss, has_aux=True)(probes)
    unit_mask = (jnp.sum(mask.reshape(u, k), axis=1) > 0).astype(jnp.float32)
    sq = jnp.zeros((u,), jnp.float32)
    summers = {}
    for path, meta in shape_tape.layers.items():
        layer_sq, summers[path] = _layer_norms_and_sums(meta, inputs[path], out_grads[path], u)
        sq = sq + layer_sq
    norms = jnp.sqrt(sq)
    scale = _clip_scale(norms, unit_mask, clip_norm)
    leaves = {}
    for path, summer in summers.items():
        for leaf, value in summer(scale).items():
            leaves[(*path, leaf)] = value

    def pick(keypath, _leaf):
        return leaves[leaf_path(keypath)]

    total = jax.tree_util.tree_map_with_path(pick, params)
    return total, _stats(losses, ex_mask, unit_mask, norms, clip_norm, u, k)


def row_dropout_keys(key: jax.Array, mask: jax.Array) -> jax.Array:
    """The dropout key of every row of a batch, ``(U, k)`` keys for U units of k rows (k = 1 per
    example): unit u's rows use ``split(split(key, U)[u], k)``, exactly the keys the reference
    gives a unit's ``logits_fn(params, x_u, key_u)`` (:meth:`labeldp.models.ModelSpec.train_logits`)."""
    u = mask.shape[0]
    k = 1 if mask.ndim == 1 else mask.shape[1]
    return jax.vmap(lambda ku: row_keys(ku, k))(jax.random.split(key, u))


def bookkeeping_clipped_sum(
    *,
    tapped_fn: TappedFn,
    loss_fn: LossFn,
    unit: str,
    clip_norm: float,
    chunk_size: int | None,
    params: PyTree,
    x,
    y,
    mask,
    key: jax.Array | None = None,
) -> tuple[PyTree, dict]:
    """The book-keeping formulation (module docstring): same result as :func:`vmap_clipped_sum`.

    Args:
      tapped_fn: the model's tapped forward ``(params, x, tape) -> logits`` (deterministic).
      loss_fn, unit, clip_norm, params, x, y, mask: as :func:`vmap_clipped_sum`.
      chunk_size: units per chunk (the batch is zero-padded, masked, to a multiple); ``None`` =
        one chunk.
      key: the dropout key of the batch (split per unit and row as the reference does,
        :func:`row_dropout_keys`); unused by models without dropout.

    Returns:
      ``(sum_i clip_C(g_i), stats)`` as :func:`vmap_clipped_sum`.
    """
    keys = row_dropout_keys(jax.random.key(0) if key is None else key, mask)

    def chunk_sum(xc, yc, mc, kc):
        return _bookkeeping_chunk(tapped_fn, loss_fn, unit, clip_norm, params, xc, yc, mc, kc)

    return sum_over_chunks(chunk_sum, (x, y, mask, keys), chunk_size=chunk_size)


def describe(formulation: str, chunk_size: int | None) -> dict[str, Any]:
    """What a record stores about the formulation that ran."""
    out: dict[str, Any] = {"clipping_formulation": formulation}
    if formulation == "bookkeeping":
        out["clipping_chunk_size"] = chunk_size
    return out
