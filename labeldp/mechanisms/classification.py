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

This module is the public import surface; the code lives in:

* :mod:`labeldp.mechanisms.classification_validation` -- shared input checks.
* :mod:`labeldp.mechanisms.classification_rr` -- RR and RR-Debiased.
* :mod:`labeldp.mechanisms.classification_rr_with_prior` -- RRTop-k and
  RRWithPrior.
* :mod:`labeldp.mechanisms.classification_alibi` -- ALIBI.
* :mod:`labeldp.mechanisms.classification_kmeans_priors` -- discrete Laplace
  histograms and k-means priors.
* :mod:`labeldp.mechanisms.classification_group_privacy` -- PrivacyBudget and
  group privacy.

Callers import these names at their module's top, so a test that spies on one patches the name where the
caller looks it up (e.g. ``monkeypatch.setattr(labeldp.ads.hybrid, "randomized_response", ...)``), not here.
"""

from labeldp.mechanisms.classification_alibi import (  # noqa: F401
    alibi_log_likelihood,
    alibi_noisy_labels,
    alibi_posterior,
    alibi_scale,
)
from labeldp.mechanisms.classification_group_privacy import (  # noqa: F401
    PrivacyBudget,
    group_privacy,
)
from labeldp.mechanisms.classification_kmeans_priors import (  # noqa: F401
    HistogramRelease,
    KMeansPriors,
    sample_discrete_laplace,
    discrete_laplace_histogram,
    discrete_laplace_parameter,
    kmeans_priors,
)
from labeldp.mechanisms.classification_rr import (  # noqa: F401
    rr_probabilities,
    randomized_response,
    randomized_response_matrix,
    rr_debiased_loss,
    rr_debiased_weights,
)
from labeldp.mechanisms.classification_rr_with_prior import (  # noqa: F401
    RRWithPriorResult,
    check_k,
    expected_correct,
    prior_order,
    rr_top_k_sample,
    rr_top_k,
    rr_top_k_matrix,
    rr_with_prior,
    rr_with_prior_optimal_k,
    rr_with_prior_probabilities,
)
from labeldp.mechanisms.classification_validation import (  # noqa: F401
    PRIOR_ATOL,
    ArrayLike,
    broadcast_priors,
    check_epsilon,
    check_labels,
    check_num_classes,
    check_prior_rows,
    check_rng,
    namespace,
)

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
