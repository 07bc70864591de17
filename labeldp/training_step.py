"""The compiled step of non-private training (:func:`labeldp.training.train_weighted`): SGD on a
weighted cross-entropy, with optional mixup (001 Appendix B), 001's data augmentation
(:mod:`labeldp.augment`) and BatchNorm state (001's networks, :mod:`labeldp.models_001`).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import optax

from labeldp.augment import augment_batch
from labeldp.dpsgd.chunks import sum_over_chunks
from labeldp.dpsgd.clipping import default_chunk_size
from labeldp.dpsgd.sgd_step import resolve_forward
from labeldp.dpsgd.tape import Tape, row_keys
from labeldp.models import ModelSpec

__all__ = ["TargetTransform", "weighted_ce", "mixup_batch", "make_weighted_sgd_step"]


def weighted_ce(logits: jax.Array, weights: jax.Array) -> jax.Array:
    """Per-example ``sum_k W[i, k] * (-log softmax(logits_i)_k)``."""
    return -jnp.sum(weights * jax.nn.log_softmax(logits, axis=-1), axis=-1)


TargetTransform = Callable[[jax.Array, jax.Array], jax.Array]
"""``(w_batch, logits) -> targets``: per-step targets computed from the stored rows and the
logits of the same forward pass (traced under ``jax.jit``; e.g. ALIBI's posterior)."""


def mixup_batch(
    x: jax.Array, w: jax.Array, rng: jax.Array, *, alpha: float, mask: jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    """Mixup (Zhang et al. 2018), as 001 Appendix B uses it for learning with noisy labels.

    Each real example ``i`` of the batch is paired with example ``pi(i)`` of a uniformly random
    permutation ``pi`` of the real rows (padding rows, ``mask == 0``, are paired only among
    themselves, so they never leak into a real row), and both inputs and targets are mixed with one
    ``lam ~ Beta(alpha, alpha)``: ``x~_i = lam x_i + (1 - lam) x_pi(i)``, ``w~_i = lam w_i +
    (1 - lam) w_pi(i)``. The weighted cross-entropy is linear in ``w``, so training on ``w~``
    is the usual mixup loss ``lam l(x~, w) + (1 - lam) l(x~, w_pi)``. Labels enter only as the
    (already randomised) targets: mixup is post-processing for label DP.

    Args:
      x: inputs (B, ...).
      w: target weights (B, K).
      rng: a JAX key.
      alpha: the Beta parameter (> 0).
      mask: optional (B,) 1 for real rows, 0 for padding (default: all real).

    Returns:
      ``(x~, w~)``.
    """
    k_lam, k_perm = jax.random.split(rng)
    lam = jax.random.beta(k_lam, alpha, alpha)
    b = x.shape[0]
    if mask is None:
        perm = jax.random.permutation(k_perm, b)
    else:
        pad = (jnp.asarray(mask) <= 0).astype(jnp.float32)
        # slots: real rows in index order, then padding rows; partners: real rows in a uniformly
        # random order, then padding rows in a random order. Slot j's row is paired with partner j.
        slots = jnp.argsort(pad, stable=True)
        partners = jnp.argsort(jax.random.uniform(k_perm, (b,)) + 2.0 * pad)
        perm = jnp.zeros((b,), jnp.int32).at[slots].set(partners.astype(jnp.int32))
    return lam * x + (1.0 - lam) * x[perm], lam * w + (1.0 - lam) * w[perm]


def make_weighted_sgd_step(
    spec: ModelSpec,
    optimizer: optax.GradientTransformation,
    target_transform: TargetTransform | None = None,
    *,
    mixup_alpha: float = 0.0,
    augment: str = "none",
    augment_pad: int = 4,
    augment_cutout: int = 8,
) -> Callable:
    """A jitted step ``(params, opt_state, x, w, mask, rng) -> (params, opt_state, loss)``.

    ``params`` is the model's state (:meth:`labeldp.models.ModelSpec.init`). For a BatchNorm model
    it is ``{"params", "batch_stats"}``: the forward pass runs in training mode (batch statistics),
    the optimiser updates ``params`` only (``opt_state`` is over them) and ``batch_stats`` takes the
    running statistics the pass updated (padding rows of a last partial batch enter the batch
    statistics, as repeats of real rows; they stay out of the loss). With ``augment`` (one of
    :data:`labeldp.augment.AUGMENTATIONS`) each batch is augmented first, from a key split off
    ``rng`` (so per run deterministic), then mixed up if ``mixup_alpha > 0``.

    With ``target_transform`` the loss is the weighted cross-entropy against
    ``target_transform(w, logits)`` instead of ``w``. With ``mixup_alpha > 0`` the batch is
    mixed first (:func:`mixup_batch`), real rows only with real rows; the mask still selects
    the real rows for the loss. On CPU, for a model with a tapped forward, the gradient runs
    through it in chunks (``step.forward == "tapped"``; same numbers up to float32 rounding).
    """
    if mixup_alpha > 0 and target_transform is not None:
        raise ValueError("mixup and a target_transform (ALIBI's per-step posterior) cannot be combined")

    forward = resolve_forward("auto", tapped_available=spec.tapped is not None)

    def augmented(x, rng):
        if augment == "none":
            return x, rng
        rng, aug_rng = jax.random.split(rng)
        return augment_batch(x, aug_rng, kind=augment, pad=augment_pad, cutout=augment_cutout), rng

    def bn_loss_fn(params, batch_stats, x, w, mask, rng):
        x, rng = augmented(x, rng)
        if mixup_alpha > 0:
            rng, mix_rng = jax.random.split(rng)
            x, w = mixup_batch(x, w, mix_rng, alpha=mixup_alpha, mask=mask)
        logits, new_stats = spec.batch_norm_train_logits(params, batch_stats, x)
        if target_transform is not None:
            w = target_transform(w, logits)
        denom = jnp.maximum(jnp.sum(mask), 1.0)
        return jnp.sum(weighted_ce(logits, w) * mask) / denom, new_stats

    if spec.has_batch_norm:

        @jax.jit
        def bn_step(state, opt_state, x, w, mask, rng):
            grad_fn = jax.value_and_grad(bn_loss_fn, has_aux=True)
            (loss, new_stats), grads = grad_fn(state["params"], state["batch_stats"], x, w, mask, rng)
            updates, opt_state = optimizer.update(grads, opt_state, state["params"])
            new_state = {"params": optax.apply_updates(state["params"], updates), "batch_stats": new_stats}
            return new_state, opt_state, loss

        bn_step.forward = "model"
        return bn_step

    def loss_fn(params, x, w, mask, rng):
        x, rng = augmented(x, rng)
        if mixup_alpha > 0:
            rng, mix_rng = jax.random.split(rng)
            x, w = mixup_batch(x, w, mix_rng, alpha=mixup_alpha, mask=mask)
        logits = spec.train_logits(params, x, rng)
        if target_transform is not None:
            w = target_transform(w, logits)
        per_example = weighted_ce(logits, w)
        denom = jnp.maximum(jnp.sum(mask), 1.0)
        return jnp.sum(per_example * mask) / denom

    def summed_loss(params, x, w, mask, keys):  # the tapped forward, one chunk (row keys: dropout)
        logits = spec.tapped(params, x, Tape(None, dropout_keys=keys))
        if target_transform is not None:
            w = target_transform(w, logits)
        return jnp.sum(weighted_ce(logits, w) * mask)

    def tapped_value_and_grad(params, x, w, mask, rng):
        """The mean loss and its gradient, summed chunk by chunk through the tapped forward
        (im2col convolutions; :func:`labeldp.dpsgd.sgd_step.resolve_forward`). Augmentation and
        mixup transform the whole batch first, as :func:`loss_fn` does."""
        x, rng = augmented(x, rng)
        if mixup_alpha > 0:
            rng, mix_rng = jax.random.split(rng)
            x, w = mixup_batch(x, w, mix_rng, alpha=mixup_alpha, mask=mask)
        keys = row_keys(rng, mask.shape[0])  # as spec.train_logits(params, x, rng) on the whole batch
        denom = jnp.maximum(jnp.sum(mask), 1.0)

        def chunk_sums(xc, wc, mc, kc):
            return jax.value_and_grad(summed_loss)(params, xc, wc, mc, kc)

        loss, grads = sum_over_chunks(chunk_sums, (x, w, mask, keys), chunk_size=default_chunk_size())
        return loss / denom, jax.tree_util.tree_map(lambda g: g / denom, grads)

    value_and_grad = tapped_value_and_grad if forward == "tapped" else jax.value_and_grad(loss_fn)

    @jax.jit
    def step(params, opt_state, x, w, mask, rng):
        loss, grads = value_and_grad(params, x, w, mask, rng)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step.forward = forward
    return step
