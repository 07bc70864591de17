"""DP-SGD (Abadi et al. 2016): 000 Algorithm 1 with the NoOp denoiser (000 Tables 3, 5, 13-15).

Clipped per-example gradients, Gaussian noise with the noise multiplier calibrated by the
accountant (Poisson subsampled Gaussian, PLD by default) for the whole run; see
:mod:`labeldp.methods.private_training`.
"""

from __future__ import annotations

from labeldp import tasks
from labeldp.denoisers import noop
from labeldp.methods.base import SELECTION_OPTIONS, MethodResult, RunSpec
from labeldp.methods.vmapped_training import train_private_vmapped

NAME = "dpsgd"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size", "clip_norm")
DATASET_KINDS = ("image", "tabular", "features")  # tabular: binary ads data, per-user gradients (labeldp.tasks.ads)
CALIBRATES_WITH_ACCOUNTANT = True  # the accountant calibrates sigma (spec.calibration_relation)
SAMPLED_BATCH_KEYS = ("batch_size",)  # the Poisson expected batch: at most the training units
OPTIONS = ("amplification", "clipping_formulation", "momentum") + SELECTION_OPTIONS


def run(data, spec: RunSpec) -> MethodResult:
    """Trains with DP-SGD (NoOp denoiser) over the task's privacy units; test metric with the accounted eps."""
    task = tasks.task_for(data, spec)
    tasks.check_task_options(task, spec, OPTIONS, NAME)
    return task.train_private(method=NAME, denoiser_for=None, desc=f"dpsgd eps={spec.epsilon}")


def vmap_key(data, spec: RunSpec) -> str | None:
    """Runs of a sweep with equal keys train as one vmapped program (:func:`run_many`); None where the
    task trains one run at a time (the per-user ads path)."""
    task = tasks.task_for(data, spec)
    tasks.check_task_options(task, spec, OPTIONS, NAME)
    return task.vmap_key(denoiser_for=None)


def run_many(data, specs: list[RunSpec]) -> list[MethodResult]:
    """Trains runs of one :func:`vmap_key` as one vmapped program (a sweep's accelerator path)."""
    return train_private_vmapped(data, specs, denoisers=[noop() for _ in specs])
