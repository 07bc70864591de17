"""User-level Hybrid (002 Table 3): Proposition 6's group-privacy conversion and its inverse, the
example caps of each phase, phase 2's fixed step count, and the user-level budget of each split."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.ads import hybrid_user
from labeldp.mechanisms.classification import group_privacy
from labeldp.methods.base import RunSpec
from tests.helpers import assert_label_event_reaccounts


@pytest.mark.parametrize("eps, delta, k", [(1.0, 1e-5, 1), (3.0, 1e-5, 2), (10.0, 1e-6, 5), (0.5, 1e-5, 10)])
def test_user_level_delta_inverts_the_item_level_budget(eps, delta, k):
    item = group_privacy(epsilon=eps, delta=delta, group_size=k, conversion="geometric_sum")
    assert item.epsilon * k == pytest.approx(eps)
    assert hybrid_user.user_level_delta(item_epsilon=item.epsilon, item_delta=item.delta, k=k) == pytest.approx(delta)
    # Proposition 6 directly: d * sum_{j<k} e^{j e}
    assert hybrid_user.user_level_delta(item_epsilon=0.3, item_delta=1e-6, k=k) == pytest.approx(
        1e-6 * sum(math.exp(j * 0.3) for j in range(k))
    )


HP = {
    "learning_rate": 1e-2,
    "epochs": 1,
    "batch_size": 64,
    "dp_learning_rate": 1e-2,
    "dp_epochs": 1,
    "dp_batch_size": 64,
    "clip_norm": 1.0,
}


def _run(data, split, k, eps=5.0, monkeypatch=None, seen=None):
    import importlib

    if monkeypatch is not None:
        real = hybrid_user.train_hybrid

        def spy(model, **kw):
            seen.update(
                phase2_rows=len(kw["y"]),
                phase1_rows=None if kw["phase1_rows"] is None else len(kw["phase1_rows"][2]),
                eps1=kw["eps1"],
            )
            return real(model, **kw)

        monkeypatch.setattr(hybrid_user, "train_hybrid", spy)  # where run_hybrid_user_level looks it up
    spec = RunSpec(
        dataset="criteo_attribution",
        method="hybrid_user_level",
        variant=f"{split}_k{k}",
        epsilon=eps,
        delta=1e-5,
        seed=0,
        hparams=HP,
        options={"examples_per_user": k, "phase_split": split},
    )
    return importlib.import_module("baselines.hybrid_user_level").run(data, spec)


def test_rr_split_randomizes_each_of_k_labels_at_eps_over_k(data, monkeypatch):
    seen = {}
    res = _run(data, "rr", 2, eps=3.0, monkeypatch=monkeypatch, seen=seen)
    users = np.unique(data.user_train).size
    assert seen == {"phase2_rows": 2 * users, "phase1_rows": 2 * users, "eps1": pytest.approx(1.5)}
    p = res.privacy
    assert p.epsilon == pytest.approx(3.0) and p.delta == 0.0 and p.privacy_unit == "user"
    assert_label_event_reaccounts(p.to_dict(target_epsilon=3.0))
    assert res.details["noise_multiplier"] is None and res.details["phase2_steps"] == 0
    # RR at 1.5 keeps a label with probability e^1.5 / (1 + e^1.5)
    assert res.details["label_noise_rate"] == pytest.approx(1 / (1 + math.exp(1.5)), abs=0.03)


def test_dpsgd_split_is_group_privacy_over_the_cap_with_fixed_steps(data):
    res = _run(data, "dpsgd", 5, eps=5.0)
    users = np.unique(data.user_train).size
    d, p = res.details, res.privacy
    assert d["phase2_rows"] == 5 * users
    assert d["phase2_steps"] == math.floor(HP["dp_epochs"] * users * hybrid_user.K_MAX / HP["dp_batch_size"])
    assert d["sampling_rate"] == pytest.approx(HP["dp_batch_size"] / (5 * users))
    item = group_privacy(epsilon=5.0, delta=1e-5, group_size=5, conversion="geometric_sum")
    assert d["item_level"] == {"epsilon": pytest.approx(item.epsilon), "delta": pytest.approx(item.delta)}
    # the user-level claim: k x the accountant's item eps, with Proposition 6's delta, within the target
    acc = p.accounting
    assert acc["epsilon"] <= item.epsilon + 1e-9
    assert p.epsilon == pytest.approx(5 * acc["epsilon"]) and p.epsilon <= 5.0 + 1e-6
    assert p.delta <= 1e-5 * (1 + 1e-9) and p.privacy_unit == "user"
    assert p.epsilon_by_relation["label_substitution"] >= p.epsilon_by_relation["add_or_remove"]
    # both relations' eps hold at the run's user-level delta (Proposition 6 on the certifying pair)
    for rel, pair in d["item_level_by_relation"].items():
        assert d["user_delta_by_relation"][rel] <= 1e-5 * (1 + 1e-9), rel
        assert p.epsilon_by_relation[rel] == pytest.approx(5 * pair["epsilon"])
    assert 0.0 <= res.metrics["test_auc"] <= 1.0


def test_hybrid_split_uses_one_example_per_user_in_phase_1(data, monkeypatch):
    seen = {}
    res = _run(data, "hybrid", 2, eps=5.0, monkeypatch=monkeypatch, seen=seen)
    users = np.unique(data.user_train).size
    assert seen["phase1_rows"] == users and seen["phase2_rows"] == 2 * users
    d, p = res.details, res.privacy
    assert d["epsilon1"] == pytest.approx(3.0) and d["epsilon1"] + d["epsilon2"] == pytest.approx(5.0)
    assert seen["eps1"] == pytest.approx(3.0)  # cap 1: no group factor in phase 1
    assert p.epsilon == pytest.approx(3.0 + 2 * p.accounting["epsilon"]) and p.epsilon <= 5.0 + 1e-6


def test_user_level_epsilon_is_a_certified_fixed_point():
    # a toy item-level curve eps(d) = a log(1/d): the returned pair certifies itself and the delta
    eps_at = lambda d: 0.05 * math.log(1 / d)
    user_eps, e, d = hybrid_user.user_level_epsilon(eps_at, user_delta=1e-5, k=4)
    assert user_eps == pytest.approx(4 * e) and eps_at(d) <= e
    assert hybrid_user.user_level_delta(item_epsilon=e, item_delta=d, k=4) <= 1e-5 * (1 + 1e-12)
    assert e == pytest.approx(eps_at(d), rel=2e-4)  # tight: not a loose upper bound


@pytest.mark.parametrize(
    "options, hp, match",
    [
        ({"examples_per_user": 2}, HP, "phase_split"),
        ({"examples_per_user": 0, "phase_split": "rr"}, HP, "integer >= 1"),
        ({"examples_per_user": 2.5, "phase_split": "rr"}, HP, "integer >= 1"),
        ({"examples_per_user": None, "phase_split": "rr"}, HP, "integer >= 1"),
        ({"examples_per_user": 2, "phase_split": "both"}, HP, "phase_split must be"),
        ({"examples_per_user": 2, "phase_split": "hybrid"}, {**HP, "epochs": 0}, "epochs"),
        ({"examples_per_user": 2, "phase_split": "dpsgd"}, {**HP, "dp_batch_size": 10**7}, "exceeds"),
    ],
)
def test_bad_variant_options_are_refused_with_the_fix(data, options, hp, match):
    import importlib

    spec = RunSpec(
        dataset="criteo_attribution",
        method="hybrid_user_level",
        variant="x",
        epsilon=1.0,
        delta=1e-5,
        seed=0,
        hparams=hp,
        options=options,
    )
    with pytest.raises(ValueError, match=match):
        importlib.import_module("baselines.hybrid_user_level").run(data, spec)
