"""One compiled step for the runs of a sweep that differ only in learning rate, C, sigma and seed.

A sweep job (:mod:`labeldp.sweep_runner`) trains many runs of one model one after another. A step
with C, sigma and the learning rate as constants in its programs compiles anew for every run: on
the 2-core CPU that compiling was most of a smoke run's time (issue 28). :func:`shared_dpsgd_step`
returns one step per process for every run with the same model, denoiser, expected batch size,
sampling, optimizer and clipping formulation; each run passes its C and sigma as a traced
:class:`~labeldp.dpsgd.step_types.StepHyper` and carries its learning rate in its optimizer state
(:func:`with_learning_rate`). The numbers are those of a step with the constants in its program:
the noise scale sigma C is multiplied in float64 and rounded once (``StepHyper.of``), and the
learning rate enters the update as the same float32 factor.

A shared step refuses a call without ``hyper``, so no run can train with another run's sigma.
"""

from __future__ import annotations

import collections
from typing import Any

import jax.numpy as jnp
import optax

from labeldp.denoisers import Denoiser
from labeldp.dpsgd.make_step import make_dpsgd_step
from labeldp.dpsgd.step import DPSGDStep
from labeldp.dpsgd.step_types import DPSGDConfig, TrainState

__all__ = ["MAX_SHARED_STEPS", "shared_dpsgd_step", "with_learning_rate"]

MAX_SHARED_STEPS = 8
"""Steps a process keeps (least recently used dropped first); a sweep needs one per model and denoiser."""

_STEPS: collections.OrderedDict[tuple, DPSGDStep] = collections.OrderedDict()


def shared_dpsgd_step(
    *,
    model: Any,
    denoiser: Denoiser,
    config: DPSGDConfig,
    momentum: float | None,
    formulation: str = "auto",
) -> DPSGDStep:
    """The process's step for runs like this one, built on first use.

    Args:
      model: the run's :class:`labeldp.models.ModelSpec` (hashable; equal specs share a step).
      denoiser: the run's denoiser; runs share a step only when their denoisers' ``repr`` agree
        (a projection onto clipped vertices has C in it).
      config: the run's :class:`DPSGDConfig`; its expected batch size, sampling, unit and padded
        length key the step, its C and sigma do not (every call passes them as ``hyper``).
      momentum: SGD momentum (None: plain SGD); the learning rate is injected
        (``optax.inject_hyperparams``) and set per run by :func:`with_learning_rate`.
      formulation: how the clipped sum is computed (:func:`~labeldp.dpsgd.step.make_dpsgd_step`).

    Returns:
      A :class:`DPSGDStep` whose calls require ``hyper`` (``StepHyper.of(config)``).
    """
    key = (
        model,
        repr(denoiser),
        int(config.expected_batch_size),
        config.sampling,
        config.unit,
        config.padded_batch_size,
        momentum,
        formulation,
    )
    step = _STEPS.get(key)
    if step is not None:
        _STEPS.move_to_end(key)
        return step
    step = make_dpsgd_step(
        optimizer=optax.inject_hyperparams(optax.sgd)(learning_rate=1.0, momentum=momentum),
        config=config,
        model=model,
        denoiser=denoiser,
        formulation=formulation,
        require_hyper=True,
    )
    _STEPS[key] = step
    while len(_STEPS) > MAX_SHARED_STEPS:
        _STEPS.popitem(last=False)
    return step


def with_learning_rate(state: TrainState, learning_rate: float) -> TrainState:
    """``state`` of a shared step (an ``optax.inject_hyperparams`` optimizer) with this run's
    learning rate (a float32 scalar, the factor a constant learning rate would be rounded to)."""
    lr = jnp.asarray(float(learning_rate), jnp.float32)
    hyper = {**state.opt_state.hyperparams, "learning_rate": lr}
    return state._replace(opt_state=state.opt_state._replace(hyperparams=hyper))
