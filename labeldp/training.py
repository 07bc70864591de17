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
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from labeldp.dpsgd.chunks import sum_over_chunks
from labeldp.dpsgd.clipping import default_chunk_size
from labeldp.dpsgd.sgd_step import resolve_forward
from labeldp.dpsgd.tape import Tape, row_keys
from labeldp.models import ModelSpec

__all__ = [
    "TrainConfig",
    "TrainResult",
    "to_float_images",
    "one_hot",
    "mixup_batch",
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
        CIFAR: the same warm-up, then constant with a decay by 10 at 30%, 60% and 90% of the steps).
      warmup_fraction: the warm-up share of ``warmup_linear_decay`` (001: 0.15).
      l2: coefficient ``c`` of an l2 penalty ``c * sum(w ** 2)`` over all parameters added to the
        loss (001 Appendix B: 1e-4), applied as weight decay ``2 c w`` before momentum.
      progress: show a tqdm progress bar.
    """

    learning_rate: float
    epochs: int
    batch_size: int = 1024
    momentum: float = 0.0
    mixup_alpha: float = 0.0
    lr_schedule: str = "constant"
    warmup_fraction: float = 0.15
    l2: float = 0.0
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


#: The step-size schedules of :class:`TrainConfig`.
LR_SCHEDULES = ("constant", "warmup_linear_decay", "warmup_piecewise")


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
    tx = optax.sgd(lr, momentum=config.momentum or None)
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


def _weighted_ce(logits: jax.Array, weights: jax.Array) -> jax.Array:
    return -jnp.sum(weights * jax.nn.log_softmax(logits, axis=-1), axis=-1)


TargetTransform = Callable[[jax.Array, jax.Array], jax.Array]
"""``(w_batch, logits) -> targets``: per-step targets computed from the stored rows and the
logits of the same forward pass (traced under ``jax.jit``; e.g. ALIBI's posterior)."""


def mixup_batch(
    x: jax.Array, w: jax.Array, rng: jax.Array, *, alpha: float, mask: jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    """Mixup (Zhang et al. 2018), as 001 Appendix B uses it for learning with noisy labels.

    Each real example ``i`` of the batch is paired with example ``pi(i)`` of a uniformly random
    permutation ``pi`` of the real rows (padding rows, ``mask == 0``, are paired only among
    themselves, so they never leak into a real row), and both inputs and targets are mixed with one
    ``lam ~ Beta(alpha, alpha)``: ``x~_i = lam x_i + (1 - lam) x_pi(i)``, ``w~_i = lam w_i +
    (1 - lam) w_pi(i)``. The weighted cross-entropy is linear in ``w``, so training on ``w~``
    is the usual mixup loss ``lam l(x~, w) + (1 - lam) l(x~, w_pi)``. Labels enter only as the
    (already randomised) targets: mixup is post-processing for label DP.

    Args:
      x: inputs (B, ...).
      w: target weights (B, K).
      rng: a JAX key.
      alpha: the Beta parameter (> 0).
      mask: optional (B,) 1 for real rows, 0 for padding (default: all real).

    Returns:
      ``(x~, w~)``.
    """
    k_lam, k_perm = jax.random.split(rng)
    lam = jax.random.beta(k_lam, alpha, alpha)
    b = x.shape[0]
    if mask is None:
        perm = jax.random.permutation(k_perm, b)
    else:
        pad = (jnp.asarray(mask) <= 0).astype(jnp.float32)
        # slots: real rows in index order, then padding rows; partners: real rows in a uniformly
        # random order, then padding rows in a random order. Slot j's row is paired with partner j.
        slots = jnp.argsort(pad, stable=True)
        partners = jnp.argsort(jax.random.uniform(k_perm, (b,)) + 2.0 * pad)
        perm = jnp.zeros((b,), jnp.int32).at[slots].set(partners.astype(jnp.int32))
    return lam * x + (1.0 - lam) * x[perm], lam * w + (1.0 - lam) * w[perm]


def make_weighted_sgd_step(
    spec: ModelSpec,
    optimizer: optax.GradientTransformation,
    target_transform: TargetTransform | None = None,
    *,
    mixup_alpha: float = 0.0,
) -> Callable:
    """A jitted step ``(params, opt_state, x, w, mask, rng) -> (params, opt_state, loss)``.

    With ``target_transform`` the loss is the weighted cross-entropy against
    ``target_transform(w, logits)`` instead of ``w``. With ``mixup_alpha > 0`` the batch is
    mixed first (:func:`mixup_batch`), real rows only with real rows; the mask still selects
    the real rows for the loss. On CPU, for a model with a tapped forward, the gradient runs
    through it in chunks (``step.forward == "tapped"``; same numbers up to float32 rounding).
    """
    if mixup_alpha > 0 and target_transform is not None:
        raise ValueError("mixup and a target_transform (ALIBI's per-step posterior) cannot be combined")

    forward = resolve_forward("auto", tapped_available=spec.tapped is not None)

    def loss_fn(params, x, w, mask, rng):
        if mixup_alpha > 0:
            rng, mix_rng = jax.random.split(rng)
            x, w = mixup_batch(x, w, mix_rng, alpha=mixup_alpha, mask=mask)
        logits = spec.train_logits(params, x, rng)
        if target_transform is not None:
            w = target_transform(w, logits)
        per_example = _weighted_ce(logits, w)
        denom = jnp.maximum(jnp.sum(mask), 1.0)
        return jnp.sum(per_example * mask) / denom

    def summed_loss(params, x, w, mask, keys):  # the tapped forward, one chunk (row keys: dropout)
        logits = spec.tapped(params, x, Tape(None, dropout_keys=keys))
        if target_transform is not None:
            w = target_transform(w, logits)
        return jnp.sum(_weighted_ce(logits, w) * mask)

    def tapped_value_and_grad(params, x, w, mask, rng):
        """The mean loss and its gradient, summed chunk by chunk through the tapped forward
        (im2col convolutions; :func:`labeldp.dpsgd.sgd_step.resolve_forward`). Mixup mixes the
        whole batch first, as :func:`loss_fn` does."""
        if mixup_alpha > 0:
            rng, mix_rng = jax.random.split(rng)
            x, w = mixup_batch(x, w, mix_rng, alpha=mixup_alpha, mask=mask)
        keys = row_keys(rng, mask.shape[0])  # as spec.train_logits(params, x, rng) on the whole batch
        denom = jnp.maximum(jnp.sum(mask), 1.0)

        def chunk_sums(xc, wc, mc, kc):
            return jax.value_and_grad(summed_loss)(params, xc, wc, mc, kc)

        loss, grads = sum_over_chunks(chunk_sums, (x, w, mask, keys), chunk_size=default_chunk_size())
        return loss / denom, jax.tree_util.tree_map(lambda g: g / denom, grads)

    value_and_grad = tapped_value_and_grad if forward == "tapped" else jax.value_and_grad(loss_fn)

    @jax.jit
    def step(params, opt_state, x, w, mask, rng):
        loss, grads = value_and_grad(params, x, w, mask, rng)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step.forward = forward
    return step


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
      seed: seeds initialisation, shuffling and dropout.
      init_params: start from these parameters instead of a fresh initialisation (LP-2ST
        stage 2 starts from the stage-1 model).
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
    opt_state = tx.init(params)
    step = make_weighted_sgd_step(spec, tx, target_transform, mixup_alpha=float(config.mixup_alpha))
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


def predict_logits(spec: ModelSpec, params, x: np.ndarray, *, batch_size: int = 2048) -> np.ndarray:
    """Deterministic logits over ``x`` in batches (padded to one compiled shape)."""
    fn = jax.jit(spec.logits)
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
