"""Property tests for the regression label randomizers (paper 003 and Ghazi et al. 2023).

Every check is exact (enumeration over finite supports / closed forms) except the sampling
checks, which use fixed seeds and tolerances of several standard errors.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy import optimize, stats

from labeldp.mechanisms import regression as R

EPS_GRID = (0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0)


# --------------------------------------------------------------------------------------
# Helpers (independent of the library).
# --------------------------------------------------------------------------------------


def random_support(rng, k):
    return np.round(rng.uniform(-3, 3) + np.cumsum(rng.uniform(0.2, 2.0, size=k)), 6)


def random_prior(rng, k, *, with_zero=False):
    p = rng.dirichlet(np.full(k, 0.7))
    if with_zero and k > 2:
        p[rng.integers(k)] = 0.0
        p /= p.sum()
    return p


def cases(seed, n_per_eps=2, k_range=(2, 7), with_zero=False):
    """A grid of (eps, support, prior) cases with eps in EPS_GRID."""
    rng = np.random.default_rng(seed)
    out = []
    for eps in EPS_GRID:
        for _ in range(n_per_eps):
            k = int(rng.integers(k_range[0], k_range[1] + 1))
            out.append((eps, random_support(rng, k), random_prior(rng, k, with_zero=with_zero)))
    return out


def max_pairwise_ratio(matrix):
    """max over outputs o and labels y, y' of P(o|y) / P(o|y') (inf if some P(o|y') = 0 < P(o|y))."""
    m = np.asarray(matrix)
    m = m[:, m.max(axis=0) > 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = m[:, None, :] / m[None, :, :]
    return float(np.nanmax(ratios))


def assert_valid_dp_randomizer(r, eps, *, row_tol=1e-12):
    assert np.all(r.matrix >= 0)
    np.testing.assert_allclose(r.matrix.sum(axis=1), 1.0, atol=row_tol, rtol=0)
    assert max_pairwise_ratio(r.matrix) <= math.exp(eps) + 1e-9
    assert r.epsilon_dp_ratio() <= eps + 1e-9


def assert_exactly_unbiased(r, tol=1e-9):
    scale = max(1.0, float(np.max(np.abs(r.support))))
    mean = np.einsum("yo,o->y", r.matrix, r.outputs)
    assert np.max(np.abs(mean - r.support)) <= tol * scale
    assert r.is_unbiased(tol)


def assert_samples_match(r, seed, n=20000):
    rng = np.random.default_rng(seed)
    labels = np.repeat(r.support, n)
    draws = r.sample(labels, rng).reshape(r.support.size, n)
    assert np.all(np.isin(draws, r.outputs))
    for i in range(r.support.size):
        freq = (draws[i][:, None] == r.outputs[None, :]).mean(axis=0)
        p = r.matrix[i]
        tol = 6.0 * np.sqrt(p * (1 - p) / n) + 1.0 / n
        assert np.all(np.abs(freq - p) <= tol), (r.name, i, np.max(np.abs(freq - p) - tol))


def loss_of(matrix, support, outputs, probs):
    return float(probs @ np.sum(matrix * (outputs[None, :] - support[:, None]) ** 2, axis=1))


# --------------------------------------------------------------------------------------
# Input validation.
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_epsilon_is_rejected(eps):
    with pytest.raises(ValueError, match="epsilon"):
        R.rr_on_bins([0, 1], [0.5, 0.5], epsilon=eps)
    with pytest.raises(ValueError, match="epsilon"):
        R.optimal_unbiased_randomizer([0, 1], [0.5, 0.5], epsilon=eps)
    with pytest.raises(ValueError, match="epsilon"):
        R.laplace_mechanism([0.5], epsilon=eps, lower=0, upper=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="epsilon"):
        R.estimate_prior([0], support=[0, 1], epsilon=eps, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="epsilon2"):
        R.label_randomizer([0], support=[0, 1], epsilon1=1.0, epsilon2=eps, rng=np.random.default_rng(0))


def test_bad_support_and_probs_are_rejected():
    with pytest.raises(ValueError, match="strictly increasing"):
        R.rr_on_bins([0, 2, 1], [0.3, 0.3, 0.4], epsilon=1.0)
    with pytest.raises(ValueError, match="strictly increasing"):
        R.debiased_rr([0, 1, 1], epsilon=1.0)
    with pytest.raises(ValueError, match="sum to 1"):
        R.rr_on_bins([0, 1, 2], [0.3, 0.3, 0.3], epsilon=1.0)
    with pytest.raises(ValueError, match="non-negative"):
        R.optimal_unbiased_randomizer([0, 1, 2], [0.6, 0.6, -0.2], epsilon=1.0)
    with pytest.raises(ValueError, match="shape"):
        R.rr_on_bins([0, 1, 2], [0.5, 0.5], epsilon=1.0)
    with pytest.raises(ValueError, match="num_outputs"):
        R.feasible_output_set([0, 1, 2], epsilon=1.0, num_outputs=1)
    with pytest.raises(ValueError, match="not both"):
        R.optimal_unbiased_randomizer([0, 1], [0.5, 0.5], epsilon=1.0, num_outputs=3, outputs=[-5, 0, 5])


def test_infeasible_explicit_outputs_are_rejected():
    # Outputs inside the label range cannot be unbiased and DP at once (003 Proposition 7
    # needs outputs beyond the labels).
    with pytest.raises(ValueError, match="infeasible"):
        R.optimal_unbiased_randomizer([0, 1, 2], [0.2, 0.3, 0.5], epsilon=1.0, outputs=[0, 1, 2])


def test_labels_outside_support_or_range_are_rejected():
    rng = np.random.default_rng(0)
    r = R.debiased_rr([0, 1, 2], epsilon=1.0)
    with pytest.raises(ValueError, match="labels must take values in the support"):
        r.sample([0, 1.5], rng)
    with pytest.raises(ValueError, match="support"):
        R.estimate_prior([0, 3], support=[0, 1, 2], epsilon=1.0, rng=rng)
    with pytest.raises(ValueError, match=r"\[lower, upper\]"):
        R.laplace_mechanism([0.0, 2.0], epsilon=1.0, lower=0, upper=1, rng=rng)
    with pytest.raises(ValueError, match="integer labels"):
        R.staircase_mechanism([0.5], epsilon=1.0, lower=0, upper=1, discrete=True, rng=rng)
    with pytest.raises(ValueError, match="upper must be > lower"):
        R.staircase_mechanism([0.0], epsilon=1.0, lower=0, upper=0, rng=rng)
    with pytest.raises(ValueError, match="min\\(support\\), max\\(support\\)"):
        R.unbiased_randomized_rounding([2.5], support=[0, 1, 2], rng=rng)
    with pytest.raises(ValueError, match="Generator"):
        r.sample([0, 1], np.random.RandomState(0))


def test_discrete_randomizer_is_frozen_and_read_only():
    r = R.debiased_rr([0, 1, 2], epsilon=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.epsilon = 2.0
    with pytest.raises(ValueError):
        r.matrix[0, 0] = 0.5
    with pytest.raises(ValueError, match="prior"):
        r.noisy_label_loss()
    assert r.noisy_label_loss([0.2, 0.3, 0.5]) > 0


def test_epsilon_dp_ratio_detects_violations():
    support, outputs = np.array([0.0, 1.0]), np.array([0.0, 1.0])
    bad = R.DiscreteRandomizer(support=support, outputs=outputs, matrix=[[1.0, 0.0], [0.5, 0.5]])
    assert bad.epsilon_dp_ratio() == math.inf
    tight = R.DiscreteRandomizer(support=support, outputs=outputs, matrix=[[0.75, 0.25], [0.25, 0.75]])
    assert tight.epsilon_dp_ratio() == pytest.approx(math.log(3.0))
    assert not tight.is_unbiased()


# --------------------------------------------------------------------------------------
# RR-on-Bins (Ghazi et al. 2023) and debiased RR (003 Definition 23).
# --------------------------------------------------------------------------------------


def set_partitions(items):
    """All set partitions of a list (Bell(len) of them)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1 :]
        yield [[first]] + part


def brute_force_rr_on_bins(support, probs, eps):
    """Best RR-on-Bins over ALL maps Phi: every set partition of the labels (contiguous or not).

    For a fixed map the loss sum_y p_y sum_j Q[y, j] (o_j - y)^2 is minimised column by column
    at o_j = sum_y p_y Q[y, j] y / sum_y p_y Q[y, j] (first-order condition).

    Returns:
      (exact, with_empty): exact[m] is the best loss with exactly m non-empty bins; with_empty
      is the best loss when one extra output that no label maps to is also allowed.
    """
    k = len(support)
    exact = np.full(k + 1, np.inf)
    with_empty = np.inf
    for part in set_partitions(list(range(k))):
        for extra in (0, 1):
            m = len(part) + extra
            q = 1.0 / (math.exp(eps) + m - 1)
            Q = np.full((k, m), q)
            for j, block in enumerate(part):
                Q[block, j] = math.exp(eps) * q
            w = probs[:, None] * Q
            mass = w.sum(0)
            o = (w * support[:, None]).sum(0) / np.where(mass > 0, mass, 1.0)
            loss = float(np.sum(w * (o[None, :] - support[:, None]) ** 2))
            if extra:
                with_empty = min(with_empty, loss)
            else:
                exact[m] = min(exact[m], loss)
    return exact, with_empty


@pytest.mark.parametrize("eps,support,probs", cases(seed=1, n_per_eps=4, with_zero=True))
def test_rr_on_bins_matches_brute_force_over_all_maps(eps, support, probs):
    r = R.rr_on_bins(support, probs, epsilon=eps)
    exact, with_empty = brute_force_rr_on_bins(support, probs, eps)
    assert r.noisy_label_loss() == pytest.approx(np.min(exact), rel=1e-9, abs=1e-12)
    assert with_empty >= np.min(exact) * (1 - 1e-9)  # an output with no label never helps
    # Per number of bins m the DP searches only contiguous bins, a subset of all partitions into
    # m blocks (for a fixed m a non-contiguous split can win, e.g. when a zero-prior label acts
    # as an empty bin), but the best over m is the global optimum.
    per_m = R.rr_on_bins_loss_by_num_bins(support, probs, epsilon=eps)
    brute_exact_m = exact[1:]
    assert np.all(per_m >= brute_exact_m * (1 - 1e-9) - 1e-12)
    assert per_m.min() == pytest.approx(brute_exact_m.min(), rel=1e-9, abs=1e-12)
    assert per_m[0] == pytest.approx(brute_exact_m[0], rel=1e-9) and per_m[-1] == pytest.approx(
        brute_exact_m[-1], rel=1e-9
    )
    assert_valid_dp_randomizer(r, eps)
    # Phi is monotone (bins are contiguous), and the loss from the matrix is the DP optimum.
    assert np.all(np.diff(r.label_to_output) >= 0)
    assert r.noisy_label_loss() == pytest.approx(per_m.min(), rel=1e-9, abs=1e-12)


def test_rr_on_bins_reproduces_paper_example():
    # 003 Section 3, Table 1: prior (0.6, 0.25, 0.15) on {0, 1, 2}, eps = 0.5:
    # Phi(0) ~ 0.396, Phi(1) = Phi(2) ~ 0.720; Bayes predictors on noisy labels 0.542 / 0.558.
    r = R.rr_on_bins([0, 1, 2], [0.6, 0.25, 0.15], epsilon=0.5)
    np.testing.assert_allclose(r.outputs, [0.396, 0.720], atol=1e-3)
    np.testing.assert_array_equal(r.label_to_output, [0, 1, 1])
    mean_out = r.expected_outputs()
    assert np.array([0.7, 0.2, 0.1]) @ mean_out == pytest.approx(0.542, abs=1e-3)
    assert np.array([0.5, 0.3, 0.2]) @ mean_out == pytest.approx(0.558, abs=1e-3)
    assert not r.is_unbiased(1e-3)  # RR-on-Bins is biased (the paper's point)


def _lp_best_mechanism(support, probs, outputs, eps, *, unbiased):
    """Algorithm 1 written directly with all k^2 n pairwise DP constraints (dense)."""
    k, n = len(support), len(outputs)
    big = math.exp(eps)
    c = (probs[:, None] * (outputs[None, :] - support[:, None]) ** 2).ravel()
    a_eq = [np.kron(np.eye(k)[y], np.ones(n)) for y in range(k)]
    b_eq = [1.0] * k
    if unbiased:
        a_eq += [np.kron(np.eye(k)[y], outputs) for y in range(k)]
        b_eq += list(support)
    rows = []
    for i, y, y2 in itertools.product(range(n), range(k), range(k)):
        if y != y2:
            row = np.zeros(k * n)
            row[y2 * n + i] = 1.0
            row[y * n + i] = -big
            rows.append(row)
    res = optimize.linprog(
        c,
        A_ub=np.array(rows),
        b_ub=np.zeros(len(rows)),
        A_eq=np.array(a_eq),
        b_eq=np.array(b_eq),
        bounds=(0, None),
        method="highs",
    )
    assert res.status == 0, res.message
    return res.fun, res.x.reshape(k, n)


@pytest.mark.parametrize("eps,support,probs", cases(seed=2, n_per_eps=1, k_range=(2, 5)))
def test_rr_on_bins_is_optimal_among_all_dp_randomizers(eps, support, probs):
    # Ghazi et al. 2023: for the squared loss an optimal eps-DP randomizer is RR-on-Bins. So the
    # (biased) LP over a fine output grid containing the RR-on-Bins outputs has the same optimum.
    r = R.rr_on_bins(support, probs, epsilon=eps)
    outs = np.unique(np.concatenate([np.linspace(support[0] - 1, support[-1] + 1, 25), r.outputs]))
    best, _ = _lp_best_mechanism(support, probs, outs, eps, unbiased=False)
    assert r.noisy_label_loss() == pytest.approx(best, rel=1e-7, abs=1e-10)


@pytest.mark.parametrize("eps,support,probs", cases(seed=3, n_per_eps=2))
def test_rr_family_is_dp_and_samples_match(eps, support, probs):
    rng = np.random.default_rng(int(eps * 1000) + len(support))
    phi = rng.choice(support, size=len(support))  # any map, not necessarily monotone
    for r in (
        R.rr_on_bins(support, probs, epsilon=eps),
        R.debiased_rr(support, epsilon=eps, probs=probs),
        R.rr_on_bins_from_map(support, epsilon=eps, label_outputs=phi),
    ):
        assert_valid_dp_randomizer(r, eps)
        # RR on m outputs is tight: the ratio e^eps is attained whenever m >= 2.
        if r.outputs.size >= 2:
            assert r.epsilon_dp_ratio() == pytest.approx(eps, rel=1e-9)
    assert_samples_match(R.rr_on_bins(support, probs, epsilon=eps), seed=7)
    assert_samples_match(R.debiased_rr(support, epsilon=eps), seed=8)


@pytest.mark.parametrize("eps,support,probs", cases(seed=4, n_per_eps=2))
def test_debiased_rr_is_unbiased(eps, support, probs):
    r = R.debiased_rr(support, epsilon=eps, probs=probs)
    assert_exactly_unbiased(r)
    k = len(support)
    expected = ((math.exp(eps) + k - 1) * support - support.sum()) / (math.exp(eps) - 1)
    np.testing.assert_allclose(r.outputs, np.sort(expected), rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------------------
# Optimal unbiased randomizer (003 Algorithms 1, 2; Proposition 7).
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps,support,probs", cases(seed=5, n_per_eps=3, with_zero=True))
def test_optimal_unbiased_is_feasible_unbiased_dp_and_beats_debiased_rr(eps, support, probs):
    k = len(support)
    # Proposition 7: the two end points of Algorithm 2 already make the LP feasible.
    two = R.optimal_unbiased_randomizer(support, probs, epsilon=eps, num_outputs=2)
    grid = R.feasible_output_set(support, epsilon=eps, num_outputs=2 * k + 1)
    default = R.optimal_unbiased_randomizer(support, probs, epsilon=eps, num_outputs=2 * k + 1)
    np.testing.assert_allclose(default.outputs, grid)
    dbrr = R.debiased_rr(support, epsilon=eps, probs=probs)
    np.testing.assert_allclose(grid[[0, -1]], dbrr.outputs[[0, -1]], rtol=1e-12)
    union = R.optimal_unbiased_randomizer(
        support, probs, epsilon=eps, outputs=np.unique(np.concatenate([grid, dbrr.outputs]))
    )
    for r in (two, default, union):
        assert_valid_dp_randomizer(r, eps)
        assert_exactly_unbiased(r)
    # More outputs can only help; with the dbRR outputs available, dbRR is a feasible point.
    scale = 1e-9 * max(1.0, dbrr.noisy_label_loss())
    assert union.noisy_label_loss() <= default.noisy_label_loss() + scale
    assert default.noisy_label_loss() <= two.noisy_label_loss() + scale
    assert union.noisy_label_loss() <= dbrr.noisy_label_loss() + scale
    assert_samples_match(default, seed=11, n=10000)


@pytest.mark.parametrize("eps", EPS_GRID)
def test_optimal_unbiased_on_equally_spaced_labels_never_worse_than_debiased_rr(eps):
    # For equally spaced labels the Algorithm 2 grid with n = k is exactly the dbRR output set.
    rng = np.random.default_rng(int(eps * 100))
    for k in (2, 4, 7):
        support = 3.0 + 0.5 * np.arange(k)
        probs = random_prior(rng, k)
        r = R.optimal_unbiased_randomizer(support, probs, epsilon=eps, num_outputs=k)
        dbrr = R.debiased_rr(support, epsilon=eps, probs=probs)
        np.testing.assert_allclose(r.outputs, dbrr.outputs, rtol=1e-12, atol=1e-9)
        assert r.noisy_label_loss() <= dbrr.noisy_label_loss() * (1 + 1e-9)


def test_proposition7_two_point_mechanism_is_dp_and_unbiased():
    for eps, support, _ in cases(seed=6, n_per_eps=1):
        L, U = R.feasible_output_set(support, epsilon=eps, num_outputs=2)
        matrix = np.stack([(U - support) / (U - L), (support - L) / (U - L)], axis=1)
        r = R.DiscreteRandomizer(support=support, outputs=[L, U], matrix=matrix)
        assert_valid_dp_randomizer(r, eps)
        assert_exactly_unbiased(r)


@pytest.mark.parametrize("eps,support,probs", cases(seed=7, n_per_eps=2, k_range=(2, 5)))
def test_optimal_unbiased_matches_pairwise_lp_formulation(eps, support, probs):
    outs = R.feasible_output_set(support, epsilon=eps, num_outputs=9)
    r = R.optimal_unbiased_randomizer(support, probs, epsilon=eps, outputs=outs)
    best, m = _lp_best_mechanism(support, probs, outs, eps, unbiased=True)
    assert r.noisy_label_loss() == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert loss_of(m, support, outs, probs) == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("eps,support,probs", cases(seed=8, n_per_eps=1, k_range=(2, 5)))
def test_optimal_unbiased_grid_refinement_bound(eps, support, probs):
    # Lemma 8 for the squared loss: rounding the fine-grid optimum onto the coarse grid (URR,
    # unbiased post-processing) adds at most Delta^2 / 4 of variance, so
    # G_fine <= G_coarse <= G_fine + Delta^2 / 4 for nested grids.
    n = 5
    coarse = R.optimal_unbiased_randomizer(support, probs, epsilon=eps, num_outputs=n)
    fine = R.optimal_unbiased_randomizer(support, probs, epsilon=eps, num_outputs=4 * (n - 1) + 1)
    delta = coarse.outputs[1] - coarse.outputs[0]
    g_c, g_f = coarse.noisy_label_loss(), fine.noisy_label_loss()
    tol = 1e-9 * max(1.0, g_c)
    assert g_f <= g_c + tol
    assert g_c <= g_f + delta**2 / 4 + tol
    # The composed mechanism is itself unbiased, eps-DP and on the coarse grid.
    rounding = R.randomized_rounding_matrix(fine.outputs, support=coarse.outputs)
    composed = R.DiscreteRandomizer(
        support=support, outputs=coarse.outputs, matrix=fine.matrix @ rounding.matrix, probs=probs
    )
    assert_valid_dp_randomizer(composed, eps, row_tol=1e-9)
    assert_exactly_unbiased(composed)
    assert g_c <= composed.noisy_label_loss() + tol


def test_optimal_unbiased_reproduces_figure2_outputs_outside_label_hull():
    # 003 Figure 2: prior of Table 1 on {0, 1, 2}, eps = 0.5, fine grid: all output labels
    # that are used lie outside [0, 2].
    r = R.optimal_unbiased_randomizer([0, 1, 2], [0.6, 0.25, 0.15], epsilon=0.5, num_outputs=401)
    used = r.outputs[r.matrix.max(axis=0) > 1e-9]
    assert used.size >= 2
    assert np.all((used < 0) | (used > 2))
    small = r.compact()
    np.testing.assert_array_equal(small.outputs, used)
    assert small.noisy_label_loss() == pytest.approx(r.noisy_label_loss(), rel=1e-12)
    assert_exactly_unbiased(small)
    assert r.noisy_label_loss() < R.debiased_rr([0, 1, 2], epsilon=0.5).noisy_label_loss([0.6, 0.25, 0.15])
    # Theorem 6: an optimal unbiased randomizer needs at most 2 |Y| outputs (a vertex of the LP
    # has at most 2|Y| non-L/U degrees of freedom; the solver returns such a vertex).
    assert used.size <= 2 * 3


def test_single_label_support():
    r = R.optimal_unbiased_randomizer([4.0], [1.0], epsilon=1.0, num_outputs=3)
    np.testing.assert_array_equal(r.outputs, [4.0])
    assert r.noisy_label_loss() == 0.0
    assert R.rr_on_bins([4.0], [1.0], epsilon=1.0).noisy_label_loss() == 0.0


# --------------------------------------------------------------------------------------
# Additive noise: Laplace and staircase (003 Definitions 17-20).
# --------------------------------------------------------------------------------------


def integer_range_cases(seed):
    rng = np.random.default_rng(seed)
    out = []
    for eps in EPS_GRID:
        lower = int(rng.integers(-5, 5))
        upper = lower + int(rng.integers(1, 6))
        out.append((eps, lower, upper))
    return out


@pytest.mark.parametrize("kind", ["laplace", "staircase"])
@pytest.mark.parametrize("eps,lower,upper", integer_range_cases(seed=9))
def test_discrete_additive_transition_matrices(kind, eps, lower, upper):
    build = R.laplace_transition_matrix if kind == "laplace" else R.staircase_transition_matrix
    clipped = build(epsilon=eps, lower=lower, upper=upper, clip=True)
    np.testing.assert_array_equal(clipped.outputs, np.arange(lower, upper + 1))
    assert_valid_dp_randomizer(clipped, eps)
    if upper - lower >= 1:
        assert not clipped.is_unbiased(1e-6)  # clipping biases the ends
    window = build(epsilon=eps, lower=lower, upper=upper, clip=False, window=15)
    np.testing.assert_allclose(window.matrix.sum(axis=1) + window.tail_mass, 1.0, atol=1e-12)
    assert max_pairwise_ratio(window.matrix) <= math.exp(eps) + 1e-9
    # The calibration is tight: some output attains the ratio e^eps (the noise is not wider
    # than Delta / eps requires).
    assert window.epsilon_dp_ratio() == pytest.approx(eps, rel=1e-9)
    # Clipped matrix = unclipped pmf with the tails folded onto the end points.
    # (The default window leaves a tail mass below 1e-11.)
    full = build(epsilon=eps, lower=lower, upper=upper, clip=False)
    assert np.all(full.tail_mass < 1e-11)
    inner = (full.outputs > lower) & (full.outputs < upper)
    np.testing.assert_allclose(clipped.matrix[:, 1:-1], full.matrix[:, inner], atol=1e-15)
    np.testing.assert_allclose(clipped.matrix[:, 0], full.matrix[:, full.outputs <= lower].sum(1), atol=1e-9)
    np.testing.assert_allclose(clipped.matrix[:, -1], full.matrix[:, full.outputs >= upper].sum(1), atol=1e-9)


@pytest.mark.parametrize("kind", ["laplace", "staircase"])
@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_discrete_mechanism_samples_match_matrices(kind, eps):
    lower, upper = 0, 3
    mech = R.laplace_mechanism if kind == "laplace" else R.staircase_mechanism
    build = R.laplace_transition_matrix if kind == "laplace" else R.staircase_transition_matrix
    clipped = build(epsilon=eps, lower=lower, upper=upper, clip=True)
    n = 20000
    rng = np.random.default_rng(12)
    for i, y in enumerate(clipped.support):
        out = mech(np.full(n, y), epsilon=eps, lower=lower, upper=upper, discrete=True, clip=True, rng=rng)
        freq = (out[:, None] == clipped.outputs[None, :]).mean(0)
        p = clipped.matrix[i]
        assert np.all(np.abs(freq - p) <= 6 * np.sqrt(p * (1 - p) / n) + 1 / n)
        raw = mech(np.full(n, y), epsilon=eps, lower=lower, upper=upper, discrete=True, clip=False, rng=rng)
        assert np.all(raw == np.round(raw))
        win = build(epsilon=eps, lower=lower, upper=upper, clip=False, window=6)
        freq = (raw[:, None] == win.outputs[None, :]).mean(0)
        p = win.matrix[i]
        assert np.all(np.abs(freq - p) <= 6 * np.sqrt(p * (1 - p) / n) + 1 / n)
    assert_samples_match(clipped, seed=13, n=5000)


def test_discrete_noise_matches_paper_definitions():
    for eps, delta in [(0.3, 1), (1.0, 3), (4.0, 5)]:
        lap = R.laplace_noise(epsilon=eps, sensitivity=delta, discrete=True)
        z = np.arange(-40, 41)
        # Definition 17: DLap(Delta / eps), pmf proportional to exp(-eps |z| / Delta).
        np.testing.assert_allclose(lap.pdf(z) / lap.pdf(0), np.exp(-eps * np.abs(z) / delta), rtol=1e-12)
        stair = R.staircase_noise(epsilon=eps, sensitivity=delta, discrete=True)
        r = stair.param
        b = math.exp(-eps)
        a = (1 - b) / (2 * r + 2 * b * (delta - r) - (1 - b))  # Definition 19's a(r)

        def p_def(i):
            i = abs(i)
            k, j = divmod(i, delta)
            return math.exp(-k * eps) * (a if j < r else math.exp(-eps) * a)

        np.testing.assert_allclose(stair.pdf(z), [p_def(i) for i in z], rtol=1e-12)
        # r minimises the variance among 1..Delta.
        big = np.arange(-4000, 4001)
        variances = [
            float(np.sum(big**2 * R.staircase_noise(epsilon=eps, sensitivity=delta, discrete=True, param=rr).pdf(big)))
            for rr in range(1, delta + 1)
        ]
        assert stair.variance() == pytest.approx(min(variances), rel=1e-9)
        assert lap.variance() == pytest.approx(float(np.sum(big**2 * lap.pdf(big))), rel=1e-9)
    # Off-integer points have zero mass.
    assert R.laplace_noise(epsilon=1.0, sensitivity=2, discrete=True).pdf(0.5) == 0.0


@pytest.mark.parametrize("kind", ["laplace", "staircase"])
@pytest.mark.parametrize("discrete", [False, True])
@pytest.mark.parametrize("eps", EPS_GRID)
def test_unclipped_noise_is_symmetric_hence_unbiased(kind, discrete, eps):
    make = R.laplace_noise if kind == "laplace" else R.staircase_noise
    delta = 3 if discrete else 2.5
    noise = make(epsilon=eps, sensitivity=delta, discrete=discrete)
    x = np.arange(-200, 201) if discrete else np.linspace(-60, 60, 2401)
    np.testing.assert_array_equal(noise.pdf(x), noise.pdf(-x))
    np.testing.assert_allclose(noise.cdf(x) + noise.cdf(-x - (1 if discrete else 0)), 1.0, atol=1e-12)
    if not discrete:
        assert noise.cdf(0.0) == pytest.approx(0.5, abs=1e-15)
    assert np.isfinite(noise.variance())  # finite second moment, so the mean exists and is 0


@pytest.mark.parametrize("kind", ["laplace", "staircase"])
@pytest.mark.parametrize("eps", EPS_GRID)
def test_continuous_noise_density_ratio_and_calibration(kind, eps):
    make = R.laplace_noise if kind == "laplace" else R.staircase_noise
    lower, upper = -1.0, 1.5
    noise = make(epsilon=eps, sensitivity=upper - lower)
    ys = np.linspace(lower, upper, 11)
    out = np.linspace(lower - 30 * (upper - lower), upper + 30 * (upper - lower), 6001)
    dens = noise.pdf(out[None, :] - ys[:, None])
    assert np.all(dens > 0)
    log_ratio = np.log(dens.max(axis=0)) - np.log(dens.min(axis=0))
    assert log_ratio.max() <= eps + 1e-9
    assert log_ratio.max() >= eps - 1e-9  # tight: the noise is calibrated to Delta / eps
    # Clipping is post-processing: the point masses at the ends satisfy the same ratio.
    for mass in (noise.cdf(lower - ys), 1.0 - noise.cdf(upper - ys)):
        assert np.log(mass.max() / mass.min()) <= eps + 1e-9
    # The cdf is the integral of the density.
    grid = np.linspace(-5 * (upper - lower), 5 * (upper - lower), 200001)
    num = np.concatenate([[0], np.cumsum((noise.pdf(grid[1:]) + noise.pdf(grid[:-1])) / 2 * np.diff(grid))])
    cdf = noise.cdf(grid)
    np.testing.assert_allclose(num - num[100000], cdf - cdf[100000], atol=2e-3 * max(1, eps))
    if kind == "laplace":
        assert noise.param == pytest.approx((upper - lower) / eps)


def test_staircase_gamma_is_variance_minimising():
    for eps in (0.1, 1.0, 4.0, 10.0):
        noise = R.staircase_noise(epsilon=eps, sensitivity=1.0)
        grid = np.linspace(0.001, 0.999, 999)
        variances = [R.staircase_noise(epsilon=eps, sensitivity=1.0, param=g).variance() for g in grid]
        assert noise.variance() <= min(variances) + 1e-12
        assert noise.param == pytest.approx(R.staircase_gamma_closed_form(eps))
        # The staircase beats Laplace (it is the optimal additive noise, [GV14]).
        assert noise.variance() <= R.laplace_noise(epsilon=eps, sensitivity=1.0).variance()
    with pytest.raises(ValueError, match="gamma"):
        R.staircase_noise(epsilon=1.0, sensitivity=1.0, param=1.5)


@pytest.mark.parametrize("kind", ["laplace", "staircase"])
@pytest.mark.parametrize("eps", [0.3, 2.0, 8.0])
def test_continuous_mechanism_samples_follow_noise_distribution(kind, eps):
    mech = R.laplace_mechanism if kind == "laplace" else R.staircase_mechanism
    make = R.laplace_noise if kind == "laplace" else R.staircase_noise
    lower, upper = 0.0, 400.0
    noise = make(epsilon=eps, sensitivity=upper - lower)
    rng = np.random.default_rng(21)
    y = 123.4
    out = mech(np.full(20000, y), epsilon=eps, lower=lower, upper=upper, clip=False, rng=rng)
    assert stats.kstest(out - y, noise.cdf).pvalue > 1e-4
    sd = math.sqrt(noise.variance() / out.size)
    assert abs(out.mean() - y) <= 5 * sd  # unbiased
    assert out.var() == pytest.approx(noise.variance(), rel=0.1)
    clipped = mech(np.full(20000, y), epsilon=eps, lower=lower, upper=upper, clip=True, rng=rng)
    assert clipped.min() >= lower and clipped.max() <= upper
    p_low = float(noise.cdf(lower - y))
    assert abs(np.mean(clipped == lower) - p_low) <= 6 * math.sqrt(p_low * (1 - p_low) / 20000) + 1e-4


def test_mechanisms_are_reproducible_and_shape_preserving():
    labels = np.array([[0.0, 1.0], [2.0, 3.0]])
    for mech in (R.laplace_mechanism, R.staircase_mechanism):
        for discrete in (False, True):
            a = mech(labels, epsilon=1.0, lower=0, upper=3, discrete=discrete, rng=np.random.default_rng(3))
            b = mech(labels, epsilon=1.0, lower=0, upper=3, discrete=discrete, rng=np.random.default_rng(3))
            assert a.shape == labels.shape
            np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------
# Prior estimation (003 Algorithm 4) and the full randomizer (003 Algorithm 3).
# --------------------------------------------------------------------------------------


def test_histogram_sensitivity_and_noise_scale():
    # L1 sensitivity of the histogram under changing one label, by enumeration of all
    # neighbouring data sets of 3 labels over a 3-value support, is 2; Algorithm 4's scale is
    # sensitivity / eps, which makes the Laplace mechanism eps-DP (003 Definition 18).
    support = np.array([0.0, 1.0, 2.0])
    sens = 0.0
    for data in itertools.product(range(3), repeat=3):
        h = np.bincount(data, minlength=3)
        for i, v in itertools.product(range(3), range(3)):
            other = list(data)
            other[i] = v
            sens = max(sens, np.abs(h - np.bincount(other, minlength=3)).sum())
    assert sens == 2
    for eps in EPS_GRID:
        b = R.prior_noise_scale(eps)
        assert b == pytest.approx(sens / eps)
        # Log density ratio of the noisy histogram at any point for neighbouring inputs <= eps.
        rng = np.random.default_rng(0)
        h, h2 = np.array([3.0, 1.0, 0.0]), np.array([2.0, 2.0, 0.0])
        x = rng.normal(1.0, 5.0, size=(1000, 3))
        log_ratio = (np.abs(x - h2).sum(1) - np.abs(x - h).sum(1)) / b
        assert log_ratio.max() <= eps + 1e-12
    del support


def test_noisy_histogram_noise_is_laplace_with_the_right_scale():
    support = np.array([0.0, 1.0, 5.0])
    labels = np.array([0.0, 0.0, 1.0, 5.0, 5.0, 5.0])
    eps = 0.7
    rng = np.random.default_rng(5)
    noise = np.concatenate(
        [R.noisy_histogram(labels, support=support, epsilon=eps, rng=rng) - [2, 1, 3] for _ in range(3000)]
    )
    assert stats.kstest(noise, stats.laplace(scale=2 / eps).cdf).pvalue > 1e-4
    # A wrong scale is detected.
    assert stats.kstest(noise, stats.laplace(scale=1 / eps).cdf).pvalue < 1e-6


@pytest.mark.parametrize("eps", EPS_GRID)
def test_estimate_prior_returns_a_distribution(eps):
    rng = np.random.default_rng(9)
    support = np.arange(6.0)
    labels = rng.choice(support, size=500, p=[0.4, 0.3, 0.1, 0.1, 0.05, 0.05])
    prior = R.estimate_prior(labels, support=support, epsilon=eps, rng=rng)
    assert prior.shape == (6,)
    assert np.all(prior >= 0)
    assert prior.sum() == pytest.approx(1.0, abs=1e-12)
    if eps >= 5:
        true = np.bincount(labels.astype(int), minlength=6) / labels.size
        assert np.abs(prior - true).sum() < 0.05


def test_estimate_prior_is_reproducible_and_clips_at_zero():
    support = np.arange(4.0)
    labels = np.zeros(3)
    a = R.estimate_prior(labels, support=support, epsilon=0.05, rng=np.random.default_rng(1))
    b = R.estimate_prior(labels, support=support, epsilon=0.05, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    noisy = R.noisy_histogram(labels, support=support, epsilon=0.05, rng=np.random.default_rng(1))
    clipped = np.maximum(noisy, 0)
    expected = clipped / clipped.sum() if clipped.sum() > 0 else np.full(4, 0.25)
    np.testing.assert_allclose(a, expected)


def test_label_randomizer_algorithm3():
    rng = np.random.default_rng(17)
    support = np.arange(0.0, 8.0)
    labels = rng.choice(support, size=4000, p=rng.dirichlet(np.ones(8)))
    res = R.label_randomizer(
        labels, support=support, epsilon1=0.2, epsilon2=1.8, num_outputs=15, rng=np.random.default_rng(3)
    )
    assert res.epsilon == pytest.approx(2.0)
    assert res.randomizer.epsilon == pytest.approx(1.8)
    np.testing.assert_allclose(res.randomizer.outputs, R.feasible_output_set(support, epsilon=1.8, num_outputs=15))
    # Same rng stream: the prior is Algorithm 4 with eps1.
    np.testing.assert_array_equal(
        res.prior, R.estimate_prior(labels, support=support, epsilon=0.2, rng=np.random.default_rng(3))
    )
    assert_valid_dp_randomizer(res.randomizer, 1.8)
    assert_exactly_unbiased(res.randomizer)
    assert res.noisy_labels.shape == labels.shape
    assert np.all(np.isin(res.noisy_labels, res.randomizer.outputs))
    # Unbiased: the noisy mean estimates the true mean.
    sd = math.sqrt(
        res.randomizer.noisy_label_loss(np.bincount(labels.astype(int), minlength=8) / labels.size) / labels.size
    )
    assert abs(res.noisy_labels.mean() - labels.mean()) <= 5 * sd
    bins = R.label_randomizer(
        labels, support=support, epsilon1=0.2, epsilon2=1.8, rng=np.random.default_rng(3), randomizer="rr_on_bins"
    )
    assert bins.randomizer.name == "RR-on-Bins"
    assert bins.randomizer.noisy_label_loss() <= res.randomizer.noisy_label_loss(bins.prior)
    with pytest.raises(ValueError, match="randomizer"):
        R.label_randomizer(labels, support=support, epsilon1=0.2, epsilon2=1.8, rng=rng, randomizer="lp")


# --------------------------------------------------------------------------------------
# Unbiased randomized rounding (003 Section 3.1).
# --------------------------------------------------------------------------------------


def test_unbiased_randomized_rounding():
    rng = np.random.default_rng(31)
    support = np.array([0.0, 0.5, 2.0, 3.0])
    values = np.array([0.0, 0.1, 0.5, 1.2, 2.0, 2.99, 3.0])
    matrix = R.randomized_rounding_matrix(values, support=support)
    np.testing.assert_allclose(matrix.matrix.sum(1), 1.0)
    assert_exactly_unbiased(matrix, tol=1e-12)
    # Only the two neighbours get mass; grid points stay put.
    assert np.all((matrix.matrix > 0).sum(1) <= 2)
    np.testing.assert_array_equal(matrix.matrix[[0, 2, 4, 6]], np.eye(4))
    assert_samples_match(matrix, seed=32)
    draws = R.unbiased_randomized_rounding(np.full(40000, 1.2), support=support, rng=rng)
    assert set(np.unique(draws)) == {0.5, 2.0}
    assert abs(draws.mean() - 1.2) <= 5 * math.sqrt((2.0 - 1.2) * (1.2 - 0.5) / draws.size)
    # Composition with an unbiased DP randomizer stays unbiased and eps-DP.
    r = R.optimal_unbiased_randomizer(support, [0.1, 0.2, 0.3, 0.4], epsilon=1.0, num_outputs=8)
    composed = R.DiscreteRandomizer(support=values, outputs=r.outputs, matrix=matrix.matrix @ r.matrix)
    assert_exactly_unbiased(composed)
    assert composed.epsilon_dp_ratio() <= 1.0 + 1e-9
