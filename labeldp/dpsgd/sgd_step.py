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
    model_forwards,
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
from labeldp.dpsgd.clipping import TappedFn, default_chunk_size
from labeldp.dpsgd.chunks import sum_over_chunks
from labeldp.dpsgd.tape import Tape, row_keys

FORWARDS = ("model", "tapped")


def resolve_forward(requested: str, *, tapped_available: bool, backend: str | None = None) -> str:
    """Which forward pass the non-private step differentiates: ``"model"`` (the model's own
    ``train_logits`` on the whole batch) or ``"tapped"`` (its tapped forward, im2col
    convolutions, in chunks: 2.0x faster for 000's MNIST CNN on the 2-core CPU,
    ``benchmarks/results/dpsgd_step_cpu.md``). ``"auto"``: tapped on CPU when available.

    Raises:
      ValueError: an unknown name, or ``"tapped"`` for a model without a tapped forward.
    """
    if requested == "auto":
        return "tapped" if (tapped_available and (backend or jax.default_backend()) == "cpu") else "model"
    if requested not in FORWARDS:
        raise ValueError(f"forward must be 'auto' or one of {FORWARDS}, got {requested!r}")
    if requested == "tapped" and not tapped_available:
        raise ValueError("forward 'tapped' needs a model with a tapped forward (labeldp.dpsgd.tape); use 'model'")
    return requested


__all__ = ["SGDStep", "make_sgd_step"]


# --------------------------------------------------------------------------------------------
# Non-private step
# --------------------------------------------------------------------------------------------


class SGDStep:
    """A jitted non-private step: the optimizer on the mean loss over the batch's real examples.

    Same model, loss and :class:`Batch`/:class:`TrainState` types as :class:`DPSGDStep` (per
    example only). Build with :func:`make_sgd_step`.
    """

    def __init__(
        self,
        *,
        logits_fn: TrainLogitsFn,
        optimizer: optax.GradientTransformation,
        loss_fn: LossFn,
        tapped_fn: TappedFn | None = None,
        forward: str = "auto",
        chunk_size: int | None = None,
    ):
        self.optimizer = optimizer
        self._logits_fn = logits_fn
        self._loss_fn = loss_fn
        self._tapped_fn = tapped_fn
        self.forward = resolve_forward(forward, tapped_available=tapped_fn is not None)
        self.chunk_size = chunk_size if chunk_size is not None else default_chunk_size()
        self._step_jit = jax.jit(self._step)

    def describe(self) -> dict:
        """What a record stores about how this step computed its gradient."""
        out = {"sgd_forward": self.forward}
        if self.forward == "tapped":
            out["sgd_chunk_size"] = self.chunk_size
        return out

    def init(self, params: PyTree) -> TrainState:
        """Initial :class:`TrainState` for ``params``."""
        return TrainState(params=params, opt_state=self.optimizer.init(params), step=jnp.zeros((), jnp.int32))

    def _loss(self, params, batch: Batch, rng):
        logits = self._logits_fn(params, batch.x, rng)
        losses = jax.vmap(self._loss_fn)(logits, batch.y)
        mask = as_float_mask(batch.mask)
        return jnp.sum(losses * mask) / jnp.maximum(jnp.sum(mask), 1.0)

    def _tapped_sums(self, params, batch: Batch, rng):
        """Summed loss and summed gradient over the real examples, chunk by chunk, through the
        tapped forward (im2col convolutions; the chunks keep the patches in cache). Dropout rows
        use ``split(rng, B)``, as the model's ``train_logits`` on the whole batch does."""

        def summed(p, x, y, m, k):
            losses = jax.vmap(self._loss_fn)(self._tapped_fn(p, x, Tape(None, dropout_keys=k)), y)
            return jnp.sum(losses * m)

        mask = as_float_mask(batch.mask)
        keys = row_keys(rng, mask.shape[0])

        def chunk_sums(x, y, m, k):
            return jax.value_and_grad(summed)(params, x, y, m, k)

        return sum_over_chunks(chunk_sums, (batch.x, batch.y, mask, keys), chunk_size=self.chunk_size)

    def _step(self, state: TrainState, batch: Batch, rng):
        if self.forward == "tapped":
            loss_sum, grad_sum = self._tapped_sums(state.params, batch, rng)
            count = jnp.maximum(jnp.sum(as_float_mask(batch.mask)), 1.0)
            loss, grads = loss_sum / count, jax.tree_util.tree_map(lambda g: g / count, grad_sum)
        else:
            loss, grads = jax.value_and_grad(self._loss)(state.params, batch, rng)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        n = jnp.sum(as_float_mask(batch.mask))
        gnorm = jnp.sqrt(tree_sqnorm(grads))
        info = StepInfo(
            loss=loss,
            num_units=n,
            clipped_fraction=jnp.zeros(()),
            mean_grad_norm=jnp.zeros(()),
            grad_norm=gnorm,
            denoise={},
        )
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
    tapped_fn: TappedFn | None = None,
    forward: str = "auto",
    chunk_size: int | None = None,
) -> SGDStep:
    """Builds the non-private step (the non-private baseline; RR-style methods via ``loss_fn``).

    Args:
      optimizer: an optax transformation.
      model: a :class:`labeldp.models.ModelSpec` (uses ``model.train_logits``), or
      logits_fn: training-mode logits ``f(params, x, rng) -> (n, K)``.
      loss_fn: per-example loss ``(logits (K,), target) -> scalar``.
      tapped_fn: the same logits through a :class:`~labeldp.dpsgd.tape.Tape`; taken from
        ``model.tapped`` when ``model`` is given without its own ``logits_fn``.
      forward: ``"auto"``, ``"model"`` or ``"tapped"`` (:func:`resolve_forward`).
      chunk_size: examples per chunk of the tapped forward (``None``: 64 on CPU, else whole).

    Returns:
      An :class:`SGDStep`.
    """
    logits_fn, tapped_fn, _ = model_forwards(model, logits_fn=logits_fn, tapped_fn=tapped_fn)
    return SGDStep(
        logits_fn=logits_fn,
        optimizer=optimizer,
        loss_fn=loss_fn,
        tapped_fn=tapped_fn,
        forward=forward,
        chunk_size=chunk_size,
    )
