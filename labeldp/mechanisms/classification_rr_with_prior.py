"""RRTop-k and RRWithPrior: randomized response restricted to likely labels.

001 -- Ghazi et al. (2021), "Deep learning with label differential privacy":
RRTop-k (Algorithm 1, Lemma 1) and RRWithPrior (Algorithm 2, Theorem 3,
Corollary 2), with their transition matrices and the optimal set size ``k*``.
Re-exported by :mod:`labeldp.mechanisms.classification`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from labeldp.mechanisms.classification_validation import (
    ArrayLike,
    broadcast_priors,
    check_epsilon,
    check_labels,
    check_prior_rows,
    check_rng,
)
from labeldp.mechanisms.classification_rr import rr_probabilities

__all__ = [
    "RRWithPriorResult",
    "rr_top_k",
    "rr_top_k_matrix",
    "rr_with_prior_optimal_k",
    "rr_with_prior",
    "rr_with_prior_probabilities",
]


# ---------------------------------------------------------------------------
# RRTop-k (001 Algorithm 1) and RRWithPrior (001 Algorithm 2).
# ---------------------------------------------------------------------------


def prior_order(priors: np.ndarray) -> np.ndarray:
    """Labels sorted by decreasing prior; ties go to the smaller label id."""
    return np.argsort(-priors, axis=-1, kind="stable")


def check_k(k: ArrayLike, num_classes: int, n: Optional[int]) -> np.ndarray:
    arr = np.asarray(k)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"k must be an integer (or integer array), got {k!r}.")
    if arr.size and (arr.min() < 1 or arr.max() > num_classes):
        raise ValueError(f"k must lie in [1, num_classes] = [1, {num_classes}], got {k!r}.")
    if n is not None:
        if arr.ndim == 0:
            arr = np.full(n, int(arr))
        elif arr.shape != (n,):
            raise ValueError(f"k must be a scalar or have shape (n,) = ({n},), got {arr.shape}.")
    return arr.astype(np.int64)


def rr_top_k_matrix(prior: ArrayLike, *, k: int, epsilon: float) -> np.ndarray:
    """Transition matrix of RRTop-k for one prior (001 Algorithm 1).

    ``Y_k`` is the set of the ``k`` labels with the largest prior (ties broken
    towards the smaller label id). For ``y`` in ``Y_k``: ``P[y, y] = e^eps /
    (e^eps + k - 1)``, ``P[y, y'] = 1 / (e^eps + k - 1)`` for other
    ``y'`` in ``Y_k``; for ``y`` not in ``Y_k``: ``P[y, y'] = 1 / k`` on
    ``Y_k``. Outputs outside ``Y_k`` have probability 0.

    Args:
      prior: (K,) prior probabilities.
      k: size of the candidate set, in ``[1, K]``.
      epsilon: the privacy parameter, > 0.

    Returns:
      (K, K) float64 matrix ``P[y, out]``.
    """
    p = check_prior_rows(prior, name="prior")
    if p.ndim != 1:
        raise ValueError(f"prior must have shape (K,), got {p.shape}.")
    eps = check_epsilon(epsilon)
    num_classes = p.shape[0]
    kk = int(check_k(k, num_classes, None))
    top = prior_order(p)[:kk]
    keep, other = rr_probabilities(kk, eps)
    mat = np.zeros((num_classes, num_classes))
    mat[:, top] = 1.0 / kk
    mat[np.ix_(top, top)] = float(other)
    mat[top, top] = float(keep)
    return mat


def rr_top_k_sample(
    y: np.ndarray, order: np.ndarray, k: np.ndarray, eps: float, rng: np.random.Generator
) -> np.ndarray:
    n = y.shape[0]
    # rank[i] = position of y[i] in the sorted order of example i.
    rank = np.argmax(order == y[:, None], axis=1)
    in_set = rank < k
    keep_prob, _ = rr_probabilities(k, eps)
    u_keep = rng.random(n)
    u_pick = rng.random(n)
    # y in Y_k, not kept: uniform over the k-1 other positions (skip rank).
    m = np.maximum(k - 1, 1)
    r = np.minimum(np.floor(u_pick * m).astype(np.int64), m - 1)
    other_pos = r + (r >= rank)
    # y not in Y_k: uniform over the k positions.
    out_pos = np.minimum(np.floor(u_pick * k).astype(np.int64), k - 1)
    pos = np.where(in_set, np.where(u_keep < keep_prob, rank, other_pos), out_pos)
    return order[np.arange(n), pos]


def rr_top_k(
    labels: ArrayLike, priors: ArrayLike, *, k: ArrayLike, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """RRTop-k: randomized response restricted to the top-k labels.

    001 Algorithm 1: let ``Y_k`` be the ``k`` labels with the largest prior
    (ties towards the smaller label id). If ``y`` is in ``Y_k``, run RR on
    ``Y_k`` (keep w.p. ``e^eps / (e^eps + k - 1)``, else uniform over
    ``Y_k \\ {y}``); otherwise output a uniform label of ``Y_k``.

    Privacy: ``epsilon``-DP with respect to each label (001 Lemma 1); the prior
    and ``k`` must not depend on the label being randomized.

    Args:
      labels: (n,) integer labels in ``[0, K)``.
      priors: (K,) prior shared by all examples or (n, K) per-example priors.
      k: set size in ``[1, K]``: an int or an (n,) int array.
      epsilon: the privacy parameter, > 0.
      rng: the only source of randomness.

    Returns:
      (n,) int64 noisy labels.
    """
    p = check_prior_rows(priors)
    eps = check_epsilon(epsilon)
    num_classes = p.shape[-1]
    y = check_labels(labels, num_classes)
    p = broadcast_priors(p, y.shape[0], "priors")
    kk = check_k(k, num_classes, y.shape[0])
    rng = check_rng(rng)
    return rr_top_k_sample(y, prior_order(p), kk, eps, rng)


def expected_correct(priors: np.ndarray, eps: float) -> np.ndarray:
    """w_k = e^eps / (e^eps + k - 1) * (top-k prior mass), for k = 1..K."""
    num_classes = priors.shape[-1]
    top_mass = np.cumsum(-np.sort(-priors, axis=-1), axis=-1)
    keep, _ = rr_probabilities(np.arange(1, num_classes + 1), eps)
    return keep * top_mass


def rr_with_prior_optimal_k(priors: ArrayLike, *, epsilon: float) -> np.ndarray:
    """k* of RRWithPrior (001 Algorithm 2, steps 1-2).

    ``k* = argmax_k w_k`` with ``w_k = e^eps / (e^eps + k - 1) * sum_{y in Y_k}
    p_y``; ties go to the smallest ``k``.

    Args:
      priors: (K,) or (n, K) priors.
      epsilon: the privacy parameter, > 0.

    Returns:
      int64 array of shape ``priors.shape[:-1]`` with values in ``[1, K]``.
    """
    p = check_prior_rows(priors)
    eps = check_epsilon(epsilon)
    return np.argmax(expected_correct(p, eps), axis=-1).astype(np.int64) + 1


@dataclasses.dataclass(frozen=True)
class RRWithPriorResult:
    """Output of :func:`rr_with_prior`.

    Attributes:
      noisy_labels: (n,) int64 randomized labels.
      k: (n,) int64 size ``k*`` of the candidate set used for each example.
    """

    noisy_labels: np.ndarray
    k: np.ndarray

    @property
    def mean_k(self) -> float:
        """Average ``k*`` (001 Appendix B reports it, e.g. 1.86 on CIFAR-10)."""
        return float(np.mean(self.k)) if self.k.size else float("nan")


def rr_with_prior(
    labels: ArrayLike, priors: ArrayLike, *, epsilon: float, rng: np.random.Generator
) -> RRWithPriorResult:
    """RRWithPrior (001 Algorithm 2).

    For each example, pick ``k* = argmax_k e^eps / (e^eps + k - 1) * (mass of
    the top-k labels of its prior)`` and return RRTop-k* of its label. Among
    all ``epsilon``-DP randomizers this maximises ``Pr[out = y]`` when
    ``y ~ prior`` (001 Theorem 3).

    Privacy: ``epsilon``-DP with respect to each label (001 Corollary 2), as
    long as the prior of an example does not depend on that example's label
    (e.g. a model trained on other, already-randomized, labels: LP-MST).

    Args:
      labels: (n,) integer labels in ``[0, K)``.
      priors: (n, K) per-example priors (or one (K,) prior for all).
      epsilon: the privacy parameter, > 0.
      rng: the only source of randomness.

    Returns:
      :class:`RRWithPriorResult` with the noisy labels and the chosen ``k*``.
    """
    p = check_prior_rows(priors)
    eps = check_epsilon(epsilon)
    num_classes = p.shape[-1]
    y = check_labels(labels, num_classes)
    p = broadcast_priors(p, y.shape[0], "priors")
    rng = check_rng(rng)
    k = np.argmax(expected_correct(p, eps), axis=-1).astype(np.int64) + 1
    noisy = rr_top_k_sample(y, prior_order(p), k, eps, rng)
    return RRWithPriorResult(noisy_labels=noisy, k=k)


def rr_with_prior_probabilities(prior: ArrayLike, *, epsilon: float) -> np.ndarray:
    """Transition matrix of RRWithPrior for one prior (001 Algorithm 2).

    Args:
      prior: (K,) prior.
      epsilon: the privacy parameter, > 0.

    Returns:
      (K, K) float64 matrix ``P[y, out] = Pr[RRWithPrior(y) = out]``, i.e.
      :func:`rr_top_k_matrix` at ``k = k*(prior)``.
    """
    p = check_prior_rows(prior, name="prior")
    if p.ndim != 1:
        raise ValueError(f"prior must have shape (K,), got {p.shape}.")
    k = int(rr_with_prior_optimal_k(p, epsilon=epsilon))
    return rr_top_k_matrix(p, k=k, epsilon=epsilon)
