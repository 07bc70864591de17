"""RR: randomized response on the training labels, then ordinary training (000 Table 5).

Every training label is randomised ONCE with K-ary randomized response at the run's epsilon
(001 eq. 1: keep the label with probability ``e^eps / (e^eps + K - 1)``, otherwise a uniform
other label), and the model is trained with the plain cross-entropy on the one-hot noisy
labels. This is LP-1ST of 001 (Algorithm 3 with T = 1: RRWithPrior with the uniform prior
is RR).

Privacy: each label is queried once by an eps-DP randomizer, so the run is (eps, 0)-label-DP
(parallel composition); training is post-processing.

Label randomness: ``numpy.random.default_rng([spec.seed, 1])``, the same stream as
``rr_debiased`` (both methods see the same noisy labels for a given seed).
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec

NAME = "rr"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("image", "tabular", "features")  # tabular: binary ads data with users (labeldp.ads, 000 Table 7)

MECHANISM = "randomized_response (pure eps-label-DP, each label queried once)"


def noisy_targets(labels, *, num_classes: int, epsilon: float, rng):
    """The label-noise step of RR: randomized response, then one-hot targets.

    Args:
      labels: (n,) true integer labels.
      num_classes: K.
      epsilon: the label-DP budget.
      rng: a ``numpy.random.Generator`` (the only randomness).

    Returns:
      ``(noisy_labels, weights)``: (n,) int64 RR labels and the (n, K) float32 one-hot
      target matrix trained on.
    """
    from labeldp.mechanisms.classification import randomized_response
    from labeldp.training import one_hot

    noisy = randomized_response(labels, num_classes=num_classes, epsilon=epsilon, rng=rng)
    return noisy, one_hot(noisy, num_classes)


def run(data, spec: RunSpec) -> MethodResult:
    """Randomizes the training labels once with RR and trains on them.

    Args:
      data: a prepared image dataset (``x_train``, ``y_train``, ``num_classes``, ...).
      spec: the run (finite ``epsilon``).

    Returns:
      A :class:`MethodResult`; ``details`` has the noisy-label accuracy and the test-set confusion
      matrices of the trained model and of the model at initialisation (000 Figure 4).
    """
    from baselines import common
    from labeldp.accounting import label_events
    from labeldp.methods.common import build_model_for, train_and_evaluate

    if getattr(data, "kind", "image") == "tabular":  # user-level RR at eps / k per label
        from labeldp.ads.pipeline import run_ads_method

        return run_ads_method(data, spec, method=NAME)
    eps = common.require_private(spec, NAME)
    common.check_options(spec, (), NAME)
    rng = common.label_rng(spec.seed, common.STREAM_RANDOMIZED_RESPONSE)
    noisy, weights = noisy_targets(data.y_train, num_classes=data.num_classes, epsilon=eps, rng=rng)
    model = build_model_for(data)
    confusion: dict = {}
    metrics, timings, audit = train_and_evaluate(model, data, weights, spec, desc=NAME, confusion=confusion)
    details = {
        "noisy_label_accuracy": common.label_accuracy(noisy, data.y_train),
        "rr_keep_probability": _keep_probability(eps, data.num_classes),
        "num_train": int(len(noisy)),
        "label_rng": [int(spec.seed), common.STREAM_RANDOMIZED_RESPONSE],
        # test-set confusion matrices (rows: true class), trained and at initialisation: 000 Figure 4
        "confusion_matrix": confusion["test"],
        "confusion_matrix_init": confusion["init"],
    }
    return MethodResult(
        metrics=metrics,
        privacy=common.pure_label_dp(
            eps, MECHANISM, event=label_events.randomized_response_event(epsilon=eps, num_classes=data.num_classes)
        ),
        timings=timings,
        details=details,
        audit_log_probs=audit,
    )


def _keep_probability(epsilon: float, num_classes: int) -> float:
    """``e^eps / (e^eps + K - 1)``: the expected noisy-label accuracy."""
    from labeldp.mechanisms.classification import randomized_response_matrix

    return float(randomized_response_matrix(num_classes=num_classes, epsilon=epsilon)[0, 0])
