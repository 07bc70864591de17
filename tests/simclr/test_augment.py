"""SimCLR augmentations in JAX (labeldp/simclr/augment.py)."""

import dataclasses

import jax
import numpy as np

from labeldp.simclr.augment import AugmentConfig, augment_batch, random_resized_crop


def _imgs(c, n=6, size=12, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, c), dtype=np.uint8)


def test_shapes_range_and_determinism_for_gray_and_colour():
    for c in (1, 3):
        x = _imgs(c)
        a = augment_batch(jax.random.key(0), x)
        assert a.shape == x.shape and a.dtype == np.float32
        assert float(a.min()) >= 0.0 and float(a.max()) <= 1.0
        np.testing.assert_array_equal(np.asarray(a), np.asarray(augment_batch(jax.random.key(0), x)))
        assert not np.array_equal(np.asarray(a), np.asarray(augment_batch(jax.random.key(1), x)))


def test_full_crop_without_jitter_is_identity_or_exact_mirror():
    x = _imgs(3, n=8)
    cfg = AugmentConfig(crop_scale=(1.0, 1.0), crop_ratio=(1.0, 1.0), jitter_prob=0.0, grey_prob=0.0, flip_prob=0.5)
    out = np.asarray(augment_batch(jax.random.key(3), x, cfg))
    xf = x.astype(np.float32) / 255.0
    flipped = [np.allclose(o, xi[:, ::-1], atol=1e-5) for o, xi in zip(out, xf)]
    same = [np.allclose(o, xi, atol=1e-5) for o, xi in zip(out, xf)]
    assert all(f or s for f, s in zip(flipped, same)) and any(flipped) and any(same)
    always = dataclasses.replace(cfg, flip_prob=1.0)
    np.testing.assert_allclose(np.asarray(augment_batch(jax.random.key(3), x, always)), xf[:, :, ::-1], atol=1e-5)


def test_a_small_crop_zooms_in():
    """A crop of a quarter of the area of a left-dark / right-bright image shows a narrower
    transition than the image itself: the crop is resampled, not padded."""
    x = np.zeros((4, 16, 16, 1), np.float32)
    x[:, :, 8:] = 1.0
    out = np.asarray(random_resized_crop(jax.random.key(0), x, scale=(0.25, 0.25), ratio=(1.0, 1.0)))
    assert out.shape == x.shape
    assert all(np.unique(np.round(o, 3)).size > 2 or o.min() == o.max() for o in out)  # interpolated values


def test_greyscale_makes_channels_equal():
    x = _imgs(3, n=4)
    cfg = AugmentConfig(grey_prob=1.0, jitter_prob=0.0)
    out = np.asarray(augment_batch(jax.random.key(0), x, cfg))
    np.testing.assert_allclose(out[..., 0], out[..., 1], atol=1e-6)
    np.testing.assert_allclose(out[..., 1], out[..., 2], atol=1e-6)
