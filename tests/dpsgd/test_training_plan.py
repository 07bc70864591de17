"""The plan of a DP run (labeldp.dpsgd.training_plan): the loop draws exactly the planned steps and
the record's eps is the accountant's for the plan, for every DP-SGD-family method."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp import accounting
from labeldp.dpsgd import training_plan
from labeldp.dpsgd.training_plan import DPTrainingPlan, make_training_plan
from labeldp.methods.base import RunSpec


def test_plan_steps_batches_and_epsilon():
    plan = make_training_plan(target_epsilon=1.0, target_delta=1e-5, n=1000, expected_batch_size=64, epochs=3)
    assert plan.steps == 3 * 1000 // 64 and plan.sampling_rate == 64 / 1000
    assert len(list(plan.batches(rng=np.random.default_rng(0), pad_to=128))) == plan.steps
    direct = accounting.dpsgd_epsilon(noise_multiplier=plan.noise_multiplier, sampling_rate=plan.sampling_rate,
                                      steps=plan.steps, delta=1e-5, neighboring_relation="add_or_remove")
    out = plan.privacy_outcome(mechanism="dpsgd")
    assert out.valid and out.epsilon == pytest.approx(direct, rel=1e-6) and out.epsilon <= 1.0
    assert out.epsilon_by_relation["label_substitution"] > out.epsilon  # stated under both relations


def test_shuffled_batches_and_other_reasons_make_the_guarantee_invalid():
    plan = make_training_plan(target_epsilon=1.0, target_delta=1e-5, n=1000, expected_batch_size=100, epochs=1,
                              sampling="shuffle")
    assert len(list(plan.batches(rng=np.random.default_rng(0), pad_to=100))) == plan.steps
    out = plan.privacy_outcome(mechanism="dpsgd", reasons=("amplification claimed",))
    assert not out.valid and "amplification claimed" in out.invalid_reason and "shuffled" in out.invalid_reason


@pytest.mark.parametrize("batch,epochs,match", [(2000, 1, "lower it in the grid"), (64, 0, "raise epochs")])
def test_a_plan_that_cannot_run_is_refused_naming_the_key(batch, epochs, match):
    with pytest.raises(ValueError, match=match):
        make_training_plan(target_epsilon=1.0, target_delta=1e-5, n=1000, expected_batch_size=batch, epochs=epochs)


def _count_batches(monkeypatch):
    drawn = []
    real = DPTrainingPlan.batches

    def counting(self, **kw):
        for b in real(self, **kw):
            drawn.append(self)
            yield b

    monkeypatch.setattr(training_plan.DPTrainingPlan, "batches", counting)
    return drawn


@pytest.mark.parametrize("method", ["dpsgd", "labeldp_pro"])
def test_image_methods_draw_the_planned_steps_and_record_the_planned_eps(monkeypatch, method):
    from labeldp.methods import registry
    from tests.baselines.test_label_baselines import _fake_data

    drawn = _count_batches(monkeypatch)
    hp = dict(learning_rate=0.2, epochs=2, batch_size=64, clip_norm=1.0)
    options = {}
    if method == "labeldp_pro":
        hp.update(proj_step_size="auto", proj_steps=5, smoothing=1.0)
        options = {"denoiser": "alt_conv", "alt_batch_size": 8}
    spec = RunSpec(dataset="mnist", method=method, variant="default", epsilon=2.0, delta=1e-5, seed=0, hparams=hp,
                   options=options)
    res = registry.get_method(method).run(_fake_data(n_train=256, n_test=32), spec)
    plan = drawn[0]
    assert all(p is plan for p in drawn) and len(drawn) == plan.steps == res.details["steps"] == 2 * 256 // 64
    acc = res.privacy.accounting
    assert acc["steps"] == plan.steps and acc["noise_multiplier"] == plan.noise_multiplier
    direct = accounting.dpsgd_epsilon(noise_multiplier=plan.noise_multiplier, sampling_rate=plan.sampling_rate,
                                      steps=plan.steps, delta=1e-5, neighboring_relation="add_or_remove")
    assert res.privacy.epsilon == pytest.approx(direct, rel=1e-6)
