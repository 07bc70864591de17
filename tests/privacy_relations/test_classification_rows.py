"""Row checks of docs/privacy_relations.md: classification."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from scipy import stats

from labeldp.mechanisms import classification as C

from tests.privacy_relations.doc import *  # noqa: F401,F403  (the parsed table and shared helpers)


# ------------------------------------------------------------------------------------------
# Classification label randomizers
# ------------------------------------------------------------------------------------------


def test_row_rr(monkeypatch):
    from baselines import rr

    r = row("rr")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    for k in (2, 4, 10):
        for eps in (0.1, 1.0, 4.0):
            p = C.randomized_response_matrix(num_classes=k, epsilon=eps)
            np.testing.assert_allclose(p.sum(1), 1.0, rtol=0, atol=1e-12)
            assert max_log_ratio(p) == pytest.approx(eps, rel=1e-12)  # exactly e^eps: tight
    # The sampler follows the matrix (keep rate), so the bound is the one that runs.
    k, eps = 4, 1.0
    y = np.repeat(np.arange(k), 5000)
    out = C.randomized_response(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(0))
    keep = C.randomized_response_matrix(num_classes=k, epsilon=eps)[0, 0]
    assert abs(np.mean(out == y) - keep) < 4 * math.sqrt(keep * (1 - keep) / y.size)
    # The baseline queries every label exactly once, at the run's eps, and trains on a
    # function of the noisy labels only.
    calls = spy(monkeypatch, C, "randomized_response")
    noisy, targets = rr.noisy_targets(y[:50], num_classes=k, epsilon=eps, rng=np.random.default_rng(1))
    assert len(calls) == 1 and calls[0]["epsilon"] == eps
    np.testing.assert_array_equal(calls[0]["args"][0], y[:50])
    np.testing.assert_array_equal(targets, np.eye(k, dtype=np.float32)[noisy])
    assert_pure_label_dp_record(rr, r)


def test_row_rr_debiased(monkeypatch):
    from baselines import rr, rr_debiased

    r = row("rr_debiased")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    k, eps = 5, 0.7
    assert max_log_ratio(C.randomized_response_matrix(num_classes=k, epsilon=eps)) == pytest.approx(eps, rel=1e-12)
    y = np.arange(40) % k
    calls = spy(monkeypatch, C, "randomized_response")
    noisy, w = rr_debiased.noisy_targets(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(2))
    # One RR query per label at the full eps (not a second query, not a split budget) ...
    assert len(calls) == 1 and calls[0]["epsilon"] == eps
    np.testing.assert_array_equal(calls[0]["args"][0], y)
    # ... and the weights are a function of the noisy labels only (post-processing).
    np.testing.assert_allclose(w, C.rr_debiased_weights(noisy, num_classes=k, epsilon=eps), rtol=1e-6)
    assert list(inspect.signature(C.rr_debiased_weights).parameters) == [
        "noisy_labels",
        "num_classes",
        "epsilon",
        "dtype",
    ], "the weights must not see true labels"
    # Same draw as rr for the same generator: RR plus post-processing, nothing more.
    noisy_rr, _ = rr.noisy_targets(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(noisy, noisy_rr)
    assert_pure_label_dp_record(rr_debiased, r)


def test_row_rr_with_prior():
    r = row("rr_with_prior")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    rng = np.random.default_rng(3)
    for eps in (0.1, 1.0, 4.0):
        for _ in range(10):
            prior = rng.dirichlet(np.full(6, 0.4))
            p = C.rr_with_prior_probabilities(prior, epsilon=eps)
            np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
            assert max_log_ratio(p) <= eps + 1e-12
            for k in range(1, 7):
                assert max_log_ratio(C.rr_top_k_matrix(prior, k=k, epsilon=eps)) <= eps + 1e-12
        # tight at k = K (plain RR)
        assert max_log_ratio(C.rr_top_k_matrix(np.full(6, 1 / 6), k=6, epsilon=eps)) == pytest.approx(eps)
    # k depends on the prior only: two label vectors, the same k; the sampler follows the matrix.
    prior = np.array([0.5, 0.3, 0.15, 0.05])
    eps = 1.0
    n = 24000
    y1 = np.repeat(np.arange(4), n // 4)
    res1 = C.rr_with_prior(y1, np.tile(prior, (n, 1)), epsilon=eps, rng=np.random.default_rng(4))
    res2 = C.rr_with_prior((y1 + 1) % 4, np.tile(prior, (n, 1)), epsilon=eps, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(res1.k, res2.k)
    mat = C.rr_with_prior_probabilities(prior, epsilon=eps)
    for c in range(4):
        emp = np.bincount(res1.noisy_labels[y1 == c], minlength=4) / (n // 4)
        np.testing.assert_allclose(emp, mat[c], atol=0.03)


def test_row_lp_2st(monkeypatch):
    from baselines import common, lp_2st

    r = row("lp_2st")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    n, k, eps = 60, 3, 1.2
    rng = np.random.default_rng(5)
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    fits = []

    def fit_stage1(idx1, noisy1):
        fits.append((np.array(idx1), np.array(noisy1)))
        return logits

    rr_calls = spy(monkeypatch, C, "randomized_response")
    rwp_calls = spy(monkeypatch, C, "rr_with_prior")
    plan = lp_2st.plan_stages(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(6), fit_stage1=fit_stage1)
    i1, i2 = plan.stage1_idx, plan.stage2_idx
    # The stages partition the examples.
    assert np.intersect1d(i1, i2).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([i1, i2])), np.arange(n))
    # Every label is queried exactly once, each query at the FULL eps: parallel composition.
    queried = np.concatenate([idx for _, idx in plan.query_log])
    assert queried.size == n and np.unique(queried).size == n
    assert [c["epsilon"] for c in rr_calls] == [eps] and [c["epsilon"] for c in rwp_calls] == [eps]
    # Stage 2's prior comes from the stage-1 model, fed only the stage-1 noisy labels.
    assert len(fits) == 1
    np.testing.assert_array_equal(fits[0][0], i1)
    np.testing.assert_array_equal(fits[0][1], plan.stage1_noisy)
    np.testing.assert_allclose(rwp_calls[0]["args"][1], common.softmax(logits[i2]))
    # The split does not depend on the labels.
    plan2 = lp_2st.plan_stages(
        (y + 1) % k, num_classes=k, epsilon=eps, rng=np.random.default_rng(6), fit_stage1=lambda a, b: logits
    )
    np.testing.assert_array_equal(plan2.stage1_idx, i1)
    # The oracle refuses a second query of any label.
    oracle = lp_2st.LabelOracle(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(7))
    oracle.randomized_response([0, 1, 2])
    with pytest.raises(RuntimeError, match="twice"):
        oracle.rr_with_prior([2, 3], np.full((2, k), 1 / k))
    with pytest.raises(RuntimeError, match="twice"):
        oracle.randomized_response([0])
    assert_pure_label_dp_record(lp_2st, r)


def test_row_lp_mst(monkeypatch):
    from baselines import common, lp_mst

    r = row("lp_mst")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    n, k, eps, stages = 90, 3, 0.8, 3
    y = np.random.default_rng(11).integers(0, k, n)
    stage_logits = {t: np.random.default_rng([12, t]).normal(size=(n, k)) for t in (1, 2)}
    fits = []

    def fit_stage(t, idx, noisy):
        fits.append((t, np.array(idx), np.array(noisy)))
        return stage_logits.get(t)

    rr_calls = spy(monkeypatch, C, "randomized_response")
    rwp_calls = spy(monkeypatch, C, "rr_with_prior")
    oracle = lp_mst.LabelOracle(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(13))
    plans = lp_mst.plan_multi_stage(
        y,
        num_classes=k,
        epsilon=eps,
        rng=np.random.default_rng(13),
        fit_stage=fit_stage,
        fractions=lp_mst.stage_fractions_for(stages),
        oracle=oracle,
    )
    # The stages partition the examples; every label is queried exactly once, each query at the FULL eps.
    queried = oracle.queried_indices
    assert queried.size == n and np.array_equal(np.sort(queried), np.arange(n))
    assert [c["epsilon"] for c in rr_calls] == [eps] and [c["epsilon"] for c in rwp_calls] == [eps] * (stages - 1)
    # Stage t's prior is the stage-(t-1) model, which saw only earlier noisy labels.
    for t in (2, 3):
        np.testing.assert_allclose(rwp_calls[t - 2]["args"][1], common.softmax(stage_logits[t - 1][plans[t - 1].idx]))
        earlier = {int(i) for p in plans[: t - 1] for i in p.idx}
        assert set(fits[t - 2][1].tolist()) <= earlier
    assert_pure_label_dp_record(lp_mst, r)


def test_row_alibi(monkeypatch):
    from baselines import alibi

    r = row("alibi")
    assert_label_only_row(r)
    l1 = l1_sensitivity(r)
    k = 4
    onehot = np.eye(k)
    assert {float(np.abs(onehot[i] - onehot[j]).sum()) for i in range(k) for j in range(k) if i != j} == {l1}
    for eps in (0.2, 1.0, 5.0):
        b = C.alibi_scale(epsilon=eps)
        assert b == pytest.approx(l1 / eps, rel=1e-15)
        # Log-density ratio over labels at sampled outputs: <= eps, and = eps at z = e_0.
        z = C.alibi_noisy_labels(np.arange(400) % k, num_classes=k, epsilon=eps, rng=np.random.default_rng(8))
        ll = C.alibi_log_likelihood(z, epsilon=eps)
        ref = np.stack([stats.laplace.logpdf(z - onehot[c], scale=b).sum(-1) for c in range(k)], axis=1)
        np.testing.assert_allclose(ll, ref, rtol=1e-10, atol=1e-10)
        assert np.max(ll.max(1) - ll.min(1)) <= eps + 1e-9
        at_e0 = C.alibi_log_likelihood(onehot[:1], epsilon=eps)
        assert float(at_e0.max() - at_e0.min()) == pytest.approx(eps, rel=1e-12)
    # The released noise has scale 2 / eps (mean |Laplace(b)| = b).
    eps = 1.0
    y = np.arange(4000) % k
    z = C.alibi_noisy_labels(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(9))
    assert np.mean(np.abs(z - onehot[y])) == pytest.approx(l1 / eps, rel=0.05)
    # The baseline noises every label once at eps; its soft labels are a function of z.
    calls = spy(monkeypatch, C, "alibi_noisy_labels")
    z2, soft = alibi.noisy_soft_labels(y[:30], num_classes=k, epsilon=eps, rng=np.random.default_rng(10))
    assert len(calls) == 1 and calls[0]["epsilon"] == eps
    np.testing.assert_allclose(soft, C.alibi_posterior(z2, None, epsilon=eps))
    assert_pure_label_dp_record(alibi, r)


def _prior_from_noisy(z: np.ndarray) -> np.ndarray:
    """001 Algorithm 4 step 4(c) on one released row: max(z, 0) normalised, uniform when all are 0."""
    c = np.maximum(z, 0).astype(np.float64)
    return c / c.sum() if c.sum() > 0 else np.full(z.shape, 1.0 / z.size)


@pytest.mark.parametrize("eps,eps_p", [(0.01, 0.005), (0.18, 0.05), (0.5, 0.1), (1.6, 0.1)])
def test_row_rr_with_prior_kmeans(eps, eps_p):
    """The whole release of baselines/rr_with_prior.py, exactly, on a small data set: one cluster of
    n = 3 examples with K = 3 classes. Output = (noisy histogram z, noisy labels o). For every label
    vector y, every neighbour y' (one label changed), every o and every z in a window, the
    probability ratio is at most e^eps with eps = eps_p + eps_r (000 Table 9's split); it is attained
    up to the window's edge (the bound is tight, not loose)."""
    import itertools

    from baselines import rr_with_prior

    r = row("rr_with_prior_kmeans")
    assert_label_only_row(r)
    assert {"L1=2", "pairwise"} <= set(sensitivity_tokens(r))
    assert rr_with_prior.prior_epsilon([[eps, eps_p]], eps) == eps_p
    eps_r = eps - eps_p
    k, n = 3, 3
    a = C.discrete_laplace_parameter(epsilon=eps_p)  # the histogram noise the mechanism draws
    assert a == eps_p / 2
    window = np.arange(-4, n + 5)
    zs = np.array(list(itertools.product(window, repeat=k)))  # (Z, K) noisy histograms
    # M(z)[y, o]: RRWithPrior's transition matrix at the prior released by z (the library's own matrix)
    mats = np.stack([C.rr_with_prior_probabilities(_prior_from_noisy(z), epsilon=eps_r) for z in zs])
    outputs = np.array(list(itertools.product(range(k), repeat=n)))  # (O, n) noisy label vectors

    def log_prob(y):  # (Z, O): log P[z, o | labels y], with scipy's dlaplace as the independent pmf
        h = np.bincount(y, minlength=k)
        log_hist = stats.dlaplace.logpmf(zs - h, a).sum(axis=1)
        with np.errstate(divide="ignore"):  # RR-top-k gives outputs outside the top k probability 0
            log_rr = sum(np.log(mats[:, y[i], outputs[:, i]]) for i in range(n))
        return log_hist[:, None] + log_rr

    worst = 0.0
    for y in itertools.product(range(k), repeat=n):
        y = np.array(y)
        base = log_prob(y)
        for i in range(n):
            for alt in range(k):
                if alt == y[i]:
                    continue
                y2 = y.copy()
                y2[i] = alt
                other = log_prob(y2)
                both_impossible = np.isneginf(base) & np.isneginf(other)  # the same support: no ratio
                assert not np.any(np.isneginf(base) ^ np.isneginf(other)), "supports differ: unbounded ratio"
                worst = max(worst, float(np.max(np.abs(base[~both_impossible] - other[~both_impossible]))))
    assert worst <= eps + 1e-9
    assert worst >= 0.9 * eps  # tight: the composition bound is what the mechanism spends
