"""001's training-time data augmentation: random crop, random left-right flip and random cutout.

001 Appendix B: "We apply standard data augmentations, including random crop, random left-right
flip, and random cutout [DeVries and Taylor 2017], to all the datasets during training." The paper
gives no sizes; the standard ones are fixed here and recorded with every run
(:class:`labeldp.training.TrainConfig`):

* random crop: pad each image by ``pad`` pixels on every side (zeros) and crop back to (H, W) at a
  uniformly random offset in ``[0, 2 pad]^2`` (default 4, the usual CIFAR setting);
* random left-right flip with probability 1/2;
* cutout: zero a ``cutout x cutout`` square whose centre is uniform over the image, clipped at the
  border (DeVries and Taylor's variant; default 8, a quarter of CIFAR's 32 pixels; 0 = off).

Every draw is per example and comes from the key passed in, so a batch's augmentation is a pure
function of (batch, key): :func:`labeldp.training.train_weighted` derives that key from the run's
seed. Labels are untouched: augmentation is post-processing of public inputs for label DP.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["AUGMENTATIONS", "DEFAULT_CUTOUT", "DEFAULT_PAD", "augment_batch", "crop_flip_cutout"]

#: The augmentation options of a training run (``none``: off).
AUGMENTATIONS = ("none", "crop_flip_cutout")
DEFAULT_PAD = 4
DEFAULT_CUTOUT = 8


def crop_flip_cutout(
    x: jax.Array, rng: jax.Array, *, pad: int = DEFAULT_PAD, cutout: int = DEFAULT_CUTOUT
) -> jax.Array:
    """Random crop, flip and cutout of a batch (module docstring).

    Args:
      x: NHWC images (float).
      rng: a JAX key; row ``b`` draws from ``split(rng, n)[b]``.
      pad: crop padding in pixels (0 = no crop).
      cutout: side of the cutout square in pixels (0 = no cutout).

    Returns:
      Augmented images, same shape and dtype as ``x``.
    """
    if pad < 0 or cutout < 0:
        raise ValueError(f"pad and cutout must be >= 0, got {pad!r}, {cutout!r}")
    n, h, w, c = x.shape
    keys = jax.random.split(rng, n)

    def one(img, key):
        k_crop, k_flip, k_cut = jax.random.split(key, 3)
        if pad > 0:
            padded = jnp.pad(img, ((pad, pad), (pad, pad), (0, 0)))
            off = jax.random.randint(k_crop, (2,), 0, 2 * pad + 1)
            img = jax.lax.dynamic_slice(padded, (off[0], off[1], 0), (h, w, c))
        img = jnp.where(jax.random.bernoulli(k_flip), img[:, ::-1, :], img)
        if cutout > 0:
            cy = jax.random.randint(k_cut, (), 0, h)
            cx = jax.random.randint(jax.random.fold_in(k_cut, 1), (), 0, w)
            rows, cols = jnp.arange(h)[:, None], jnp.arange(w)[None, :]
            lo = cutout // 2
            inside = (rows >= cy - lo) & (rows < cy - lo + cutout) & (cols >= cx - lo) & (cols < cx - lo + cutout)
            img = jnp.where(inside[:, :, None], jnp.zeros((), img.dtype), img)
        return img

    return jax.vmap(one)(x, keys).astype(x.dtype)


def augment_batch(x: jax.Array, rng: jax.Array, *, kind: str, pad: int, cutout: int) -> jax.Array:
    """``x`` augmented as ``kind`` says (one of :data:`AUGMENTATIONS`; ``none`` returns ``x``)."""
    if kind == "none":
        return x
    if kind == "crop_flip_cutout":
        return crop_flip_cutout(x, rng, pad=pad, cutout=cutout)
    raise ValueError(f"unknown augmentation {kind!r}; known: {AUGMENTATIONS}")
