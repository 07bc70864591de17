"""ALIBI: additive Laplace noise on one-hot labels + iterative Bayesian inference.

Malek et al. (2021), "Antipodes of label differential privacy: PATE and ALIBI", Section 4;
a baseline of 000 Table 5, whose authors ran the official PyTorch implementation
(facebookresearch/label_dp_antipodes; 000 D.4). This module follows that implementation's
semantics (read, not copied):

1. Noise, once: every training label's one-hot vector gets i.i.d. Laplace(0, b) noise on its
   K coordinates, ``b = 2 / eps`` (L1 sensitivity 2): ``z_i = e_{y_i} + Lap(b)^K``
   (:func:`labeldp.mechanisms.classification.alibi_noisy_labels`). The official default
   ``noise_only_once=True`` draws the noise once when the dataset is built; its Laplace scale
   ``sigma / sqrt(2)`` with ``eps = 2 sqrt(2) / sigma`` is the same ``b = 2 / eps``.
2. Soft labels: the Bayesian posterior ``Pr[y = k | z_i] ∝ prior_k * exp(-||z_i - e_k||_1 /
   b)`` (:func:`labeldp.mechanisms.classification.alibi_posterior`), trained on with the
   soft-label cross-entropy ``sum_k W[i, k] * (-log softmax_k)``.
3. Prior (official default post-processing ``MAPWithPrior``): the model's own softmax. The
   official loss recomputes the posterior at EVERY step, with the prior the model's softmax
   on the same mini-batch, from the same training-mode forward pass (dropout on), detached
   from the gradient; the first steps therefore use the untrained model's near-uniform
   softmax. That is this module's default, option ``prior = "step"``; it needs its own
   jitted step (:func:`train_alibi_per_step`), which otherwise mirrors
   :func:`labeldp.training.train_weighted` (same init / shuffling / padding / seeding).

Other values of option ``prior`` (``spec.options``):

* ``"epoch"``: the suite's generic loop (:func:`labeldp.training.train_weighted` through
  ``train_and_evaluate``) with the targets recomputed after every epoch (``on_epoch_end``)
  from deterministic (dropout-off) predictions over the whole training set, the uniform
  prior in the first epoch. Cheaper to express but a weaker bootstrap: on a 20k-example
  MNIST subset at eps = 1, 10 epochs, lr 0.2, SGD momentum 0.9 it reached 57% test accuracy
  against 85% for ``"step"`` (30% vs 34% without momentum).
* ``"uniform"``: the posterior under the uniform prior, never refined (official ``MAP``).

The optimiser is the suite's, from the grid (000 Table 8: plain SGD; a ``momentum`` grid axis is
honoured), as for the other Table 5 baselines, unless the variant sets the recipe options
(:data:`labeldp.methods.base.OPTIMIZER_OPTIONS`). The official run's optimiser (``train_cifar_alibi.py``:
SGD with Nesterov momentum 0.9, weight decay 1e-4, a 30-epoch linear warm-up then a decay by 0.2
every 60 epochs, 200 epochs of batch 128) is the variant ``official_recipe`` with the grid point
lr 0.1, 200 epochs, batch 128 (weight decay 1e-4 is ``l2: 5e-5``: the suite's l2 adds ``2 c w``).
Its augmentation (crops and flips of CIFAR images) is off in the official ``main`` (``random_aug=False``), as here.

Network: the dataset's (000 Table 10's CNN), unless the variant sets option ``model`` (a registered network,
:func:`labeldp.methods.common.build_model_for`): ``mnist_cnn_torch_defaults`` is that CNN as a PyTorch port
builds it (padding 0, PyTorch's default initialisation, standardised inputs; :mod:`labeldp.models_torch_defaults`),
the network 000 presumably ran ALIBI with (variant ``official_recipe_torch_defaults``). The BatchNorm networks
(``inception_001``, ``resnet18_v2_cifar``) train too: :func:`labeldp.training.train_weighted`'s BatchNorm step
takes the per-step targets from the training-mode forward pass (batch statistics), as the official loss does.
The rest of the recipe's network options (``init_from``) and augmentation (``augment*``) are refused. The label
release does not depend on the network: the same ``z`` for every ``model``.

Diagnostic option ``test_curve_diagnostic: true``: the test accuracy after every epoch, in ``details``
(``test_accuracy_by_epoch``). The official loop prints it and keeps the best epoch's accuracy on the test
set beside the final one (``best_acc``); this option measures how far the two are apart. The test labels never
choose anything: the record's metric stays the final model's. On a held-out run (``validation_fraction``) it also
reports the model's log-probabilities at the held-out rows after every epoch (``audit_log_probs_by_epoch``), which
the runner scores against the RR-released held-out labels (``details.validation_noisy_accuracy_by_epoch``,
:func:`labeldp.selection.score_heldout`): the honest counterpart of ``best_acc``. A table column may read the
test curve at the epoch those labels choose (:mod:`labeldp.heldout_stopping`): a value chosen without the test
labels.

Privacy: the noisy vectors ``z`` are the only access to the labels and each label is noised
once, so the run is (eps, 0)-label-DP; the posterior and the model's predictions (functions
of ``z`` and the public images only) are post-processing.

Label randomness: ``numpy.random.default_rng([spec.seed, 3])``.
"""

from __future__ import annotations

from labeldp.methods.base import OPTIMIZER_OPTIONS, MethodResult, RunSpec
from baselines.common import softmax
from baselines import common

NAME = "alibi"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("image", "features")
#: honest selection (variant options validation_fraction / validation_epsilon): the runner trains on the fitting
#: rows and scores the model on the RR-released held-out labels (labeldp.selection.heldout_data)
HELDOUT_SELECTION_BY_RUNNER = True
#: the released labels depend on the seed's noise stream alone (labeldp.methods.base documents the flag)
LABEL_RELEASE_FIXED_BY_SEED = True

MECHANISM = "alibi_laplace (Laplace(2/eps) on one-hot labels; pure eps-label-DP, each label noised once)"
PRIOR_MODES = ("step", "epoch", "uniform")
DEFAULT_PRIOR = "step"
#: The network option ALIBI honours: ``model`` of :data:`labeldp.methods.base.NETWORK_OPTIONS` (not ``init_from``).
MODEL_OPTIONS = ("model",)
OPTIONS = ("prior", "test_curve_diagnostic", *OPTIMIZER_OPTIONS, *MODEL_OPTIONS)


def noisy_soft_labels(labels, *, num_classes: int, epsilon: float, rng):
    """The label-noise step of ALIBI: noisy one-hot vectors and their uniform-prior posterior.

    Args:
      labels: (n,) true integer labels.
      num_classes: K.
      epsilon: the label-DP budget (Laplace scale ``2 / epsilon``).
      rng: a ``numpy.random.Generator``.

    Returns:
      ``(noisy_onehot, soft_labels)``: the (n, K) float64 released vectors ``z`` and the (n,
      K) posterior ``Pr[y = k | z]`` under the uniform prior.
    """
    from labeldp.mechanisms.classification import alibi_noisy_labels, alibi_posterior

    z = alibi_noisy_labels(labels, num_classes=num_classes, epsilon=epsilon, rng=rng)
    return z, alibi_posterior(z, None, epsilon=epsilon)


def refine_soft_labels(noisy_onehot, logits, *, epsilon: float):
    """ALIBI's refinement: the posterior of ``z`` with the model's softmax as the prior.

    numpy, float64 (used by ``prior="epoch"`` and for diagnostics).

    Args:
      noisy_onehot: (n, K) released vectors ``z``.
      logits: (n, K) the model's logits on the same examples.
      epsilon: the ALIBI budget used to make ``z``.

    Returns:
      (n, K) float64 soft labels.
    """
    from labeldp.mechanisms.classification import alibi_posterior

    return alibi_posterior(noisy_onehot, softmax(logits), epsilon=epsilon)


def step_targets(noisy_onehot, logits, *, epsilon: float):
    """The per-step targets of ``prior="step"`` (jax.numpy, traceable under ``jax.jit``).

    ``alibi_posterior(z, softmax(stop_gradient(logits)))``: the prior is the model's current
    softmax on the batch and carries no gradient, as in the official loss.
    """
    import jax

    from labeldp.mechanisms.classification import alibi_posterior

    prior = jax.nn.softmax(jax.lax.stop_gradient(logits), axis=-1)
    return alibi_posterior(noisy_onehot, prior, epsilon=epsilon)


def train_alibi_per_step(
    model, *, x_train, noisy_onehot, epsilon: float, config, seed: int, desc: str = NAME, on_epoch_end=None
):
    """SGD on the ALIBI loss with the posterior recomputed at every step (official semantics).

    :func:`labeldp.training.train_weighted` (same initialisation, shuffling, padding and
    seeding as every other label method) on the stored noisy vectors ``z``, with the targets of
    each batch replaced by :func:`step_targets` of its ``z`` and the logits of the same
    forward pass.

    Args:
      on_epoch_end: optional ``(epoch, params) -> None`` observer (a diagnostic; it must not return targets:
        the per-step posterior is the only target here).

    Returns:
      A :class:`labeldp.training.TrainResult`.
    """
    from labeldp.training import train_weighted

    return train_weighted(
        model,
        x_train=x_train,
        target_weights=noisy_onehot,
        config=config,
        seed=seed,
        desc=desc,
        target_transform=lambda z, logits: step_targets(z, logits, epsilon=epsilon),
        on_epoch_end=None if on_epoch_end is None else _observer(on_epoch_end),
    )


def _observer(callback):
    """``callback`` as a ``train_weighted`` epoch hook that never changes the targets."""

    def hook(epoch, params):
        if callback(epoch, params) is not None:
            raise ValueError("an ALIBI per-step epoch observer must return None (it cannot set targets)")
        return None

    return hook


def run(data, spec: RunSpec) -> MethodResult:
    """Noises the one-hot labels once and trains on iteratively refined posterior soft labels.

    Args:
      data: a prepared image dataset.
      spec: the run (finite ``epsilon``); options in :data:`OPTIONS`: ``prior`` in :data:`PRIOR_MODES`
        (default ``"step"``), ``model`` (a registered network), the optimiser's, ``test_curve_diagnostic``.

    Returns:
      A :class:`MethodResult`; ``details`` has the argmax accuracy of the noisy vectors, of
      the uniform-prior posterior and of the final posterior. With ``test_curve_diagnostic``, ``details`` also
      has the test accuracy after every epoch (``test_accuracy_by_epoch``), and on data with ``audit_inputs`` (a
      held-out run's held-out rows, or the audit's canaries) the result's ``audit_log_probs_by_epoch`` holds the
      log-probabilities there after every epoch (the runner scores a held-out run's, then drops them).
    """
    import time

    import numpy as np

    from labeldp.accounting import label_events
    from labeldp.methods.common import build_model_for, train_and_evaluate, train_config
    from labeldp.training import accuracy_pct, audit_log_probs, predict_logits, to_float_images

    eps = common.require_private(spec, NAME)
    common.check_options(spec, OPTIONS, NAME)
    prior_mode = str(spec.options.get("prior", DEFAULT_PRIOR))
    if prior_mode not in PRIOR_MODES:
        raise ValueError(f"alibi option prior must be one of {PRIOR_MODES}, got {prior_mode!r}")
    k = int(data.num_classes)
    y = np.asarray(data.y_train)
    rng = common.label_rng(spec.seed, common.STREAM_ALIBI)
    z, soft0 = noisy_soft_labels(y, num_classes=k, epsilon=eps, rng=rng)
    model = build_model_for(data, options=spec.options)
    epochs = int(spec.hparams["epochs"])
    x_train = to_float_images(data.x_train)
    state = {"targets": soft0, "refreshes": 0, "refresh_seconds": 0.0}
    curve_option = spec.options.get("test_curve_diagnostic", False)
    if not isinstance(curve_option, bool):
        raise ValueError(f"alibi option test_curve_diagnostic must be true or false, got {curve_option!r}")
    if curve_option and prior_mode != "step":
        raise ValueError(
            f"alibi option test_curve_diagnostic needs prior 'step' (got {prior_mode!r}); drop one of them"
        )
    x_test = to_float_images(data.x_test)
    test_curve: list[float] = []
    audit_curve: list = []  # the log-probabilities at data.audit_inputs after every epoch (held-out runs)

    def observe_test(epoch, params):
        test_curve.append(accuracy_pct(model, params, x_test, data.y_test))
        audit = audit_log_probs(model, params, data)
        if audit is not None:
            audit_curve.append(audit)

    if prior_mode == "step":
        result = train_alibi_per_step(
            model,
            x_train=x_train,
            noisy_onehot=z,
            epsilon=eps,
            config=train_config(spec),
            seed=spec.seed,
            on_epoch_end=observe_test if curve_option else None,
        )
        acc = accuracy_pct(model, result.params, x_test, data.y_test)
        audit = audit_log_probs(model, result.params, data)
        metrics = {
            "test_accuracy_pct": acc,
            "diverged": result.diverged or not np.isfinite(result.final_loss),
            "final_train_loss": result.final_loss,
            "steps": result.steps,
        }
        timings = {"train_seconds": result.train_seconds, "seconds_per_epoch": result.seconds_per_epoch}
        # Diagnostic: the posterior under the final model's (deterministic) predictions.
        state["targets"] = refine_soft_labels(z, predict_logits(model, result.params, x_train), epsilon=eps)
    else:

        def on_epoch_end(epoch, params):
            if prior_mode == "uniform" or epoch >= epochs - 1:
                return None  # the last epoch's refresh would never be trained on
            t0 = time.perf_counter()
            soft = refine_soft_labels(z, predict_logits(model, params, x_train), epsilon=eps)
            state["targets"] = soft
            state["refreshes"] += 1
            state["refresh_seconds"] += time.perf_counter() - t0
            return soft.astype(np.float32)

        metrics, timings, audit = train_and_evaluate(
            model, data, soft0.astype(np.float32), spec, desc=NAME, on_epoch_end=on_epoch_end
        )
        timings = dict(timings, prior_refresh_seconds=state["refresh_seconds"])
    details = {
        "noisy_label_accuracy": common.label_accuracy(np.argmax(z, axis=-1), y),
        "soft_label_accuracy_uniform_prior": common.label_accuracy(np.argmax(soft0, axis=-1), y),
        "soft_label_accuracy_final": common.label_accuracy(np.argmax(state["targets"], axis=-1), y),
        "laplace_scale": 2.0 / eps,
        "prior": prior_mode,
        "epoch_prior_refreshes": int(state["refreshes"]),
        "num_train": int(len(y)),
        "label_rng": [int(spec.seed), common.STREAM_ALIBI],
        "label_release_sha256": common.release_digest(z),
    }
    if "model" in spec.options:
        details["model"] = model.name
    if curve_option:
        details["test_accuracy_by_epoch"] = test_curve
        details["test_curve_note"] = (
            "test accuracy after every epoch (never chooses anything; a column may read it at the epoch chosen on "
            "the released held-out labels, labeldp/heldout_stopping.py); the metric is the final model's; "
            "train_seconds includes these test passes"
        )
    return MethodResult(
        metrics=metrics,
        privacy=common.pure_label_dp(eps, MECHANISM, event=label_events.pure_epsilon_event(epsilon=eps)),
        timings=timings,
        details=details,
        audit_log_probs=audit,
        audit_log_probs_by_epoch=audit_curve if curve_option and audit is not None else None,
    )
