"""LabelDP-Pro (000): DP-SGD whose noisy gradient is projected by a feature-only denoiser.

The variant's options choose the denoiser of 000 Table 1: ``alt_conv`` (default; the convex
hull of the per-example per-class gradients of an independent alternative batch of n2
examples, compatible with amplification), ``self_conv`` / ``self_span`` (the current batch;
they break amplification, so they are accounted without it unless the variant is one of
Table 3's reference-only "w/ AMP" columns, which the record marks not private). Projection
hyper-parameters: ``proj_steps``, ``proj_step_size`` and the smoothing ``lambda`` (000 D.2).
``momentum``: SGD momentum on the denoised update, as DP-SGD's option (post-processing, so the
accounting is unchanged; absent: plain SGD, 000 Table 8's "SGD").
Implementation options (same algorithm, recorded in the result's ``details``):
``projection_momentum`` (``none``: the paper's PGD; ``nesterov``: FISTA) and
``projection_solver`` (``auto`` | ``matrix_free`` | ``jacobian`` | ``gram``, see :mod:`labeldp.denoisers`)
and, for the converged projection, ``projection_algorithm`` (``fista`` | ``pairwise_frank_wolfe``, the
latter with the ``gram`` solver; :mod:`labeldp.denoisers.hull_gram`).
Which projection runs is ONE option, ``projection`` (:data:`PROJECTIONS`): ``paper_pgd`` (000 Section
3.2 and Appendix C) or ``converged`` (the default). The knobs below refine it for ablations; a knob
that contradicts the named projection is refused, and the record says which ran
(``details.projection``).
Projection options (:data:`HULL_DEFAULTS`; :mod:`labeldp.denoisers.hull_converged`):
``vertices`` (``clipped`` to C | ``raw``), ``coefficient_set`` (``joint`` | ``per_example``),
``projection_start`` (``predicted`` | ``uniform``) and ``projection_tol`` (a relative Frank-Wolfe
gap, ``proj_steps`` the cap; ``null``: exactly ``proj_steps`` iterations).
"""

from __future__ import annotations

from labeldp import tasks
from labeldp.methods.base import MethodResult, RunSpec
from labeldp.methods.pro_denoiser import (  # noqa: F401 (the variant options, importable from here)
    HULL_DEFAULTS,
    OPTIONS,
    PROJECTIONS,
    make_denoiser_for,
    projection_options,
    projection_step_size,
)
from labeldp.methods.vmapped_training import train_private_vmapped

NAME = "labeldp_pro"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size", "clip_norm", "proj_step_size", "proj_steps", "smoothing")
DATASET_KINDS = ("image", "tabular", "features")  # tabular: binary ads data, user-level AltConv (labeldp.tasks.ads)
CALIBRATES_WITH_ACCOUNTANT = True  # the accountant calibrates sigma (spec.calibration_relation)
SAMPLED_BATCH_KEYS = ("batch_size",)  # the Poisson expected batch: at most the training units


def run(data, spec: RunSpec) -> MethodResult:
    """Trains with LabelDP-Pro over the task's privacy units (on ads data: per-user gradients and the
    user-level AltConv, :mod:`labeldp.tasks.ads`) and reports the test metric with the accounted eps."""
    task = tasks.task_for(data, spec)
    tasks.check_task_options(task, spec, OPTIONS, NAME)
    return task.train_private(method=NAME, denoiser_for=make_denoiser_for, desc=f"labeldp_pro eps={spec.epsilon}")


def vmap_key(data, spec: RunSpec) -> str | None:
    """Runs of a sweep with equal keys train as one vmapped program (:func:`run_many`): the same
    denoiser (its projection settings and C) and everything but the learning rate; None for the
    per-user ads path and where the projection runs a Python-driven loop (the CPU's default)."""
    task = tasks.task_for(data, spec)
    tasks.check_task_options(task, spec, OPTIONS, NAME)
    return task.vmap_key(denoiser_for=make_denoiser_for)


def run_many(data, specs: list[RunSpec]) -> list[MethodResult]:
    """Trains runs of one :func:`vmap_key` as one vmapped program (a sweep's accelerator path).

    Raises:
      ValueError: the denoiser's projection runs a Python-driven loop on this backend (the CPU).
    """
    return train_private_vmapped(data, specs, denoisers=[make_denoiser_for(s) for s in specs])
