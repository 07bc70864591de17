"""Honest selection (labeldp.selection): the held-out split, the one release of its labels, and
the privacy of a run that scores on them."""

from __future__ import annotations

import dataclasses
import math
import types

import numpy as np
import pytest

from labeldp import accounting
from labeldp.accounting.reaccount import reaccount_record
from labeldp.data.prepare import load_prepared
from labeldp.methods import registry
from labeldp.methods.base import MethodResult, PrivacyOutcome, RunSpec
from labeldp.runner import run_spec
from labeldp.selection import (
    VALIDATION_SEED,
    heldout_data,
    noisy_accuracy_pct,
    release_validation_labels,
    score_heldout,
    validation_split,
    with_validation_release,
)
from tests.helpers import assert_label_event_reaccounts, fake_mnist_images, write_prepared_mnist


def test_the_split_is_fixed_disjoint_and_complete():
    fit, val = validation_split(1000, 0.1)
    fit2, val2 = validation_split(1000, 0.1)
    assert np.array_equal(val, val2) and val.size == 100 and fit.size == 900
    assert np.array_equal(np.sort(np.concatenate([fit, val])), np.arange(1000))
    with pytest.raises(ValueError, match="validation_fraction"):
        validation_split(1000, 1.0)


def test_the_held_out_labels_are_released_once_by_k_ary_rr():
    y = np.random.default_rng(0).integers(0, 10, 20000)
    a = release_validation_labels(y, num_classes=10, epsilon=1.0)
    assert np.array_equal(a, release_validation_labels(y, num_classes=10, epsilon=1.0))  # one release per cell
    keep = math.e / (math.e + 9)
    assert np.mean(a == y) == pytest.approx(keep, abs=4 * math.sqrt(keep * (1 - keep) / y.size))
    assert noisy_accuracy_pct(y, a) == pytest.approx(100 * np.mean(a == y))


def test_a_run_scoring_on_the_release_is_max_of_both_epsilons_under_each_relation():
    acc = accounting.account_dpsgd(target_epsilon=0.5, target_delta=1e-5, sampling_rate=0.02, steps=50)
    p = PrivacyOutcome(
        epsilon=float(acc.epsilon),
        delta=1e-5,
        mechanism="dpsgd",
        accounting=acc.to_dict(),
        neighboring_relation="add_or_remove",
        epsilon_by_relation=dict(acc.epsilon_by_relation),
    )
    out = with_validation_release(p, epsilon=0.8, fraction=0.1)
    assert out.epsilon == pytest.approx(0.8) and out.epsilon_by_relation["add_or_remove"] == pytest.approx(0.8)
    assert out.epsilon_by_relation["label_substitution"] == pytest.approx(
        max(0.8, acc.epsilon_by_relation["label_substitution"])
    )
    assert out.accounting["validation_release"]["epsilon"] == 0.8 and out.accounting["event"] == acc.to_dict()["event"]
    low = with_validation_release(p, epsilon=0.1, fraction=0.1)  # a cheaper release costs nothing extra
    assert low.epsilon == pytest.approx(p.epsilon)


def test_dpsgd_with_a_held_out_part_trains_on_the_rest_and_records_the_release():
    spec = RunSpec(
        dataset="mnist",
        method="dpsgd",
        variant="heldout10",
        epsilon=0.5,
        delta=1e-5,
        seed=0,
        hparams=dict(learning_rate=0.2, epochs=1, batch_size=64, clip_norm=1.0),
        options={"validation_fraction": 0.25, "validation_epsilon": 3.0},
    )
    res = registry.get_method("dpsgd").run(fake_mnist_images(n_train=256, n_test=32), spec)
    d = res.details
    assert d["n_fit"] == 192 and d["n_validation"] == 64 and res.details["steps"] == 192 // 64
    assert 0.0 <= res.metrics["validation_noisy_accuracy_pct"] <= 100.0
    assert res.privacy.epsilon == pytest.approx(3.0)  # the release's budget is in the record's eps
    assert res.privacy.accounting["validation_release"]["fraction"] == 0.25


def _label_method_spec(method, **options):
    return RunSpec(
        dataset="mnist",
        method=method,
        variant="heldout",
        epsilon=1.0,
        delta=0.0,
        seed=0,
        hparams=dict(learning_rate=0.1, epochs=1, batch_size=64),
        options=options,
    )


@pytest.mark.parametrize("method", ["rr", "rr_debiased", "lp_2st", "alibi"])
def test_a_label_release_method_is_held_out_and_scored_by_the_runner(tmp_path, method):
    data = load_prepared(write_prepared_mnist(tmp_path / "mnist.npz", n_train=192, n_test=32))
    res = run_spec(_label_method_spec(method, validation_fraction=0.25, validation_epsilon=3.0), data)
    d = res.details
    assert d["n_fit"] == 144 and d["n_validation"] == 48
    if "num_train" in d:  # the method itself saw only the fitting rows
        assert d["num_train"] == 144
    assert 0.0 <= res.metrics["validation_noisy_accuracy_pct"] <= 100.0
    assert res.privacy.epsilon == pytest.approx(3.0)  # the release's budget is in the record's eps
    assert res.privacy.accounting["validation_release"]["epsilon"] == 3.0
    stored = res.privacy.to_dict(target_epsilon=1.0)  # what the record holds: eps under the stated relation
    assert stored["epsilon_by_relation"] == {"label_substitution": pytest.approx(3.0)}
    assert_label_event_reaccounts(stored)  # its stored event accounts to the record's eps 3, not the run's 1
    record = {"run_id": f"{method}-heldout", "privacy": stored}
    assert reaccount_record(record)[0]["privacy"]["epsilon"] == pytest.approx(3.0)  # the re-accounting script reads it
    assert res.audit_log_probs is None  # the held-out rows were the probe, not an audit


def test_without_the_options_a_label_release_method_runs_on_the_whole_training_split(tmp_path):
    data = load_prepared(write_prepared_mnist(tmp_path / "mnist.npz", n_train=192, n_test=32))
    plain = run_spec(_label_method_spec("rr"), data)
    assert plain.details["num_train"] == 192 and plain.privacy.epsilon == pytest.approx(1.0)
    assert "validation_noisy_accuracy_pct" not in plain.metrics and "n_validation" not in plain.details


def test_held_out_scoring_is_the_noisy_accuracy_of_the_reported_predictions(tmp_path):
    data = load_prepared(write_prepared_mnist(tmp_path / "mnist.npz", n_train=200, n_test=8))
    held = heldout_data(data, _label_method_spec("rr", validation_fraction=0.1))
    assert held.fit_spec.options == {} and held.epsilon == 1.0  # default: the run's eps
    fit, val = validation_split(200, 0.1)
    assert np.array_equal(held.fit_data.x_train, data.x_train[fit])
    assert np.array_equal(held.fit_data.y_train, data.y_train[fit])  # the method never sees a held-out label
    assert np.array_equal(held.fit_data.audit_inputs, data.x_train[val])
    # a model that predicts the released label on the first half of the rows and (released + 1) mod K after
    preds = np.array(held.y_noisy)
    preds[10:] = (preds[10:] + 1) % 10
    log_probs = np.log(np.eye(10)[preds] * 0.9 + 0.01)
    outcome = PrivacyOutcome(epsilon=2.0, delta=0.0, mechanism="rr", epsilon_by_relation={"label_substitution": 2.0})
    scored = score_heldout(MethodResult(metrics={}, privacy=outcome, timings={}, audit_log_probs=log_probs), held)
    assert scored.metrics["validation_noisy_accuracy_pct"] == pytest.approx(50.0)
    assert scored.privacy.epsilon == 2.0  # max(run 2, release 1)


def test_a_per_epoch_curve_is_scored_epoch_by_epoch_on_the_same_release(tmp_path):
    data = load_prepared(write_prepared_mnist(tmp_path / "mnist.npz", n_train=200, n_test=8))
    held = heldout_data(data, _label_method_spec("rr", validation_fraction=0.1))
    released = np.asarray(held.y_noisy)
    # epoch e's model predicts the released label on the first 5 e rows and (released + 1) mod K elsewhere
    by_epoch = []
    for e in range(1, 4):
        preds = (released + 1) % 10
        preds[: 5 * e] = released[: 5 * e]
        by_epoch.append(np.log(np.eye(10)[preds] * 0.9 + 0.01))
    outcome = PrivacyOutcome(epsilon=1.0, delta=0.0, mechanism="rr", epsilon_by_relation={"label_substitution": 1.0})
    result = MethodResult(
        metrics={}, privacy=outcome, timings={}, audit_log_probs=by_epoch[-1], audit_log_probs_by_epoch=by_epoch
    )
    scored = score_heldout(result, held)
    assert scored.details["validation_noisy_accuracy_by_epoch"] == pytest.approx([25.0, 50.0, 75.0])
    assert scored.metrics["validation_noisy_accuracy_pct"] == pytest.approx(75.0)  # the final model: the last epoch
    assert scored.audit_log_probs is None and scored.audit_log_probs_by_epoch is None  # not carried into the record
    plain = score_heldout(dataclasses.replace(result, audit_log_probs_by_epoch=None), held)
    assert "validation_noisy_accuracy_by_epoch" not in plain.details


def test_alibis_held_out_curve_scores_every_epoch_and_ends_at_the_final_model(tmp_path):
    data = load_prepared(write_prepared_mnist(tmp_path / "mnist.npz", n_train=192, n_test=32))
    spec = dataclasses.replace(
        _label_method_spec("alibi", validation_fraction=0.25, test_curve_diagnostic=True),
        hparams=dict(learning_rate=0.1, epochs=3, batch_size=64),
    )
    res = run_spec(spec, data)
    curve = res.details["validation_noisy_accuracy_by_epoch"]
    assert len(curve) == len(res.details["test_accuracy_by_epoch"]) == 3
    assert curve[-1] == res.metrics["validation_noisy_accuracy_pct"]  # the last epoch's model is the final one
    assert res.privacy.epsilon == pytest.approx(1.0)  # choosing an epoch on the release adds nothing to its eps


def test_held_out_selection_refuses_what_it_cannot_score(tmp_path):
    data = load_prepared(write_prepared_mnist(tmp_path / "mnist.npz"))
    with pytest.raises(ValueError, match="add validation_fraction"):
        heldout_data(data, _label_method_spec("rr", validation_epsilon=2.0))
    audited = dataclasses.replace(data, audit_inputs=data.x_train[:4])
    with pytest.raises(ValueError, match="label-canary audit"):
        heldout_data(audited, _label_method_spec("rr", validation_fraction=0.1))
    tabular = types.SimpleNamespace(kind="tabular", num_classes=2, audit_inputs=None)
    with pytest.raises(ValueError, match="image and features datasets, not 'tabular'"):
        heldout_data(tabular, _label_method_spec("rr", validation_fraction=0.1))
    release_seed = dataclasses.replace(_label_method_spec("rr", validation_fraction=0.1), seed=VALIDATION_SEED)
    with pytest.raises(ValueError, match="VALIDATION_SEED"):
        heldout_data(data, release_seed)
    with pytest.raises(ValueError, match="finite eps > 0"):  # validation_epsilon 0 is refused, not read as "unset"
        heldout_data(data, _label_method_spec("rr", validation_fraction=0.1, validation_epsilon=0.0))
