"""RMSProp training of a :class:`~labeldp.regression.model.TabularMLP` on (noisy) labels.

003 Appendix G: squared loss, RMSProp, l2 regularisation 1e-4 on the weights, the batch sizes,
learning rates and epochs of the paper's grids (config data, ``grids.*.regression_*``). The l2
term is ``l2 * sum ||W||^2`` over every kernel and embedding table (Keras' ``l2(1e-4)``
convention, which 003's code base uses); biases are not regularised.

One jitted step driven from a Python loop over shuffled mini-batches (XLA's CPU while-loop is
slow, shared/MACHINE_NOTES.md); the last partial batch is padded and masked, so every step has
one shape and the same seed gives the same numbers.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from labeldp.regression.model import TabularMLP

__all__ = ["RegressionTrainConfig", "TrainResult", "train_regression", "predict"]


@dataclasses.dataclass(frozen=True)
class RegressionTrainConfig:
    """Training hyper-parameters (003 Appendix G).

    Attributes:
      learning_rate: RMSProp step size.
      epochs: passes over the training rows.
      batch_size: rows per step.
      l2: weight of the l2 penalty on kernels and embeddings.
    """

    learning_rate: float
    epochs: int
    batch_size: int
    l2: float = 1e-4

    def __post_init__(self):
        if not (self.learning_rate > 0 and self.epochs >= 1 and self.batch_size >= 1 and self.l2 >= 0):
            raise ValueError(
                f"invalid training config {self}: learning_rate > 0, epochs >= 1, batch_size >= 1, l2 >= 0"
            )


@dataclasses.dataclass(frozen=True)
class TrainResult:
    params: object
    final_loss: float
    steps: int
    train_seconds: float
    diverged: bool


def _l2_penalty(params) -> jax.Array:
    leaves = jax.tree_util.tree_leaves_with_path(params)
    total = jnp.float32(0.0)
    for path, leaf in leaves:
        name = str(path[-1])
        if "kernel" in name or "embedding" in name:
            total = total + jnp.sum(jnp.square(leaf))
    return total


def train_regression(
    model: TabularMLP, *, x_num: np.ndarray, x_cat: np.ndarray, y: np.ndarray, config: RegressionTrainConfig, seed: int
) -> TrainResult:
    """Minimises the mean squared error to ``y`` plus the l2 penalty with RMSProp.

    Args:
      model: the network (its ``output_bias`` is typically ``mean(y)``).
      x_num: ``(n, d_num)`` float features.
      x_cat: ``(n, d_cat)`` int category indices.
      y: ``(n,)`` training targets (the randomized labels).
      config: hyper-parameters.
      seed: initialisation and shuffling seed.

    Returns:
      A :class:`TrainResult`; ``diverged`` when the loss became non-finite (training stops).
    """
    n = int(y.shape[0])
    if n == 0:
        raise ValueError("no training rows: the training split is empty")
    bs = min(int(config.batch_size), n)
    init_key = jax.random.PRNGKey(seed)
    params = model.init(init_key, jnp.asarray(x_num[:1]), jnp.asarray(x_cat[:1]))
    tx = optax.rmsprop(config.learning_rate)
    opt_state = tx.init(params)

    def loss_fn(p, xn, xc, t, mask):
        err = model.apply(p, xn, xc) - t
        mse = jnp.sum(mask * err**2) / jnp.maximum(jnp.sum(mask), 1.0)
        return mse + config.l2 * _l2_penalty(p), mse

    @jax.jit
    def step(p, s, xn, xc, t, mask):
        (_, mse), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, xn, xc, t, mask)
        updates, s = tx.update(grads, s, p)
        return optax.apply_updates(p, updates), s, mse

    rng = np.random.default_rng(seed)
    steps_per_epoch = -(-n // bs)
    y32 = np.asarray(y, dtype=np.float32)
    t0 = time.perf_counter()
    last, steps, diverged = float("nan"), 0, False
    for _ in range(int(config.epochs)):
        order = rng.permutation(n)
        pad = steps_per_epoch * bs - n
        idx = np.concatenate([order, order[:pad]]) if pad else order
        mask_all = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])
        losses = []
        for b in range(steps_per_epoch):
            sl = idx[b * bs : (b + 1) * bs]
            params, opt_state, mse = step(
                params, opt_state, x_num[sl], x_cat[sl], y32[sl], mask_all[b * bs : (b + 1) * bs]
            )
            losses.append(mse)
            steps += 1
        last = float(np.mean(jax.device_get(losses)))
        if not np.isfinite(last):
            diverged = True
            break
    return TrainResult(
        params=params, final_loss=last, steps=steps, train_seconds=time.perf_counter() - t0, diverged=diverged
    )


def predict(model: TabularMLP, params, x_num: np.ndarray, x_cat: np.ndarray, *, batch_size: int = 8192) -> np.ndarray:
    """Predictions for every row, in batches."""
    fn = jax.jit(model.apply)
    out = [
        np.asarray(fn(params, x_num[i : i + batch_size], x_cat[i : i + batch_size]))
        for i in range(0, x_num.shape[0], batch_size)
    ]
    return np.concatenate(out) if out else np.zeros((0,), np.float32)
