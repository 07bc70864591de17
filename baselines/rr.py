"""RR: randomized response on the training labels, then ordinary training (000 Table 5).

Every training label is randomised ONCE with K-ary randomized response at the run's epsilon
(001 eq. 1: keep the label with probability ``e^eps / (e^eps + K - 1)``, otherwise a uniform
other label), and the model is trained with the plain cross-entropy on the one-hot noisy
labels. This is LP-1ST of 001 (Algorithm 3 with T = 1: RRWithPrior with the uniform prior
is RR).

Privacy: each label is queried once by an eps-DP randomizer, so the run is (eps, 0)-label-DP
(parallel composition); training is post-processing.

A variant may set the training optimiser (:data:`labeldp.methods.base.OPTIMIZER_OPTIONS`, e.g.
``momentum``; default 000 Table 8's plain SGD): it acts on the released labels only. Tasks with a fixed
recipe (the ads MLP's RMSProp) refuse them, naming why.

Label randomness: ``numpy.random.default_rng([spec.seed, 1])``, the same stream as
``rr_debiased`` (both methods see the same noisy labels for a given seed).
"""

from __future__ import annotations

from labeldp.methods.base import OPTIMIZER_OPTIONS, MethodResult, RunSpec
from baselines import common

NAME = "rr"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("image", "tabular", "features")  # tabular: binary ads data (labeldp.tasks.ads; 000 Table 7 per user)
#: honest selection (variant options validation_fraction / validation_epsilon): the runner trains on the fitting
#: rows and scores the model on the RR-released held-out labels (labeldp.selection.heldout_data)
HELDOUT_SELECTION_BY_RUNNER = True
#: the released labels depend on the seed's noise stream alone (labeldp.methods.base documents the flag)
LABEL_RELEASE_FIXED_BY_SEED = True

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
    """Randomizes the training labels once with RR and trains on them, on any classification task.

    At the user level (ads data with ``examples_per_user = k``, 000 Section 6) each of a user's k labels is
    randomised at eps / k: by basic composition (group privacy) the user's label vector is eps-DP.

    Args:
      data: a prepared classification dataset (images, features, binary ads data).
      spec: the run (finite ``epsilon``).

    Returns:
      A :class:`MethodResult`; ``details`` has the noisy-label accuracy and, on images, the test-set
      confusion matrices of the trained model and of the model at initialisation (000 Figure 4).
    """
    from labeldp import tasks
    from labeldp.accounting import label_events
    from labeldp.mechanisms.user_level import rr_group_epsilon, user_randomized_response

    eps = common.require_private(spec, NAME)
    task = tasks.task_for(data, spec)
    tasks.check_task_options(task, spec, OPTIMIZER_OPTIONS, NAME)
    units = task.training_labels()
    k, num_classes = units.labels_per_unit, units.num_classes
    per_label = rr_group_epsilon(epsilon=eps, k=k)
    stream = common.STREAM_RANDOMIZED_RESPONSE
    noisy = user_randomized_response(
        units.labels, units.unit_ids, epsilon=eps, k=k, num_classes=num_classes, rng=task.label_rng(stream)
    )
    trained = task.train_on_targets(noisy, desc=NAME, confusion=True)
    mechanism = MECHANISM
    if units.privacy_unit == "user":
        mechanism = (
            f"randomized_response at eps/k = {per_label:.6g} on each of a user's k = {k} labels "
            "(group privacy: eps-DP for the user's label vector)"
        )
    event = label_events.per_user_label_event(
        label_events.randomized_response_event(epsilon=per_label, num_classes=num_classes), labels_per_user=k
    )
    details = {
        "noisy_label_accuracy": common.label_accuracy(noisy, units.labels),
        "rr_keep_probability": _keep_probability(per_label, num_classes),
        "per_label_epsilon": per_label,
        "num_train": int(len(noisy)),
        "label_rng": list(task.label_entropy(stream)),
        "label_release_sha256": common.release_digest(noisy),
    }
    return trained.result(
        common.label_dp_outcome(epsilon=eps, mechanism=mechanism, privacy_unit=units.privacy_unit, event=event),
        details=details,
    )


def _keep_probability(epsilon: float, num_classes: int) -> float:
    """``e^eps / (e^eps + K - 1)``: the expected noisy-label accuracy."""
    from labeldp.mechanisms.classification import randomized_response_matrix

    return float(randomized_response_matrix(num_classes=num_classes, epsilon=epsilon)[0, 0])
