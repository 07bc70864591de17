"""The ads task (labeldp.tasks.ads): one Table 7 run end to end through the method modules on a tiny
SYNTHETIC Criteo Attribution stand-in; what each method states about its user-level privacy is what ran."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp import tasks
from labeldp.methods import registry
from labeldp.tasks.ads import AdsTask, user_arrays
from labeldp.data.sources import criteo_attribution
from labeldp.data.tabular import load_prepared_tabular
from labeldp.methods.base import RunSpec
from tests.helpers import assert_label_event_reaccounts


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("attr")
    criteo_attribution.write_standin(d / "raw", n_rows=3000, seed=0)
    out = criteo_attribution.prepare_dataset(raw_dir=d / "raw", out_path=d / "p.npz", source="synthetic_standin")
    return load_prepared_tabular(out)


def _spec(method, eps, k, **hp):
    hparams = {"learning_rate": 1e-2, "epochs": 2, "batch_size": 32, **hp}
    return RunSpec(
        dataset="criteo_attribution",
        method=method,
        variant=f"k{k}" if k else "default",
        epsilon=eps,
        delta=1e-5,
        seed=0,
        hparams=hparams,
        options={"examples_per_user": k} if k else {},
    )


def run_ads_method(data, spec, *, method):
    """Runs ``method``'s module on ads data (no method branches on the kind: the task does the rest)."""
    assert spec.method == method
    return registry.get_method(method).run(data, spec)


def test_user_arrays_give_every_user_exactly_k_of_its_own_rows(data):
    x_num, x_cat, y = user_arrays(data, k=3, seed=0)
    assert y.shape == (len(np.unique(data.user_train)), 3) and x_cat.shape[:2] == y.shape


def test_rr_spends_eps_over_k_per_label_and_states_a_user_level_guarantee(data):
    res = run_ads_method(data, _spec("rr", 1.0, 4), method="rr")
    p = res.privacy.to_dict(target_epsilon=1.0)
    assert p["privacy_unit"] == "user" and p["epsilon"] == 1.0 and p["delta"] == 0.0
    assert_label_event_reaccounts(p)  # 4 binary RR events at 0.25 compose to 1.0
    assert res.details["per_label_epsilon"] == pytest.approx(0.25)
    flip = 1 / (1 + math.exp(0.25))  # binary RR at eps/k flips a label with probability 1/(1+e^(eps/k))
    n = res.details["users"] * 4
    assert abs((1 - res.details["noisy_label_accuracy"]) - flip) < 4 * math.sqrt(flip * (1 - flip) / n)
    assert 0.0 <= res.metrics["test_auc"] <= 1.0


def test_dpsgd_is_accounted_for_poisson_sampling_over_users(data):
    res = run_ads_method(data, _spec("dpsgd", 1.0, 2, clip_norm=1.0), method="dpsgd")
    users = res.details["users"]
    acc = res.privacy.accounting
    assert res.details["sampling_rate"] == pytest.approx(32 / users)
    assert res.metrics["steps"] == res.details["steps"] == int(2 * users // 32)
    assert res.privacy.privacy_unit == "user" and res.privacy.epsilon <= 1.0 + 1e-9
    assert set(res.privacy.epsilon_by_relation) == {"add_or_remove", "label_substitution"}
    assert res.privacy.epsilon_by_relation["label_substitution"] > res.privacy.epsilon
    assert acc["noise_multiplier"] > 0


def test_nonprivate_default_variant_uses_every_training_row(data):
    res = run_ads_method(data, _spec("nonprivate", math.inf, None), method="nonprivate")
    assert res.details["rows"] == len(data.y_train) and math.isinf(res.privacy.epsilon)


def test_the_ads_data_get_the_ads_task(data):
    assert isinstance(tasks.task_for(data, _spec("rr", 1.0, 2)), AdsTask)


def test_example_level_rr_randomises_each_row_once_at_eps(data):
    res = run_ads_method(data, _spec("rr", 1.0, None), method="rr")
    p = res.privacy.to_dict(target_epsilon=1.0)
    assert p["privacy_unit"] == "example" and res.details["per_label_epsilon"] == 1.0
    assert res.details["num_train"] == len(data.y_train) == res.details["rows"]
    assert_label_event_reaccounts(p)


def test_options_the_ads_task_does_not_implement_are_refused_with_the_reason(data):
    import dataclasses

    spec = dataclasses.replace(_spec("dpsgd", 1.0, 2, clip_norm=1.0), options={"examples_per_user": 2, "momentum": 0.9})
    with pytest.raises(ValueError, match="'momentum'.*RMSProp"):
        run_ads_method(data, spec, method="dpsgd")
    rr_spec = dataclasses.replace(_spec("rr", 1.0, None), options={"momentum": 0.9})  # RR's optimiser variant too
    with pytest.raises(ValueError, match="'momentum'.*RMSProp"):
        run_ads_method(data, rr_spec, method="rr")
    spec = dataclasses.replace(spec, options={"examples_per_user": 2, "validation_fraction": 0.1})
    with pytest.raises(ValueError, match="held-out selection"):
        run_ads_method(data, spec, method="dpsgd")
    for option, why in [("model", "network is the dataset's ads MLP"), ("augment", "image augmentation")]:
        spec = dataclasses.replace(spec, options={"examples_per_user": 2, option: "x"})
        with pytest.raises(ValueError, match=f"'{option}'.*{why}"):
            run_ads_method(data, spec, method="dpsgd")


def test_the_regression_task_refuses_recipe_options_with_the_reason_that_fits_each():
    from labeldp.tasks.regression import RegressionTask

    why = RegressionTask.unsupported_options
    assert "RMSProp" in why["momentum"] and "RMSProp" not in why["model"] and "RMSProp" not in why["augment"]
    assert "003 MLP" in why["model"] and "augmentation" in why["augment_cutout"]


def test_user_level_epsilon_is_dp_accountings_for_the_user_sampling_that_ran(data):
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    res = run_ads_method(data, _spec("dpsgd", 2.0, 5, clip_norm=1.0), method="dpsgd")
    q, steps, sigma = res.details["sampling_rate"], res.details["steps"], res.details["noise_multiplier"]
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
    )
    NR = dp_accounting.NeighboringRelation
    for relation, nr in (("add_or_remove", NR.ADD_OR_REMOVE_ONE), ("label_substitution", NR.REPLACE_ONE)):
        acc = pld_privacy_accountant.PLDAccountant(nr)
        acc.compose(event)
        direct = acc.get_epsilon(1e-5)
        assert res.privacy.epsilon_by_relation[relation] == pytest.approx(direct, rel=2e-2), relation
    assert res.privacy.epsilon_by_relation["add_or_remove"] <= 2.0 + 1e-9
