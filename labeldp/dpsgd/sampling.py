"""Host-side (numpy) batch samplers of the DP-SGD engine.

:func:`num_steps` (steps per epoch = n / n1), :func:`poisson_batches` (Poisson subsampling at
rate q = n1 / n, the sampling the privacy analysis of 000 Section 3.4 assumes; padded to a
multiple of ``pad_to``, never truncated), :func:`shuffled_batches` (fixed-size batches of random
permutations) and :func:`sample_alt_batch` (AltConv's alternative batch I^P, 000 Table 1).
Re-exported by :mod:`labeldp.dpsgd`.
"""

from __future__ import annotations

import math
from typing import Iterator

import numpy as np

__all__ = ["num_steps", "poisson_batches", "shuffled_batches", "sample_alt_batch"]


# --------------------------------------------------------------------------------------------
# Batch samplers (host side, numpy)
# --------------------------------------------------------------------------------------------


def _generator(rng: np.random.Generator | int) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def num_steps(*, n: int, expected_batch_size: int, epochs: float) -> int:
    """Number of steps for ``epochs`` passes: ``floor(epochs * n / n1)`` (steps per epoch = n/n1).

    E.g. MNIST, n = 60000, n1 = 1024, 10 epochs: 585 steps.
    """
    return int(math.floor(epochs * n / expected_batch_size))


def poisson_batches(
    n: int,
    *,
    sampling_rate: float,
    rng: np.random.Generator | int,
    pad_to: int,
    num_batches: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Poisson-subsampled batches, padded to a multiple of ``pad_to``.

    Each of the n units is included independently with probability ``sampling_rate`` (q = n1/n),
    the sampling that the privacy analysis assumes (000 Section 3.4). The batch is padded with
    index 0 and mask False to length ``m * pad_to``, ``m = max(1, ceil(size / pad_to))``: a
    batch larger than ``pad_to`` is kept whole (processed in chunks by :class:`DPSGDStep`),
    never truncated or resampled.

    Args:
      n: dataset size (number of users for user-level DP).
      sampling_rate: q in (0, 1].
      rng: numpy Generator or seed.
      pad_to: padded length (e.g. ``DPSGDConfig.padded_batch_size``).
      num_batches: number of batches to yield (e.g. :func:`num_steps`).

    Yields:
      ``(indices, mask)``: int64 indices (padded with 0) and a bool mask, same length.
    """
    if not 0.0 < sampling_rate <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate}")
    gen = _generator(rng)
    pad_to = int(pad_to)
    for _ in range(int(num_batches)):
        idx = np.flatnonzero(gen.random(n) < sampling_rate)
        m = max(1, -(-idx.size // pad_to))
        out = np.zeros(m * pad_to, np.int64)
        out[: idx.size] = idx
        mask = np.zeros(m * pad_to, bool)
        mask[: idx.size] = True
        yield out, mask


def shuffled_batches(
    n: int,
    *,
    batch_size: int,
    rng: np.random.Generator | int,
    num_batches: int | None = None,
    drop_remainder: bool = True,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Fixed-size batches from random permutations (epoch after epoch).

    Args:
      n: dataset size.
      batch_size: n1.
      rng: numpy Generator or seed.
      num_batches: total batches to yield (crossing epochs); ``None`` = one epoch.
      drop_remainder: drop each epoch's last partial batch (default), or pad it (mask False).

    Yields:
      ``(indices, mask)`` of length ``batch_size``.
    """
    gen = _generator(rng)
    bs = int(batch_size)
    per_epoch = n // bs if drop_remainder else -(-n // bs)
    if per_epoch < 1:
        raise ValueError(f"batch_size {bs} > n {n} with drop_remainder=True")
    total = per_epoch if num_batches is None else int(num_batches)
    produced = 0
    while produced < total:
        perm = gen.permutation(n)
        for b in range(per_epoch):
            if produced >= total:
                return
            idx = perm[b * bs : (b + 1) * bs]
            mask = np.ones(bs, bool)
            if idx.size < bs:
                mask[idx.size :] = False
                idx = np.concatenate([idx, np.zeros(bs - idx.size, idx.dtype)])
            produced += 1
            yield idx.astype(np.int64), mask


def sample_alt_batch(n: int, *, size: int, rng: np.random.Generator | int) -> np.ndarray:
    """Indices of an alternative batch I^P for AltConv: ``size`` distinct units, uniformly,
    drawn independently of I^G (000 Table 1). Only their features may be used."""
    return _generator(rng).choice(n, size=int(size), replace=False).astype(np.int64)
