"""Label randomizers for classification under label differential privacy.

Every randomizer here acts on one label at a time and queries it once, so an
``epsilon``-DP randomizer applied to every example of a data set is
``epsilon``-label-DP for the whole data set (parallel composition; 001
Section 4, proof of Theorem 4). Labels are integers in ``{0, ..., K-1}``.

Papers (the spec lives in ``/work/shared/papers``):

* 000 -- LabelDP-Pro (Section 6 and Appendix D.1: RR-Debiased, group privacy).
* 001 -- Ghazi et al. (2021), "Deep learning with label differential privacy":
  RR (eq. 1), RRTop-k (Algorithm 1), RRWithPrior (Algorithm 2, Theorem 3),
  SSL/k-means priors (Algorithm 4), LP-RR-SGD (Algorithm 5, eq. 7).
* 002 -- semi-sensitive features (Proposition 6: group privacy).
* Malek et al. (2021), "Antipodes of label differential privacy: PATE and
  ALIBI" -- ALIBI (additive Laplace noise on one-hot labels + Bayesian
  inference).

Conventions (optax / jax_privacy style): data arguments are positional,
options keyword-only, randomness comes only from an explicit
``rng: numpy.random.Generator``, results are frozen dataclasses, and invalid
input raises ``ValueError`` naming the argument and the fix. Everything is
vectorised over examples. ``rr_debiased_loss``, ``rr_debiased_weights`` and
``alibi_posterior`` are array-API agnostic and also run on (and under
``jax.jit`` with) ``jax.numpy`` arrays.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal, Optional

import numpy as np

ArrayLike = Any

__all__ = [
    "RRWithPriorResult",
    "HistogramRelease",
    "KMeansPriors",
    "PrivacyBudget",
    "randomized_response",
    "randomized_response_matrix",
    "rr_debiased_weights",
    "rr_debiased_loss",
    "rr_top_k",
    "rr_top_k_matrix",
    "rr_with_prior_optimal_k",
    "rr_with_prior",
    "rr_with_prior_probabilities",
    "alibi_scale",
    "alibi_noisy_labels",
    "alibi_log_likelihood",
    "alibi_posterior",
    "discrete_laplace_parameter",
    "discrete_laplace_histogram",
    "kmeans_priors",
    "group_privacy",
]

# Tolerance on |sum(prior) - 1|. Loose enough for float32 softmax outputs;
# priors only rank labels (RRTop-k / RRWithPrior) or re-weight a likelihood
# (ALIBI), so this slack has no effect on the privacy guarantee.
_PRIOR_ATOL = 1e-4


# ---------------------------------------------------------------------------
# Validation helpers.
# ---------------------------------------------------------------------------


def _check_epsilon(epsilon: float, name: str = "epsilon") -> float:
  try:
    eps = float(epsilon)
  except (TypeError, ValueError):
    raise ValueError(
        f"{name} must be a positive finite float, got {epsilon!r}.") from None
  if not math.isfinite(eps) or eps <= 0.0:
    raise ValueError(
        f"{name} must be a positive finite float (the label-DP budget), got "
        f"{epsilon!r}. For a non-private baseline use the true labels instead "
        "of a randomizer.")
  return eps


def _check_num_classes(num_classes: int) -> int:
  if isinstance(num_classes, bool) or not isinstance(
      num_classes, (int, np.integer)) or num_classes < 2:
    raise ValueError(
        f"num_classes must be an integer >= 2, got {num_classes!r}.")
  return int(num_classes)


def _check_rng(rng: Any) -> np.random.Generator:
  if not isinstance(rng, np.random.Generator):
    raise ValueError(
        "rng must be a numpy.random.Generator (e.g. "
        f"numpy.random.default_rng(seed)), got {type(rng).__name__}.")
  return rng


def _check_labels(labels: ArrayLike, num_classes: int,
                  name: str = "labels") -> np.ndarray:
  arr = np.asarray(labels)
  if arr.ndim != 1:
    raise ValueError(
        f"{name} must be a 1-D array of integer class ids, got shape "
        f"{arr.shape}.")
  if arr.size and arr.dtype.kind not in "iu":
    raise ValueError(
        f"{name} must have an integer dtype (class ids in 0..num_classes-1), "
        f"got dtype {arr.dtype}; cast with labels.astype(int).")
  arr = arr.astype(np.int64)
  if arr.size and (arr.min() < 0 or arr.max() >= num_classes):
    raise ValueError(
        f"{name} must lie in [0, num_classes - 1] = [0, {num_classes - 1}], "
        f"got values in [{arr.min()}, {arr.max()}]; check num_classes or "
        "re-index the labels.")
  return arr


def _check_prior_rows(priors: ArrayLike, name: str = "priors") -> np.ndarray:
  """Validates an array whose last axis is a probability vector."""
  arr = np.asarray(priors, dtype=np.float64)
  if arr.ndim not in (1, 2) or arr.shape[-1] < 2:
    raise ValueError(
        f"{name} must have shape (K,) or (n, K) with K >= 2, got shape "
        f"{arr.shape}.")
  if not np.all(np.isfinite(arr)) or np.any(arr < 0):
    raise ValueError(
        f"{name} must be finite and non-negative (probabilities); got "
        "negative or non-finite entries.")
  sums = arr.sum(axis=-1)
  if np.any(np.abs(sums - 1.0) > _PRIOR_ATOL):
    worst = float(np.max(np.abs(sums - 1.0)))
    raise ValueError(
        f"each row of {name} must sum to 1 (|sum - 1| <= {_PRIOR_ATOL}); the "
        f"worst row is off by {worst:.3g}. Normalise with "
        "priors / priors.sum(-1, keepdims=True).")
  return arr


def _broadcast_priors(priors: np.ndarray, n: int, name: str) -> np.ndarray:
  if priors.ndim == 1:
    return np.broadcast_to(priors, (n, priors.shape[0]))
  if priors.shape[0] != n:
    raise ValueError(
        f"{name} must have one row per label: got {priors.shape[0]} rows for "
        f"{n} labels.")
  return priors


def _namespace(*arrays: Any):
  """Returns the array module (numpy or jax.numpy) of the given arrays."""
  for a in arrays:
    if type(a).__module__.startswith("jax"):
      import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
      return jnp
  for a in arrays:
    get_ns = getattr(a, "__array_namespace__", None)
    if get_ns is not None:
      return get_ns()
  return np


# ---------------------------------------------------------------------------
# Randomized response (001 eq. 1).
# ---------------------------------------------------------------------------


def _rr_probabilities(num_outputs: ArrayLike, epsilon: float):
  """(keep, other) = (e^eps, 1) / (e^eps + k - 1), overflow-free."""
  e_minus = math.exp(-epsilon)
  keep = 1.0 / (1.0 + (np.asarray(num_outputs, dtype=np.float64) - 1.0)
                * e_minus)
  return keep, keep * e_minus


def randomized_response_matrix(*, num_classes: int,
                               epsilon: float) -> np.ndarray:
  """Transition matrix of K-ary randomized response (001 eq. 1).

  Args:
    num_classes: K, the number of labels.
    epsilon: the privacy parameter.

  Returns:
    A (K, K) float64 matrix ``P`` with ``P[y, out] = Pr[RR(y) = out]``:
    ``e^eps / (e^eps + K - 1)`` on the diagonal and ``1 / (e^eps + K - 1)``
    off it.
  """
  k = _check_num_classes(num_classes)
  eps = _check_epsilon(epsilon)
  keep, other = _rr_probabilities(k, eps)
  mat = np.full((k, k), float(other))
  np.fill_diagonal(mat, float(keep))
  return mat


def randomized_response(labels: ArrayLike, *, num_classes: int,
                        epsilon: float,
                        rng: np.random.Generator) -> np.ndarray:
  """K-ary randomized response (001 eq. 1; Warner 1965).

  Keeps each label with probability ``e^eps / (e^eps + K - 1)`` and otherwise
  outputs one of the other ``K - 1`` labels uniformly at random.

  Privacy: ``epsilon``-DP with respect to each label, hence
  ``epsilon``-label-DP for the whole data set (each label is queried once).

  Args:
    labels: (n,) integer labels in ``[0, K)``.
    num_classes: K.
    epsilon: the privacy parameter, > 0.
    rng: the only source of randomness.

  Returns:
    (n,) int64 noisy labels.
  """
  k = _check_num_classes(num_classes)
  eps = _check_epsilon(epsilon)
  y = _check_labels(labels, k)
  rng = _check_rng(rng)
  keep_prob, _ = _rr_probabilities(k, eps)
  n = y.shape[0]
  keep = rng.random(n) < keep_prob
  # Uniform over the other K - 1 labels: draw r in [0, K-2], skip y.
  r = np.minimum(np.floor(rng.random(n) * (k - 1)).astype(np.int64), k - 2)
  other = r + (r >= y)
  return np.where(keep, y, other)


# ---------------------------------------------------------------------------
# RR-Debiased / LP-RR-SGD (000 Appendix D.1; 001 Algorithm 5, eq. 7).
# ---------------------------------------------------------------------------


def rr_debiased_weights(noisy_labels: ArrayLike, *, num_classes: int,
                        epsilon: float, dtype: Any = None):
  """Weights ``W`` of the unbiased RR loss: ``loss_hat = sum_k W[:, k] l(k)``.

  With ``p = K / (e^eps + K - 1)`` (000 Appendix D.1),
  ``W = (onehot(yhat) - p / K) / (1 - p)``, i.e. ``1 - p = (e^eps - 1) /
  (e^eps + K - 1)`` and ``p / K = 1 / (e^eps + K - 1)`` as in 001 eq. (7).

  Works with numpy and jax.numpy arrays (also under ``jax.jit``); the result
  lives in the array module of ``noisy_labels``.

  Args:
    noisy_labels: (...,) integer labels output by :func:`randomized_response`
      with the same ``num_classes`` and ``epsilon``.
    num_classes: K.
    epsilon: the RR privacy parameter, > 0.
    dtype: floating dtype of the result (default: the module's default float).

  Returns:
    (..., K) weights.
  """
  k = _check_num_classes(num_classes)
  eps = _check_epsilon(epsilon)
  xp = _namespace(noisy_labels)
  if xp is np:
    _check_labels(np.ravel(noisy_labels), k, name="noisy_labels")
  e_minus = math.exp(-eps)
  p = k * e_minus / (1.0 + (k - 1.0) * e_minus)  # = K / (e^eps + K - 1)
  labels = xp.asarray(noisy_labels)
  onehot = labels[..., None] == xp.arange(k)
  if dtype is None:
    dtype = xp.float64 if xp is np else xp.zeros(()).dtype
  onehot = xp.asarray(onehot, dtype=dtype)
  return (onehot - p / k) / (1.0 - p)


def rr_debiased_loss(per_class_losses: ArrayLike, noisy_labels: ArrayLike, *,
                     num_classes: int, epsilon: float):
  """Unbiased loss for labels randomized by K-ary RR (RR-Debiased).

  000 Appendix D.1 / 001 Algorithm 5 (LP-RR-SGD, eq. 7): with
  ``p = K / (e^eps + K - 1)``,

      loss_hat = (l(yhat) - p / K * sum_k l(k)) / (1 - p),

  so that ``E_{yhat ~ RR(y)}[loss_hat] = l(y)`` exactly. The same identity
  holds for gradients, so differentiating this loss gives eq. (7).

  Privacy: post-processing of the RR labels (``epsilon``-label-DP).

  Works with numpy and jax.numpy arrays (and under ``jax.jit``).

  Args:
    per_class_losses: (..., K) losses ``l(f(x), k)`` for every class ``k``.
    noisy_labels: (...,) RR labels.
    num_classes: K (must match ``per_class_losses.shape[-1]``).
    epsilon: the RR privacy parameter, > 0.

  Returns:
    (...,) debiased losses.
  """
  k = _check_num_classes(num_classes)
  xp = _namespace(per_class_losses, noisy_labels)
  per_class_losses = xp.asarray(per_class_losses)
  if per_class_losses.ndim < 1 or per_class_losses.shape[-1] != k:
    raise ValueError(
        "per_class_losses must have num_classes entries on its last axis, got "
        f"shape {tuple(per_class_losses.shape)} for num_classes={k}.")
  if tuple(per_class_losses.shape[:-1]) != tuple(np.shape(noisy_labels)):
    raise ValueError(
        "noisy_labels must have the shape of per_class_losses without its "
        f"last axis: got {tuple(np.shape(noisy_labels))} and "
        f"{tuple(per_class_losses.shape)}.")
  weights = rr_debiased_weights(noisy_labels, num_classes=k, epsilon=epsilon,
                                dtype=per_class_losses.dtype)
  return xp.sum(weights * per_class_losses, axis=-1)


# ---------------------------------------------------------------------------
# RRTop-k (001 Algorithm 1) and RRWithPrior (001 Algorithm 2).
# ---------------------------------------------------------------------------


def _prior_order(priors: np.ndarray) -> np.ndarray:
  """Labels sorted by decreasing prior; ties go to the smaller label id."""
  return np.argsort(-priors, axis=-1, kind="stable")


def _check_k(k: ArrayLike, num_classes: int, n: Optional[int]) -> np.ndarray:
  arr = np.asarray(k)
  if arr.dtype.kind not in "iu":
    raise ValueError(f"k must be an integer (or integer array), got {k!r}.")
  if arr.size and (arr.min() < 1 or arr.max() > num_classes):
    raise ValueError(
        f"k must lie in [1, num_classes] = [1, {num_classes}], got {k!r}.")
  if n is not None:
    if arr.ndim == 0:
      arr = np.full(n, int(arr))
    elif arr.shape != (n,):
      raise ValueError(
          f"k must be a scalar or have shape (n,) = ({n},), got {arr.shape}.")
  return arr.astype(np.int64)


def rr_top_k_matrix(prior: ArrayLike, *, k: int,
                    epsilon: float) -> np.ndarray:
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
  p = _check_prior_rows(prior, name="prior")
  if p.ndim != 1:
    raise ValueError(f"prior must have shape (K,), got {p.shape}.")
  eps = _check_epsilon(epsilon)
  num_classes = p.shape[0]
  kk = int(_check_k(k, num_classes, None))
  top = _prior_order(p)[:kk]
  keep, other = _rr_probabilities(kk, eps)
  mat = np.zeros((num_classes, num_classes))
  mat[:, top] = 1.0 / kk
  mat[np.ix_(top, top)] = float(other)
  mat[top, top] = float(keep)
  return mat


def _rr_top_k_sample(y: np.ndarray, order: np.ndarray, k: np.ndarray,
                     eps: float, rng: np.random.Generator) -> np.ndarray:
  n = y.shape[0]
  # rank[i] = position of y[i] in the sorted order of example i.
  rank = np.argmax(order == y[:, None], axis=1)
  in_set = rank < k
  keep_prob, _ = _rr_probabilities(k, eps)
  u_keep = rng.random(n)
  u_pick = rng.random(n)
  # y in Y_k, not kept: uniform over the k-1 other positions (skip rank).
  m = np.maximum(k - 1, 1)
  r = np.minimum(np.floor(u_pick * m).astype(np.int64), m - 1)
  other_pos = r + (r >= rank)
  # y not in Y_k: uniform over the k positions.
  out_pos = np.minimum(np.floor(u_pick * k).astype(np.int64), k - 1)
  pos = np.where(in_set, np.where(u_keep < keep_prob, rank, other_pos),
                 out_pos)
  return order[np.arange(n), pos]


def rr_top_k(labels: ArrayLike, priors: ArrayLike, *, k: ArrayLike,
             epsilon: float, rng: np.random.Generator) -> np.ndarray:
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
  p = _check_prior_rows(priors)
  eps = _check_epsilon(epsilon)
  num_classes = p.shape[-1]
  y = _check_labels(labels, num_classes)
  p = _broadcast_priors(p, y.shape[0], "priors")
  kk = _check_k(k, num_classes, y.shape[0])
  rng = _check_rng(rng)
  return _rr_top_k_sample(y, _prior_order(p), kk, eps, rng)


def _expected_correct(priors: np.ndarray, eps: float) -> np.ndarray:
  """w_k = e^eps / (e^eps + k - 1) * (top-k prior mass), for k = 1..K."""
  num_classes = priors.shape[-1]
  top_mass = np.cumsum(-np.sort(-priors, axis=-1), axis=-1)
  keep, _ = _rr_probabilities(np.arange(1, num_classes + 1), eps)
  return keep * top_mass


def rr_with_prior_optimal_k(priors: ArrayLike, *,
                            epsilon: float) -> np.ndarray:
  """k* of RRWithPrior (001 Algorithm 2, steps 1-2).

  ``k* = argmax_k w_k`` with ``w_k = e^eps / (e^eps + k - 1) * sum_{y in Y_k}
  p_y``; ties go to the smallest ``k``.

  Args:
    priors: (K,) or (n, K) priors.
    epsilon: the privacy parameter, > 0.

  Returns:
    int64 array of shape ``priors.shape[:-1]`` with values in ``[1, K]``.
  """
  p = _check_prior_rows(priors)
  eps = _check_epsilon(epsilon)
  return np.argmax(_expected_correct(p, eps), axis=-1).astype(np.int64) + 1


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


def rr_with_prior(labels: ArrayLike, priors: ArrayLike, *, epsilon: float,
                  rng: np.random.Generator) -> RRWithPriorResult:
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
  p = _check_prior_rows(priors)
  eps = _check_epsilon(epsilon)
  num_classes = p.shape[-1]
  y = _check_labels(labels, num_classes)
  p = _broadcast_priors(p, y.shape[0], "priors")
  rng = _check_rng(rng)
  k = np.argmax(_expected_correct(p, eps), axis=-1).astype(np.int64) + 1
  noisy = _rr_top_k_sample(y, _prior_order(p), k, eps, rng)
  return RRWithPriorResult(noisy_labels=noisy, k=k)


def rr_with_prior_probabilities(prior: ArrayLike, *,
                                epsilon: float) -> np.ndarray:
  """Transition matrix of RRWithPrior for one prior (001 Algorithm 2).

  Args:
    prior: (K,) prior.
    epsilon: the privacy parameter, > 0.

  Returns:
    (K, K) float64 matrix ``P[y, out] = Pr[RRWithPrior(y) = out]``, i.e.
    :func:`rr_top_k_matrix` at ``k = k*(prior)``.
  """
  p = _check_prior_rows(prior, name="prior")
  if p.ndim != 1:
    raise ValueError(f"prior must have shape (K,), got {p.shape}.")
  k = int(rr_with_prior_optimal_k(p, epsilon=epsilon))
  return rr_top_k_matrix(p, k=k, epsilon=epsilon)


# ---------------------------------------------------------------------------
# ALIBI (Malek et al. 2021).
# ---------------------------------------------------------------------------


def alibi_scale(*, epsilon: float) -> float:
  """Laplace scale ``b = 2 / epsilon`` of ALIBI.

  Changing a label moves the one-hot vector by ``||e_y - e_y'||_1 = 2``, so
  the Laplace mechanism with scale ``b`` is ``(2 / b)``-DP.
  """
  return 2.0 / _check_epsilon(epsilon)


def alibi_noisy_labels(labels: ArrayLike, *, num_classes: int, epsilon: float,
                       rng: np.random.Generator) -> np.ndarray:
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
  k = _check_num_classes(num_classes)
  y = _check_labels(labels, k)
  b = alibi_scale(epsilon=epsilon)
  rng = _check_rng(rng)
  onehot = np.zeros((y.shape[0], k))
  onehot[np.arange(y.shape[0]), y] = 1.0
  return onehot + rng.laplace(0.0, b, size=onehot.shape)


def alibi_log_likelihood(noisy_onehot: ArrayLike, *,
                         epsilon: float) -> np.ndarray:
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
    raise ValueError(
        f"noisy_onehot must have shape (n, K), got {z.shape}.")
  k = z.shape[-1]
  dist = np.abs(z[:, None, :] - np.eye(k)[None, :, :]).sum(-1)
  return -dist / b - k * math.log(2.0 * b)


def alibi_posterior(noisy_onehot: ArrayLike, prior: ArrayLike = None, *,
                    epsilon: float):
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
  xp = _namespace(noisy_onehot, prior)
  z = xp.asarray(noisy_onehot)
  if z.ndim != 2:
    raise ValueError(f"noisy_onehot must have shape (n, K), got {z.shape}.")
  logits = xp.clip(2.0 * z - 1.0, -1.0, 1.0) / b
  if prior is not None:
    if xp is np:
      _check_prior_rows(prior, name="prior")
    pr = xp.asarray(prior)
    if pr.shape[-1] != z.shape[-1]:
      raise ValueError(
          f"prior must have K = {z.shape[-1]} entries on its last axis, got "
          f"shape {pr.shape}.")
    with np.errstate(divide="ignore"):
      logits = logits + xp.log(pr)
  logits = logits - xp.max(logits, axis=-1, keepdims=True)
  w = xp.exp(logits)
  return w / xp.sum(w, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# Discrete Laplace histograms and k-means priors (001 Algorithm 4).
# ---------------------------------------------------------------------------


def discrete_laplace_parameter(*, epsilon: float,
                               sensitivity: int = 2) -> float:
  """Parameter ``a`` of the discrete Laplace noise ``Pr[Z = z] ∝ e^{-a|z|}``.

  ``a = epsilon / sensitivity`` gives ``epsilon``-DP for integer queries of
  the given L1 sensitivity. For label histograms the sensitivity is 2 (a
  label change moves one count down and one up), hence 001 Algorithm 4
  step 4(b) draws ``scipy.stats.dlaplace.rvs(eps_p / 2)``.
  """
  eps = _check_epsilon(epsilon)
  if isinstance(sensitivity, bool) or not isinstance(
      sensitivity, (int, np.integer)) or sensitivity < 1:
    raise ValueError(
        f"sensitivity must be a positive integer, got {sensitivity!r}.")
  return eps / int(sensitivity)


def _sample_discrete_laplace(a: float, shape: tuple[int, ...],
                             rng: np.random.Generator) -> np.ndarray:
  # The difference of two i.i.d. geometric variables with success
  # probability 1 - e^{-a} is discrete Laplace with parameter a.
  p = -math.expm1(-a)
  return (rng.geometric(p, size=shape) - rng.geometric(p, size=shape)).astype(
      np.int64)


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


def discrete_laplace_histogram(counts: ArrayLike, *, epsilon: float,
                               rng: np.random.Generator) -> HistogramRelease:
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
  eps = _check_epsilon(epsilon)
  h = np.asarray(counts)
  if h.ndim == 1:
    h = h[None, :]
  if h.ndim != 2 or h.shape[-1] < 2:
    raise ValueError(
        f"counts must have shape (K,) or (C, K) with K >= 2, got "
        f"{np.shape(counts)}.")
  if h.size and (h.dtype.kind not in "iu" or h.min() < 0):
    raise ValueError(
        "counts must be non-negative integers (a label histogram per "
        f"cluster), got dtype {h.dtype} with min {h.min()}.")
  rng = _check_rng(rng)
  a = discrete_laplace_parameter(epsilon=eps, sensitivity=2)
  noisy = h.astype(np.int64) + _sample_discrete_laplace(a, h.shape, rng)
  clipped = np.maximum(noisy, 0).astype(np.float64)
  total = clipped.sum(axis=-1, keepdims=True)
  uniform = np.full_like(clipped, 1.0 / h.shape[-1])
  priors = np.where(total > 0, clipped / np.where(total > 0, total, 1.0),
                    uniform)
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


def kmeans_priors(features: ArrayLike, labels: ArrayLike, *,
                  num_clusters: int, num_classes: int, epsilon: float,
                  rng: np.random.Generator, seed: int = 0,
                  n_init: int = 1, max_iter: int = 300) -> KMeansPriors:
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

  k = _check_num_classes(num_classes)
  eps = _check_epsilon(epsilon)
  x = np.asarray(features, dtype=np.float64)
  if x.ndim != 2:
    raise ValueError(f"features must have shape (n, d), got {x.shape}.")
  y = _check_labels(labels, k)
  if y.shape[0] != x.shape[0]:
    raise ValueError(
        f"features and labels must have the same number of rows, got "
        f"{x.shape[0]} and {y.shape[0]}.")
  if isinstance(num_clusters, bool) or not isinstance(
      num_clusters, (int, np.integer)) or not 1 <= num_clusters <= x.shape[0]:
    raise ValueError(
        f"num_clusters must be an integer in [1, n] = [1, {x.shape[0]}], got "
        f"{num_clusters!r}.")
  rng = _check_rng(rng)
  km = KMeans(n_clusters=int(num_clusters), random_state=seed, n_init=n_init,
              max_iter=max_iter)
  cluster_ids = km.fit_predict(x).astype(np.int64)
  counts = np.zeros((int(num_clusters), k), dtype=np.int64)
  np.add.at(counts, (cluster_ids, y), 1)
  release = discrete_laplace_histogram(counts, epsilon=eps, rng=rng)
  return KMeansPriors(priors=release.priors[cluster_ids],
                      cluster_ids=cluster_ids,
                      cluster_priors=release.priors,
                      noisy_counts=release.noisy_counts, epsilon=eps)


# ---------------------------------------------------------------------------
# Group privacy (000 Section 6; 002 Proposition 6).
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PrivacyBudget:
  """An (epsilon, delta) pair."""
  epsilon: float
  delta: float = 0.0


def group_privacy(*, epsilon: float, delta: float = 0.0, group_size: int,
                  conversion: Literal["labeldp_pro",
                                      "geometric_sum"] = "labeldp_pro"
                  ) -> PrivacyBudget:
  """Item-level budget that gives a user-level (epsilon, delta) guarantee.

  A user contributes ``group_size = k`` examples. By group privacy (Vadhan
  2017), an item-level ``(e, d)``-DP mechanism is user-level
  ``(k e, d * sum_{j<k} e^{j e}) = (k e, d (e^{k e} - 1) / (e^e - 1))``-DP.

  * ``delta == 0`` (pure DP, e.g. RR in 000 Table 7): ``(epsilon / k, 0)``.
  * ``conversion="labeldp_pro"`` (default; 000 Section 6):
    ``(epsilon / k, delta / (k e^epsilon))``. Valid (conservative) because
    ``sum_{j<k} e^{j epsilon / k} <= k e^epsilon``.
  * ``conversion="geometric_sum"`` (002 Proposition 6, inverted exactly):
    ``(epsilon / k, delta (e^{epsilon/k} - 1) / (e^epsilon - 1))``. The
    extracted text of 002 shows ``e^{k eps - 1}`` in the numerator; that is a
    typesetting slip for ``e^{k eps} - 1`` (only the latter gives ``delta``
    back at ``k = 1``).

  Args:
    epsilon: user-level epsilon, > 0.
    delta: user-level delta in ``[0, 1)``.
    group_size: examples per user, an integer >= 1.
    conversion: which approximate-DP conversion to use (ignored if
      ``delta == 0``).

  Returns:
    :class:`PrivacyBudget` with the item-level (epsilon, delta).
  """
  eps = _check_epsilon(epsilon)
  if not isinstance(delta, (int, float, np.floating)) or not 0.0 <= delta < 1.0:
    raise ValueError(f"delta must be a float in [0, 1), got {delta!r}.")
  if isinstance(group_size, bool) or not isinstance(
      group_size, (int, np.integer)) or group_size < 1:
    raise ValueError(
        f"group_size must be an integer >= 1 (examples per user), got "
        f"{group_size!r}.")
  k = int(group_size)
  item_eps = eps / k
  if delta == 0.0:
    return PrivacyBudget(epsilon=item_eps, delta=0.0)
  if conversion == "labeldp_pro":
    item_delta = float(delta) / (k * math.exp(eps))
  elif conversion == "geometric_sum":
    item_delta = float(delta) * math.expm1(item_eps) / math.expm1(eps)
  else:
    raise ValueError(
        "conversion must be 'labeldp_pro' (000 Section 6) or 'geometric_sum' "
        f"(002 Proposition 6), got {conversion!r}.")
  return PrivacyBudget(epsilon=item_eps, delta=item_delta)
