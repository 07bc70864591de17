"""Runs of one vmap group trained as one vmapped program: the sweep's accelerator path for
``dpsgd`` and ``labeldp_pro`` (issue 28).

:func:`vmap_group_key` says which runs may share a program (everything but the learning rate, C
and the seed); :func:`train_private_vmapped` trains them with
:func:`labeldp.dpsgd.vmapped_loop.run_dp_loops_vmapped` and returns, per run, the result
:func:`labeldp.methods.private_training.train_private` returns for it (same plan, batches, noise
keys and initialisation; metrics to about 1e-5 relative).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp

from labeldp.dpsgd.loop import run_dp_loop
from labeldp.dpsgd.vmapped_loop import BatchTooLong, VmappedRun, run_dp_loops_vmapped
from labeldp.methods.base import MethodResult, RunSpec
from labeldp.methods.private_training import finish_private_run, prepare_private_run, training_arrays

__all__ = ["VMAPPED_HPARAMS", "train_private_vmapped", "vmap_group_key"]

#: Hyper-parameters a vmapped group traces per run (:func:`vmap_group_key`); every other one, and
#: the denoiser (whose projection may depend on C), is shared by the group.
VMAPPED_HPARAMS = ("learning_rate", "clip_norm")


def vmap_group_key(spec: RunSpec, *, denoiser) -> str:
    """Runs with equal keys can train as one vmapped program (:func:`train_private_vmapped`): the
    same data, method, variant, options, eps, relation, denoiser and every hyper-parameter but
    :data:`VMAPPED_HPARAMS` (so the same model, batch shape and number of steps)."""
    shared = {k: v for k, v in spec.hparams.items() if k not in VMAPPED_HPARAMS}
    return json.dumps(
        {
            "dataset": spec.dataset,
            "method": spec.method,
            "variant": spec.variant,
            "options": spec.options,
            "epsilon": spec.epsilon,
            "delta": spec.delta,
            "sampling": spec.sampling,
            "accountant": spec.accountant,
            "relation": spec.calibration_relation,
            "hparams": shared,
            "denoiser": repr(denoiser),
        },
        sort_keys=True,
        default=str,
    )


def train_private_vmapped(data, specs: Sequence[RunSpec], *, denoisers: Sequence[Any]) -> list[MethodResult]:
    """Trains runs of one :func:`vmap_group_key` as one vmapped program; one result per run.

    Each run's result is the one :func:`train_private` returns for it (same plan, batches, noise
    keys and initialisation; metrics to about 1e-5 relative), except timings: the group's wall
    time is divided among its runs. A group whose denoiser runs a Python-driven loop (the
    projection on CPU) cannot vmap; a Poisson batch longer than the compiled length (about 1e-9
    per step) makes the group train its runs one by one.

    Raises:
      ValueError: the specs do not share one group key, or the denoiser cannot run in-jit.
    """
    if len({vmap_group_key(s, denoiser=d) for s, d in zip(specs, denoisers)}) != 1:
        raise ValueError(
            "train_private_vmapped needs runs of one vmap group (labeldp.methods.vmapped_training.vmap_group_key)"
        )
    arrays = training_arrays(data, specs[0])
    prepared = [prepare_private_run(data, s, denoiser=d, arrays=arrays) for s, d in zip(specs, denoisers)]
    first = prepared[0]
    template = first.step  # the runs' shared step: one group key means one shared_dpsgd_step key
    if template.denoiser.host_loop(first.state.params):
        raise ValueError(
            f"the {first.denoiser.name} denoiser runs a Python-driven loop on this backend; "
            "its runs cannot be vmapped (train them one by one)"
        )
    runs = [VmappedRun(state=p.state, plan=p.plan, seed=p.spec.seed, key=p.key, hyper=p.hyper) for p in prepared]
    x_dev, y_dev = jnp.asarray(arrays.x_train), jnp.asarray(arrays.y_train)
    try:
        loops = run_dp_loops_vmapped(
            template=template,
            runs=runs,
            gather=lambda idx: x_dev[idx],
            labels=y_dev,
            alt_batch_size=first.alt_batch_size,
        )
    except BatchTooLong:
        loops = [
            run_dp_loop(
                step=p.step,
                state=p.state,
                plan=p.plan,
                seed=p.spec.seed,
                key=p.key,
                gather=lambda idx: x_dev[idx],
                labels=y_dev,
                alt_batch_size=p.alt_batch_size,
                hyper=p.hyper,
            )
            for p in prepared
        ]
    return [finish_private_run(p, loop) for p, loop in zip(prepared, loops)]
