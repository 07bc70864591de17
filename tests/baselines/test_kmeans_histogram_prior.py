"""001 Figure 2's measurement (baselines/kmeans_histogram_prior.py): k-means on train + test features,
noisy training-label histograms per cluster, test accuracy of their argmax."""

from __future__ import annotations

import types

import numpy as np
import pytest

from baselines import kmeans_histogram_prior as khp
from labeldp.methods.base import RunSpec
from tests.helpers import assert_label_event_reaccounts


def _blobs(n_train=300, n_test=150, k=3, seed=0):
    """Well-separated Gaussian blobs whose label is the blob (and 10% of training labels flipped)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 10, (k, 5))
    y_tr, y_te = rng.integers(0, k, n_train), rng.integers(0, k, n_test)
    x_tr, x_te = centres[y_tr] + rng.normal(0, 0.3, (n_train, 5)), centres[y_te] + rng.normal(0, 0.3, (n_test, 5))
    flip = rng.random(n_train) < 0.1
    y_noisy = np.where(flip, (y_tr + 1) % k, y_tr)
    return types.SimpleNamespace(
        x_train=x_tr.astype(np.float32),
        y_train=y_noisy,
        x_test=x_te.astype(np.float32),
        y_test=y_te,
        num_classes=k,
        name="blobs_simclr",
        kind="features",
    )


def _spec(eps, clusters, seed=0, **options):
    return RunSpec(
        dataset="blobs_simclr",
        method=khp.NAME,
        variant=f"c{clusters}",
        epsilon=eps,
        delta=0.0,
        seed=seed,
        hparams={},
        options={"num_clusters": clusters, **options},
    )


def test_a_large_budget_recovers_each_clusters_majority_label():
    data = _blobs()
    res = khp.run(data, _spec(50.0, 3))
    # 3 well-separated blobs: every cluster is one blob and its majority (90%) label is the blob's
    assert res.metrics["test_accuracy_pct"] == pytest.approx(100.0)
    assert res.details["clusters_with_training_examples"] == 3
    assert_label_event_reaccounts(res.privacy.to_dict(target_epsilon=50.0))


def test_accuracy_falls_with_the_budget_and_more_clusters_need_more_of_it():
    """001 Figure 2's shape: at a tiny eps the noise (scale 2 / eps) swamps each cluster's counts,
    more so with more, smaller clusters (mean over 10 seeds)."""
    data = _blobs(n_train=600, n_test=300)

    def acc(eps, c):
        return np.mean([khp.run(data, _spec(eps, c, seed=s)).metrics["test_accuracy_pct"] for s in range(10)])

    assert acc(0.01, 3) < acc(10.0, 3) - 20
    assert acc(0.05, 60) < acc(0.05, 3)
    assert acc(10.0, 60) > 95


def test_same_seed_same_numbers_and_bad_options_are_refused():
    data = _blobs()
    assert khp.run(data, _spec(1.0, 5, seed=4)).metrics == khp.run(data, _spec(1.0, 5, seed=4)).metrics
    no_c = RunSpec(
        dataset="blobs_simclr", method=khp.NAME, variant="v", epsilon=1.0, delta=0.0, seed=0, hparams={}, options={}
    )
    with pytest.raises(ValueError, match="num_clusters"):
        khp.run(data, no_c)
    with pytest.raises(ValueError, match="must be in"):
        khp.run(data, _spec(1.0, 10_000))
    with pytest.raises(ValueError, match="does not implement options"):
        khp.run(data, _spec(1.0, 3, prior="x"))
