"""Several DP runs as one vmapped program: the GPU path of a sweep (issue 28).

:func:`run_dp_loops_vmapped` trains R runs that share the model, the denoiser, the padded batch
length and the number of steps, and differ in learning rate, clip norm C, noise multiplier sigma,
seed (initialisation, batches, noise) and plan. Each step stacks the R runs' batches and applies
``jax.jit(jax.vmap(step.pure_step))`` once. Every run draws exactly what :func:`labeldp.dpsgd.loop.
run_dp_loop` draws for it alone: its own Poisson batches from ``default_rng([seed, BATCH_STREAM])``,
its alternative batches from ``default_rng([seed, ALT_STREAM])`` and its noise keys by one
``split`` per step of its own key, so each run is the run a single job trains (the same batches and
noise; the arithmetic of a batched program can differ in the last bits, so metrics agree to about
1e-5 relative, not bitwise). The step's denoiser must run in-jit (``DPSGDStep.pure_step``): NoOp,
the paper's PGD projection with ``loop="fori"`` (a GPU's default), or the converged projection with
the ``jacobian`` or ``gram`` solver, whose ``lax.while_loop`` under ``vmap`` runs until every run of
the batch has converged, each run's iterate frozen once its own gap test passes.

Where vmapping pays is the backend's business: on the 2-core CPU three vmapped DP-SGD steps took
2.4x the time of three single steps (``benchmarks/results/sweep_cpu.md``), so the sweep runner
(:mod:`labeldp.sweep_runner`) uses this loop only when ``sweep_vmap_runs`` resolves above 1.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from labeldp.dpsgd.loop import ALT_STREAM, BATCH_STREAM, DIAGNOSTICS, DPLoopResult
from labeldp.dpsgd.sampling import sample_alt_batch
from labeldp.dpsgd.step import DPSGDStep
from labeldp.dpsgd.step_types import Batch, StepHyper, TrainState
from labeldp.dpsgd.training_plan import DPTrainingPlan

__all__ = ["BatchTooLong", "VmappedRun", "run_dp_loops_vmapped"]


class BatchTooLong(RuntimeError):
    """A Poisson batch exceeded the compiled length (probability about 1e-9 per step): the
    vmapped program has one batch shape, so the caller trains these runs one by one instead."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class VmappedRun:
    """One run of a vmapped group.

    Attributes:
      state: its initial :class:`TrainState`, built by the group's template step (so its optimizer
        state has the template's structure, the run's learning rate in ``hyperparams``).
      plan: its :class:`DPTrainingPlan` (every run of a group has the same ``steps`` and ``n``).
      seed: its seed (batch and alternative-batch streams).
      key: its noise key stream (:func:`labeldp.dpsgd.loop.split_init_key`).
      hyper: its C and sigma.
    """

    state: TrainState
    plan: DPTrainingPlan
    seed: int
    key: jax.Array
    hyper: StepHyper


def _stack(trees: Sequence[Any]) -> Any:
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *trees)


def _unstack(tree: Any, count: int) -> list[Any]:
    return [jax.tree_util.tree_map(lambda leaf, i=i: leaf[i], tree) for i in range(count)]


def run_dp_loops_vmapped(
    *,
    template: DPSGDStep,
    runs: Sequence[VmappedRun],
    gather: Callable[[np.ndarray], Any],
    labels: jax.Array,
    alt_batch_size: int = 0,
) -> list[DPLoopResult]:
    """Trains ``runs`` together, exactly ``plan.steps`` steps each; one result per run, in order.

    Args:
      template: the group's step; its ``pure_step`` takes each run's :class:`StepHyper` (C, sigma)
        and reads the learning rate from each run's optimizer state.
      runs: the :class:`VmappedRun` s (same ``plan.steps`` and ``plan.n``).
      gather: ``indices -> x`` for an index array of any shape (rows of the device array).
      labels: the units' labels, indexed like ``gather``.
      alt_batch_size: units in LabelDP-Pro's alternative batch per step (0: none).

    Returns:
      One :class:`DPLoopResult` per run; ``seconds`` is the group's wall time divided by R.

    Raises:
      ValueError: the runs differ in steps or units.
      BatchTooLong: a run's Poisson batch exceeded ``template.pad_to``.
    """
    count = len(runs)
    if count == 0:
        return []
    steps, n = runs[0].plan.steps, runs[0].plan.n
    if any(r.plan.steps != steps or r.plan.n != n for r in runs):
        raise ValueError("a vmapped group needs runs with the same number of steps and training units")
    pad = template.pad_to
    streams = [r.plan.batches(rng=np.random.default_rng([int(r.seed), BATCH_STREAM]), pad_to=pad) for r in runs]
    alt_rngs = [np.random.default_rng([int(r.seed), ALT_STREAM]) for r in runs]
    state = _stack([r.state for r in runs])
    hyper = _stack([r.hyper for r in runs])
    keys = jnp.stack([r.key for r in runs])
    vstep = jax.jit(jax.vmap(template.pure_step))
    vsplit = jax.jit(jax.vmap(jax.random.split))
    losses, clipped, norms, diag = [], [], [], {}
    t0 = time.perf_counter()
    for _ in range(steps):
        drawn = [next(s) for s in streams]
        if any(idx.shape[0] != pad for idx, _ in drawn):
            raise BatchTooLong(f"a Poisson batch exceeded the compiled length {pad}")
        idx = np.stack([i for i, _ in drawn])
        mask = np.stack([m for _, m in drawn])
        x_alt = None
        if alt_batch_size:
            x_alt = gather(np.stack([sample_alt_batch(n, size=alt_batch_size, rng=g) for g in alt_rngs]))
        split = vsplit(keys)
        keys, subs = split[:, 0], split[:, 1]
        state, info = vstep(state, Batch(x=gather(idx), y=labels[idx], mask=mask, x_alt=x_alt), subs, hyper)
        losses.append(info.loss)
        clipped.append(info.clipped_fraction)
        norms.append(info.grad_norm)
        for name in DIAGNOSTICS:
            if name in info.denoise:
                diag.setdefault(name, []).append(info.denoise[name])
    losses = np.asarray(jax.device_get(losses), np.float64).reshape(steps, count)
    clipped = np.asarray(jax.device_get(clipped), np.float64).reshape(steps, count)
    norms = np.asarray(jax.device_get(norms), np.float64).reshape(steps, count)
    diag = {k: np.asarray(jax.device_get(v), np.float64).reshape(steps, count) for k, v in diag.items()}
    finals = _unstack(state, count)
    seconds = (time.perf_counter() - t0) / count
    out = []
    for i, final in enumerate(finals):
        finite = bool(np.isfinite(losses[:, i]).all()) and all(
            bool(np.isfinite(np.asarray(leaf)).all()) for leaf in jax.tree_util.tree_leaves(final.params)
        )
        out.append(
            DPLoopResult(
                state=final,
                steps=steps,
                losses=[float(v) for v in losses[:, i]],
                clipped_fraction=[float(v) for v in clipped[:, i]],
                diagnostics={k: [float(v) for v in vals[:, i]] for k, vals in diag.items()},
                diverged=not finite,
                seconds=seconds,
                grad_norms=[float(v) for v in norms[:, i]],
            )
        )
    return out
