"""Row checks of docs/privacy_relations.md: regression."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from labeldp import accounting
from labeldp.mechanisms import classification as C

from tests.privacy_relations.doc import *  # noqa: F401,F403  (the parsed table and shared helpers)


# ------------------------------------------------------------------------------------------
# Regression randomizers (paper 003)
# ------------------------------------------------------------------------------------------


def _delta_token(r):
    assert "Delta=upper-lower" in sensitivity_tokens(r), r["id"]


def _additive_checks(kind, r):
    from labeldp.mechanisms import regression as R

    noise_fn = R.laplace_noise if kind == "laplace" else R.staircase_noise
    mech = R.laplace_mechanism if kind == "laplace" else R.staircase_mechanism
    matrix_fn = R.laplace_transition_matrix if kind == "laplace" else R.staircase_transition_matrix
    lower, upper = -1.0, 2.0
    delta = upper - lower
    for eps in (0.3, 1.0, 3.0):
        noise = noise_fn(epsilon=eps, sensitivity=delta)
        assert noise.sensitivity == delta
        ys = np.linspace(lower, upper, 7)
        o = np.linspace(lower - 8 * delta / eps, upper + 8 * delta / eps, 2001)
        logf = np.log(noise.pdf(o[None, :] - ys[:, None]))
        worst = float(np.max(logf.max(0) - logf.min(0)))
        assert worst <= eps + 1e-9
        assert worst == pytest.approx(eps, rel=1e-6)  # attained by y = lower vs y = upper
        # A label outside the range (a larger sensitivity) would break the bound.
        far = np.log(noise.pdf(o - (upper + delta))) - np.log(noise.pdf(o - lower))
        assert np.max(np.abs(far)) > 1.5 * eps
        # Discrete variants, exact matrices, clipped and unclipped.
        for clip in (True, False):
            t = matrix_fn(epsilon=eps, lower=0, upper=4, clip=clip)
            assert t.epsilon_dp_ratio() <= eps + 1e-9
            assert t.epsilon_dp_ratio() == pytest.approx(eps, rel=1e-6)
    # The mechanism calibrates to the range and refuses labels outside it.
    with pytest.raises(ValueError, match="lower, upper"):
        mech(np.array([upper + 0.5]), epsilon=1.0, lower=lower, upper=upper, rng=np.random.default_rng(0))
    eps = 1.0
    y = np.full(20000, 0.5)
    out = mech(y, epsilon=eps, lower=lower, upper=upper, rng=np.random.default_rng(12))
    assert np.mean((out - y) ** 2) == pytest.approx(noise_fn(epsilon=eps, sensitivity=delta).variance(), rel=0.1)


def test_row_regression_laplace():
    r = row("regression_laplace")
    assert_label_only_row(r)
    _delta_token(r)
    _additive_checks("laplace", r)
    from labeldp.mechanisms import regression as R

    assert R.laplace_noise(epsilon=0.5, sensitivity=3.0).param == pytest.approx(3.0 / 0.5)  # Lap(Delta/eps)


def test_row_regression_staircase():
    r = row("regression_staircase")
    assert_label_only_row(r)
    _delta_token(r)
    _additive_checks("staircase", r)


def _support_and_prior(seed, k=5):
    rng = np.random.default_rng(seed)
    sup = np.sort(rng.choice(np.arange(0.0, 20.0, 0.5), size=k, replace=False))
    return sup, rng.dirichlet(np.ones(k))


def test_row_regression_rr_on_bins():
    from labeldp.mechanisms import regression as R

    r = row("regression_rr_on_bins")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    for seed, eps in ((0, 0.5), (1, 1.0), (2, 3.0)):
        sup, probs = _support_and_prior(seed)
        for mech in (
            R.rr_on_bins(sup, probs, epsilon=eps),
            R.debiased_rr(sup, epsilon=eps),
            R.rr_on_bins_from_map(sup, epsilon=eps, label_outputs=[1.0, 1.0, 4.0, 4.0, 9.0]),
        ):
            assert mech.epsilon_dp_ratio() <= eps + 1e-12
            assert max_log_ratio(mech.matrix) == pytest.approx(mech.epsilon_dp_ratio())
            m = mech.outputs.size
            q = 1.0 / (math.exp(eps) + m - 1)
            vals = np.unique(np.round(mech.matrix / q, 9))  # every entry is q or e^eps q
            assert set(vals) <= {1.0, round(math.exp(eps), 9)}
        assert R.debiased_rr(sup, epsilon=eps).epsilon_dp_ratio() == pytest.approx(eps, rel=1e-12)


def test_row_regression_optimal_unbiased():
    from labeldp.mechanisms import regression as R

    r = row("regression_optimal_unbiased")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    for seed, eps in ((3, 0.5), (4, 2.0)):
        sup, probs = _support_and_prior(seed, k=4)
        mech = R.optimal_unbiased_randomizer(sup, probs, epsilon=eps)
        used = mech.matrix.max(0) > 0
        assert max_log_ratio(mech.matrix[:, used]) <= eps * (1 + 1e-9) + 1e-12
        assert mech.is_unbiased()
        np.testing.assert_allclose(mech.matrix.sum(1), 1.0, atol=1e-9)


def test_row_regression_prior():
    from labeldp.mechanisms import regression as R

    r = row("regression_prior")
    assert_label_only_row(r)
    l1 = l1_sensitivity(r)
    for eps in (0.2, 1.0, 4.0):
        b = R.prior_noise_scale(eps)
        assert b == pytest.approx(l1 / eps)
        # Neighbouring histograms (one label moves from bin 2 to bin 0): ratio <= e^eps, tight.
        h = np.array([3.0, 0.0, 5.0, 1.0])
        h2 = h + np.array([1.0, 0.0, -1.0, 0.0])
        assert np.abs(h - h2).sum() == l1
        z = h + np.random.default_rng(13).laplace(0, 3 * b, size=(5000, 4))
        z = np.concatenate([z, [h2 + np.array([1.0, 0, -1.0, 0])]])  # a point where the bound is attained
        lr = stats.laplace.logpdf(z - h, scale=b).sum(1) - stats.laplace.logpdf(z - h2, scale=b).sum(1)
        assert np.max(np.abs(lr)) <= eps + 1e-9
        assert np.max(np.abs(lr)) == pytest.approx(eps, rel=1e-9)
    # The sampler's noise has that scale.
    sup = np.arange(3000.0)
    noisy = R.noisy_histogram(np.array([0.0]), support=sup, epsilon=1.0, rng=np.random.default_rng(14))
    counts = np.zeros(sup.size)
    counts[0] = 1
    assert np.mean(np.abs(noisy - counts)) == pytest.approx(l1 / 1.0, rel=0.07)
    # Algorithm 3 spends eps1 (prior) + eps2 (randomizer): basic composition.
    labels = np.random.default_rng(15).choice([0.0, 1.0, 2.0], size=50)
    res = R.label_randomizer(
        labels,
        support=[0.0, 1.0, 2.0],
        epsilon1=0.3,
        epsilon2=0.9,
        rng=np.random.default_rng(16),
        randomizer="rr_on_bins",
    )
    assert res.epsilon == pytest.approx(1.2)
    assert res.randomizer.epsilon_dp_ratio() <= 0.9 + 1e-12


# ------------------------------------------------------------------------------------------
# k-means priors (001 Algorithm 4)
# ------------------------------------------------------------------------------------------


def test_row_kmeans_priors():
    r = row("kmeans_priors")
    assert_label_only_row(r)
    l1 = l1_sensitivity(r)
    for eps in (0.1, 1.0, 3.0):
        a = C.discrete_laplace_parameter(epsilon=eps)
        assert a == pytest.approx(eps / l1)
        # Two neighbouring (cluster, class) tables: one count -1, another +1.
        h = np.array([4, 1, 0])
        h2 = np.array([3, 1, 1])
        assert np.abs(h - h2).sum() == l1
        rad = 6
        grid = np.stack(np.meshgrid(*[np.arange(v - rad, v + rad + 1) for v in h], indexing="ij"), -1).reshape(-1, 3)
        lr = stats.dlaplace.logpmf(grid - h, a).sum(-1) - stats.dlaplace.logpmf(grid - h2, a).sum(-1)
        assert np.max(np.abs(lr)) <= eps + 1e-9
        assert np.max(np.abs(lr)) == pytest.approx(eps, rel=1e-9)  # tight
    # The sampler's noise is discrete Laplace with that parameter.
    eps = 1.0
    rel = C.discrete_laplace_histogram(np.zeros((200, 50), dtype=np.int64), epsilon=eps, rng=np.random.default_rng(17))
    assert rel.epsilon == eps
    assert np.var(rel.noisy_counts) == pytest.approx(stats.dlaplace.var(eps / l1), rel=0.1)
    # The clusters come from the features only.
    rng = np.random.default_rng(18)
    feats = np.concatenate([rng.normal(c, 0.1, size=(20, 2)) for c in (0.0, 3.0, 6.0)])
    y = rng.integers(0, 3, 60)
    p1 = C.kmeans_priors(feats, y, num_clusters=3, num_classes=3, epsilon=eps, rng=np.random.default_rng(19))
    p2 = C.kmeans_priors(feats, (y + 1) % 3, num_clusters=3, num_classes=3, epsilon=eps, rng=np.random.default_rng(19))
    np.testing.assert_array_equal(p1.cluster_ids, p2.cluster_ids)
    assert p1.epsilon == eps


def test_row_kmeans_histogram_prior(monkeypatch):
    """001 Figure 2's measurement releases only the discrete Laplace histograms of the TRAINING labels
    at eps (the test labels only score), its clusters do not depend on any label, and its record is
    (eps, 0) under label substitution with an event that re-accounts."""
    import types

    from baselines import kmeans_histogram_prior as khp
    from labeldp.methods.base import RunSpec
    from tests.helpers import assert_label_event_reaccounts

    r = row("kmeans_histogram_prior")
    assert_label_only_row(r)
    assert l1_sensitivity(r) == 2
    rng = np.random.default_rng(3)
    feats = np.concatenate([rng.normal(c, 0.1, size=(30, 2)) for c in (0.0, 3.0, 6.0)]).astype(np.float32)
    data = types.SimpleNamespace(
        x_train=feats[:60],
        y_train=rng.integers(0, 3, 60),
        x_test=feats[60:],
        y_test=rng.integers(0, 3, 30),
        num_classes=3,
        name="toy_simclr",
        kind="features",
    )
    spec = RunSpec(
        dataset="toy_simclr",
        method=khp.NAME,
        variant="c3",
        epsilon=0.7,
        delta=0.0,
        seed=1,
        hparams={},
        options={"num_clusters": 3},
    )
    calls = spy(monkeypatch, C, "discrete_laplace_histogram")
    res = khp.run(data, spec)
    assert len(calls) == 1 and calls[0]["epsilon"] == 0.7
    counts = calls[0]["args"][0]
    assert counts.sum() == 60 and counts.shape == (3, 3)  # the training labels only
    # another labelling of the training set: the same clusters (the counts' row sums), other counts
    flipped = types.SimpleNamespace(**{**vars(data), "y_train": (data.y_train + 1) % 3})
    khp.run(flipped, spec)
    np.testing.assert_array_equal(calls[1]["args"][0].sum(axis=1), counts.sum(axis=1))
    out = res.privacy.to_dict(target_epsilon=0.7)
    assert set(out["epsilon_by_relation"]) == LABEL_ONLY and out["delta"] == 0.0
    assert_label_event_reaccounts(out)


# ------------------------------------------------------------------------------------------
# The regression method modules (003): one row per method id
# ------------------------------------------------------------------------------------------


def _method_data(tmp_path_factory=None):
    import tempfile

    from tests.regression.helpers import synthetic_tabular

    return synthetic_tabular(Path(tempfile.mkdtemp()), n_train=600, n_test=100, lower=0, upper=6)


def _method_outcome(method: str, eps: float, data):
    from labeldp.methods.base import RunSpec
    from labeldp.regression import randomizers as RZ

    fn = {
        "laplace": RZ.additive("laplace", clip=False),
        "laplace_clipped": RZ.additive("laplace", clip=True),
        "staircase": RZ.additive("staircase", clip=False),
        "staircase_clipped": RZ.additive("staircase", clip=True),
        "rr_on_bins": RZ.rr_on_bins_randomizer,
        "optimal_unbiased": RZ.optimal_unbiased_randomizer_fn,
    }[method]
    spec = RunSpec(
        dataset="rand_hie",
        method=method,
        variant="default",
        epsilon=eps,
        delta=0.0,
        seed=0,
        hparams={"learning_rate": 1e-2, "epochs": 1, "batch_size": 64},
    )
    return fn(data.y_train, data=data, spec=spec, rng=np.random.default_rng(0))


def _additive_method_checks(method: str, kind: str, clip: bool):
    from labeldp.mechanisms import regression as R

    r = BY_ID[method]
    assert relations(r) == LABEL_ONLY and "Delta=upper-lower" in sensitivity_tokens(r)
    data = _method_data()
    for eps in (0.5, 2.0):
        out = _method_outcome(method, eps, data)
        assert out.privacy.epsilon == eps and out.privacy.delta == 0.0
        assert out.privacy.neighboring_relation is accounting.LABEL_SUBSTITUTION
        assert out.details["sensitivity"] == data.label_upper - data.label_lower
        # integer labels: the discrete mechanism, whose exact matrix over the range is eps-DP
        matrix_fn = R.laplace_transition_matrix if kind == "laplace" else R.staircase_transition_matrix
        t = matrix_fn(epsilon=eps, lower=int(data.label_lower), upper=int(data.label_upper), clip=clip)
        assert t.epsilon_dp_ratio() <= eps + 1e-9
        if clip:
            assert out.noisy_labels.min() >= data.label_lower and out.noisy_labels.max() <= data.label_upper
        else:
            assert out.noisy_labels.min() < data.label_lower or out.noisy_labels.max() > data.label_upper


def test_row_laplace():
    _additive_method_checks("laplace", "laplace", clip=False)


def test_row_laplace_clipped():
    _additive_method_checks("laplace_clipped", "laplace", clip=True)


def test_row_staircase():
    _additive_method_checks("staircase", "staircase", clip=False)


def test_row_staircase_clipped():
    _additive_method_checks("staircase_clipped", "staircase", clip=True)


def _prior_method_checks(method: str):
    from labeldp.regression.pipeline import PRIOR_EPSILON

    r = BY_ID[method]
    assert relations(r) == LABEL_ONLY
    assert "L1=2" in sensitivity_tokens(r) and "pairwise" in sensitivity_tokens(r)
    data = _method_data()
    for eps in (0.5, 2.0):
        out = _method_outcome(method, eps, data)
        d = out.details
        assert d["epsilon1"] == PRIOR_EPSILON["rand_hie"] and d["epsilon2"] == pytest.approx(eps - d["epsilon1"])
        assert out.privacy.epsilon == pytest.approx(d["epsilon1"] + d["epsilon2"]) and out.privacy.delta == 0.0
        assert d["dp_ratio_log"] <= d["epsilon2"] + 1e-9  # the exact randomizer that ran


def test_row_rr_on_bins():
    _prior_method_checks("rr_on_bins")


def test_row_optimal_unbiased():
    _prior_method_checks("optimal_unbiased")
