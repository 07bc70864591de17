"""Property tests for labeldp.mechanisms.classification.

Every randomizer is checked for (i) a valid transition matrix, (ii) the
epsilon-DP ratio bound, (iii) agreement between its sampler and its matrix
(chi-square tests with fixed seeds), plus the paper-specific identities:
001 Theorem 3 (RRWithPrior = LP optimum), 000 D.1 (RR-Debiased unbiased),
ALIBI's Laplace scale 2/eps and posterior, 001 Algorithm 4's noise.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, stats

from labeldp.mechanisms import classification as C

EPS_GRID = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0]
K_GRID = [2, 3, 5, 10]
RATIO_RTOL = 1e-9
P_MIN = 1e-3  # chi-square p-value threshold (seeds are fixed)


def max_privacy_ratio(mat):
    """max over out, y, y' of P[y, out] / P[y', out] (inf if 0 vs > 0)."""
    cols = np.asarray(mat).T
    hi, lo = cols.max(axis=1), cols.min(axis=1)
    used = hi > 0
    if np.any(lo[used] == 0):
        return math.inf
    return float(np.max(hi[used] / lo[used]))


def assert_valid_dp_matrix(mat, eps):
    mat = np.asarray(mat)
    assert mat.shape[0] == mat.shape[1]
    assert np.all(mat >= 0)
    np.testing.assert_allclose(mat.sum(axis=1), 1.0, atol=1e-12)
    assert max_privacy_ratio(mat) <= math.exp(eps) * (1 + RATIO_RTOL)


def assert_rows_match(true_labels, noisy, mat):
    """Chi-square goodness of fit of the empirical P[out | y] to `mat`."""
    k = mat.shape[0]
    for y in np.unique(true_labels):
        out = noisy[true_labels == y]
        counts = np.bincount(out, minlength=k)
        expected = mat[y] * out.size
        support = mat[y] > 0
        assert np.all(counts[~support] == 0), (y, counts, mat[y])
        if support.sum() < 2:
            assert counts[support].sum() == out.size
            continue
        pval = stats.chisquare(counts[support], expected[support]).pvalue
        assert pval > P_MIN, (y, counts, expected, pval)


def random_priors(rng, n, k, alpha):
    return rng.dirichlet(np.full(k, alpha), size=n)


# ---------------------------------------------------------------------------
# Randomized response.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", K_GRID)
@pytest.mark.parametrize("eps", EPS_GRID)
def test_rr_matrix_valid_and_tight(k, eps):
    mat = C.randomized_response_matrix(num_classes=k, epsilon=eps)
    assert_valid_dp_matrix(mat, eps)
    # RR meets the bound with equality (it is the optimal randomizer for a
    # uniform prior) and has the closed form of 001 eq. (1).
    assert max_privacy_ratio(mat) == pytest.approx(math.exp(eps), rel=1e-12)
    assert mat[0, 0] == pytest.approx(math.exp(eps) / (math.exp(eps) + k - 1))


@pytest.mark.parametrize("k,eps", [(2, 0.1), (4, 1.0), (10, 2.0), (5, 10.0)])
def test_rr_sampler_matches_matrix(k, eps):
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(k), 4000)
    noisy = C.randomized_response(y, num_classes=k, epsilon=eps, rng=rng)
    assert noisy.dtype == np.int64 and noisy.shape == y.shape
    assert_rows_match(y, noisy, C.randomized_response_matrix(num_classes=k, epsilon=eps))


def test_rr_is_reproducible_from_rng_only():
    y = np.arange(50) % 7
    a = C.randomized_response(y, num_classes=7, epsilon=1.0, rng=np.random.default_rng(3))
    b = C.randomized_response(y, num_classes=7, epsilon=1.0, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------
# RR-Debiased (000 Appendix D.1; 001 Algorithm 5).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", K_GRID)
@pytest.mark.parametrize("eps", EPS_GRID)
def test_rr_debiased_loss_is_exactly_unbiased(k, eps):
    rng = np.random.default_rng(k)
    losses = rng.exponential(size=(6, k))  # 6 random loss vectors
    mat = C.randomized_response_matrix(num_classes=k, epsilon=eps)
    for row in losses:
        # Debiased loss for every possible RR output.
        hat = C.rr_debiased_loss(np.tile(row, (k, 1)), np.arange(k), num_classes=k, epsilon=eps)
        expectation = mat @ hat  # E_{out ~ RR(y)}[loss_hat(out)] for every y
        np.testing.assert_allclose(expectation, row, rtol=0, atol=1e-9)


@pytest.mark.parametrize("k,eps", [(2, 0.01), (3, 1.0), (10, 0.1), (10, 10.0)])
def test_rr_debiased_weights_invert_rr(k, eps):
    w = C.rr_debiased_weights(np.arange(k), num_classes=k, epsilon=eps)
    mat = C.randomized_response_matrix(num_classes=k, epsilon=eps)
    np.testing.assert_allclose(mat @ w, np.eye(k), atol=1e-9)
    # Closed form of 000 D.1: (l(yhat) - p/K sum_k l(k)) / (1 - p).
    p = k / (math.exp(eps) + k - 1)
    rng = np.random.default_rng(0)
    losses = rng.normal(size=(20, k))
    yhat = rng.integers(0, k, 20)
    direct = (losses[np.arange(20), yhat] - p / k * losses.sum(1)) / (1 - p)
    np.testing.assert_allclose(
        C.rr_debiased_loss(losses, yhat, num_classes=k, epsilon=eps), direct, rtol=1e-10, atol=1e-10
    )


def test_rr_debiased_loss_with_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    k, eps = 5, 0.5
    rng = np.random.default_rng(0)
    losses = rng.exponential(size=(16, k))
    yhat = rng.integers(0, k, 16)
    ref = C.rr_debiased_loss(losses, yhat, num_classes=k, epsilon=eps)

    fn = jax.jit(lambda l, y: C.rr_debiased_loss(l, y, num_classes=k, epsilon=eps))
    out32 = fn(jnp.asarray(losses, dtype=jnp.float32), jnp.asarray(yhat))
    assert isinstance(out32, jax.Array)
    np.testing.assert_allclose(np.asarray(out32), ref, rtol=1e-5, atol=1e-5)
    with jax.enable_x64(True):
        mat = C.randomized_response_matrix(num_classes=k, epsilon=eps)
        l64 = jnp.asarray(losses)
        out64 = C.rr_debiased_loss(l64, jnp.asarray(yhat), num_classes=k, epsilon=eps)
        np.testing.assert_allclose(np.asarray(out64), ref, rtol=1e-12)
        # Exact unbiasedness also holds on jax arrays.
        for row in losses[:3]:
            hat = C.rr_debiased_loss(jnp.tile(jnp.asarray(row), (k, 1)), jnp.arange(k), num_classes=k, epsilon=eps)
            np.testing.assert_allclose(mat @ np.asarray(hat), row, atol=1e-9)
        # Gradients flow through the loss (the training loop differentiates it).
        g = jax.grad(lambda l: C.rr_debiased_loss(l, jnp.asarray(yhat), num_classes=k, epsilon=eps).sum())(l64)
        w = C.rr_debiased_weights(yhat, num_classes=k, epsilon=eps)
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12)


# ---------------------------------------------------------------------------
# RRTop-k (001 Algorithm 1).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k_classes", [2, 4, 7])
@pytest.mark.parametrize("eps", EPS_GRID)
def test_rr_top_k_matrix_valid(k_classes, eps):
    rng = np.random.default_rng(11)
    for prior in random_priors(rng, 3, k_classes, 0.5):
        for k in range(1, k_classes + 1):
            mat = C.rr_top_k_matrix(prior, k=k, epsilon=eps)
            assert_valid_dp_matrix(mat, eps)
            top = np.argsort(-prior, kind="stable")[:k]
            outside = np.setdiff1d(np.arange(k_classes), top)
            assert np.all(mat[:, outside] == 0)
            # P(out = in) under y ~ prior is w_k (001, text above Algorithm 2).
            w_k = math.exp(eps) / (math.exp(eps) + k - 1) * prior[top].sum()
            assert np.dot(prior, np.diag(mat)) == pytest.approx(w_k, rel=1e-12)


def test_rr_top_k_full_set_is_rr():
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(
        C.rr_top_k_matrix(prior, k=4, epsilon=0.7), C.randomized_response_matrix(num_classes=4, epsilon=0.7), atol=1e-15
    )


def test_rr_top_k_ties_go_to_smaller_label():
    prior = np.array([0.3, 0.2, 0.3, 0.2])
    mat = C.rr_top_k_matrix(prior, k=3, epsilon=1.0)
    assert np.all(mat[:, 3] == 0) and np.all(mat[:, 1] > 0)
    rng = np.random.default_rng(0)
    noisy = C.rr_top_k(np.full(500, 3), prior, k=3, epsilon=1.0, rng=rng)
    assert set(np.unique(noisy)) == {0, 1, 2}


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_rr_top_k_sampler_matches_matrix(eps):
    rng = np.random.default_rng(5)
    prior = np.array([0.05, 0.4, 0.1, 0.25, 0.2])
    y = np.repeat(np.arange(5), 3000)
    for k in (1, 2, 3, 5):
        noisy = C.rr_top_k(y, prior, k=k, epsilon=eps, rng=rng)
        assert_rows_match(y, noisy, C.rr_top_k_matrix(prior, k=k, epsilon=eps))


def test_rr_top_k_per_example_priors_and_k():
    rng = np.random.default_rng(9)
    priors = random_priors(rng, 3, 4, 1.0)
    ks = np.array([1, 2, 3])
    per = 4 * 2500
    y = np.tile(np.repeat(np.arange(4), 2500), 3)
    idx = np.repeat(np.arange(3), per)
    noisy = C.rr_top_k(y, priors[idx], k=ks[idx], epsilon=1.0, rng=rng)
    for j in range(3):
        sel = idx == j
        assert_rows_match(y[sel], noisy[sel], C.rr_top_k_matrix(priors[j], k=int(ks[j]), epsilon=1.0))


# ---------------------------------------------------------------------------
# RRWithPrior (001 Algorithm 2, Theorem 3).
# ---------------------------------------------------------------------------


def lp1_optimum(prior, eps):
    """Optimum of LP1 in the proof of 001 Theorem 3, via HiGHS."""
    k = prior.shape[0]
    idx = lambda out, y: out * k + y  # variable q[out | y]
    c = np.zeros(k * k)
    for y in range(k):
        c[idx(y, y)] = -prior[y]  # maximise sum_y p_y q[y|y]
    a_ub, b_ub = [], []
    for out, y, y2 in itertools.product(range(k), repeat=3):
        if y != y2:
            row = np.zeros(k * k)
            row[idx(out, y)] = 1.0
            row[idx(out, y2)] = -math.exp(eps)
            a_ub.append(row)
            b_ub.append(0.0)
    a_eq = np.zeros((k, k * k))
    for y in range(k):
        for out in range(k):
            a_eq[y, idx(out, y)] = 1.0
    res = optimize.linprog(
        c, A_ub=np.array(a_ub), b_ub=np.array(b_ub), A_eq=a_eq, b_eq=np.ones(k), bounds=(0, None), method="highs"
    )
    assert res.status == 0
    return -res.fun


@pytest.mark.parametrize("k", [2, 3, 4, 6])
@pytest.mark.parametrize("eps", EPS_GRID)
def test_rr_with_prior_attains_lp_optimum(k, eps):
    rng = np.random.default_rng(100 + k)
    priors = np.concatenate([random_priors(rng, 2, k, 0.3), random_priors(rng, 1, k, 3.0)])
    for prior in priors:
        mat = C.rr_with_prior_probabilities(prior, epsilon=eps)
        assert_valid_dp_matrix(mat, eps)
        objective = float(np.dot(prior, np.diag(mat)))
        assert objective == pytest.approx(lp1_optimum(prior, eps), abs=1e-7)


@pytest.mark.parametrize("eps", [0.05, 0.5, 2.0, 8.0])
def test_rr_with_prior_k_maximises_over_all_subsets(eps):
    rng = np.random.default_rng(7)
    k_classes = 5
    for prior in random_priors(rng, 5, k_classes, 0.4):
        k_star = int(C.rr_with_prior_optimal_k(prior, epsilon=eps))
        best = max(
            math.exp(eps) / (math.exp(eps) + len(s) - 1) * prior[list(s)].sum()
            for r in range(1, k_classes + 1)
            for s in itertools.combinations(range(k_classes), r)
        )
        mat = C.rr_with_prior_probabilities(prior, epsilon=eps)
        assert np.dot(prior, np.diag(mat)) == pytest.approx(best, rel=1e-12)
        assert np.count_nonzero(mat.sum(axis=0)) == k_star


def test_rr_with_prior_uniform_prior_is_rr():
    for eps in EPS_GRID:
        mat = C.rr_with_prior_probabilities(np.full(6, 1 / 6), epsilon=eps)
        np.testing.assert_allclose(mat, C.randomized_response_matrix(num_classes=6, epsilon=eps), atol=1e-15)


def test_rr_with_prior_sampler_matches_matrix_per_example():
    rng = np.random.default_rng(21)
    k, eps, reps = 4, 1.0, 2500
    priors = np.stack([[0.7, 0.1, 0.1, 0.1], [0.4, 0.35, 0.2, 0.05], [0.25, 0.25, 0.25, 0.25]])
    y = np.tile(np.repeat(np.arange(k), reps), 3)
    idx = np.repeat(np.arange(3), k * reps)
    result = C.rr_with_prior(y, priors[idx], epsilon=eps, rng=rng)
    assert isinstance(result, C.RRWithPriorResult)
    np.testing.assert_array_equal(result.k, C.rr_with_prior_optimal_k(priors, epsilon=eps)[idx])
    assert result.mean_k == pytest.approx(result.k.mean())
    assert len(set(result.k.tolist())) > 1  # the priors lead to different k*
    for j in range(3):
        sel = idx == j
        assert_rows_match(y[sel], result.noisy_labels[sel], C.rr_with_prior_probabilities(priors[j], epsilon=eps))


# ---------------------------------------------------------------------------
# ALIBI (Malek et al. 2021).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("eps", EPS_GRID)
def test_alibi_scale_is_two_over_eps(eps):
    assert C.alibi_scale(epsilon=eps) == pytest.approx(2.0 / eps, rel=1e-15)


@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 10.0])
def test_alibi_density_ratio_bound(eps):
    k = 3
    b = 2.0 / eps
    grid = np.arange(-3.0, 4.0 + 1e-9, 0.25) * max(1.0, b / 4)
    grid = np.concatenate([grid, [0.0, 1.0, 0.5]])
    z = np.array(list(itertools.product(grid, repeat=k)))
    ll = C.alibi_log_likelihood(z, epsilon=eps)
    # Independent reference with scipy's Laplace density.
    ref = np.stack([stats.laplace.logpdf(z - np.eye(k)[c], scale=b).sum(-1) for c in range(k)], axis=1)
    np.testing.assert_allclose(ll, ref, rtol=1e-12, atol=1e-12)
    worst = np.max(ll.max(axis=1) - ll.min(axis=1))
    assert worst <= eps + 1e-9
    assert worst == pytest.approx(eps, rel=1e-9)  # attained, e.g. z = e_0


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 4.0])
def test_alibi_noise_is_laplace_with_scale_two_over_eps(eps):
    rng = np.random.default_rng(13)
    k = 4
    y = rng.integers(0, k, 5000)
    z = C.alibi_noisy_labels(y, num_classes=k, epsilon=eps, rng=rng)
    assert z.shape == (5000, k)
    noise = (z - np.eye(k)[y]).ravel()
    assert stats.kstest(noise, stats.laplace(scale=2.0 / eps).cdf).pvalue > P_MIN
    # The test has power: half or double the scale is rejected.
    for wrong in (1.0 / eps, 4.0 / eps):
        assert stats.kstest(noise, stats.laplace(scale=wrong).cdf).pvalue < 1e-6


def test_alibi_posterior_is_bayes_rule():
    rng = np.random.default_rng(17)
    k, eps = 5, 0.8
    y = rng.integers(0, k, 200)
    z = C.alibi_noisy_labels(y, num_classes=k, epsilon=eps, rng=rng)
    prior = random_priors(rng, 200, k, 1.0)
    post = C.alibi_posterior(z, prior, epsilon=eps)
    lik = np.stack([stats.laplace.pdf(z - np.eye(k)[c], scale=2 / eps).prod(-1) for c in range(k)], axis=1)
    ref = prior * lik / (prior * lik).sum(1, keepdims=True)
    np.testing.assert_allclose(post, ref, rtol=1e-10, atol=1e-12)
    # Uniform prior by default; a shared (K,) prior broadcasts.
    uni = C.alibi_posterior(z, epsilon=eps)
    np.testing.assert_allclose(uni, lik / lik.sum(1, keepdims=True), rtol=1e-10)
    np.testing.assert_allclose(C.alibi_posterior(z, np.full(k, 1 / k), epsilon=eps), uni, rtol=1e-12)


def test_alibi_posterior_is_calibrated():
    # Under y ~ prior, E[posterior_k] = prior_k and the posterior is more
    # accurate than the prior (statistical check of Bayes' rule).
    rng = np.random.default_rng(23)
    k, eps, n = 3, 2.0, 40000
    prior = np.array([0.6, 0.3, 0.1])
    y = rng.choice(k, size=n, p=prior)
    post = C.alibi_posterior(C.alibi_noisy_labels(y, num_classes=k, epsilon=eps, rng=rng), prior, epsilon=eps)
    np.testing.assert_allclose(post.mean(0), prior, atol=4 / math.sqrt(n))
    for c in range(k):
        # Among examples with posterior_c in a bin, the frequency of y == c
        # matches the mean posterior.
        sel = (post[:, c] > 0.4) & (post[:, c] < 0.6)
        if sel.sum() > 500:
            assert abs((y[sel] == c).mean() - post[sel, c].mean()) < 4 * 0.5 / math.sqrt(sel.sum())


def test_alibi_posterior_with_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(2)
    z = C.alibi_noisy_labels(rng.integers(0, 4, 8), num_classes=4, epsilon=1.0, rng=rng)
    prior = random_priors(rng, 8, 4, 1.0)
    ref = C.alibi_posterior(z, prior, epsilon=1.0)
    out = jax.jit(lambda a, p: C.alibi_posterior(a, p, epsilon=1.0))(
        jnp.asarray(z, dtype=jnp.float32), jnp.asarray(prior, dtype=jnp.float32)
    )
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# Discrete Laplace histograms and k-means priors (001 Algorithm 4).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 3.0])
def test_discrete_laplace_neighbouring_histograms_ratio(eps):
    a = C.discrete_laplace_parameter(epsilon=eps)
    assert a == pytest.approx(eps / 2)  # 001 Algorithm 4 step 4(b)
    h = np.array([3, 0, 5, 1])
    h2 = h.copy()
    h2[2] -= 1  # one example's label changes from class 2 to class 0
    h2[0] += 1
    r = 5
    axes = [np.arange(v - r, v + r + 1) for v in h]
    z = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 4)
    log_p = stats.dlaplace.logpmf(z - h, a).sum(-1)
    log_p2 = stats.dlaplace.logpmf(z - h2, a).sum(-1)
    worst = np.max(np.abs(log_p - log_p2))
    assert worst <= eps + 1e-9
    assert worst == pytest.approx(eps, rel=1e-9)  # tight: sensitivity is 2
    # Reading the noise parameter as eps (not eps / 2) would break the bound.
    bad = np.abs(stats.dlaplace.logpmf(z - h, eps).sum(-1) - stats.dlaplace.logpmf(z - h2, eps).sum(-1)).max()
    assert bad > eps * 1.5


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_discrete_laplace_noise_distribution(eps):
    rng = np.random.default_rng(31)
    counts = np.zeros((400, 50), dtype=np.int64)
    release = C.discrete_laplace_histogram(counts, epsilon=eps, rng=rng)
    noise = release.noisy_counts.ravel()
    a = eps / 2
    lim = int(stats.dlaplace.ppf(0.995, a))
    edges = np.arange(-lim, lim + 1)
    observed = np.array([(noise < -lim + 0).sum()] + [(noise == v).sum() for v in edges] + [(noise > lim).sum()])
    probs = np.concatenate(
        [[stats.dlaplace.cdf(-lim - 1, a)], stats.dlaplace.pmf(edges, a), [stats.dlaplace.sf(lim, a)]]
    )
    keep = probs * noise.size > 5
    expected = probs * noise.size
    pval = stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue
    assert pval > P_MIN
    assert np.var(noise) == pytest.approx(stats.dlaplace.var(a), rel=0.05)


def test_discrete_laplace_histogram_prior_and_fallback():
    rng = np.random.default_rng(0)
    counts = np.array([[40, 0, 10], [0, 0, 0], [1, 2, 3]])
    rel = C.discrete_laplace_histogram(counts, epsilon=60.0, rng=rng)
    # eps = 60: noise is 0 except with prob ~ 2 e^{-30}.
    np.testing.assert_array_equal(rel.noisy_counts, counts)
    np.testing.assert_allclose(rel.priors[0], [0.8, 0.0, 0.2])
    np.testing.assert_allclose(rel.priors[1], [1 / 3] * 3)  # uniform fallback
    np.testing.assert_allclose(rel.priors[2], [1 / 6, 2 / 6, 3 / 6])
    rel = C.discrete_laplace_histogram(counts, epsilon=0.2, rng=rng)
    clipped = np.maximum(rel.noisy_counts, 0)
    np.testing.assert_allclose(rel.priors.sum(1), 1.0)
    for row, c in zip(rel.priors, clipped):
        if c.sum() > 0:
            np.testing.assert_allclose(row, c / c.sum())
        else:
            np.testing.assert_allclose(row, 1 / 3)


def test_kmeans_priors():
    rng = np.random.default_rng(4)
    centers = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    cid = np.repeat(np.arange(3), 200)
    features = centers[cid] + rng.normal(size=(600, 2))
    labels = np.where(rng.random(600) < 0.9, cid, (cid + 1) % 3)
    out = C.kmeans_priors(
        features, labels, num_clusters=3, num_classes=3, epsilon=2.0, rng=np.random.default_rng(0), seed=0
    )
    assert out.priors.shape == (600, 3) and out.cluster_ids.shape == (600,)
    np.testing.assert_allclose(out.priors.sum(1), 1.0)
    np.testing.assert_array_equal(out.priors, out.cluster_priors[out.cluster_ids])
    # Clusters recover the blobs; priors put ~90% on the blob's majority label.
    for c in range(3):
        members = out.cluster_ids == c
        assert len(np.unique(cid[members])) == 1
        assert out.cluster_priors[c].max() > 0.8
    # Noisy counts = true histogram + noise of the right (small) size.
    true = np.zeros((3, 3), dtype=int)
    np.add.at(true, (out.cluster_ids, labels), 1)
    assert np.abs(out.noisy_counts - true).max() < 20
    # The clustering ignores labels: permuting labels leaves it unchanged.
    out2 = C.kmeans_priors(
        features,
        rng.permutation(labels),
        num_clusters=3,
        num_classes=3,
        epsilon=2.0,
        rng=np.random.default_rng(0),
        seed=0,
    )
    np.testing.assert_array_equal(out.cluster_ids, out2.cluster_ids)


# ---------------------------------------------------------------------------
# Group privacy (000 Section 6; 002 Proposition 6).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 5, 10])
@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_group_privacy(k, eps):
    pure = C.group_privacy(epsilon=eps, group_size=k)
    assert pure == C.PrivacyBudget(epsilon=eps / k, delta=0.0)
    delta = 1e-5
    a = C.group_privacy(epsilon=eps, delta=delta, group_size=k)
    assert a.epsilon == pytest.approx(eps / k)
    assert a.delta == pytest.approx(delta / (k * math.exp(eps)), rel=1e-12)
    b = C.group_privacy(epsilon=eps, delta=delta, group_size=k, conversion="geometric_sum")
    assert b.delta == pytest.approx(delta * (math.exp(eps / k) - 1) / (math.exp(eps) - 1), rel=1e-12)
    # Both are valid: Vadhan's group privacy maps the item-level budget back to
    # at most the user-level (eps, delta); the geometric sum is exact.
    for item, exact in ((a, False), (b, True)):
        back = item.delta * sum(math.exp(j * item.epsilon) for j in range(k))
        assert k * item.epsilon == pytest.approx(eps)
        if exact:
            assert back == pytest.approx(delta, rel=1e-9)
        else:
            assert back <= delta * (1 + 1e-12)
    if k == 1:
        assert b == C.PrivacyBudget(epsilon=eps, delta=delta)


# ---------------------------------------------------------------------------
# Input validation.
# ---------------------------------------------------------------------------


def _rng():
    return np.random.default_rng(0)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: C.randomized_response([0, 1], num_classes=2, epsilon=0.0, rng=_rng()), "epsilon"),
        (lambda: C.randomized_response([0, 1], num_classes=2, epsilon=-1.0, rng=_rng()), "epsilon"),
        (lambda: C.randomized_response([0, 1], num_classes=2, epsilon=float("nan"), rng=_rng()), "epsilon"),
        (lambda: C.randomized_response([0, 2], num_classes=2, epsilon=1.0, rng=_rng()), "labels must lie"),
        (lambda: C.randomized_response([0, -1], num_classes=2, epsilon=1.0, rng=_rng()), "labels must lie"),
        (lambda: C.randomized_response([0.0, 1.0], num_classes=2, epsilon=1.0, rng=_rng()), "integer dtype"),
        (lambda: C.randomized_response([0, 1], num_classes=1, epsilon=1.0, rng=_rng()), "num_classes"),
        (lambda: C.randomized_response([0, 1], num_classes=2, epsilon=1.0, rng=0), "numpy.random.Generator"),
        (lambda: C.randomized_response_matrix(num_classes=3, epsilon=0), "epsilon"),
        (lambda: C.rr_with_prior([0], [[0.5, 0.6]], epsilon=1.0, rng=_rng()), "sum to 1"),
        (lambda: C.rr_with_prior([0], [[1.5, -0.5]], epsilon=1.0, rng=_rng()), "non-negative"),
        (lambda: C.rr_with_prior([0, 1], [[0.5, 0.5]] * 3, epsilon=1.0, rng=_rng()), "one row per label"),
        (lambda: C.rr_with_prior([0, 3], [0.5, 0.5], epsilon=1.0, rng=_rng()), "labels must lie"),
        (lambda: C.rr_top_k([0], [0.5, 0.5], k=3, epsilon=1.0, rng=_rng()), "k must lie"),
        (lambda: C.rr_top_k([0], [0.5, 0.5], k=0, epsilon=1.0, rng=_rng()), "k must lie"),
        (lambda: C.rr_top_k_matrix([0.5, 0.5], k=1, epsilon=-2), "epsilon"),
        (lambda: C.rr_with_prior_probabilities([0.2, 0.2], epsilon=1.0), "sum to 1"),
        (lambda: C.rr_debiased_loss(np.zeros((3, 4)), np.zeros(3, int), num_classes=5, epsilon=1.0), "num_classes"),
        (lambda: C.rr_debiased_loss(np.zeros((3, 4)), np.zeros(2, int), num_classes=4, epsilon=1.0), "shape"),
        (
            lambda: C.rr_debiased_loss(np.zeros((2, 4)), np.array([0, 4]), num_classes=4, epsilon=1.0),
            "noisy_labels must lie",
        ),
        (lambda: C.rr_debiased_weights(np.array([0, 1]), num_classes=4, epsilon=0.0), "epsilon"),
        (lambda: C.alibi_noisy_labels([0, 1], num_classes=2, epsilon=0.0, rng=_rng()), "epsilon"),
        (lambda: C.alibi_posterior(np.zeros((2, 3)), [0.5, 0.5, 0.5], epsilon=1.0), "sum to 1"),
        (lambda: C.alibi_posterior(np.zeros((2, 3)), [0.5, 0.5], epsilon=1.0), "K = 3"),
        (lambda: C.discrete_laplace_histogram([[1, -1]], epsilon=1.0, rng=_rng()), "non-negative"),
        (lambda: C.discrete_laplace_histogram([[1, 2]], epsilon=0.0, rng=_rng()), "epsilon"),
        (
            lambda: C.kmeans_priors(
                np.zeros((4, 2)), [0, 1, 2, 0], num_clusters=2, num_classes=2, epsilon=1.0, rng=_rng()
            ),
            "labels must lie",
        ),
        (
            lambda: C.kmeans_priors(
                np.zeros((4, 2)), [0, 1, 1, 0], num_clusters=9, num_classes=2, epsilon=1.0, rng=_rng()
            ),
            "num_clusters",
        ),
        (lambda: C.group_privacy(epsilon=1.0, group_size=0), "group_size"),
        (lambda: C.group_privacy(epsilon=0.0, group_size=2), "epsilon"),
        (lambda: C.group_privacy(epsilon=1.0, delta=1.0, group_size=2), "delta"),
        (lambda: C.group_privacy(epsilon=1.0, delta=1e-5, group_size=2, conversion="other"), "conversion"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
