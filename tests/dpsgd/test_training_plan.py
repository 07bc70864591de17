"""The plan of a DP run (labeldp.dpsgd.training_plan): the loop draws exactly the planned steps and
the record's eps is the accountant's for the plan, for every DP-SGD-family method."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp import accounting
from labeldp.dpsgd import training_plan
from labeldp.dpsgd.training_plan import DPTrainingPlan, make_training_plan
from labeldp.methods.base import RunSpec
from tests.helpers import fake_mnist_images


def test_plan_steps_batches_and_epsilon():
    plan = make_training_plan(target_epsilon=1.0, target_delta=1e-5, n=1000, expected_batch_size=64, epochs=3)
    assert plan.steps == 3 * 1000 // 64 and plan.sampling_rate == 64 / 1000
    assert len(list(plan.batches(rng=np.random.default_rng(0), pad_to=128))) == plan.steps
    direct = accounting.dpsgd_epsilon(
        noise_multiplier=plan.noise_multiplier,
        sampling_rate=plan.sampling_rate,
        steps=plan.steps,
        delta=1e-5,
        neighboring_relation="add_or_remove",
    )
    out = plan.privacy_outcome(mechanism="dpsgd")
    assert out.valid and out.epsilon == pytest.approx(direct, rel=1e-6) and out.epsilon <= 1.0
    assert out.epsilon_by_relation["label_substitution"] > out.epsilon  # stated under both relations


def test_shuffled_batches_and_other_reasons_make_the_guarantee_invalid():
    plan = make_training_plan(
        target_epsilon=1.0, target_delta=1e-5, n=1000, expected_batch_size=100, epochs=1, sampling="shuffle"
    )
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

    drawn = _count_batches(monkeypatch)
    hp = dict(learning_rate=0.2, epochs=2, batch_size=64, clip_norm=1.0)
    options = {}
    if method == "labeldp_pro":
        hp.update(proj_step_size="auto", proj_steps=5, smoothing=1.0)
        options = {"denoiser": "alt_conv", "alt_batch_size": 8}
    spec = RunSpec(
        dataset="mnist", method=method, variant="default", epsilon=2.0, delta=1e-5, seed=0, hparams=hp, options=options
    )
    res = registry.get_method(method).run(fake_mnist_images(n_train=256, n_test=32), spec)
    plan = drawn[0]
    assert all(p is plan for p in drawn) and len(drawn) == plan.steps == res.details["steps"] == 2 * 256 // 64
    acc = res.privacy.accounting
    assert acc["steps"] == plan.steps and acc["noise_multiplier"] == plan.noise_multiplier
    direct = accounting.dpsgd_epsilon(
        noise_multiplier=plan.noise_multiplier,
        sampling_rate=plan.sampling_rate,
        steps=plan.steps,
        delta=1e-5,
        neighboring_relation="add_or_remove",
    )
    assert res.privacy.epsilon == pytest.approx(direct, rel=1e-6)


def test_opacus_twin_draws_the_plans_batches(monkeypatch):
    pytest.importorskip("opacus")
    from baselines import dpsgd_opacus

    drawn = _count_batches(monkeypatch)
    spec = RunSpec(
        dataset="mnist",
        method="dpsgd_opacus",
        variant="default",
        epsilon=2.0,
        delta=1e-5,
        seed=0,
        hparams=dict(learning_rate=0.2, epochs=2, batch_size=64, clip_norm=1.0),
    )
    res = dpsgd_opacus.run(fake_mnist_images(n_train=256, n_test=32), spec)
    plan = drawn[0]
    assert all(p is plan for p in drawn) and len(drawn) == plan.steps == 2 * 256 // 64
    assert res.privacy.accounting["noise_multiplier"] == plan.noise_multiplier


@pytest.fixture(scope="module")
def ads_data(tmp_path_factory):
    """A prepared SYNTHETIC Criteo Attribution stand-in (users and sensitive features)."""
    from tests.helpers import prepared_attribution

    return prepared_attribution(tmp_path_factory.mktemp("attr"), n_rows=2500, seed=1)


@pytest.mark.parametrize("method", ["dpsgd", "labeldp_pro"])
def test_user_level_methods_draw_the_planned_steps_and_record_the_planned_eps(monkeypatch, ads_data, method):
    from labeldp.methods import registry

    drawn = _count_batches(monkeypatch)
    hp = dict(learning_rate=1e-2, epochs=2, batch_size=32, clip_norm=1.0)
    if method == "labeldp_pro":
        hp.update(proj_step_size="auto", proj_steps=5, smoothing=1.0)
    spec = RunSpec(
        dataset="criteo_attribution",
        method=method,
        variant="k2",
        epsilon=1.0,
        delta=1e-5,
        seed=0,
        hparams=hp,
        options={"examples_per_user": 2},
    )
    res = registry.get_method(method).run(ads_data, spec)
    plan = drawn[0]
    users = res.details["users"]
    assert plan.n == users and all(p is plan for p in drawn)
    assert len(drawn) == plan.steps == res.metrics["steps"] == 2 * users // 32
    direct = accounting.dpsgd_epsilon(
        noise_multiplier=plan.noise_multiplier,
        sampling_rate=plan.sampling_rate,
        steps=plan.steps,
        delta=1e-5,
        neighboring_relation="add_or_remove",
    )
    assert res.privacy.epsilon == pytest.approx(direct, rel=1e-6) and res.privacy.privacy_unit == "user"


@pytest.mark.parametrize("method", ["hybrid", "hybrid_dpsgd"])
def test_hybrid_dp_phase_draws_the_planned_steps_and_records_eps1_plus_the_plans_eps(monkeypatch, ads_data, method):
    import importlib

    drawn = _count_batches(monkeypatch)
    hp = {
        "learning_rate": 1e-2,
        "epochs": 1,
        "batch_size": 64,
        "dp_learning_rate": 1e-2,
        "dp_epochs": 2,
        "dp_batch_size": 64,
        "clip_norm": 1.0,
    }
    if method == "hybrid_dpsgd":
        hp = {k: hp[k] for k in ("dp_learning_rate", "dp_epochs", "dp_batch_size", "clip_norm")}
    spec = RunSpec(
        dataset="criteo_attribution", method=method, variant="default", epsilon=5.0, delta=1e-5, seed=0, hparams=hp
    )
    res = importlib.import_module(f"baselines.{method}").run(ads_data, spec)
    plan = drawn[0]
    n = len(ads_data.y_train)
    assert plan.n == n and all(p is plan for p in drawn)
    assert len(drawn) == plan.steps == res.details["phase2_steps"] == 2 * n // 64
    direct = accounting.dpsgd_epsilon(
        noise_multiplier=plan.noise_multiplier,
        sampling_rate=plan.sampling_rate,
        steps=plan.steps,
        delta=1e-5,
        neighboring_relation="add_or_remove",
    )
    assert res.privacy.epsilon == pytest.approx(res.details["epsilon1"] + direct, rel=1e-6)


def test_user_level_hybrid_draws_its_fixed_steps_at_the_item_level_target(monkeypatch, ads_data):
    from baselines import hybrid_user_level
    from labeldp.ads import hybrid_user

    drawn = _count_batches(monkeypatch)
    hp = {"dp_learning_rate": 1e-2, "dp_epochs": 1, "dp_batch_size": 64, "clip_norm": 1.0}
    spec = RunSpec(
        dataset="criteo_attribution",
        method="hybrid_user_level",
        variant="dpsgd_k3",
        epsilon=5.0,
        delta=1e-5,
        seed=0,
        hparams=hp,
        options={"examples_per_user": 3, "phase_split": "dpsgd"},
    )
    res = hybrid_user_level.run(ads_data, spec)
    plan = drawn[0]
    users = res.details["users"]
    assert plan.n == 3 * users and all(p is plan for p in drawn)
    assert len(drawn) == plan.steps == res.details["phase2_steps"] == users * hybrid_user.K_MAX // 64
    item = res.details["item_level"]
    direct = accounting.dpsgd_epsilon(
        noise_multiplier=plan.noise_multiplier,
        sampling_rate=plan.sampling_rate,
        steps=plan.steps,
        delta=item["delta"],
        neighboring_relation="add_or_remove",
    )
    assert direct <= item["epsilon"] * (1 + 1e-6)
    assert res.privacy.epsilon == pytest.approx(3 * res.details["item_level_by_relation"]["add_or_remove"]["epsilon"])


def test_a_plan_takes_an_explicit_step_count_and_refuses_both_or_neither():
    plan = make_training_plan(target_epsilon=1.0, target_delta=1e-5, n=1000, expected_batch_size=64, steps=7)
    assert plan.steps == 7 and len(list(plan.batches(rng=np.random.default_rng(0), pad_to=128))) == 7
    for kw in ({}, {"epochs": 1, "steps": 7}):
        with pytest.raises(ValueError, match="exactly one of epochs and steps"):
            make_training_plan(target_epsilon=1.0, target_delta=1e-5, n=1000, expected_batch_size=64, **kw)
