"""RRWithPrior with k-means priors on features (baselines/rr_with_prior.py; 001 Algorithm 4, 000 Table 9)."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

from baselines import rr, rr_with_prior
from labeldp.mechanisms import classification as C
from labeldp.methods.base import RunSpec
from tests.helpers import assert_label_event_reaccounts

TABLE9 = [[0.01, 0.005], [0.02, 0.01], [0.05, 0.02], [0.18, 0.05], [0.29, 0.05], [0.5, 0.1], [1.6, 0.1]]


def _features(n_train=600, n_test=300, k=4, d=8, seed=0, spread=0.3):
    """Well-separated Gaussian clusters, one per class: a features dataset (kind "features")."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)) * 3

    def draw(n):
        y = rng.integers(0, k, n)
        return (centres[y] + spread * rng.normal(size=(n, d))).astype(np.float32), y

    x_tr, y_tr = draw(n_train)
    x_te, y_te = draw(n_test)
    return types.SimpleNamespace(
        x_train=x_tr,
        y_train=y_tr,
        x_test=x_te,
        y_test=y_te,
        num_classes=k,
        name="toy_simclr",
        kind="features",
        source="fake",
        subset=None,
        metadata={},
    )


def _spec(method, *, epsilon, seed=0, clusters=8, options=None):
    return RunSpec(
        dataset="toy_simclr",
        method=method,
        variant="default",
        epsilon=epsilon,
        delta=0.0,
        seed=seed,
        hparams={"learning_rate": 0.5, "epochs": 5, "batch_size": 64, "num_clusters": clusters},
        options={"prior_epsilon": TABLE9} if options is None else options,
    )


def test_prior_epsilon_follows_table9_and_refuses_what_it_cannot_split():
    for eps, eps_p in TABLE9:
        assert rr_with_prior.prior_epsilon(TABLE9, eps) == eps_p
    assert rr_with_prior.prior_epsilon(0.05, 1.0) == 0.05
    with pytest.raises(ValueError, match="no entry for eps = 0.1"):
        rr_with_prior.prior_epsilon(TABLE9, 0.1)
    with pytest.raises(ValueError, match="must be in"):
        rr_with_prior.prior_epsilon(0.5, 0.5)  # nothing left for RRWithPrior
    with pytest.raises(ValueError, match="needs the variant option prior_epsilon"):
        rr_with_prior.prior_epsilon(None, 1.0)


def test_run_spends_eps_p_on_histograms_and_the_rest_on_rr_with_prior(monkeypatch):
    data = _features()
    calls = {}
    real_kmeans, real_rrp = C.kmeans_priors, C.rr_with_prior

    def kmeans_spy(*a, **kw):
        calls["kmeans"] = kw
        return real_kmeans(*a, **kw)

    def rrp_spy(labels, priors, **kw):
        calls["rrp"] = kw
        np.testing.assert_array_equal(labels, data.y_train)  # each training label queried once
        return real_rrp(labels, priors, **kw)

    monkeypatch.setattr(C, "kmeans_priors", kmeans_spy)
    monkeypatch.setattr(C, "rr_with_prior", rrp_spy)
    res = rr_with_prior.run(data, _spec("rr_with_prior", epsilon=0.5))
    assert calls["kmeans"]["epsilon"] == 0.1 and calls["kmeans"]["num_clusters"] == 8
    assert calls["rrp"]["epsilon"] == pytest.approx(0.4)
    rec = res.privacy.to_dict(target_epsilon=0.5)
    assert rec["epsilon"] == pytest.approx(0.5) and rec["delta"] == 0.0 and rec["valid"]
    assert rec["neighboring_relation"] == "label_substitution" and rec["accounting"] is None
    assert res.details["prior_epsilon"] + res.details["rr_epsilon"] == pytest.approx(0.5)
    assert "eps_p = 0.1" in rec["mechanism"]
    assert_label_event_reaccounts(rec)  # the prior's 0.1 and RRWithPrior's 0.4, composed


def test_learned_priors_beat_rr_at_small_eps_and_runs_are_deterministic():
    """001 Section 5.2's point on separable features: at eps = 0.18 RR's labels are nearly uniform,
    while cluster priors (eps_p = 0.05) make most RRWithPrior labels right."""
    data = _features()
    spec = _spec("rr_with_prior", epsilon=0.18, seed=1)
    a = rr_with_prior.run(data, spec)
    b = rr_with_prior.run(data, spec)
    assert a.metrics["test_accuracy_pct"] == b.metrics["test_accuracy_pct"]
    assert a.details == b.details
    base = rr.run(data, _spec("rr", epsilon=0.18, seed=1, options={}))
    assert a.details["noisy_label_accuracy"] > base.details["noisy_label_accuracy"] + 0.3
    assert a.metrics["test_accuracy_pct"] > base.metrics["test_accuracy_pct"]
    assert a.details["mean_k"] < data.num_classes  # the prior narrowed the candidate set
    other = rr_with_prior.run(data, _spec("rr_with_prior", epsilon=0.18, seed=2))
    assert other.details["noisy_label_accuracy"] != a.details["noisy_label_accuracy"]


def test_refuses_unknown_options_and_image_data():
    data = _features(n_train=50, n_test=20)
    with pytest.raises(ValueError, match="does not implement options"):
        rr_with_prior.run(data, _spec("rr_with_prior", epsilon=0.5, options={"prior_epsilon": 0.1, "bogus": 1}))
    assert rr_with_prior.DATASET_KINDS == ("features",)
    assert math.isclose(rr_with_prior.OPTIONAL_HYPERPARAMETERS["num_clusters"], 100)
