"""The regression pipeline shared by 003's randomizer methods: privacy budget split, unbiasedness
of the noisy training labels, determinism, and errors before any training."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp import accounting
from labeldp.methods.base import RunSpec
from labeldp.regression.pipeline import PRIOR_EPSILON, prior_epsilon, run_label_randomizer, validation_split
from labeldp.regression.randomizers import additive, optimal_unbiased_randomizer_fn, rr_on_bins_randomizer
from labeldp.runner import run_spec
from tests.regression.helpers import synthetic_tabular
from tests.helpers import assert_label_event_reaccounts

HP = {"learning_rate": 1e-2, "epochs": 2, "batch_size": 256}


def _spec(method, eps, seed=0, **hp):
    return RunSpec(
        dataset="rand_hie", method=method, variant="default", epsilon=eps, delta=0.0, seed=seed, hparams={**HP, **hp}
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return synthetic_tabular(tmp_path_factory.mktemp("tab"), n_train=3000)


@pytest.mark.parametrize("method", ["rr_on_bins", "optimal_unbiased"])
def test_prior_budget_and_split_of_eps(data, method):
    res = run_spec(_spec(method, 2.0), data)
    eps1 = PRIOR_EPSILON["rand_hie"]
    assert res.details["epsilon1"] == eps1
    assert math.isclose(res.details["epsilon2"], 2.0 - eps1)
    assert math.isclose(res.privacy.epsilon, res.details["epsilon1"] + res.details["epsilon2"])
    assert res.privacy.neighboring_relation is accounting.LABEL_SUBSTITUTION and res.privacy.delta == 0.0
    assert_label_event_reaccounts(res.privacy.to_dict(target_epsilon=2.0))
    # the randomizer that ran is eps2-DP (its exact matrix), so the total is eps1 + eps2
    assert res.details["dp_ratio_log"] <= res.details["epsilon2"] + 1e-9


def _noisy(data, randomize, method, eps, seed):
    rng = np.random.default_rng(seed)
    return randomize(data.y_train, data=data, spec=_spec(method, eps, seed), rng=rng).noisy_labels


def _per_label_bias_z(data, randomize, name, draws=30):
    """z-score of mean(noisy - y) for every label value with at least 20 training rows."""
    y = np.tile(data.y_train, draws)
    noisy = np.concatenate([_noisy(data, randomize, name, 1.0, s) for s in range(draws)])
    z = {}
    for v in np.unique(data.y_train):
        m = y == v
        if m.sum() >= 20 * draws:
            d = noisy[m] - v
            z[float(v)] = float(d.mean() / (d.std() / math.sqrt(d.size) + 1e-12))
    return z


@pytest.mark.parametrize(
    "name,randomize",
    [
        ("laplace", additive("laplace", clip=False)),
        ("staircase", additive("staircase", clip=False)),
        ("optimal_unbiased", optimal_unbiased_randomizer_fn),
    ],
)
def test_unbiased_randomizers_give_unbiased_noisy_labels(data, name, randomize):
    """E[noisy | label = y] = y for every label value (30 draws over the training set; each
    label's mean within 4.5 standard errors, about a 1e-5 false alarm per label)."""
    z = _per_label_bias_z(data, randomize, name)
    assert max(abs(v) for v in z.values()) < 4.5, z


@pytest.mark.parametrize(
    "name,randomize",
    [
        ("laplace_clipped", additive("laplace", clip=True)),
        ("rr_on_bins", rr_on_bins_randomizer),
    ],
)
def test_biased_randomizers_are_detectably_biased(data, name, randomize):
    """The property test above can fail: clipped Laplace and RR-on-Bins move the labels near the
    ends of the range towards the middle."""
    z = _per_label_bias_z(data, randomize, name)
    assert max(abs(v) for v in z.values()) > 10, z


def test_integer_labels_get_discrete_noise(data):
    noisy = _noisy(data, additive("laplace", clip=False), "laplace", 1.0, 0)
    assert np.all(noisy == np.round(noisy))


def test_real_labels_are_rounded_without_bias(tmp_path):
    real = synthetic_tabular(tmp_path, integer=False, n_train=1500)
    z = _per_label_bias_z(real, optimal_unbiased_randomizer_fn, "optimal_unbiased")
    assert not z  # real labels: no repeated values; check the overall mean instead
    diffs = np.concatenate(
        [_noisy(real, optimal_unbiased_randomizer_fn, "optimal_unbiased", 1.0, s) - real.y_train for s in range(30)]
    )
    assert abs(diffs.mean()) < 4 * diffs.std() / math.sqrt(diffs.size)


def test_same_seed_same_numbers(data):
    a = run_spec(_spec("optimal_unbiased", 1.0, seed=3), data)
    b = run_spec(_spec("optimal_unbiased", 1.0, seed=3), data)
    assert a.metrics == b.metrics


def test_records_store_what_the_issue_asks(data):
    res = run_spec(_spec("optimal_unbiased", 1.0, mesh_size=42), data)
    for key in ("epsilon1", "epsilon2", "mesh_size", "lp_solve_seconds", "joint_histogram"):
        assert key in res.details
    assert res.details["mesh_size"] == 42 and res.details["num_outputs"] == 42
    for key in ("test_mse", "noisy_label_mse", "validation_noisy_mse"):
        assert math.isfinite(res.metrics[key])
    counts = np.asarray(res.details["joint_histogram"]["counts"])
    assert counts.sum() == data.y_train.size


def test_validation_rows_are_fixed_and_disjoint():
    fit, val = validation_split(1000, 0.1)
    fit2, val2 = validation_split(1000, 0.1)
    assert np.array_equal(val, val2) and val.size == 100 and not set(fit) & set(val)


def test_prior_budget_not_below_eps_is_refused_before_training(data):
    with pytest.raises(ValueError, match="eps1 = 0.03 is not below"):
        prior_epsilon(data, _spec("rr_on_bins", 0.03))
    with pytest.raises(ValueError, match="not below"):
        run_spec(_spec("optimal_unbiased", 0.02), data)


def test_mesh_too_small_is_refused(data):
    with pytest.raises(ValueError, match="mesh_size must be >= 2"):
        run_spec(_spec("optimal_unbiased", 1.0, mesh_size=1), data)


def test_image_data_is_refused(data):
    class Fake:
        name = "mnist"
        kind = "image"

    with pytest.raises(ValueError, match="tabular"):
        run_label_randomizer(Fake(), _spec("laplace", 1.0), additive("laplace", clip=False), name="laplace")


def test_nonprivate_regression_trains_on_true_labels(data):
    res = run_spec(
        RunSpec(
            dataset="rand_hie", method="nonprivate", variant="default", epsilon=math.inf, delta=0.0, seed=0, hparams=HP
        ),
        data,
    )
    assert res.metrics["noisy_label_mse"] == 0.0
    assert res.privacy.epsilon == math.inf


def test_config_with_eps_below_the_prior_budget_is_refused_before_any_job():
    from labeldp.config_semantics import validate_semantics
    from labeldp.plan import ConfigError
    from tests.helpers import repo_config

    cfg = repo_config()
    cfg["tables"]["figure5a"]["epsilons"] = [0.001, 1.0]  # Census eps1 = 0.002
    with pytest.raises(ConfigError, match="does not exceed the prior budget eps1 = 0.002"):
        validate_semantics(cfg)


@pytest.mark.parametrize("method", ["laplace", "staircase", "laplace_clipped", "staircase_clipped"])
def test_additive_randomizers_state_an_event_that_reaccounts(data, method):
    res = run_spec(_spec(method, 1.5), data)
    assert_label_event_reaccounts(res.privacy.to_dict(target_epsilon=1.5))
