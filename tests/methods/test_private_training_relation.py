"""A DP-SGD-family run meets its target under the relation it was calibrated for, and its
record states eps under both relations."""

import json
import math

import pytest

from labeldp import accounting
from labeldp.methods.base import RunSpec
from tests.helpers import fake_mnist_images


@pytest.mark.parametrize("relation", [None, "add_or_remove", "label_substitution"])
def test_dpsgd_record_states_both_relations(relation):
    from labeldp.methods import dpsgd

    data = fake_mnist_images(n_train=192, n_test=64)
    spec = RunSpec(
        dataset="mnist",
        method="dpsgd",
        variant="default",
        epsilon=1.0,
        delta=1e-5,
        seed=0,
        hparams=dict(learning_rate=0.2, epochs=1, batch_size=64, clip_norm=5.0),
        calibration_relation=relation,
    )
    res = dpsgd.run(data, spec)
    priv = json.loads(json.dumps(res.privacy.to_dict(target_epsilon=1.0)))
    rel = relation or "add_or_remove"
    assert priv["neighboring_relation"] == rel and priv["accounting"]["neighboring_relation"] == rel
    assert set(priv["epsilon_by_relation"]) == {"add_or_remove", "label_substitution"}
    assert priv["epsilon_by_relation"][rel] == priv["epsilon"] <= 1.0
    acc = priv["accounting"]
    # the other relation, straight from dp_accounting for what ran
    other = "label_substitution" if rel == "add_or_remove" else "add_or_remove"
    direct = accounting.dpsgd_epsilon(
        noise_multiplier=acc["noise_multiplier"],
        sampling_rate=acc["sampling_rate"],
        steps=acc["steps"],
        delta=1e-5,
        neighboring_relation=other,
    )
    assert priv["epsilon_by_relation"][other] == pytest.approx(direct, rel=1e-9)
    if rel == "add_or_remove":
        assert priv["epsilon_by_relation"]["label_substitution"] > 1.0  # more than the target
    else:
        assert priv["epsilon_by_relation"]["add_or_remove"] < 1.0


def test_label_randomizer_outcome_is_stated_under_label_substitution():
    from baselines.common import pure_label_dp
    from labeldp.accounting.label_events import randomized_response_event

    event = randomized_response_event(epsilon=2.0, num_classes=10)
    out = pure_label_dp(2.0, "randomized_response", event=event).to_dict(target_epsilon=2.0)
    assert out["neighboring_relation"] == "label_substitution"
    assert out["epsilon_by_relation"] == {"label_substitution": 2.0}
    assert math.isfinite(out["epsilon"])
