"""Hybrid (002): the budget split, the debiased loss's unbiasedness, the truncated model's
independence from the sensitive features, and one run of each method with composed privacy."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from labeldp.ads.hybrid import debiased_rr_weights, split_budget
from labeldp.ads.model import AdsMLP, two_class_logits
from labeldp.ads.train import init_params
from labeldp.methods.base import RunSpec
from tests.helpers import assert_label_event_reaccounts


@pytest.mark.parametrize("eps, e1", [(1, 0.6), (3, 1.8), (5, 3.0), (50, 3.0)])
def test_budget_split_is_002s_rule_and_adds_up(eps, e1):
    a, b = split_budget(eps)
    assert a == pytest.approx(e1) and a + b == pytest.approx(eps)
    assert split_budget(eps, rule="rr_only") == (eps, 0) and split_budget(eps, rule="dpsgd_only") == (0, eps)
    with pytest.raises(ValueError):
        split_budget(math.inf)


@pytest.mark.parametrize("eps1", [0.3, 1.0, 3.0])
def test_debiased_loss_is_unbiased_for_every_loss_pair(eps1):
    rng = np.random.default_rng(0)
    losses = rng.uniform(0.1, 3.0, size=(20, 2))  # L(0), L(1) of 20 examples
    p_keep = math.exp(eps1) / (1 + math.exp(eps1))
    for y in (0, 1):
        w_kept = debiased_rr_weights(np.full(20, y), eps1=eps1)
        w_flip = debiased_rr_weights(np.full(20, 1 - y), eps1=eps1)
        expected = p_keep * (w_kept * losses).sum(1) + (1 - p_keep) * (w_flip * losses).sum(1)
        np.testing.assert_allclose(expected, losses[:, y], rtol=1e-5)


def test_truncated_model_ignores_sensitive_features_and_their_parameters():
    model = AdsMLP(
        hidden=(8,), vocab_sizes=(5, 5), embed_dims=(3, 3), sensitive_cat=(False, True), sensitive_num=(True,)
    )
    rng = np.random.default_rng(1)
    x_num, x_cat = rng.normal(size=(6, 1)).astype(np.float32), rng.integers(0, 5, (6, 2)).astype(np.int32)
    params = init_params(model, x_num, x_cat, seed=0)
    f = two_class_logits(model, truncated=True)
    x_cat2, x_num2 = x_cat.copy(), x_num + 5.0
    x_cat2[:, 1] = (x_cat[:, 1] + 1) % 5
    np.testing.assert_allclose(f(params, (x_num, x_cat)), f(params, (x_num2, x_cat2)))
    g = jax.grad(lambda p: f(p, (x_num, x_cat))[:, 1].sum())(params)
    assert float(abs(g["params"]["embed_1"]["embedding"]).sum()) == 0.0
    assert float(abs(g["params"]["embed_0"]["embedding"]).sum()) > 0.0
    full = two_class_logits(model)
    assert not np.allclose(full(params, (x_num, x_cat)), full(params, (x_num2, x_cat2)))


HP = {
    "learning_rate": 1e-2,
    "epochs": 2,
    "batch_size": 64,
    "dp_learning_rate": 1e-2,
    "dp_epochs": 1,
    "dp_batch_size": 64,
    "clip_norm": 1.0,
}


@pytest.mark.parametrize(
    "method, keys",
    [
        ("hybrid", None),
        ("hybrid_rr", ("learning_rate", "epochs", "batch_size")),
        ("hybrid_dpsgd", ("dp_learning_rate", "dp_epochs", "dp_batch_size", "clip_norm")),
    ],
)
def test_each_method_composes_its_phases_budgets(data, method, keys):
    import importlib

    mod = importlib.import_module(f"baselines.{method}")
    hp = {k: HP[k] for k in (keys or HP)}
    spec = RunSpec(
        dataset="criteo_attribution", method=method, variant="default", epsilon=5.0, delta=1e-5, seed=0, hparams=hp
    )
    res = mod.run(data, spec)
    d, p = res.details, res.privacy
    assert d["epsilon1"] + d["epsilon2"] == pytest.approx(5.0)
    if method == "hybrid_rr":
        assert p.epsilon == pytest.approx(5.0) and p.delta == 0.0 and d["noise_multiplier"] is None
        assert_label_event_reaccounts(p.to_dict(target_epsilon=5.0))
    else:
        acc = p.accounting
        assert p.epsilon == pytest.approx(d["epsilon1"] + acc["epsilon"], rel=1e-9)
        assert p.epsilon <= 5.0 + 1e-6
        assert p.epsilon_by_relation["label_substitution"] >= p.epsilon_by_relation["add_or_remove"]
        assert d["phase2_steps"] == int(HP["dp_epochs"] * len(data.y_train) // HP["dp_batch_size"])
    if method == "hybrid":
        assert d["epsilon1"] == pytest.approx(3.0) and d["label_noise_rate"] is not None
        # the record's event: binary RR at eps1, then the DP phase's event; the accountant's epsilon for
        # it under label substitution is at most the basic composition the record states, and above eps1
        from labeldp.accounting import label_events

        rec = p.to_dict(target_epsilon=5.0)
        event = label_events.label_event_from_record(rec)
        assert type(event).__name__ == "ComposedDpEvent" and len(event.events) == 2
        stated = rec["epsilon_by_relation"]["label_substitution"]
        got = label_events.label_event_epsilon(event, delta=rec["delta"], scale=stated)
        assert d["epsilon1"] < got <= stated + label_events.label_event_tolerance(event, epsilon=stated), (got, stated)
    assert 0.0 <= res.metrics["test_auc"] <= 1.0
    assert d["data_deviation"] == "000's user-split preparation, not 002's random 80/20 split"  # the fixture's split


def test_on_002s_random_split_the_record_states_no_data_deviation(tmp_path):
    """On the split view 002's tables use (labeldp.data.views), the record does not claim 000's split."""
    from baselines import hybrid_rr
    from labeldp.data.sources import criteo_attribution
    from labeldp.data.tabular import load_prepared_tabular

    criteo_attribution.write_standin(tmp_path / "raw", n_rows=1500, seed=1)
    view = load_prepared_tabular(
        criteo_attribution.prepare_dataset(
            raw_dir=tmp_path / "raw",
            out_path=tmp_path / "v.npz",
            source="synthetic_standin",
            split="random_80_20",
            view="criteo_attribution_random_80_20",
        )
    )
    spec = RunSpec(
        dataset="criteo_attribution_random_80_20",
        method="hybrid_rr",
        variant="default",
        epsilon=5.0,
        delta=1e-5,
        seed=0,
        hparams={k: HP[k] for k in ("learning_rate", "epochs", "batch_size")},
    )
    assert hybrid_rr.run(view, spec).details["data_deviation"] is None
