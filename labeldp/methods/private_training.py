"""The DP-SGD training loop shared by ``dpsgd`` and ``labeldp_pro`` (000 Algorithm 1).

Accounting happens BEFORE training, for exactly what will run, under the run's calibration
relation (``spec.calibration_relation``; the record also states eps under the other one): Poisson sampling at rate
``q = n1 / n`` over ``steps = floor(epochs * n / n1)`` steps, the noise multiplier calibrated by
:func:`labeldp.accounting.account_dpsgd` so that the whole run meets (epsilon, delta), then
re-accounted. Denoisers that break amplification by subsampling (SelfSpan, SelfConv; 000
Section 3.4) are accounted without amplification unless the variant explicitly asks for the
paper's reference-only "w/ AMP" columns, in which case the record says the guarantee is NOT
valid. Shuffled fixed-size batches (``sampling="shuffle"``) are accounted as Poisson sampling,
as is common practice; the record marks that approximation as not a valid guarantee.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from labeldp.dpsgd import DPSGDConfig, StepHyper
from labeldp.dpsgd.loop import DPLoopResult, run_dp_loop, split_init_key
from labeldp.dpsgd.shared_steps import shared_dpsgd_step, with_learning_rate
from labeldp.dpsgd.training_plan import make_training_plan
from labeldp.methods.base import MethodResult, RunSpec
from labeldp.methods.common import build_model_for
from labeldp.models import require_no_batch_norm
from labeldp.selection import (
    noisy_accuracy_pct,
    held_out_rows,
    validation_details,
    with_validation_release,
)
from labeldp.training import (
    accuracy_pct,
    audit_log_probs,
    predict_logits,
    to_float_images,
)


def account_run(spec: RunSpec, *, n: int, amplification: bool = True):
    """The :class:`~labeldp.dpsgd.training_plan.DPTrainingPlan` of exactly the run ``spec``
    describes on ``n`` training units: sigma calibrated so the target epsilon is met under
    ``spec.calibration_relation`` (None: ``add_or_remove``, the papers' convention); the record
    states the run's epsilon under every relation.

    Raises:
      ValueError: the batch is larger than the data, or the run has less than one step.
    """
    return make_training_plan(
        target_epsilon=spec.epsilon,
        target_delta=spec.delta,
        n=n,
        expected_batch_size=int(spec.hparams["batch_size"]),
        epochs=int(spec.hparams["epochs"]),
        sampling=spec.sampling,
        amplification=amplification,
        accountant=spec.accountant,
        neighboring_relation=spec.calibration_relation,
    )


def _projection_summary(diag: dict[str, list]) -> dict[str, Any]:
    """Per-run summary of the converged projection's per-step diagnostics (empty otherwise):
    the final relative Frank-Wolfe gap and iterations, their median and max over the steps."""
    out: dict[str, Any] = {}
    for name, vals in diag.items():
        v = np.asarray([float(x) for x in vals])
        out[f"{name}_final"] = float(v[-1])
        out[f"{name}_median"] = float(np.median(v))
        out[f"{name}_max"] = float(np.max(v))
    return out


def initial_params(model, *, seed: int):
    """The initial parameters of a DP-SGD run, and the key stream that continues after them.

    The one definition of "the initialisation for this seed", shared by the JAX engine and the
    Opacus twin (``baselines.dpsgd_opacus`` with ``init: flax``), so both can start from the same
    point.

    Args:
      model: a :class:`labeldp.models.ModelSpec`.
      seed: the run's seed.

    Returns:
      ``(key, params)``: the JAX key for the training noise and the Flax parameters.
    """
    key, init_key = split_init_key(seed)
    return key, model.init(init_key)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingArrays:
    """The arrays a run trains and selects on (shared by the runs of a vmapped group).

    Attributes:
      x_train, y_train: the rows the run fits (all, or the rest after the held-out split).
      x_val, y_val_noisy: the held-out rows and their RR-released labels (None without selection).
      fraction, eps_val: the held-out fraction and the release's eps (None without selection).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray | None = None
    y_val_noisy: np.ndarray | None = None
    fraction: float | None = None
    eps_val: float | None = None


def training_arrays(data, spec: RunSpec) -> TrainingArrays:
    """The run's fitting rows, and the held-out rows with their labels released by RR when the
    options ask for honest selection (``validation_fraction`` / ``validation_epsilon``,
    :mod:`labeldp.selection`)."""
    x_train = to_float_images(data.x_train)
    y_train = np.asarray(data.y_train, np.int32)
    fraction = spec.options.get("validation_fraction")
    if fraction is None:
        return TrainingArrays(x_train=x_train, y_train=y_train)
    rows = held_out_rows(y_train, spec, num_classes=int(data.num_classes))
    return TrainingArrays(
        x_train=x_train[rows.fit],
        y_train=y_train[rows.fit],
        x_val=x_train[rows.val],
        y_val_noisy=rows.y_noisy,
        fraction=rows.fraction,
        eps_val=rows.epsilon,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreparedRun:
    """A DP-SGD / LabelDP-Pro run planned and initialised, not yet trained.

    Attributes:
      spec, data, denoiser: the run, its prepared data and its denoiser.
      arrays: its :class:`TrainingArrays`.
      plan: its :class:`~labeldp.dpsgd.training_plan.DPTrainingPlan`.
      model, step, state, key: the model, the compiled step (shared by the process's runs that differ
        only in learning rate, C, sigma and seed; :mod:`labeldp.dpsgd.shared_steps`), the initial
        state (the run's learning rate in its optimizer state) and the noise key stream.
      config, hyper: the run's :class:`DPSGDConfig` and its C and sigma as the step's traced
        :class:`StepHyper` (every call of ``step`` passes ``hyper``).
      alt_batch_size: units of the alternative batch per step (0: none); ``n2`` as configured.
      projection_solver: what the denoiser's projection solves with (for the record).
      amplification: whether the accountant used amplification by subsampling.
      reasons: why the guarantee is not valid (empty: valid).
    """

    spec: RunSpec
    data: Any
    denoiser: Any
    arrays: TrainingArrays
    plan: Any
    model: Any
    step: Any
    state: Any
    key: Any
    config: DPSGDConfig
    hyper: StepHyper
    alt_batch_size: int
    n2: int
    projection_solver: Any
    amplification: bool
    reasons: tuple[str, ...]


def sgd_momentum(spec: RunSpec) -> float | None:
    """The SGD momentum a variant asks for (option ``momentum``; None: plain SGD, 000 Table 8's
    "SGD"). Applied after noising, so it is post-processing and the accounting is unchanged.

    Raises:
      ValueError: not a number in [0, 1).
    """
    value = spec.options.get("momentum")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
        raise ValueError(
            f"option momentum must be a number in [0, 1) or absent, got {value!r} (variant {spec.variant!r})"
        )
    return float(value)


def prepare_private_run(data, spec: RunSpec, *, denoiser, arrays: TrainingArrays | None = None) -> PreparedRun:
    """Plans ``spec`` (sigma from the accountant), builds its step and initial state.

    Args:
      data: prepared image data.
      spec: the run; hparams need ``learning_rate``, ``epochs``, ``batch_size``, ``clip_norm``;
        options may set ``validation_fraction`` / ``validation_epsilon`` (train on the rest, score on
        the held-out rows' labels released by RR at that eps, default the run's; :mod:`labeldp.selection`),
        ``amplification`` (default True), ``alt_batch_size`` (n2), ``momentum`` (SGD momentum,
        :func:`sgd_momentum`) and ``clipping_formulation`` (``auto``, ``vmap_grad`` or ``bookkeeping``: how the per-example
        clipped sum is computed, :mod:`labeldp.dpsgd.clipping`; the record's details say which ran).
      denoiser: a :class:`labeldp.denoisers.Denoiser`.
      arrays: the run's :class:`TrainingArrays` (default :func:`training_arrays`).

    Returns:
      A :class:`PreparedRun`.
    """
    if not spec.private:
        raise ValueError(f"{spec.method} is a private method: epsilon must be finite, got {spec.epsilon}")
    model = build_model_for(data, options=spec.options)
    require_no_batch_norm(model, method=spec.method)  # DP-SGD keeps no BatchNorm state
    arrays = training_arrays(data, spec) if arrays is None else arrays
    hp = spec.hparams
    lr, n1, clip = float(hp["learning_rate"]), int(hp["batch_size"]), float(hp["clip_norm"])
    n = arrays.x_train.shape[0]
    amplification = bool(spec.options.get("amplification", True))
    reasons = []
    if denoiser.breaks_amplification and amplification:
        reasons.append(
            f"amplification by subsampling claimed for the {denoiser.name} denoiser, whose projection "
            "depends on which examples were sampled (000 Section 3.4): reference only, not private"
        )
    run_plan = account_run(spec, n=n, amplification=amplification)
    cfg = DPSGDConfig(
        clip_norm=clip, noise_multiplier=run_plan.noise_multiplier, expected_batch_size=n1, sampling=spec.sampling
    )
    step = shared_dpsgd_step(
        model=model,
        denoiser=denoiser,
        config=cfg,
        momentum=sgd_momentum(spec),
        formulation=str(spec.options.get("clipping_formulation", "auto")),
    )
    key, params = initial_params(model, seed=spec.seed)
    n2 = int(spec.options.get("alt_batch_size") or n1)
    projection_solver = denoiser.projection_solver(  # for the batch the denoiser projects onto
        rows=min(n2, n) if denoiser.uses_alt_batch else (cfg.padded_batch_size if spec.sampling == "poisson" else n1),
        k=int(jax.eval_shape(model.logits, params, arrays.x_train[:1]).shape[-1]),
        params=params,
    )
    return PreparedRun(
        spec=spec,
        data=data,
        denoiser=denoiser,
        arrays=arrays,
        plan=run_plan,
        model=model,
        step=step,
        state=with_learning_rate(step.init(params), lr),
        key=key,
        config=cfg,
        hyper=StepHyper.of(cfg),
        alt_batch_size=min(n2, n) if denoiser.uses_alt_batch else 0,
        n2=n2,
        projection_solver=projection_solver,
        amplification=amplification,
        reasons=tuple(reasons),
    )


def finish_private_run(run: PreparedRun, loop: DPLoopResult) -> MethodResult:
    """The run's :class:`MethodResult` after its loop: test accuracy, the plan's privacy outcome
    (and the held-out release's), timings and details."""
    spec, data, arrays, plan, model = run.spec, run.data, run.arrays, run.plan, run.model
    state, losses, train_seconds = loop.state, loop.losses, loop.seconds
    n, n1, steps = arrays.x_train.shape[0], int(spec.hparams["batch_size"]), plan.steps
    metrics: dict[str, Any] = {
        "test_accuracy_pct": accuracy_pct(model, state.params, to_float_images(data.x_test), data.y_test),
        "diverged": loop.diverged,
        "final_train_loss": losses[-1] if losses else float("nan"),
        "steps": loop.steps,
    }
    privacy = plan.privacy_outcome(
        mechanism=f"dpsgd ({'poisson' if spec.sampling == 'poisson' else 'shuffled'} batches, Gaussian noise, "
        f"denoiser {run.denoiser.name}{', no amplification' if not run.amplification else ''})",
        reasons=run.reasons,
    )
    validation = {}
    if arrays.x_val is not None:
        predicted = np.argmax(predict_logits(model, state.params, arrays.x_val), axis=-1)
        metrics["validation_noisy_accuracy_pct"] = noisy_accuracy_pct(predicted, arrays.y_val_noisy)
        privacy = with_validation_release(privacy, epsilon=arrays.eps_val, fraction=arrays.fraction)
        validation = validation_details(
            fraction=arrays.fraction, epsilon=arrays.eps_val, n_fit=n, n_validation=arrays.y_val_noisy.size
        )
    return MethodResult(
        metrics=metrics,
        privacy=privacy,
        audit_log_probs=audit_log_probs(model, state.params, data),
        timings={
            "train_seconds": train_seconds,
            "seconds_per_epoch": train_seconds / max(steps / (n / n1), 1e-9),
            "seconds_per_step": train_seconds / steps,
            "accounting_seconds": plan.seconds,
        },
        details={
            "noise_multiplier": plan.noise_multiplier,
            "sampling_rate": plan.sampling_rate,
            "steps": steps,
            "denoiser": run.denoiser.name,
            "amplification_claimed": run.amplification,
            "alt_batch_size": run.n2 if run.denoiser.uses_alt_batch else None,
            "projection_solver": run.projection_solver,
            "projection": run.denoiser.projection,
            **run.step.describe(),
            **validation,
            **_projection_summary(loop.diagnostics),
            "training_curves": loop.curves(),
        },
    )


def train_private(data, spec: RunSpec, *, denoiser, desc: str) -> MethodResult:
    """Trains with DP-SGD and ``denoiser`` and evaluates test accuracy.

    Args:
      data: prepared image data.
      spec: the run (see :func:`prepare_private_run`).
      denoiser: a :class:`labeldp.denoisers.Denoiser`.
      desc: progress-bar label.

    Returns:
      A :class:`MethodResult` with the accounted privacy.
    """
    run = prepare_private_run(data, spec, denoiser=denoiser)
    x_dev, y_dev = jnp.asarray(run.arrays.x_train), jnp.asarray(run.arrays.y_train)
    loop = run_dp_loop(
        step=run.step,
        state=run.state,
        plan=run.plan,
        seed=spec.seed,
        key=run.key,
        gather=lambda idx: x_dev[idx],
        labels=y_dev,
        alt_batch_size=run.alt_batch_size,
        progress=lambda it, total: tqdm(it, total=total, desc=desc, leave=False, disable=None),
        hyper=run.hyper,
    )
    return finish_private_run(run, loop)
