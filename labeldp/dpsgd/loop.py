"""The one DP training loop: image and user-level DP-SGD / LabelDP-Pro and Hybrid's DP phase.

Given a compiled private step (:class:`labeldp.dpsgd.step.DPSGDStep`) and the run's plan
(:class:`labeldp.dpsgd.training_plan.DPTrainingPlan`), :func:`run_dp_loop` draws exactly
``plan.steps`` batches from the plan's sampler and applies one step to each. Every DP run of the
suite goes through it, so the seeding, the batches and the step count are defined once:

* batch sampling: ``numpy.random.default_rng([seed, BATCH_STREAM])`` (the Opacus twin draws the
  same batches from the same stream);
* LabelDP-Pro's alternative batch: ``numpy.random.default_rng([seed, ALT_STREAM])``;
* the step's noise: the JAX key stream after the initialisation key (:func:`split_init_key`), one
  ``split`` per step.

The loop never stops early: the accountant's ``plan.steps`` steps always run, and a run whose loss
or parameters became non-finite is reported as ``diverged`` (stopping on the private loss would be
a data-dependent decision the accountant does not cover).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import numpy as np

from labeldp.dpsgd.sampling import sample_alt_batch
from labeldp.dpsgd.step_types import Batch, StepHyper, TrainState
from labeldp.dpsgd.training_plan import DPTrainingPlan

__all__ = ["BATCH_STREAM", "ALT_STREAM", "DPLoopResult", "split_init_key", "run_dp_loop"]

BATCH_STREAM = 1
"""Stream id of the batch sampler, ``numpy.random.default_rng([seed, BATCH_STREAM])``."""

ALT_STREAM = 2
"""Stream id of LabelDP-Pro's alternative-batch sampler."""

DIAGNOSTICS = ("projection_gap_relative", "projection_iterations", "smoothing_bias_ratio")
"""The denoisers' per-step diagnostics the loop keeps (never read the labels)."""


def split_init_key(seed: int) -> tuple[jax.Array, jax.Array]:
    """``(noise_key, init_key)`` of a run: the one definition of a DP run's JAX keys.

    Args:
      seed: the run's seed.

    Returns:
      The key stream the loop's noise continues from, and the key the model is initialised with.
    """
    key, init_key = jax.random.split(jax.random.key(int(seed)))
    return key, init_key


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPLoopResult:
    """What :func:`run_dp_loop` trained.

    Attributes:
      state: the final training state.
      steps: the steps run (always ``plan.steps``).
      losses: per-step training loss (diagnostic, not privatized).
      clipped_fraction: per-step fraction of clipped units (diagnostic).
      grad_norms: per-step norm of the noisy, denoised gradient the optimizer got (diagnostic; 000 Figure 2).
      diagnostics: the denoiser's per-step diagnostics, by name.
      diverged: a loss or parameter became non-finite.
      seconds: wall time of the loop.
    """

    state: TrainState
    steps: int
    losses: list[float]
    clipped_fraction: list[float]
    diagnostics: dict[str, list[float]]
    diverged: bool
    seconds: float
    grad_norms: list[float] = dataclasses.field(default_factory=list)

    def curves(self, *, points: int = 100) -> dict[str, Any]:
        """The training loss and gradient norm along training, as means over consecutive blocks of steps
        (at most ``points`` blocks of ``steps_per_point`` steps; the last block may be shorter): what 000
        Figure 2 plots, small enough for a record. Diagnostics only: never released as private outputs."""
        n = len(self.losses)
        every = max(1, -(-n // int(points)))

        def blocks(values):
            return [float(np.mean(values[i : i + every])) for i in range(0, len(values), every)]

        return {"steps_per_point": every, "loss": blocks(self.losses), "grad_norm": blocks(self.grad_norms)}

    @property
    def final_loss(self) -> float:
        """Mean loss of the last tenth of the steps (NaN without steps)."""
        if not self.losses:
            return float("nan")
        return float(np.mean(self.losses[-max(1, len(self.losses) // 10) :]))


def run_dp_loop(
    *,
    step: Callable,
    state: TrainState,
    plan: DPTrainingPlan,
    seed: int,
    key: jax.Array,
    gather: Callable[[np.ndarray], Any],
    labels: np.ndarray,
    alt_batch_size: int = 0,
    gather_alt: Callable[[np.ndarray], Any] | None = None,
    progress: Callable | None = None,
    hyper: StepHyper | None = None,
) -> DPLoopResult:
    """Runs exactly ``plan.steps`` private steps on the plan's batches.

    Args:
      step: the compiled private step (a :class:`~labeldp.dpsgd.step.DPSGDStep`),
        ``step(state, batch, key, hyper) -> (state, StepInfo)``; its ``pad_to`` is the padded
        batch length.
      state: the initial training state.
      plan: the run's plan (sampler, steps, sigma already in ``step``).
      seed: the run's seed (batch and alternative-batch streams).
      key: the noise key stream (:func:`split_init_key`).
      gather: ``indices -> x`` of the batch's units (rows of an array, or a tuple of arrays).
      labels: the units' labels (or per-class weights), indexed by the batch's indices.
      alt_batch_size: units in LabelDP-Pro's alternative batch per step (0: none).
      gather_alt: ``indices -> x_alt`` (default ``gather``).
      progress: wraps the batch iterator (e.g. a progress bar); None for none.
      hyper: the run's C and sigma as traced values, for a step shared by the runs of a sweep
        (``DPSGDStep.__call__``); None: the step's config.

    Returns:
      A :class:`DPLoopResult`.
    """
    batches = plan.batches(rng=np.random.default_rng([int(seed), BATCH_STREAM]), pad_to=step.pad_to)
    if progress is not None:
        batches = progress(batches, total=plan.steps)
    alt_rng = np.random.default_rng([int(seed), ALT_STREAM])
    gather_alt = gather if gather_alt is None else gather_alt
    losses, clipped, norms, diag, done = [], [], [], {}, 0
    t0 = time.perf_counter()
    for idx, mask in batches:
        x_alt = gather_alt(sample_alt_batch(plan.n, size=alt_batch_size, rng=alt_rng)) if alt_batch_size else None
        key, sub = jax.random.split(key)
        batch = Batch(x=gather(idx), y=labels[idx], mask=mask, x_alt=x_alt)
        state, info = step(state, batch, sub, hyper)
        losses.append(info.loss)
        clipped.append(info.clipped_fraction)
        norms.append(info.grad_norm)
        for name in DIAGNOSTICS:
            if name in info.denoise:
                diag.setdefault(name, []).append(info.denoise[name])
        done += 1
    losses = [float(v) for v in jax.device_get(losses)]
    clipped = [float(v) for v in jax.device_get(clipped)]
    norms = [float(v) for v in jax.device_get(norms)]
    diag = {name: [float(v) for v in jax.device_get(vals)] for name, vals in diag.items()}
    finite = all(np.isfinite(losses)) and all(
        bool(np.isfinite(np.asarray(leaf)).all()) for leaf in jax.tree_util.tree_leaves(state.params)
    )
    return DPLoopResult(
        state=state,
        steps=done,
        losses=losses,
        clipped_fraction=clipped,
        diagnostics=diag,
        diverged=not finite,
        seconds=time.perf_counter() - t0,
        grad_norms=norms,
    )
