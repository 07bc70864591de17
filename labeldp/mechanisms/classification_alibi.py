"""ALIBI: additive Laplace noise on one-hot labels and its Bayesian posterior.

Malek et al. (2021), "Antipodes of label differential privacy: PATE and
ALIBI" (Section 4, "Additive Laplace with Iterative Bayesian Inference").
``alibi_posterior`` is array-API agnostic and also runs on (and under
``jax.jit`` with) ``jax.numpy`` arrays. Re-exported by
:mod:`labeldp.mechanisms.classification`.
"""

from __future__ import annotations

import math

import numpy as np

from labeldp.mechanisms.classification_validation import (
    ArrayLike,
    check_epsilon,
    check_labels,
    check_num_classes,
    check_prior_rows,
    check_rng,
    namespace,
)

__all__ = [
    "alibi_scale",
    "alibi_noisy_labels",
    "alibi_log_likelihood",
    "alibi_posterior",
]


# ---------------------------------------------------------------------------
# ALIBI (Malek et al. 2021).
# ---------------------------------------------------------------------------


def alibi_scale(*, epsilon: float) -> float:
    """Laplace scale ``b = 2 / epsilon`` of ALIBI.

    Changing a label moves the one-hot vector by ``||e_y - e_y'||_1 = 2``, so
    the Laplace mechanism with scale ``b`` is ``(2 / b)``-DP.
    """
    return 2.0 / check_epsilon(epsilon)


def alibi_noisy_labels(labels: ArrayLike, *, num_classes: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """ALIBI randomizer: one-hot label plus i.i.d. Laplace(0, 2/eps) noise.

    Malek et al. (2021), Section 4 ("Additive Laplace with Iterative Bayesian
    Inference"). The one-hot encoding has L1 sensitivity 2 under a label change,
    so Laplace noise of scale ``b = 2 / epsilon`` on each of the K coordinates
    makes the released vector ``epsilon``-DP with respect to the label; the
    density ratio is ``exp((||z - e_y'||_1 - ||z - e_y||_1) / b) <=
    exp(2 / b) = e^eps`` for every output ``z``.

    Args:
      labels: (n,) integer labels in ``[0, K)``.
      num_classes: K.
      epsilon: the privacy parameter, > 0.
      rng: the only source of randomness.

    Returns:
      (n, K) float64 noisy one-hot vectors.
    """
    k = check_num_classes(num_classes)
    y = check_labels(labels, k)
    b = alibi_scale(epsilon=epsilon)
    rng = check_rng(rng)
    onehot = np.zeros((y.shape[0], k))
    onehot[np.arange(y.shape[0]), y] = 1.0
    return onehot + rng.laplace(0.0, b, size=onehot.shape)


def alibi_log_likelihood(noisy_onehot: ArrayLike, *, epsilon: float) -> np.ndarray:
    """``log p(z | y = k)`` of the ALIBI output ``z`` for every class ``k``.

    ``p(z | y = k) = prod_j (2b)^{-1} exp(-|z_j - [j = k]| / b)`` with
    ``b = 2 / epsilon``.

    Args:
      noisy_onehot: (n, K) ALIBI outputs.
      epsilon: the ALIBI privacy parameter, > 0.

    Returns:
      (n, K) float64 log densities.
    """
    b = alibi_scale(epsilon=epsilon)
    z = np.asarray(noisy_onehot, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"noisy_onehot must have shape (n, K), got {z.shape}.")
    k = z.shape[-1]
    dist = np.abs(z[:, None, :] - np.eye(k)[None, :, :]).sum(-1)
    return -dist / b - k * math.log(2.0 * b)


def alibi_posterior(noisy_onehot: ArrayLike, prior: ArrayLike = None, *, epsilon: float):
    """Bayesian soft label of ALIBI: ``Pr[y = k | z]``.

    With ``b = 2 / epsilon`` and the Laplace likelihood,

        Pr[y = k | z] ∝ prior_k * exp(-||z - e_k||_1 / b)
                      ∝ prior_k * exp((|z_k| - |z_k - 1|) / b)
                      = prior_k * exp((epsilon / 2) * clip(2 z_k - 1, -1, 1)),

    because ``||z - e_k||_1 = sum_j |z_j| - |z_k| + |z_k - 1|`` and the first
    sum does not depend on ``k``. ALIBI's iterative inference passes the
    model's current predictions as ``prior`` (Malek et al. 2021, Section 4).

    Privacy: post-processing of the ALIBI output (``epsilon``-label-DP) as long
    as ``prior`` does not depend on the example's true label.

    Works with numpy and jax.numpy arrays (and under ``jax.jit``).

    Args:
      noisy_onehot: (n, K) outputs of :func:`alibi_noisy_labels`.
      prior: None (uniform), (K,) or (n, K) prior probabilities.
      epsilon: the ALIBI privacy parameter used to make ``noisy_onehot``.

    Returns:
      (n, K) posterior probabilities (rows sum to 1), in the array module of
      the inputs.
    """
    b = alibi_scale(epsilon=epsilon)
    xp = namespace(noisy_onehot, prior)
    z = xp.asarray(noisy_onehot)
    if z.ndim != 2:
        raise ValueError(f"noisy_onehot must have shape (n, K), got {z.shape}.")
    logits = xp.clip(2.0 * z - 1.0, -1.0, 1.0) / b
    if prior is not None:
        if xp is np:
            check_prior_rows(prior, name="prior")
        pr = xp.asarray(prior)
        if pr.shape[-1] != z.shape[-1]:
            raise ValueError(f"prior must have K = {z.shape[-1]} entries on its last axis, got shape {pr.shape}.")
        with np.errstate(divide="ignore"):
            logits = logits + xp.log(pr)
    logits = logits - xp.max(logits, axis=-1, keepdims=True)
    w = xp.exp(logits)
    return w / xp.sum(w, axis=-1, keepdims=True)
