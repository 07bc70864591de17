"""ALIBI: additive Laplace noise on one-hot labels + iterative Bayesian inference.

Malek et al. (2021), "Antipodes of label differential privacy: PATE and ALIBI", Section 4;
a baseline of 000 Table 5 (whose authors ran the official PyTorch implementation,
facebookresearch/label_dp_antipodes, 000 D.4).

1. Noise, once: every training label's one-hot vector gets i.i.d. Laplace(0, b) noise on its
   K coordinates with ``b = 2 / eps`` (L1 sensitivity 2), ``z_i = e_{y_i} + Lap(b)^K``
   (:func:`labeldp.mechanisms.classification.alibi_noisy_labels`). This is the official
   code's default ``noise_only_once=True`` (its ``NoisedCIFAR`` draws the noise once when the
   dataset is built); its scale ``sigma / sqrt(2)`` with ``eps = 2 sqrt(2) / sigma`` is the
   same ``b = 2 / eps``.
2. Soft labels: the Bayesian posterior ``Pr[y = k | z_i] ∝ prior_k * exp(-||z_i - e_k||_1 /
   b)`` (:func:`labeldp.mechanisms.classification.alibi_posterior`), trained on with the
   soft-label cross-entropy ``sum_k W[i, k] * (-log softmax_k)``.
3. Prior ("MAPWithPrior", the official default post-processing): the model's own softmax
   predictions. The first epoch uses the uniform prior; after every epoch (except the last,
   whose targets would never be used) the targets are recomputed with the current model's
   softmax over the whole training set (``on_epoch_end`` of
   :func:`labeldp.training.train_weighted`).

Choice documented here: the official code recomputes the posterior inside the loss at every
step, with the prior the model's softmax on the *same mini-batch in training mode* (dropout
on), detached from the gradient; its very first steps therefore use an untrained model's
near-uniform softmax as prior. This suite's training loop compiles one weighted-CE step for
all label methods and takes the targets as a fixed matrix, so the prior is refreshed once per
epoch from deterministic (dropout-off) predictions instead of every step, and it is exactly
uniform in the first epoch. Option ``prior`` (``spec.options``): ``"model"`` (default, the
above) or ``"uniform"`` (the official ``MAP`` mode: the posterior under the uniform prior,
never refined).

The official run also uses momentum 0.9, weight decay 1e-4 and a warm-up schedule; here the
optimiser is the suite's (000 Table 8: plain SGD; ``momentum`` if the grid has it), as for the
other Table 5 baselines.

Privacy: the noisy vectors ``z`` are the only access to the labels and each label is noised
once, so the run is (eps, 0)-label-DP; the posterior and the model's predictions (a function
of ``z`` and the public images only) are post-processing.

Label randomness: ``numpy.random.default_rng([spec.seed, 3])``.
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec

NAME = "alibi"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("image",)

MECHANISM = "alibi_laplace (Laplace(2/eps) on one-hot labels; pure eps-label-DP, each label noised once)"
PRIOR_MODES = ("model", "uniform")


def noisy_soft_labels(labels, *, num_classes: int, epsilon: float, rng):
    """The label-noise step of ALIBI: noisy one-hot vectors and their uniform-prior posterior.

    Args:
      labels: (n,) true integer labels.
      num_classes: K.
      epsilon: the label-DP budget (Laplace scale ``2 / epsilon``).
      rng: a ``numpy.random.Generator``.

    Returns:
      ``(noisy_onehot, soft_labels)``: the (n, K) float64 released vectors ``z`` and the (n,
      K) posterior ``Pr[y = k | z]`` under the uniform prior (the first epoch's targets).
    """
    from labeldp.mechanisms.classification import alibi_noisy_labels, alibi_posterior

    z = alibi_noisy_labels(labels, num_classes=num_classes, epsilon=epsilon, rng=rng)
    return z, alibi_posterior(z, None, epsilon=epsilon)


def refine_soft_labels(noisy_onehot, logits, *, epsilon: float):
    """ALIBI's refinement: the posterior of ``z`` with the model's softmax as the prior.

    Args:
      noisy_onehot: (n, K) released vectors ``z``.
      logits: (n, K) the current model's logits on the same examples.
      epsilon: the ALIBI budget used to make ``z``.

    Returns:
      (n, K) float64 soft labels.
    """
    from baselines.common import softmax
    from labeldp.mechanisms.classification import alibi_posterior

    return alibi_posterior(noisy_onehot, softmax(logits), epsilon=epsilon)


def run(data, spec: RunSpec) -> MethodResult:
    """Noises the one-hot labels once and trains on iteratively refined posterior soft labels.

    Args:
      data: a prepared image dataset.
      spec: the run (finite ``epsilon``); option ``prior`` in :data:`PRIOR_MODES`.

    Returns:
      A :class:`MethodResult`; ``details`` has the argmax accuracy of the noisy vectors and of
      the soft labels (first and last epoch's targets) and the number of prior refreshes.
    """
    import time

    import numpy as np

    from baselines import common
    from labeldp.methods.common import build_model_for, train_and_evaluate
    from labeldp.training import predict_logits, to_float_images

    eps = common.require_private(spec, NAME)
    prior_mode = str(spec.options.get("prior", "model"))
    if prior_mode not in PRIOR_MODES:
        raise ValueError(f"alibi option prior must be one of {PRIOR_MODES}, got {prior_mode!r}")
    k = int(data.num_classes)
    y = np.asarray(data.y_train)
    rng = common.label_rng(spec.seed, common.STREAM_ALIBI)
    z, soft0 = noisy_soft_labels(y, num_classes=k, epsilon=eps, rng=rng)
    model = build_model_for(data)
    epochs = int(spec.hparams["epochs"])
    x_train = to_float_images(data.x_train)
    state = {"targets": soft0, "refreshes": 0, "refresh_seconds": 0.0}

    def on_epoch_end(epoch, params):
        if prior_mode == "uniform" or epoch >= epochs - 1:
            return None  # the last epoch's refresh would never be trained on
        t0 = time.perf_counter()
        soft = refine_soft_labels(z, predict_logits(model, params, x_train), epsilon=eps)
        state["targets"] = soft
        state["refreshes"] += 1
        state["refresh_seconds"] += time.perf_counter() - t0
        return soft.astype(np.float32)

    metrics, timings = train_and_evaluate(model, data, soft0.astype(np.float32), spec, desc=NAME,
                                          on_epoch_end=on_epoch_end)
    timings = dict(timings, prior_refresh_seconds=state["refresh_seconds"])
    details = {
        "noisy_label_accuracy": common.label_accuracy(np.argmax(z, axis=-1), y),
        "soft_label_accuracy_first_epoch": common.label_accuracy(np.argmax(soft0, axis=-1), y),
        "soft_label_accuracy_last_epoch": common.label_accuracy(np.argmax(state["targets"], axis=-1), y),
        "laplace_scale": 2.0 / eps,
        "prior": prior_mode,
        "prior_refreshes": int(state["refreshes"]),
        "num_train": int(len(y)),
        "label_rng": [int(spec.seed), common.STREAM_ALIBI],
    }
    return MethodResult(metrics=metrics, privacy=common.pure_label_dp(eps, MECHANISM),
                        timings=timings, details=details)
