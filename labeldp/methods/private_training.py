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

from typing import Any

import numpy as np

from labeldp.methods.base import MethodResult, RunSpec




def account_run(spec: RunSpec, *, n: int, amplification: bool = True):
    """The :class:`~labeldp.dpsgd.training_plan.DPTrainingPlan` of exactly the run ``spec``
    describes on ``n`` training units: sigma calibrated so the target epsilon is met under
    ``spec.calibration_relation`` (None: ``add_or_remove``, the papers' convention); the record
    states the run's epsilon under every relation.

    Raises:
      ValueError: the batch is larger than the data, or the run has less than one step.
    """
    from labeldp.dpsgd.training_plan import make_training_plan  # JAX-free planning imports this module

    return make_training_plan(target_epsilon=spec.epsilon, target_delta=spec.delta, n=n,
                              expected_batch_size=int(spec.hparams["batch_size"]), epochs=int(spec.hparams["epochs"]),
                              sampling=spec.sampling, amplification=amplification, accountant=spec.accountant,
                              neighboring_relation=spec.calibration_relation)


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
    from labeldp.dpsgd.loop import split_init_key

    key, init_key = split_init_key(seed)
    return key, model.init(init_key)


def train_private(data, spec: RunSpec, *, denoiser, desc: str) -> MethodResult:
    """Trains with DP-SGD and ``denoiser`` and evaluates test accuracy.

    Args:
      data: prepared image data.
      spec: the run; hparams need ``learning_rate``, ``epochs``, ``batch_size``, ``clip_norm``;
        options may set ``validation_fraction`` / ``validation_epsilon`` (train on the rest, score on
        the held-out rows' labels released by RR at that eps, default the run's; :mod:`labeldp.selection`),
        ``amplification`` (default True), ``alt_batch_size`` (n2) and
        ``clipping_formulation`` (``auto``, ``vmap_grad`` or ``bookkeeping``: how the per-example
        clipped sum is computed, :mod:`labeldp.dpsgd.clipping`; the record's details say which ran).
      denoiser: a :class:`labeldp.denoisers.Denoiser`.
      desc: progress-bar label.

    Returns:
      A :class:`MethodResult` with the accounted privacy.
    """
    import jax
    import jax.numpy as jnp
    import optax
    from tqdm.auto import tqdm

    from labeldp.dpsgd import DPSGDConfig, make_dpsgd_step
    from labeldp.dpsgd.loop import run_dp_loop
    from labeldp.methods.common import build_model_for
    from labeldp.selection import noisy_accuracy_pct, release_validation_labels, validation_split, with_validation_release
    from labeldp.training import accuracy_pct, audit_log_probs, predict_logits, to_float_images

    if not spec.private:
        raise ValueError(f"{spec.method} is a private method: epsilon must be finite, got {spec.epsilon}")
    hp = spec.hparams
    lr, n1, clip = float(hp["learning_rate"]), int(hp["batch_size"]), float(hp["clip_norm"])
    x_train = to_float_images(data.x_train)
    y_train = np.asarray(data.y_train, np.int32)
    fraction = spec.options.get("validation_fraction")
    x_val = y_val_noisy = None
    if fraction is not None:  # honest selection (labeldp.selection): hold out rows, release their labels by RR
        fit, val = validation_split(x_train.shape[0], float(fraction))
        eps_val = float(spec.options.get("validation_epsilon") or spec.epsilon)
        y_val_noisy = release_validation_labels(y_train[val], num_classes=int(data.num_classes), epsilon=eps_val)
        x_val, x_train, y_train = x_train[val], x_train[fit], y_train[fit]
    n = x_train.shape[0]

    amplification_requested = bool(spec.options.get("amplification", True))
    breaks = bool(denoiser.breaks_amplification)
    amplification = amplification_requested
    reasons = []
    if breaks and amplification_requested:
        reasons.append(f"amplification by subsampling claimed for the {denoiser.name} denoiser, whose projection "
                       "depends on which examples were sampled (000 Section 3.4): reference only, not private")
    run_plan = account_run(spec, n=n, amplification=amplification)
    q, steps = run_plan.sampling_rate, run_plan.steps
    accounting_seconds = run_plan.seconds
    sigma = run_plan.noise_multiplier

    model = build_model_for(data)
    cfg = DPSGDConfig(clip_norm=clip, noise_multiplier=sigma, expected_batch_size=n1, sampling=spec.sampling)
    step = make_dpsgd_step(optimizer=optax.sgd(lr), config=cfg, model=model, denoiser=denoiser,
                           formulation=str(spec.options.get("clipping_formulation", "auto")))
    key, params = initial_params(model, seed=spec.seed)
    state = step.init(params)
    n2 = int(spec.options.get("alt_batch_size") or n1)
    x_dev, y_dev = jnp.asarray(x_train), jnp.asarray(y_train)
    projection_solver = denoiser.projection_solver(  # for the batch the denoiser projects onto
        rows=min(n2, n) if denoiser.uses_alt_batch else (cfg.padded_batch_size if spec.sampling == "poisson" else n1),
        k=int(jax.eval_shape(model.logits, params, x_dev[:1]).shape[-1]), params=params)
    loop = run_dp_loop(step=step, state=state, plan=run_plan, seed=spec.seed, key=key, gather=lambda idx: x_dev[idx],
                       labels=y_dev, alt_batch_size=min(n2, n) if denoiser.uses_alt_batch else 0,
                       progress=lambda it, total: tqdm(it, total=total, desc=desc, leave=False, disable=None))
    state, losses, diverged, train_seconds = loop.state, loop.losses, loop.diverged, loop.seconds
    acc_pct = accuracy_pct(model, state.params, to_float_images(data.x_test), data.y_test)
    steps_per_epoch = n / n1
    metrics: dict[str, Any] = {
        "test_accuracy_pct": acc_pct,
        "diverged": diverged,
        "final_train_loss": losses[-1] if losses else float("nan"),
        "steps": loop.steps,
    }
    privacy = run_plan.privacy_outcome(
        mechanism=f"dpsgd ({'poisson' if spec.sampling == 'poisson' else 'shuffled'} batches, Gaussian noise, "
                  f"denoiser {denoiser.name}{', no amplification' if not amplification else ''})",
        reasons=tuple(reasons))
    validation = {}
    if x_val is not None:
        metrics["validation_noisy_accuracy_pct"] = noisy_accuracy_pct(np.argmax(predict_logits(model, state.params, x_val), axis=-1),
                                                                      y_val_noisy)
        privacy = with_validation_release(privacy, epsilon=eps_val, fraction=float(fraction))
        validation = {"validation_fraction": float(fraction), "validation_epsilon": eps_val, "n_fit": int(n),
                      "n_validation": int(y_val_noisy.size)}
    return MethodResult(
        metrics=metrics,
        privacy=privacy,
        audit_log_probs=audit_log_probs(model, state.params, data),
        timings={"train_seconds": train_seconds, "seconds_per_epoch": train_seconds / max(steps / steps_per_epoch, 1e-9),
                 "seconds_per_step": train_seconds / steps, "accounting_seconds": accounting_seconds},
        details={"noise_multiplier": sigma, "sampling_rate": q, "steps": steps, "denoiser": denoiser.name,
                 "amplification_claimed": amplification, "alt_batch_size": n2 if denoiser.uses_alt_batch else None,
                 "projection_solver": projection_solver, **step.describe(), **validation,
                 **_projection_summary(loop.diagnostics)},
    )
