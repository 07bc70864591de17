"""RRWithPrior with priors from k-means on self-supervised features (001 Section 5.2 / Algorithm 4;
000 Table 6 and Table 9).

On a features dataset (SimCLR representations of an image dataset, :mod:`labeldp.feature_datasets`):

1. k-means (scikit-learn, ``random_state = seed``) splits the training features into ``C`` clusters
   (grid axis ``num_clusters``; 001 used C = 100 for BYOL features). The features are public under
   label DP, so the clustering costs no budget.
2. Each cluster's label histogram is released with the discrete Laplace mechanism at
   ``eps_p`` (001 Algorithm 4 step 4(b): noise ``dlaplace(eps_p / 2)``, L1 sensitivity 2), and its
   clipped, normalised noisy histogram is the prior of every example in the cluster
   (:func:`labeldp.mechanisms.classification.kmeans_priors`).
3. Every training label is randomised once with RRWithPrior (001 Algorithm 2) at
   ``eps_r = eps - eps_p``, with its cluster's prior; the classifier is trained on the noisy labels
   (one-hot cross-entropy), like RR.

``eps_p`` per target eps comes from the variant option ``prior_epsilon``: a number, or a list of
``[eps, eps_p]`` pairs (000 Table 9 is the config's ``rr_with_prior: default``); a run whose eps has
no entry is refused with the fix, never given a guessed split.

Privacy (label substitution, pure DP): step 2 is ``eps_p``-label-DP (disjoint clusters; one label
change moves one count down and one up in one row). Given its output, step 3 randomises each label
once with an ``eps_r``-DP randomizer whose prior is fixed by step 2's output (it does not otherwise
depend on the label), so changing one label changes one output with ratio at most ``e^eps_r``. By
adaptive sequential composition the run is ``(eps_p + eps_r, 0) = (eps, 0)``-label-DP; training is
post-processing. No accountant is involved (basic composition of two pure-DP steps is exact here).

Label randomness: ``numpy.random.default_rng([spec.seed, 5])`` draws the histogram noise, then the
RRWithPrior outputs.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from labeldp.methods.base import MethodResult, RunSpec
from baselines import common

NAME = "rr_with_prior"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
OPTIONAL_HYPERPARAMETERS = {"num_clusters": 100}
DATASET_KINDS = ("features",)
OPTIONS = ("prior_epsilon", "kmeans_n_init", "kmeans_max_iter")

MECHANISM = (
    "discrete_laplace_histograms (k-means clusters) + rr_with_prior (pure eps-label-DP: eps_p + eps_r, "
    "each label queried once)"
)


def prior_epsilon(option: Any, epsilon: float) -> float:
    """The budget for the prior at a run's ``epsilon``.

    Args:
      option: the variant's ``prior_epsilon``: a number, or ``[[eps, eps_p], ...]`` (000 Table 9).
      epsilon: the run's total label-DP budget.

    Returns:
      ``eps_p`` with ``0 < eps_p < epsilon``.

    Raises:
      ValueError: no option, no entry for ``epsilon``, or an ``eps_p`` that leaves nothing for RR.
    """
    if option is None:
        raise ValueError(
            "rr_with_prior needs the variant option prior_epsilon (a number, or [[eps, eps_p], ...] "
            "as in 000 Table 9): add it under variants.rr_with_prior.<variant> in the config"
        )
    if isinstance(option, (int, float)) and not isinstance(option, bool):
        eps_p = float(option)
    else:
        table = {float(e): float(p) for e, p in option}
        matches = [p for e, p in table.items() if math.isclose(e, epsilon, rel_tol=1e-9, abs_tol=1e-12)]
        if not matches:
            raise ValueError(
                f"rr_with_prior: prior_epsilon has no entry for eps = {epsilon:g} (entries: "
                f"{sorted(table)}); add [{epsilon:g}, eps_p] to the variant's prior_epsilon"
            )
        eps_p = matches[0]
    if not 0 < eps_p < epsilon:
        raise ValueError(
            f"rr_with_prior: prior_epsilon = {eps_p:g} must be in (0, eps = {epsilon:g}): the rest of "
            "eps goes to RRWithPrior"
        )
    return eps_p


def run(data, spec: RunSpec) -> MethodResult:
    """Releases k-means cluster priors, randomises the labels with RRWithPrior, trains on them.

    Args:
      data: a prepared features dataset (``x_train`` (n, D) float32 representations, ``y_train``,
        ``num_classes``, ...).
      spec: the run (finite ``epsilon``; ``hparams`` may carry ``num_clusters``).

    Returns:
      A :class:`MethodResult`; ``details`` has the budget split, the mean ``k*``, and diagnostics
      of the prior and of the noisy labels (accuracies against the true labels, never trained on).
    """
    import numpy as np

    from labeldp.accounting import label_events
    from labeldp.mechanisms.classification import kmeans_priors, rr_with_prior
    from labeldp.methods.common import build_model_for, train_and_evaluate
    from labeldp.training import one_hot

    eps = common.require_private(spec, NAME)
    common.check_options(spec, OPTIONS, NAME)
    eps_p = prior_epsilon(spec.options.get("prior_epsilon"), eps)
    eps_r = eps - eps_p
    clusters = int(spec.hparams.get("num_clusters", OPTIONAL_HYPERPARAMETERS["num_clusters"]))
    k = int(data.num_classes)
    rng = common.label_rng(spec.seed, common.STREAM_RR_WITH_PRIOR)
    priors = kmeans_priors(
        np.asarray(data.x_train, np.float32),
        data.y_train,
        num_clusters=clusters,
        num_classes=k,
        epsilon=eps_p,
        rng=rng,
        seed=int(spec.seed),
        n_init=int(spec.options.get("kmeans_n_init", 1)),
        max_iter=int(spec.options.get("kmeans_max_iter", 300)),
    )
    release = rr_with_prior(data.y_train, priors.priors, epsilon=eps_r, rng=rng)
    model = build_model_for(data)
    metrics, timings, audit = train_and_evaluate(model, data, one_hot(release.noisy_labels, k), spec, desc=NAME)
    details: Mapping[str, Any] = {
        "prior_epsilon": eps_p,
        "rr_epsilon": eps_r,
        "num_clusters": clusters,
        "mean_k": release.mean_k,
        "prior_argmax_accuracy": common.label_accuracy(np.argmax(priors.priors, axis=-1), data.y_train),
        "noisy_label_accuracy": common.label_accuracy(release.noisy_labels, data.y_train),
        "num_train": int(len(release.noisy_labels)),
        "label_rng": [int(spec.seed), common.STREAM_RR_WITH_PRIOR],
    }
    mechanism = f"{MECHANISM}; eps_p = {eps_p:g}, eps_r = {eps_r:g}"
    return MethodResult(
        metrics=metrics,
        privacy=common.pure_label_dp(
            eps_p + eps_r,
            mechanism,
            event=label_events.composed_label_event(
                [label_events.pure_epsilon_event(epsilon=eps_p), label_events.pure_epsilon_event(epsilon=eps_r)]
            ),
        ),
        timings=timings,
        details=dict(details),
        audit_log_probs=audit,
    )
