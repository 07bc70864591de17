"""The non-private step: the optimizer on the mean loss over a batch's real examples.

:class:`SGDStep` and its builder :func:`make_sgd_step`: same model, loss and
:class:`~labeldp.dpsgd.step_types.Batch` / :class:`~labeldp.dpsgd.step_types.TrainState` types as the
private step of 000 Algorithm 1 (:mod:`labeldp.dpsgd.step`), per example only; the non-private
baseline and the RR-style methods (via ``loss_fn``). Re-exported by :mod:`labeldp.dpsgd`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from labeldp.dpsgd.step_types import (
    Batch,
    LossFn,
    PyTree,
    StepInfo,
    TrainLogitsFn,
    TrainState,
    as_float_mask,
    tree_sqnorm,
    cross_entropy,
)

__all__ = ["SGDStep", "make_sgd_step"]


# --------------------------------------------------------------------------------------------
# Non-private step
# --------------------------------------------------------------------------------------------


class SGDStep:
    """A jitted non-private step: the optimizer on the mean loss over the batch's real examples.

    Same model, loss and :class:`Batch`/:class:`TrainState` types as :class:`DPSGDStep` (per
    example only). Build with :func:`make_sgd_step`.
    """

    def __init__(self, *, logits_fn: TrainLogitsFn, optimizer: optax.GradientTransformation, loss_fn: LossFn):
        self.optimizer = optimizer
        self._logits_fn = logits_fn
        self._loss_fn = loss_fn
        self._step_jit = jax.jit(self._step)

    def init(self, params: PyTree) -> TrainState:
        """Initial :class:`TrainState` for ``params``."""
        return TrainState(params=params, opt_state=self.optimizer.init(params), step=jnp.zeros((), jnp.int32))

    def _loss(self, params, batch: Batch, rng):
        logits = self._logits_fn(params, batch.x, rng)
        losses = jax.vmap(self._loss_fn)(logits, batch.y)
        mask = as_float_mask(batch.mask)
        return jnp.sum(losses * mask) / jnp.maximum(jnp.sum(mask), 1.0)

    def _step(self, state: TrainState, batch: Batch, rng):
        loss, grads = jax.value_and_grad(self._loss)(state.params, batch, rng)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        n = jnp.sum(as_float_mask(batch.mask))
        gnorm = jnp.sqrt(tree_sqnorm(grads))
        info = StepInfo(loss=loss, num_units=n, clipped_fraction=jnp.zeros(()), mean_grad_norm=jnp.zeros(()),
                        grad_norm=gnorm, denoise={})
        return TrainState(params=params, opt_state=opt_state, step=state.step + 1), info

    def __call__(self, state: TrainState, batch: Batch, rng: jax.Array) -> tuple[TrainState, StepInfo]:
        """One optimizer step on ``mean_{real i} loss_fn(logits_i, y_i)``.

        Args:
          state: current state. batch: a :class:`Batch` (x, y, mask). rng: PRNG key (dropout).

        Returns:
          ``(new_state, info)`` (``info.grad_norm`` is the mean gradient's norm).
        """
        return self._step_jit(state, batch, rng)


def make_sgd_step(
    *,
    optimizer: optax.GradientTransformation,
    model: Any | None = None,
    logits_fn: TrainLogitsFn | None = None,
    loss_fn: LossFn = cross_entropy,
) -> SGDStep:
    """Builds the non-private step (the non-private baseline; RR-style methods via ``loss_fn``).

    Args:
      optimizer: an optax transformation.
      model: a :class:`labeldp.models.ModelSpec` (uses ``model.train_logits``), or
      logits_fn: training-mode logits ``f(params, x, rng) -> (n, K)``.
      loss_fn: per-example loss ``(logits (K,), target) -> scalar``.

    Returns:
      An :class:`SGDStep`.
    """
    if model is not None:
        logits_fn = logits_fn or model.train_logits
    if logits_fn is None:
        raise ValueError("give model= or logits_fn=")
    return SGDStep(logits_fn=logits_fn, optimizer=optimizer, loss_fn=loss_fn)
