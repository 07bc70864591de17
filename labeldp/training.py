"""Non-private mini-batch training of the Table 10 models on (soft) label targets.

Every label-randomisation method (RR, RR-Debiased, ALIBI, LP-2ST stages) and the non-private
reference train the same way: SGD over shuffled fixed-size batches of a weighted
cross-entropy ``sum_k W[i, k] * (-log softmax(f(x_i))_k)``. ``W`` is the one-hot label for
ordinary training, a soft label for ALIBI, and the debiasing weights of 000 Appendix D.1 for
RR-Debiased, so one compiled step serves them all. The loss is averaged over the real
examples of the batch (the last, partial batch is padded and masked so the compiled shape
never changes).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from labeldp.augment import AUGMENTATIONS, DEFAULT_CUTOUT, DEFAULT_PAD
from labeldp.models import ModelSpec
from labeldp.training_step import TargetTransform, make_weighted_sgd_step, mixup_batch

__all__ = [
    "TrainConfig",
    "TrainResult",
    "to_float_images",
    "one_hot",
    "mixup_batch",
    "make_weighted_sgd_step",
    "LR_SCHEDULES",
    "sgd_optimizer",
    "train_weighted",
    "predict_logits",
    "accuracy_pct",
    "initial_params",
    "confusion_matrix",
]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of a non-private training run (000 Table 8).

    Attributes:
      learning_rate: SGD step size.
      epochs: passes over the training set.
      batch_size: examples per step (1024 in the paper).
      momentum: SGD momentum (0 in the paper: plain SGD).
      mixup_alpha: mixup (Zhang et al. 2018; 001 Appendix B, "Learning with Noisy Labels")
        with mixing weight ``lam ~ Beta(alpha, alpha)`` per batch; 0 turns it off.
      lr_schedule: ``constant`` (000 Table 8), ``warmup_linear_decay`` (001 Appendix B, MNIST family:
        the step size grows linearly from 0 to ``learning_rate`` over the first ``warmup_fraction`` of
        all steps, then decays linearly to 0 at the last step) or ``warmup_piecewise`` (001 Appendix B,
        CIFAR: the same warm-up, then constant with a decay by 10 at 30%, 60% and 90% of the steps) or
        ``epoch_warmup_step_decay`` (ALIBI's official recipe, ``train_cifar_alibi.py`` of
        facebookresearch/label_dp_antipodes: in epoch ``e`` the rate is ``learning_rate * (e + 1) / 30``
        for ``e < 30``, then ``learning_rate * 0.2 ** (e // 60)``; constant within an epoch).
      nesterov: Nesterov momentum (ALIBI's official recipe; needs ``momentum`` > 0).
      warmup_fraction: the warm-up share of ``warmup_linear_decay`` (001: 0.15).
      l2: coefficient ``c`` of an l2 penalty ``c * sum(w ** 2)`` over all parameters added to the
        loss (001 Appendix B: 1e-4), applied as weight decay ``2 c w`` before momentum.
      augment: 001 Appendix B's data augmentation, ``none`` (off) or ``crop_flip_cutout`` (random
        crop after ``augment_pad`` pixels of zero padding, left-right flip, ``augment_cutout``-pixel
        cutout; :mod:`labeldp.augment`), applied per batch from a key of the run's key stream.
      augment_pad, augment_cutout: the crop padding and cutout side in pixels (001 states none; 4 and 8).
      progress: show a tqdm progress bar.
    """

    learning_rate: float
    epochs: int
    batch_size: int = 1024
    momentum: float = 0.0
    nesterov: bool = False
    mixup_alpha: float = 0.0
    lr_schedule: str = "constant"
    warmup_fraction: float = 0.15
    l2: float = 0.0
    augment: str = "none"
    augment_pad: int = DEFAULT_PAD
    augment_cutout: int = DEFAULT_CUTOUT
    progress: bool = True

    def __post_init__(self):
        if not (self.mixup_alpha >= 0.0 and np.isfinite(self.mixup_alpha)):
            raise ValueError(f"mixup_alpha must be a finite number >= 0 (0 = off), got {self.mixup_alpha!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction!r}")
        if not (self.l2 >= 0.0 and np.isfinite(self.l2)):
            raise ValueError(f"l2 must be a finite number >= 0 (0 = off), got {self.l2!r}")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1) (0 = plain SGD), got {self.momentum!r}")
        if self.nesterov and not self.momentum > 0.0:
            raise ValueError("nesterov needs momentum > 0: set the variant's momentum (ALIBI's recipe: 0.9)")
        if self.augment not in AUGMENTATIONS:
            raise ValueError(f"augment must be one of {AUGMENTATIONS}, got {self.augment!r}")
        if int(self.augment_pad) < 0 or int(self.augment_cutout) < 0:
            raise ValueError(
                f"augment_pad and augment_cutout must be >= 0, got {self.augment_pad}, {self.augment_cutout}"
            )


#: The step-size schedules of :class:`TrainConfig`.
LR_SCHEDULES = ("constant", "warmup_linear_decay", "warmup_piecewise", "epoch_warmup_step_decay")

#: ``epoch_warmup_step_decay``: warm-up epochs, then the decay factor every ``decay_every`` epochs
#: (ALIBI's official ``adjust_learning_rate``).
EPOCH_WARMUP, EPOCH_DECAY_EVERY, EPOCH_DECAY = 30, 60, 0.2


def epoch_warmup_step_decay(peak: float, *, steps_per_epoch: int) -> optax.Schedule:
    """ALIBI's official schedule by epoch (``train_cifar_alibi.py``, facebookresearch/label_dp_antipodes):
    ``peak * (e + 1) / 30`` in epoch ``e < 30``, then ``peak * 0.2 ** (e // 60)``.

    Args:
      peak: the configured learning rate.
      steps_per_epoch: optimiser steps per epoch (the epoch of step ``t`` is ``t // steps_per_epoch``).

    Returns:
      An optax schedule of the step count.
    """

    def schedule(count):
        epoch = count // int(steps_per_epoch)
        warm = peak * (epoch + 1) / EPOCH_WARMUP
        decayed = peak * EPOCH_DECAY ** (epoch // EPOCH_DECAY_EVERY)
        return jnp.where(epoch < EPOCH_WARMUP, warm, decayed)

    return schedule


def sgd_optimizer(config: TrainConfig, *, total_steps: int) -> optax.GradientTransformation:
    """SGD of ``config``: its schedule, momentum and l2 penalty (001 Appendix B's recipe when set).

    Args:
      config: the training settings.
      total_steps: the number of optimiser steps the run will take (the schedule's length).

    Returns:
      An optax transformation; with the defaults (constant rate, no l2) exactly
      ``optax.sgd(learning_rate, momentum)``.
    """
    peak = float(config.learning_rate)
    if config.lr_schedule == "constant":
        lr = peak
    elif config.lr_schedule == "warmup_linear_decay":
        warm = max(1, int(round(config.warmup_fraction * total_steps)))
        lr = optax.join_schedules(
            [optax.linear_schedule(0.0, peak, warm), optax.linear_schedule(peak, 0.0, max(1, int(total_steps) - warm))],
            [warm],
        )
    elif config.lr_schedule == "epoch_warmup_step_decay":
        lr = epoch_warmup_step_decay(peak, steps_per_epoch=max(1, int(total_steps) // max(1, int(config.epochs))))
    else:  # warmup_piecewise
        warm = max(1, int(round(config.warmup_fraction * total_steps)))
        drops = {int(round(f * total_steps)): 0.1 for f in (0.3, 0.6, 0.9) if round(f * total_steps) > warm}
        lr = optax.join_schedules(
            [
                optax.linear_schedule(0.0, peak, warm),
                optax.piecewise_constant_schedule(peak, {b - warm: s for b, s in drops.items()}),
            ],
            [warm],
        )
    tx = optax.sgd(lr, momentum=config.momentum or None, nesterov=bool(config.nesterov))
    if config.l2 > 0:
        tx = optax.chain(optax.add_decayed_weights(2.0 * float(config.l2)), tx)
    return tx


@dataclasses.dataclass(frozen=True)
class TrainResult:
    params: object
    seconds_per_epoch: float
    train_seconds: float
    final_loss: float
    diverged: bool
    steps: int
    forward: str = "model"


def to_float_images(x: np.ndarray) -> np.ndarray:
    """uint8 NHWC images -> float32 in [0, 1]; float inputs (a features dataset's representations,
    :mod:`labeldp.feature_datasets`) are returned as float32 unchanged; other integer inputs are ids (a
    ratings dataset's (user, item) pairs, exact in float32 below 2^24) and keep their values as float32."""
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.floating):
        return x.astype(np.float32, copy=False)
    if x.dtype != np.uint8:
        return x.astype(np.float32)
    return x.astype(np.float32) / 255.0


def one_hot(labels: np.ndarray, num_classes: int) -> np.ndarray:
    labels = np.asarray(labels)
    return np.eye(num_classes, dtype=np.float32)[labels]


def _seeded_init(spec: ModelSpec, seed: int):
    """(the training key stream, the initial parameters) of a run seeded ``seed``."""
    key, init_key = jax.random.split(jax.random.key(seed))
    return key, spec.init(init_key)


def initial_params(spec: ModelSpec, seed: int):
    """The parameters :func:`train_weighted` starts from for ``seed`` (the model at initialisation, 000 Figure 4)."""
    return _seeded_init(spec, seed)[1]


def confusion_matrix(spec: ModelSpec, params, x: np.ndarray, y: np.ndarray, num_classes: int) -> list[list[int]]:
    """``m[true][predicted]``: counts of the model's argmax predictions on ``x`` against the labels ``y``."""
    pred = np.argmax(predict_logits(spec, params, x), axis=-1)
    m = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(m, (np.asarray(y, dtype=np.int64), pred), 1)
    return m.tolist()


def train_weighted(
    spec: ModelSpec,
    *,
    x_train: np.ndarray,
    target_weights: np.ndarray,
    config: TrainConfig,
    seed: int,
    init_params=None,
    desc: str = "train",
    on_epoch_end: Callable[[int, object], np.ndarray | None] | None = None,
    target_transform: TargetTransform | None = None,
) -> TrainResult:
    """Trains ``spec`` with SGD on a weighted cross-entropy.

    Args:
      spec: the model.
      x_train: float32 inputs (n, H, W, C).
      target_weights: (n, K) weights W; row i is the target of example i (one-hot, soft label
        or debiasing weights).
      config: optimiser settings.
      seed: seeds initialisation, shuffling, dropout and augmentation.
      init_params: start from this model state instead of a fresh initialisation (LP-2ST
        stage 2 starts from the stage-1 model; for a BatchNorm model, its running statistics too).
      desc: progress bar label.
      on_epoch_end: optional callback ``(epoch, params) -> new target_weights or None``;
        ALIBI's ``prior="epoch"`` mode uses it to refine its soft labels.
      target_transform: optional per-step targets from (stored rows, logits of the same
        forward pass); ALIBI's default ``prior="step"`` mode (see
        :func:`make_weighted_sgd_step`).

    Returns:
      A :class:`TrainResult`; ``diverged`` is True if a non-finite loss was seen.
    """
    n = x_train.shape[0]
    if target_weights.shape[0] != n:
        raise ValueError(f"target_weights has {target_weights.shape[0]} rows for {n} examples")
    if config.mixup_alpha > 0 and not getattr(spec.module, "MIXES_INPUTS", True):
        raise ValueError(
            f"mixup mixes inputs, and model {spec.name!r} takes ids that cannot be mixed; "
            "set the grid's mixup_alpha1 / mixup_alpha2 to 0 for this dataset"
        )
    key, params = _seeded_init(spec, seed)
    params = params if init_params is None else init_params
    bs = int(config.batch_size)
    steps_per_epoch = -(-n // bs)
    tx = sgd_optimizer(config, total_steps=steps_per_epoch * int(config.epochs))
    opt_state = tx.init(params["params"] if spec.has_batch_norm else params)
    step = make_weighted_sgd_step(
        spec,
        tx,
        target_transform,
        mixup_alpha=float(config.mixup_alpha),
        augment=config.augment,
        augment_pad=int(config.augment_pad),
        augment_cutout=int(config.augment_cutout),
    )
    rng = np.random.default_rng(seed)
    x_dev = jnp.asarray(x_train)
    w_dev = jnp.asarray(target_weights, dtype=jnp.float32)
    diverged = False
    last_loss = float("nan")
    epoch_times = []
    total_steps = 0
    t_start = time.perf_counter()
    for epoch in range(int(config.epochs)):
        t0 = time.perf_counter()
        perm = rng.permutation(n)
        pad = steps_per_epoch * bs - n
        perm_padded = np.concatenate([perm, np.zeros(pad, dtype=perm.dtype)])
        mask_all = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])
        bar = tqdm(
            range(steps_per_epoch),
            desc=f"{desc} epoch {epoch + 1}/{config.epochs}",
            disable=not config.progress,
            leave=False,
        )
        for s in bar:
            idx = perm_padded[s * bs : (s + 1) * bs]
            mask = jnp.asarray(mask_all[s * bs : (s + 1) * bs])
            key, sk = jax.random.split(key)
            params, opt_state, loss = step(params, opt_state, x_dev[idx], w_dev[idx], mask, sk)
            total_steps += 1
        last_loss = float(loss)
        if not np.isfinite(last_loss):
            diverged = True
        epoch_times.append(time.perf_counter() - t0)
        if on_epoch_end is not None:
            new_w = on_epoch_end(epoch, params)
            if new_w is not None:
                w_dev = jnp.asarray(new_w, dtype=jnp.float32)
    train_seconds = time.perf_counter() - t_start
    # The first epoch includes compilation; report the median epoch when there are several.
    spe = float(np.median(epoch_times[1:])) if len(epoch_times) > 1 else float(epoch_times[0])
    return TrainResult(
        params=params,
        seconds_per_epoch=spe,
        train_seconds=train_seconds,
        final_loss=last_loss,
        diverged=diverged,
        steps=total_steps,
        forward=step.forward,
    )


@functools.lru_cache(maxsize=64)
def _jitted_logits(spec: ModelSpec):
    """One compiled logits function per model (a sweep evaluates many runs of one model: a new
    ``jax.jit`` per call would compile again each time)."""
    return jax.jit(spec.logits)


def predict_logits(spec: ModelSpec, params, x: np.ndarray, *, batch_size: int = 2048) -> np.ndarray:
    """Deterministic logits over ``x`` in batches (padded to one compiled shape)."""
    fn = _jitted_logits(spec)
    n = x.shape[0]
    out = []
    for s in range(0, n, batch_size):
        xb = x[s : s + batch_size]
        m = xb.shape[0]
        if m < batch_size and n > batch_size:
            xb = np.concatenate([xb, np.zeros((batch_size - m, *xb.shape[1:]), xb.dtype)])
        out.append(np.asarray(fn(params, jnp.asarray(xb)))[:m])
    return np.concatenate(out, axis=0)


def audit_log_probs(spec: ModelSpec, params, data) -> np.ndarray | None:
    """Log-probabilities of the trained model at ``data.audit_inputs`` (the label-canary
    audit's canaries, :mod:`labeldp.audit`), or None when the data carries none."""
    x = getattr(data, "audit_inputs", None)
    if x is None:
        return None
    return np.asarray(jax.nn.log_softmax(jnp.asarray(predict_logits(spec, params, to_float_images(x))), axis=-1))


def accuracy_pct(spec: ModelSpec, params, x: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy in percent."""
    logits = predict_logits(spec, params, x)
    return float(100.0 * np.mean(np.argmax(logits, axis=-1) == np.asarray(y)))
