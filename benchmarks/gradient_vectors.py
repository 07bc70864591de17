"""Flattened gradients and their geometry, shared by the gradient benchmarks
(``bench_converged_projection.py``, ``ablation_projection.py``, ``rr_debiased_gradient_noise.py``).

Measurement helpers only: nothing here is part of a private run.
"""

from __future__ import annotations

import jax.flatten_util
import numpy as np


def flat(tree) -> np.ndarray:
    """A parameter (or gradient) pytree as one float64 vector, leaves in ``ravel_pytree`` order.

    Args:
      tree: a pytree of arrays.

    Returns:
      The concatenated leaves, float64.
    """
    return np.asarray(jax.flatten_util.ravel_pytree(tree)[0], np.float64)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The cosine of two flattened vectors.

    Args:
      a, b: vectors of one length.

    Returns:
      ``<a, b> / (|a| |b|)``, with the denominator floored at 1e-30 (0 for a zero vector).
    """
    return float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-30))


def split_along(g: np.ndarray, clean: np.ndarray) -> dict[str, float]:
    """``g`` split along ``clean``: ``along = <g, c> / |c|^2``, ``across = |g - along c| / |c|`` and the cosine.

    Args:
      g: a flattened gradient.
      clean: the reference (clean-label) gradient, nonzero.

    Returns:
      ``{"along", "across", "cosine"}``.
    """
    cc = float(clean @ clean)
    along = float(g @ clean) / cc
    across = float(np.linalg.norm(g - along * clean) / np.sqrt(cc))
    return {"along": along, "across": across, "cosine": cosine(g, clean)}
