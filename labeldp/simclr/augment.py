"""SimCLR's data augmentations in JAX (Chen et al. 2020, Appendix A; no torchvision).

One jitted function maps a batch of images and a key to an augmented batch, so the augmentation
runs where the model runs (the accelerator when there is one) and is a pure function of the key:

1. random resized crop: area fraction ``U(scale)``, log aspect ratio ``U(log ratio)``, a uniform
   position, resampled bilinearly (``jax.scipy.ndimage.map_coordinates``, order 1) to the input size;
2. horizontal flip with probability 1/2;
3. colour jitter with probability 0.8: brightness, contrast, saturation and hue factors drawn
   uniformly within ``0.4, 0.4, 0.4, 0.1`` of identity (SimCLR's CIFAR strength 0.5), applied in this
   fixed order (torchvision draws a random order). On 1-channel images only brightness and
   contrast apply (saturation and hue are undefined);
4. random greyscale with probability 0.2 (a no-op on 1-channel images).

Inputs are NHWC, uint8 or float in [0, 1]; the output is float32 in [0, 1].
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

__all__ = ["AugmentConfig", "augment_batch", "random_resized_crop"]


@dataclasses.dataclass(frozen=True)
class AugmentConfig:
    """Strengths of the augmentations (SimCLR's CIFAR-10 defaults)."""

    crop_scale: tuple[float, float] = (0.08, 1.0)
    crop_ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0)
    flip_prob: float = 0.5
    jitter_prob: float = 0.8
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4
    hue: float = 0.1
    grey_prob: float = 0.2


def _to_float(x: jax.Array) -> jax.Array:
    return x.astype(jnp.float32) / 255.0 if x.dtype == jnp.uint8 else x.astype(jnp.float32)


def _crop_one(img: jax.Array, box: jax.Array) -> jax.Array:
    """Resamples the crop ``box = (y0, x0, h, w)`` (pixels) of one HWC image to H x W."""
    h_out, w_out, c = img.shape
    y0, x0, h, w = box[0], box[1], box[2], box[3]
    ys = y0 + (jnp.arange(h_out) + 0.5) * h / h_out - 0.5
    xs = x0 + (jnp.arange(w_out) + 0.5) * w / w_out - 0.5
    yy, xx = jnp.meshgrid(ys, xs, indexing="ij")
    chan = lambda ch: jax.scipy.ndimage.map_coordinates(ch, [yy, xx], order=1, mode="nearest")  # noqa: E731
    return jnp.stack([chan(img[..., i]) for i in range(c)], axis=-1)


def random_resized_crop(key: jax.Array, x: jax.Array, *, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) -> jax.Array:
    """Random resized crops of a float NHWC batch, each back to the input size.

    Args:
      key: a ``jax.random`` key.
      x: (n, H, W, C) float images.
      scale: range of the crop's area as a fraction of the image.
      ratio: range of the crop's width / height.

    Returns:
      (n, H, W, C) crops.
    """
    n, hgt, wid, _ = x.shape
    k1, k2, k3, k4 = jax.random.split(key, 4)
    area = jax.random.uniform(k1, (n,), minval=scale[0], maxval=scale[1]) * hgt * wid
    log_r = jax.random.uniform(k2, (n,), minval=math.log(ratio[0]), maxval=math.log(ratio[1]))
    r = jnp.exp(log_r)
    w = jnp.clip(jnp.sqrt(area * r), 1.0, wid)
    h = jnp.clip(jnp.sqrt(area / r), 1.0, hgt)
    y0 = jax.random.uniform(k3, (n,)) * (hgt - h)
    x0 = jax.random.uniform(k4, (n,)) * (wid - w)
    return jax.vmap(_crop_one)(x, jnp.stack([y0, x0, h, w], axis=1))


def _grey(x: jax.Array) -> jax.Array:
    return jnp.sum(x * jnp.array([0.299, 0.587, 0.114], x.dtype), axis=-1, keepdims=True)


def _hue_rotate(x: jax.Array, angle: jax.Array) -> jax.Array:
    """Rotates the chroma of RGB images by ``angle`` (radians, per image) in YIQ space."""
    to_yiq = jnp.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]], x.dtype)
    yiq = x @ to_yiq.T
    cos, sin = jnp.cos(angle)[:, None, None], jnp.sin(angle)[:, None, None]
    i, q = yiq[..., 1], yiq[..., 2]
    yiq = jnp.stack([yiq[..., 0], cos * i - sin * q, sin * i + cos * q], axis=-1)
    return yiq @ jnp.linalg.inv(to_yiq).T


def _uniform_factor(key, n, strength):
    return jax.random.uniform(key, (n,), minval=1.0 - strength, maxval=1.0 + strength)


def _colour_jitter(key: jax.Array, x: jax.Array, cfg: AugmentConfig) -> jax.Array:
    n, c = x.shape[0], x.shape[-1]
    kb, kc, ks, kh = jax.random.split(key, 4)
    b = _uniform_factor(kb, n, cfg.brightness)[:, None, None, None]
    x = jnp.clip(x * b, 0.0, 1.0)
    mean = jnp.mean(_grey(x) if c == 3 else x, axis=(1, 2, 3), keepdims=True)
    ct = _uniform_factor(kc, n, cfg.contrast)[:, None, None, None]
    x = jnp.clip((x - mean) * ct + mean, 0.0, 1.0)
    if c == 3:
        s = _uniform_factor(ks, n, cfg.saturation)[:, None, None, None]
        g = _grey(x)
        x = jnp.clip(g + (x - g) * s, 0.0, 1.0)
        angle = jax.random.uniform(kh, (n,), minval=-cfg.hue, maxval=cfg.hue) * 2.0 * jnp.pi
        x = jnp.clip(_hue_rotate(x, angle), 0.0, 1.0)
    return x


@functools.partial(jax.jit, static_argnames=("cfg",))
def augment_batch(key: jax.Array, images: jax.Array, cfg: AugmentConfig = AugmentConfig()) -> jax.Array:
    """One SimCLR view of every image of a batch (see the module docstring).

    Args:
      key: a ``jax.random`` key; the output is a deterministic function of it and the images.
      images: (n, H, W, C) uint8 or float in [0, 1].
      cfg: strengths.

    Returns:
      (n, H, W, C) float32 in [0, 1].
    """
    x = _to_float(images)
    n, c = x.shape[0], x.shape[-1]
    kc, kf, kj, kjp, kg = jax.random.split(key, 5)
    x = random_resized_crop(kc, x, scale=cfg.crop_scale, ratio=cfg.crop_ratio)
    flip = jax.random.bernoulli(kf, cfg.flip_prob, (n,))[:, None, None, None]
    x = jnp.where(flip, x[:, :, ::-1, :], x)
    jit_on = jax.random.bernoulli(kjp, cfg.jitter_prob, (n,))[:, None, None, None]
    x = jnp.where(jit_on, _colour_jitter(kj, x, cfg), x)
    if c == 3:
        grey_on = jax.random.bernoulli(kg, cfg.grey_prob, (n,))[:, None, None, None]
        x = jnp.where(grey_on, jnp.broadcast_to(_grey(x), x.shape), x)
    return jnp.clip(x, 0.0, 1.0)
