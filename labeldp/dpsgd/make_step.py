"""The builder of the private step: :func:`make_dpsgd_step` (000 Algorithm 1).

It takes the model's training, projection and tapped forwards from a
:class:`labeldp.models.ModelSpec` (or the functions themselves) and returns a
:class:`labeldp.dpsgd.step.DPSGDStep`. Re-exported by :mod:`labeldp.dpsgd`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import optax

from labeldp.denoisers import Denoiser, NoOp
from labeldp.dpsgd.clipping import TappedFn
from labeldp.dpsgd.step import DPSGDStep
from labeldp.dpsgd.step_types import DPSGDConfig, LossFn, PyTree, TrainLogitsFn, cross_entropy, model_forwards

__all__ = ["make_dpsgd_step"]


def make_dpsgd_step(
    *,
    optimizer: optax.GradientTransformation,
    config: DPSGDConfig,
    model: Any | None = None,
    logits_fn: TrainLogitsFn | None = None,
    projection_logits_fn: Callable[[PyTree, jax.Array], jax.Array] | None = None,
    loss_fn: LossFn = cross_entropy,
    denoiser: Denoiser | None = None,
    tapped_fn: TappedFn | None = None,
    formulation: str = "auto",
    chunk_size: int | None = None,
    require_hyper: bool = False,
) -> DPSGDStep:
    """Builds the DP-SGD / LabelDP-Pro step of 000 Algorithm 1.

    Args:
      optimizer: an optax transformation (000 uses SGD; RMSprop for Table 7).
      config: a :class:`DPSGDConfig` (C, sigma, n1, sampling, unit, pad_to).
      model: a :class:`labeldp.models.ModelSpec`; sets ``logits_fn = model.train_logits`` and
        ``projection_logits_fn = model.logits`` unless those are given.
      logits_fn: training-mode logits ``f(params, x, rng) -> (n, K)`` (rng for dropout).
      projection_logits_fn: deterministic ``f(params, x) -> (n, K)`` used by the denoiser's
        projection (hashable).
      loss_fn: per-example loss ``(logits (K,), target) -> scalar``; default
        :func:`cross_entropy` (int label or (K,) weights).
      denoiser: a :class:`~labeldp.denoisers.Denoiser`; default NoOp (plain DP-SGD).
      tapped_fn: the model's tapped forward ``(params, x, tape) -> logits``
        (:mod:`labeldp.dpsgd.tape`), computing the same logits as ``logits_fn``; taken from
        ``model.tapped`` when ``model`` is given without its own ``logits_fn``.
      formulation: how per-unit clipped sums are computed (:mod:`labeldp.dpsgd.clipping`):
        ``"auto"`` (book-keeping on CPU when a tapped forward exists, else the reference),
        ``"vmap_grad"`` or ``"bookkeeping"``.
      chunk_size: units per chunk of the book-keeping formulation; ``None``: 64 on CPU, the
        whole batch elsewhere.
      require_hyper: every call must pass the run's ``hyper`` (:class:`StepHyper`); for a step
        shared by runs with different C and sigma (:mod:`labeldp.dpsgd.shared_steps`).

    Returns:
      A :class:`DPSGDStep`.

    Raises:
      ValueError: ``formulation="bookkeeping"`` without a tapped forward, or an unknown name.
    """
    logits_fn, tapped_fn, from_model = model_forwards(model, logits_fn=logits_fn, tapped_fn=tapped_fn)
    # the projection's per-class rows through the same tape, when it projects with the model's logits
    tapped_projection = from_model and projection_logits_fn is None and tapped_fn is not None
    if model is not None:
        projection_logits_fn = projection_logits_fn or model.logits
    return DPSGDStep(
        logits_fn=logits_fn,
        projection_logits_fn=projection_logits_fn,
        optimizer=optimizer,
        config=config,
        loss_fn=loss_fn,
        denoiser=denoiser if denoiser is not None else NoOp(),
        tapped_fn=tapped_fn,
        formulation=formulation,
        chunk_size=chunk_size,
        tapped_projection=tapped_projection,
        require_hyper=require_hyper,
    )
