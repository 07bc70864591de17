"""001's data augmentation (labeldp.augment): deterministic per key, shape and dtype kept, and it
crops (pad and crop), flips left-right and cuts out a square."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from labeldp.augment import augment_batch, crop_flip_cutout


def _images(n=16, h=12, w=10, c=2, seed=0):
    # strictly positive, all-distinct pixels, so a zero is a cut-out pixel and a match is a true shift
    return jax.random.uniform(jax.random.key(seed), (n, h, w, c), minval=0.1, maxval=1.0)


def test_deterministic_per_key_and_keeps_shape_and_dtype():
    x = _images()
    a = crop_flip_cutout(x, jax.random.key(3))
    assert a.shape == x.shape and a.dtype == x.dtype
    assert np.array_equal(a, crop_flip_cutout(x, jax.random.key(3)))
    assert not np.array_equal(a, crop_flip_cutout(x, jax.random.key(4)))
    assert np.array_equal(augment_batch(x, jax.random.key(3), kind="none", pad=4, cutout=8), x)
    with pytest.raises(ValueError, match="unknown augmentation"):
        augment_batch(x, jax.random.key(3), kind="rotate", pad=4, cutout=8)


def test_flip_only_mirrors_some_rows_and_leaves_the_others():
    x = np.asarray(_images(n=32))
    out = np.asarray(crop_flip_cutout(jnp.asarray(x), jax.random.key(1), pad=0, cutout=0))
    same = [np.array_equal(o, i) for o, i in zip(out, x)]
    mirrored = [np.array_equal(o, i[:, ::-1]) for o, i in zip(out, x)]
    assert all(s or m for s, m in zip(same, mirrored)) and any(same) and any(mirrored)


def _matches_a_shift(out, img, pad):
    h, w, _ = img.shape
    padded = np.pad(img, ((pad, pad), (pad, pad), (0, 0)))
    for flip in (False, True):
        src = padded[:, ::-1] if flip else padded
        for dy in range(2 * pad + 1):
            for dx in range(2 * pad + 1):
                if np.array_equal(out, src[dy : dy + h, dx : dx + w]):
                    return (dy, dx)
    return None


def test_crop_is_a_shifted_window_of_the_zero_padded_image_at_varying_offsets():
    pad = 2
    x = np.asarray(_images(n=24))
    out = np.asarray(crop_flip_cutout(jnp.asarray(x), jax.random.key(2), pad=pad, cutout=0))
    offsets = [_matches_a_shift(o, i, pad) for o, i in zip(out, x)]
    assert all(off is not None for off in offsets)
    assert len(set(offsets)) > 3 and any(off != (pad, pad) for off in offsets)


def test_cutout_zeroes_one_clipped_square_and_nothing_else():
    size = 4
    x = np.asarray(_images(n=24))
    out = np.asarray(crop_flip_cutout(jnp.asarray(x), jax.random.key(5), pad=0, cutout=size))
    for o, i in zip(out, x):
        zero = np.all(o == 0, axis=-1)
        assert 0 < zero.sum() <= size * size
        rows, cols = np.nonzero(zero)
        assert zero[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1].all()  # a rectangle
        assert np.ptp(rows) < size and np.ptp(cols) < size
        kept = o[~zero]
        src = i if np.array_equal(kept, i[~zero]) else i[:, ::-1]
        assert np.array_equal(kept, src[~zero])  # the rest is the (maybe mirrored) image
    assert np.sum(np.all(out == 0, axis=-1)) < size * size * len(x)  # some squares clipped at the border
