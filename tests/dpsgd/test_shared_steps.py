"""One step shared by a sweep's runs (labeldp.dpsgd.shared_steps): runs that differ in learning rate,
C, sigma and seed call one compiled program and get, bit for bit, what a step with their constants
computes; a shared step refuses a call that does not say which run's C and sigma it is."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import optax
import pytest

from labeldp.denoisers import noop
from labeldp.dpsgd import StepHyper, make_dpsgd_step
from labeldp.dpsgd.loop import run_dp_loop
from labeldp.methods.base import RunSpec
from labeldp.methods.pro_denoiser import make_denoiser_for
from labeldp.methods.private_training import prepare_private_run, sgd_momentum, training_arrays
from tests.helpers import fake_mnist_images

PRO = {"denoiser": "alt_conv", "amplification": True}
PRO_HP = {"proj_step_size": "auto", "proj_steps": 4, "smoothing": 0.75}


def _spec(method="dpsgd", *, lr=0.5, clip=5.0, eps=1.0, seed=0, options=None, extra=None):
    hp = dict(learning_rate=lr, epochs=1, batch_size=32, clip_norm=clip, **(extra or {}))
    return RunSpec(
        dataset="mnist",
        method=method,
        variant="default",
        epsilon=eps,
        delta=1e-5,
        seed=seed,
        hparams=hp,
        options=dict(options or {}),
        profile="smoke",
    )


def _denoiser(spec):
    return noop() if spec.method == "dpsgd" else make_denoiser_for(spec)


def _train(run, data, *, constant_step=None):
    x = np.asarray(training_arrays(data, run.spec).x_train)
    y = np.asarray(data.y_train, np.int32)
    step, state, hyper = run.step, run.state, run.hyper
    if constant_step is not None:  # the same run with C, sigma and lr as constants in the program
        step, state, hyper = constant_step, constant_step.init(run.state.params), None
    return run_dp_loop(
        step=step,
        state=state,
        plan=run.plan,
        seed=run.spec.seed,
        key=run.key,
        gather=lambda idx: x[idx],
        labels=y,
        alt_batch_size=run.alt_batch_size,
        hyper=hyper,
    )


@pytest.mark.parametrize(
    "method,options,extra", [("dpsgd", None, None), ("labeldp_pro", PRO, PRO_HP)], ids=["dpsgd", "labeldp_pro"]
)
def test_runs_of_a_sweep_share_one_step_and_train_what_their_constants_train(method, options, extra):
    data = fake_mnist_images(128, 32)
    specs = [
        _spec(method, lr=0.5, clip=5.0, eps=1.0, seed=0, options=options, extra=extra),
        _spec(method, lr=0.2, clip=5.0, eps=0.3, seed=1, options=options, extra=extra),
    ]
    runs = [prepare_private_run(data, s, denoiser=_denoiser(s)) for s in specs]
    assert runs[0].step is runs[1].step  # one compiled program for both runs
    assert runs[0].config.noise_multiplier != runs[1].config.noise_multiplier
    for run in runs[1:]:  # the run whose lr, C and sigma differ from the step's config
        constant = make_dpsgd_step(
            optimizer=optax.sgd(float(run.spec.hparams["learning_rate"]), momentum=sgd_momentum(run.spec)),
            config=run.config,
            model=run.model,
            denoiser=run.denoiser,
        )
        shared, reference = _train(run, data), _train(run, data, constant_step=constant)
        assert shared.steps == reference.steps == run.plan.steps
        assert shared.losses == reference.losses
        for a, b in zip(
            jax.tree_util.tree_leaves(shared.state.params), jax.tree_util.tree_leaves(reference.state.params)
        ):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_different_denoiser_or_batch_size_gets_its_own_step():
    data = fake_mnist_images(128, 32)
    base = prepare_private_run(data, _spec(), denoiser=noop())
    other_clip = prepare_private_run(data, _spec(clip=1.0, lr=0.1), denoiser=noop())
    assert other_clip.step is base.step  # C is traced for DP-SGD
    pro_a = _spec("labeldp_pro", clip=5.0, options=PRO, extra=PRO_HP)
    pro_b = _spec("labeldp_pro", clip=1.0, options=PRO, extra=PRO_HP)
    a = prepare_private_run(data, pro_a, denoiser=_denoiser(pro_a))
    b = prepare_private_run(data, pro_b, denoiser=_denoiser(pro_b))
    assert a.step is not base.step
    if repr(a.denoiser) != repr(b.denoiser):  # a projection that depends on C is not shared across C
        assert a.step is not b.step
    bigger = dataclasses.replace(_spec(), hparams={**_spec().hparams, "batch_size": 64})
    assert prepare_private_run(data, bigger, denoiser=noop()).step is not base.step


def test_a_shared_step_refuses_a_call_without_the_runs_hyper():
    data = fake_mnist_images(128, 32)
    run = prepare_private_run(data, _spec(), denoiser=noop())
    x = np.asarray(training_arrays(data, run.spec).x_train)
    with pytest.raises(ValueError, match="StepHyper.of"):
        _train_without_hyper(run, x, np.asarray(data.y_train, np.int32))
    # StepHyper.of rounds sigma * C once, as a constant in the program is rounded
    h = StepHyper.of(run.config)
    assert float(h.sum_noise_std()) == float(np.float32(run.config.noise_multiplier * run.config.clip_norm))


def _train_without_hyper(run, x, y):
    return run_dp_loop(
        step=run.step,
        state=run.state,
        plan=run.plan,
        seed=0,
        key=run.key,
        gather=lambda idx: x[idx],
        labels=y,
    )
