"""RR-Debiased: randomized-response labels with the unbiased loss of 000 Appendix D.1.

The training labels are randomised once with K-ary RR (exactly as ``rr``: same generator
stream, so for a given seed both methods see the same noisy labels) and the model minimises

    l_hat(f(x), y_hat) = (l(f(x), y_hat) - p/K * sum_k l(f(x), k)) / (1 - p),
    p = K / (e^eps + K - 1),

whose expectation over the RR draw is the clean loss l(f(x), y) (000 D.1; LP-RR-SGD of 001
Algorithm 5, eq. 7). With the cross-entropy this is the weighted loss
``sum_k W[i, k] * (-log softmax_k)`` with ``W = rr_debiased_weights(y_hat)``: ``(1 - p/K) /
(1 - p)`` on the noisy label and ``-(p/K) / (1 - p)`` elsewhere. The negative weights are
intended (they make the loss unbiased); they also make it unbounded below, so at small eps
training can diverge, which the result records (``diverged``).

Privacy: (eps, 0)-label-DP, each label queried once; the loss is post-processing, and so is the
training optimiser a variant may set (:data:`labeldp.methods.base.OPTIMIZER_OPTIONS`, e.g. ``momentum``;
default 000 Table 8's plain SGD).
"""

from __future__ import annotations

from labeldp.methods.base import OPTIMIZER_OPTIONS, MethodResult, RunSpec
from baselines import common

NAME = "rr_debiased"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("image", "features")
#: honest selection (variant options validation_fraction / validation_epsilon): the runner trains on the fitting
#: rows and scores the model on the RR-released held-out labels (labeldp.selection.heldout_data)
HELDOUT_SELECTION_BY_RUNNER = True
#: the released labels depend on the seed's noise stream alone (labeldp.methods.base documents the flag)
LABEL_RELEASE_FIXED_BY_SEED = True

MECHANISM = "randomized_response (pure eps-label-DP, each label queried once)"


def noisy_targets(labels, *, num_classes: int, epsilon: float, rng):
    """The label-noise step of RR-Debiased: RR labels and their debiasing weights.

    Args:
      labels: (n,) true integer labels.
      num_classes: K.
      epsilon: the label-DP budget.
      rng: a ``numpy.random.Generator``.

    Returns:
      ``(noisy_labels, weights)``: (n,) RR labels and the (n, K) float32 weight matrix ``W``
      with ``E[W[i] | y_i] = one_hot(y_i)``.
    """
    import numpy as np

    from labeldp.mechanisms.classification import randomized_response, rr_debiased_weights

    noisy = randomized_response(labels, num_classes=num_classes, epsilon=epsilon, rng=rng)
    weights = rr_debiased_weights(noisy, num_classes=num_classes, epsilon=epsilon)
    return noisy, np.asarray(weights, dtype=np.float32)


def run(data, spec: RunSpec) -> MethodResult:
    """Randomizes the training labels once with RR and trains with the debiased loss.

    Args:
      data: a prepared image dataset.
      spec: the run (finite ``epsilon``).

    Returns:
      A :class:`MethodResult`; ``details`` has the noisy-label accuracy and the weights.
    """
    from labeldp.accounting import label_events
    from labeldp.methods.common import build_model_for, train_and_evaluate

    eps = common.require_private(spec, NAME)
    common.check_options(spec, OPTIMIZER_OPTIONS, NAME)
    k = int(data.num_classes)
    rng = common.label_rng(spec.seed, common.STREAM_RANDOMIZED_RESPONSE)
    noisy, weights = noisy_targets(data.y_train, num_classes=k, epsilon=eps, rng=rng)
    model = build_model_for(data)
    metrics, timings, audit = train_and_evaluate(model, data, weights, spec, desc=NAME)
    p = k / (_exp(eps) + k - 1.0)
    details = {
        "noisy_label_accuracy": common.label_accuracy(noisy, data.y_train),
        "rr_p": p,
        "weight_on_noisy_label": (1.0 - p / k) / (1.0 - p),
        "weight_off_noisy_label": -(p / k) / (1.0 - p),
        "num_train": int(len(noisy)),
        "label_rng": [int(spec.seed), common.STREAM_RANDOMIZED_RESPONSE],
        "label_release_sha256": common.release_digest(noisy),
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


def _exp(x: float) -> float:
    import math

    try:
        return math.exp(x)
    except OverflowError:
        return math.inf
