"""Tests for labeldp.mechanisms.user_level (000 Section 6, user-level label DP).

* RR with group privacy: eps/k per label; the k-fold product channel is exactly eps-DP for the
  user's label vector (closed form vs brute-force enumeration of [K]^k x [K]^k x [K]^k), and a
  larger per-label budget is not; the sampler is RR at eps/k and refuses users with > k labels.

Per-user sum-then-clip and the user-level accounting are tested where they run:
tests/ads/test_train.py (the engine) and tests/ads/test_pipeline.py (q, steps, both relations).
"""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from labeldp.mechanisms import classification as C
from labeldp.mechanisms import user_level as U

EPS_GRID = [0.01, 0.1, 0.5, 1.0, 2.0, 5.0]


# ---------------------------------------------------------------------------
# Randomized response with group privacy.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 5, 10])
def test_rr_group_epsilon_is_eps_over_k(k):
    for eps in EPS_GRID:
        assert U.rr_group_epsilon(epsilon=eps, k=k) == pytest.approx(eps / k, rel=1e-15)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_rr_group_epsilon_rejects_bad_k(bad):
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        U.rr_group_epsilon(epsilon=1.0, k=bad)


def product_channel(eps_label, k, num_classes):
    """P[y, z] of k independent RR(eps_label) labels over [K]^k (row/col order: itertools)."""
    r = C.randomized_response_matrix(num_classes=num_classes, epsilon=eps_label)
    mat = np.ones((1, 1))
    for _ in range(k):
        mat = np.kron(mat, r)
    return mat


def brute_force_max_log_ratio(mat):
    """max over y, y', z of log P[y, z] / P[y', z], by enumerating every triple."""
    logm = np.log(mat)
    n = mat.shape[0]
    best = -math.inf
    for y, y2 in itertools.product(range(n), repeat=2):
        best = max(best, float(np.max(logm[y] - logm[y2])))
    return best


@pytest.mark.parametrize("k,num_classes", [(1, 2), (2, 2), (3, 2), (4, 2), (2, 3), (3, 3)])
@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_max_user_log_ratio_is_exact_and_equals_eps(k, num_classes, eps):
    exact = U.max_user_log_ratio(epsilon=eps, k=k, num_classes=num_classes)
    brute = brute_force_max_log_ratio(product_channel(eps / k, k, num_classes))
    assert exact == pytest.approx(brute, rel=1e-12, abs=1e-12)
    assert exact <= eps + 1e-12
    assert exact == pytest.approx(eps, rel=1e-12)  # tight: the split wastes no budget


@pytest.mark.parametrize("k", [2, 5, 10])
@pytest.mark.parametrize("num_classes", [2, 10])
def test_max_user_log_ratio_closed_form_grid(k, num_classes):
    for eps in EPS_GRID:
        assert U.max_user_log_ratio(epsilon=eps, k=k, num_classes=num_classes) <= eps + 1e-12


@pytest.mark.parametrize("k,num_classes", [(2, 2), (3, 2), (2, 3)])
def test_larger_per_label_budget_breaks_user_level_eps(k, num_classes):
    eps = 1.0
    # k labels at eps/(k-1) (e.g. forgetting one label): the user-level loss exceeds eps.
    loss = brute_force_max_log_ratio(product_channel(eps / (k - 1), k, num_classes))
    assert loss == pytest.approx(k * eps / (k - 1), rel=1e-12)
    assert loss > eps + 0.1


def test_user_randomized_response_is_rr_at_eps_over_k():
    rng = np.random.default_rng(0)
    n_users, k, num_classes, eps = 4000, 5, 3, 1.0
    labels = rng.integers(0, num_classes, size=n_users * k)
    users = np.repeat(np.arange(n_users), k)
    perm = rng.permutation(labels.size)  # rows in any order
    labels, users = labels[perm], users[perm]
    noisy = U.user_randomized_response(
        labels, users, epsilon=eps, k=k, num_classes=num_classes, rng=np.random.default_rng(1)
    )
    # the same draws as classification.randomized_response at eps/k
    same = C.randomized_response(labels, num_classes=num_classes, epsilon=eps / k, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(noisy, same)
    assert noisy.dtype == np.int64 and noisy.shape == labels.shape
    # keep rate of RR(eps/k)
    mat = C.randomized_response_matrix(num_classes=num_classes, epsilon=eps / k)
    kept = int(np.sum(noisy == labels))
    pval = stats.binomtest(kept, labels.size, mat[0, 0]).pvalue
    assert pval > 1e-3


def test_user_randomized_response_allows_fewer_and_refuses_more_than_k():
    labels = np.array([0, 1, 1, 0, 1])
    rng = np.random.default_rng(0)
    # user 7 has 2 <= k = 3 rows, user 9 three: fine
    out = U.user_randomized_response(labels, np.array([7, 7, 9, 9, 9]), epsilon=1.0, k=3, num_classes=2, rng=rng)
    assert out.shape == (5,)
    with pytest.raises(ValueError, match=r"user 9 has 3 labels but k=2"):
        U.user_randomized_response(labels, np.array([7, 7, 9, 9, 9]), epsilon=1.0, k=2, num_classes=2, rng=rng)
    with pytest.raises(ValueError, match="user_ids must have one entry per label"):
        U.user_randomized_response(labels, np.array([0, 1]), epsilon=1.0, k=2, num_classes=2, rng=rng)
    with pytest.raises(ValueError, match="user_ids must be integers"):
        U.user_randomized_response(labels, np.zeros(5), epsilon=1.0, k=5, num_classes=2, rng=rng)
    with pytest.raises(ValueError, match="epsilon must be a positive"):
        U.user_randomized_response(labels, np.arange(5), epsilon=0.0, k=1, num_classes=2, rng=rng)
