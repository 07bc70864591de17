"""Discrete-Laplace label histograms and k-means label priors.

001 -- Ghazi et al. (2021), "Deep learning with label differential privacy":
SSL / k-means priors (Algorithm 4): cluster the public features, release each
cluster's label histogram with discrete Laplace noise, and use the normalised
noisy histograms as priors for RRWithPrior. Re-exported by
:mod:`labeldp.mechanisms.classification`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from labeldp.mechanisms.classification_validation import (
    ArrayLike,
    check_epsilon,
    check_labels,
    check_num_classes,
    check_rng,
)

__all__ = [
    "HistogramRelease",
    "KMeansPriors",
    "discrete_laplace_parameter",
    "discrete_laplace_histogram",
    "kmeans_priors",
]


# ---------------------------------------------------------------------------
# Discrete Laplace histograms and k-means priors (001 Algorithm 4).
# ---------------------------------------------------------------------------


def discrete_laplace_parameter(*, epsilon: float, sensitivity: int = 2) -> float:
    """Parameter ``a`` of the discrete Laplace noise ``Pr[Z = z] ∝ e^{-a|z|}``.

    ``a = epsilon / sensitivity`` gives ``epsilon``-DP for integer queries of
    the given L1 sensitivity. For label histograms the sensitivity is 2 (a
    label change moves one count down and one up), hence 001 Algorithm 4
    step 4(b) draws ``scipy.stats.dlaplace.rvs(eps_p / 2)``.
    """
    eps = check_epsilon(epsilon)
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, np.integer)) or sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive integer, got {sensitivity!r}.")
    return eps / int(sensitivity)


def sample_discrete_laplace(a: float, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    # The difference of two i.i.d. geometric variables with success
    # probability 1 - e^{-a} is discrete Laplace with parameter a.
    p = -math.expm1(-a)
    return (rng.geometric(p, size=shape) - rng.geometric(p, size=shape)).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class HistogramRelease:
    """Output of :func:`discrete_laplace_histogram`.

    Attributes:
      noisy_counts: (C, K) int64 counts plus discrete Laplace noise (the DP
        release; may be negative).
      priors: (C, K) float64 ``max(noisy, 0)`` normalised per row; rows whose
        clipped counts are all 0 fall back to the uniform prior ``1 / K``.
      epsilon: the budget spent.
    """

    noisy_counts: np.ndarray
    priors: np.ndarray
    epsilon: float


def discrete_laplace_histogram(counts: ArrayLike, *, epsilon: float, rng: np.random.Generator) -> HistogramRelease:
    """Private label histograms via the discrete Laplace (geometric) mechanism.

    001 Algorithm 4, steps 4(b)-(c): ``H~_c = H_c + dlaplace(eps / 2)`` for
    every cluster ``c`` and class, then ``p_c = max(H~_c, 0) / sum(max(H~_c,
    0))``. The noise has ``Pr[Z = z] = tanh(a / 2) e^{-a |z|}`` with
    ``a = eps / 2`` (two-sided geometric with ratio ``e^{-eps/2}``).

    Privacy: the clusters are disjoint, so changing one label changes the whole
    (C, K) table by +1 in one cell and -1 in another of the same row (L1
    sensitivity 2); noise with parameter ``eps / 2`` makes the release
    ``epsilon``-label-DP. Clipping, normalising and the uniform fallback are
    post-processing.

    Args:
      counts: (K,) or (C, K) non-negative integer label counts.
      epsilon: the privacy parameter spent on the histograms, > 0.
      rng: the only source of randomness.

    Returns:
      :class:`HistogramRelease` (2-D even for a 1-D input).
    """
    eps = check_epsilon(epsilon)
    h = np.asarray(counts)
    if h.ndim == 1:
        h = h[None, :]
    if h.ndim != 2 or h.shape[-1] < 2:
        raise ValueError(f"counts must have shape (K,) or (C, K) with K >= 2, got {np.shape(counts)}.")
    if h.size and (h.dtype.kind not in "iu" or h.min() < 0):
        raise ValueError(
            "counts must be non-negative integers (a label histogram per "
            f"cluster), got dtype {h.dtype} with min {h.min()}."
        )
    rng = check_rng(rng)
    a = discrete_laplace_parameter(epsilon=eps, sensitivity=2)
    noisy = h.astype(np.int64) + sample_discrete_laplace(a, h.shape, rng)
    clipped = np.maximum(noisy, 0).astype(np.float64)
    total = clipped.sum(axis=-1, keepdims=True)
    uniform = np.full_like(clipped, 1.0 / h.shape[-1])
    priors = np.where(total > 0, clipped / np.where(total > 0, total, 1.0), uniform)
    return HistogramRelease(noisy_counts=noisy, priors=priors, epsilon=eps)


@dataclasses.dataclass(frozen=True)
class KMeansPriors:
    """Output of :func:`kmeans_priors`.

    Attributes:
      priors: (n, K) per-example priors (the prior of the example's cluster).
      cluster_ids: (n,) int64 cluster of each example.
      cluster_priors: (C, K) per-cluster priors.
      noisy_counts: (C, K) the released noisy histograms.
      epsilon: the budget spent on the histograms.
    """

    priors: np.ndarray
    cluster_ids: np.ndarray
    cluster_priors: np.ndarray
    noisy_counts: np.ndarray
    epsilon: float


def kmeans_priors(
    features: ArrayLike,
    labels: ArrayLike,
    *,
    num_clusters: int,
    num_classes: int,
    epsilon: float,
    rng: np.random.Generator,
    seed: int = 0,
    n_init: int = 1,
    max_iter: int = 300,
) -> KMeansPriors:
    """Label priors from k-means clusters and private histograms.

    001 Algorithm 4 (SSL priors): cluster the (public) features with k-means
    into C groups, release each group's label histogram with
    :func:`discrete_laplace_histogram`, and give every example its group's
    normalised noisy histogram as prior.

    Privacy: the clustering uses the features only (public under label DP), so
    the whole output is ``epsilon``-label-DP (see
    :func:`discrete_laplace_histogram`). The remaining budget can go to
    :func:`rr_with_prior` (sequential composition: total ``eps_p + eps``).

    Args:
      features: (n, d) features (e.g. self-supervised embeddings).
      labels: (n,) integer labels in ``[0, K)``.
      num_clusters: C.
      num_classes: K.
      epsilon: budget for the histograms (``eps_p`` in 001), > 0.
      rng: the only source of randomness for the noise.
      seed: ``random_state`` of scikit-learn's KMeans (it does not see labels).
      n_init: KMeans restarts.
      max_iter: KMeans iterations.

    Returns:
      :class:`KMeansPriors`.
    """
    from sklearn.cluster import KMeans  # pylint: disable=g-import-not-at-top

    k = check_num_classes(num_classes)
    eps = check_epsilon(epsilon)
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must have shape (n, d), got {x.shape}.")
    y = check_labels(labels, k)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"features and labels must have the same number of rows, got {x.shape[0]} and {y.shape[0]}.")
    if (
        isinstance(num_clusters, bool)
        or not isinstance(num_clusters, (int, np.integer))
        or not 1 <= num_clusters <= x.shape[0]
    ):
        raise ValueError(f"num_clusters must be an integer in [1, n] = [1, {x.shape[0]}], got {num_clusters!r}.")
    rng = check_rng(rng)
    km = KMeans(n_clusters=int(num_clusters), random_state=seed, n_init=n_init, max_iter=max_iter)
    cluster_ids = km.fit_predict(x).astype(np.int64)
    counts = np.zeros((int(num_clusters), k), dtype=np.int64)
    np.add.at(counts, (cluster_ids, y), 1)
    release = discrete_laplace_histogram(counts, epsilon=eps, rng=rng)
    return KMeansPriors(
        priors=release.priors[cluster_ids],
        cluster_ids=cluster_ids,
        cluster_priors=release.priors,
        noisy_counts=release.noisy_counts,
        epsilon=eps,
    )
