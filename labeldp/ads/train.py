"""Training the ads model (:mod:`labeldp.ads.model`) on binary labels: non-private or on
randomized labels (RR), and DP-SGD / LabelDP-Pro with per-USER gradients (000 Section 6).

Both use the suite's one DP-SGD engine (:mod:`labeldp.dpsgd`): :func:`train_on_labels` its
non-private step on the mean binary cross-entropy, :func:`train_user_level` its private step
with ``unit="user"``: a user's gradient is the sum of the gradients of its k examples, clipped
as ONE unit to norm C, so one user's contribution (all k labels together) is bounded by C; users
are Poisson-sampled at rate q = n1 / U (000 Section 6, Table 7). RMSProp, as 000 Appendix D.3
states for Table 7. One jitted step driven from a Python loop (XLA's CPU while-loop is slow).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from labeldp.ads.model import AdsMLP, two_class_logits
from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step, make_sgd_step
from labeldp.dpsgd.loop import run_dp_loop, split_init_key
from labeldp.dpsgd.training_plan import DPTrainingPlan

__all__ = [
    "AdsTrainConfig",
    "AdsTrainResult",
    "ShuffledRun",
    "init_params",
    "run_shuffled_epochs",
    "train_on_labels",
    "train_user_level",
    "predict_proba",
]


@dataclasses.dataclass(frozen=True)
class AdsTrainConfig:
    """Hyper-parameters (000 Table 8's Table 7 grid).

    Attributes:
      learning_rate: RMSProp step size.
      epochs: passes over the training rows (non-private / RR) or users (user-level DP-SGD).
      batch_size: rows per step, or EXPECTED users per step for user-level DP-SGD.
    """

    learning_rate: float
    epochs: int
    batch_size: int

    def __post_init__(self):
        if not (self.learning_rate > 0 and self.epochs >= 1 and self.batch_size >= 1):
            raise ValueError(f"invalid training config {self}: learning_rate > 0, epochs >= 1, batch_size >= 1")


@dataclasses.dataclass(frozen=True)
class AdsTrainResult:
    params: Any
    final_loss: float
    steps: int
    train_seconds: float
    diverged: bool
    details: dict = dataclasses.field(default_factory=dict)


def init_params(model: AdsMLP, x_num: np.ndarray, x_cat: np.ndarray, *, seed: int):
    """Initial parameters (the same for every method at a seed)."""
    return model.init(jax.random.PRNGKey(seed), (jnp.asarray(x_num[:1]), jnp.asarray(x_cat[:1])))


@dataclasses.dataclass(frozen=True)
class ShuffledRun:
    """What :func:`run_shuffled_epochs` trained.

    Attributes:
      state: the final training state.
      losses: the per-step training losses (diagnostic).
      epoch_losses: each finished epoch's mean loss.
      steps: the steps taken.
      diverged: an epoch's mean loss was non-finite.
    """

    state: Any
    losses: list[float]
    epoch_losses: list[float]
    steps: int
    diverged: bool


def run_shuffled_epochs(
    step,
    state,
    *,
    x_num: np.ndarray,
    x_cat: np.ndarray,
    targets: np.ndarray,
    batch_size: int,
    epochs: int,
    rng: np.random.Generator,
    key: jax.Array,
    stop_on_divergence: bool,
) -> ShuffledRun:
    """The non-private loop of the ads models: ``epochs`` passes over a fresh permutation each, in batches of
    ``batch_size`` rows; the last batch is filled by wrapping around the permutation and those rows are masked
    out; step ``t`` gets the key ``fold_in(key, t)``.

    Args:
      step: a compiled step (:func:`labeldp.dpsgd.make_sgd_step`); state: its initial state.
      x_num, x_cat: the rows' features. targets: the rows' labels or per-class weights.
      batch_size: rows per step (at most the rows). epochs: passes.
      rng: the shuffling generator. key: the step-key stream.
      stop_on_divergence: stop after an epoch whose mean loss is non-finite.

    Returns:
      A :class:`ShuffledRun`.
    """
    n = int(targets.shape[0])
    bs = min(int(batch_size), n)
    per_epoch = -(-n // bs)
    losses: list[float] = []
    epoch_losses: list[float] = []
    steps, diverged = 0, False
    for _ in range(int(epochs)):
        order = rng.permutation(n)
        pad = per_epoch * bs - n
        idx = np.concatenate([order, order[:pad]]) if pad else order
        mask = np.concatenate([np.ones(n, bool), np.zeros(pad, bool)])
        epoch = []
        for b in range(per_epoch):
            sl = idx[b * bs : (b + 1) * bs]
            batch = Batch(x=(x_num[sl], x_cat[sl]), y=targets[sl], mask=mask[b * bs : (b + 1) * bs])
            state, info = step(state, batch, jax.random.fold_in(key, steps))
            epoch.append(info.loss)
            steps += 1
        fetched = jax.device_get(epoch)
        losses += [float(v) for v in fetched]
        epoch_losses.append(float(np.mean(fetched)))  # the float32 mean, as the records have always held
        if not np.isfinite(epoch_losses[-1]):
            diverged = True
            if stop_on_divergence:
                break
    return ShuffledRun(state=state, losses=losses, epoch_losses=epoch_losses, steps=steps, diverged=diverged)


def train_on_labels(
    model: AdsMLP, *, x_num: np.ndarray, x_cat: np.ndarray, y: np.ndarray, config: AdsTrainConfig, seed: int
) -> AdsTrainResult:
    """Minimises the mean binary cross-entropy to ``y`` (true or randomized labels) with RMSProp.

    Args:
      model: the network. x_num: ``(n, d_num)``. x_cat: ``(n, d_cat)``. y: ``(n,)`` labels in {0, 1}.
      config: hyper-parameters. seed: initialisation and shuffling seed.

    Returns:
      An :class:`AdsTrainResult`; ``diverged`` when the loss became non-finite (training stops).
    """
    if int(y.shape[0]) == 0:
        raise ValueError("no training rows: the training split is empty")
    step = make_sgd_step(optimizer=optax.rmsprop(config.learning_rate), logits_fn=two_class_logits(model))
    t0 = time.perf_counter()
    run = run_shuffled_epochs(
        step,
        step.init(init_params(model, x_num, x_cat, seed=seed)),
        x_num=x_num,
        x_cat=x_cat,
        targets=np.asarray(y, dtype=np.int32),
        batch_size=config.batch_size,
        epochs=config.epochs,
        rng=np.random.default_rng([seed, 1]),
        key=jax.random.PRNGKey(seed),
        stop_on_divergence=True,
    )
    last = run.epoch_losses[-1] if run.epoch_losses else float("nan")
    return AdsTrainResult(
        params=run.state.params,
        final_loss=last,
        steps=run.steps,
        train_seconds=time.perf_counter() - t0,
        diverged=run.diverged,
    )


def train_user_level(
    model: AdsMLP,
    *,
    x_num: np.ndarray,
    x_cat: np.ndarray,
    y: np.ndarray,
    config: AdsTrainConfig,
    clip_norm: float,
    plan: DPTrainingPlan,
    seed: int,
    denoiser=None,
    alt_batch_users: int = 0,
) -> AdsTrainResult:
    """DP-SGD (or LabelDP-Pro with ``denoiser``) with per-user gradients.

    Args:
      model: the network.
      x_num: ``(U, k, d_num)``; x_cat: ``(U, k, d_cat)``; y: ``(U, k)``: every user's k examples
        (:func:`labeldp.data.sources.criteo_attribution.cap_examples_per_user` makes them).
      config: ``learning_rate`` (RMSprop); the batch size and epochs are the plan's.
      clip_norm: C.
      plan: the run's :class:`~labeldp.dpsgd.training_plan.DPTrainingPlan` over the U users: its
        sampler, steps and sigma (:func:`labeldp.dpsgd.loop.run_dp_loop` draws exactly
        ``plan.steps`` batches).
      seed: initialisation, batch sampling and noise seed.
      denoiser: a :class:`labeldp.denoisers.Denoiser` (None: NoOp, i.e. DP-SGD).
      alt_batch_users: users in LabelDP-Pro's alternative batch (AltConv); 0 for none.

    Returns:
      An :class:`AdsTrainResult` with the mean clipped fraction in ``details``.
    """
    users, k = int(y.shape[0]), int(y.shape[1])
    if plan.n != users:
        raise ValueError(f"the plan is for {plan.n} users, the data has {users}")
    n1 = plan.expected_batch_size
    dp_config = DPSGDConfig(
        clip_norm=float(clip_norm),
        noise_multiplier=plan.noise_multiplier,
        expected_batch_size=n1,
        sampling=plan.sampling,
        unit="user",
    )
    logits = two_class_logits(model)
    step = make_dpsgd_step(
        optimizer=optax.rmsprop(config.learning_rate),
        config=dp_config,
        logits_fn=logits,
        projection_logits_fn=None if denoiser is None else logits,  # carries column_norms
        denoiser=denoiser,
        tapped_fn=logits.tapped,
    )
    state = step.init(init_params(model, x_num[:, 0], x_cat[:, 0], seed=seed))
    loop = run_dp_loop(
        step=step,
        state=state,
        plan=plan,
        seed=seed,
        key=split_init_key(seed)[0],
        gather=lambda idx: (x_num[idx], x_cat[idx]),
        labels=np.asarray(y, dtype=np.int32),
        alt_batch_size=int(alt_batch_users),
        gather_alt=lambda alt: (x_num[alt].reshape(-1, x_num.shape[-1]), x_cat[alt].reshape(-1, x_cat.shape[-1])),
    )
    clipped = loop.clipped_fraction
    return AdsTrainResult(
        params=loop.state.params,
        final_loss=loop.final_loss,
        steps=loop.steps,
        train_seconds=loop.seconds,
        diverged=loop.diverged,
        details={
            "mean_clipped_fraction": float(np.mean(clipped)) if clipped else None,
            "examples_per_user": k,
            "users": users,
            **step.describe(),
        },
    )


def predict_proba(
    model: AdsMLP, params, x_num: np.ndarray, x_cat: np.ndarray, *, batch_size: int = 16384
) -> np.ndarray:
    """P(y = 1 | x) for every row, in batches."""
    fn = jax.jit(lambda p, xn, xc: jax.nn.sigmoid(model.apply(p, (xn, xc))))
    out = [
        np.asarray(fn(params, x_num[i : i + batch_size], x_cat[i : i + batch_size]))
        for i in range(0, len(x_num), batch_size)
    ]
    return np.concatenate(out) if out else np.zeros(0)
