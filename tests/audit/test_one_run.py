"""Property tests for labeldp.audit.one_run (Steinke, Nasr & Jagielski 2023).

The bound is checked (i) against independent computations (a brute-force eps
scan for delta = 0; the theorem's formula written out naively for
delta > 0), (ii) for monotonicity, and (iii) for soundness and power on K-ary
randomized response applied to the canary labels, a mechanism whose label-DP
epsilon is known exactly and against which the auditor's guess is optimal.
"""

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import special, stats

from labeldp.audit import one_run as A

K = 10


# ---------------------------------------------------------------------------
# Helpers.
# ---------------------------------------------------------------------------


def naive_p_value(m, r, v, eps, delta):
    """The theorem's tail bound, written directly with binomial survival fns.

    f(t) = P[Binomial(r, q) >= t];  p = f(v) + 2 m delta max_i (f(v-i) - f(v))/i.
    """
    q = math.exp(eps) / (1.0 + math.exp(eps))
    f = lambda t: stats.binom.sf(t - 1, r, q)
    i = np.arange(1, v + 1)
    extra = np.max((f(v - i) - f(v)) / i, initial=0.0)
    return min(1.0, f(v) + 2 * m * delta * extra)


def rr_audit(*, eps, m, seed, delta, confidence=0.95):
    """Audits K-ary randomized response applied to the canary labels.

    The "model" is the released noisy label; log_probs put 1 on it (plus tiny
    tie-breaking noise from an RNG independent of the secret bits), so the
    score is +1 / -1 / 0 if the noisy label is label1 / label0 / neither.
    """
    rng = np.random.default_rng(seed)
    canaries = A.make_label_canaries(num_canaries=m, num_classes=K, num_train=3 * m, rng=rng)
    y = canaries.training_labels
    keep = rng.random(m) < math.exp(eps) / (math.exp(eps) + K - 1)
    noisy = np.where(keep, y, (y + rng.integers(1, K, size=m)) % K)
    log_probs = np.zeros((m, K))
    log_probs[np.arange(m), noisy] = 1.0
    log_probs += 1e-6 * np.random.default_rng(10_000 + seed).random((m, K))
    return A.audit(log_probs=log_probs, canaries=canaries, delta=delta, confidence=confidence)


# ---------------------------------------------------------------------------
# The canary game.
# ---------------------------------------------------------------------------


def test_make_label_canaries_draws_a_valid_game():
    c = A.make_label_canaries(num_canaries=4000, num_classes=K, num_train=5000, rng=np.random.default_rng(0))
    assert c.num_canaries == 4000 and c.num_classes == K
    assert np.unique(c.indices).size == 4000
    assert c.indices.min() >= 0 and c.indices.max() < 5000
    assert np.all(np.diff(c.indices) > 0)  # sorted, distinct
    assert np.all(c.label0 != c.label1)
    assert set(np.unique(c.secret_bits)) == {0, 1}
    expected = np.where(c.secret_bits == 1, c.label1, c.label0)
    np.testing.assert_array_equal(c.training_labels, expected)
    # Uniform over the K (K - 1) ordered pairs and fair bits (fixed seed).
    pairs = np.bincount(c.label0 * K + c.label1, minlength=K * K)
    off_diag = pairs[np.arange(K * K) % (K + 1) != 0]
    assert stats.chisquare(off_diag).pvalue > 1e-3
    assert stats.binomtest(int(c.secret_bits.sum()), 4000).pvalue > 1e-3


def test_canaries_are_reproducible_frozen_and_read_only():
    make = lambda: A.make_label_canaries(num_canaries=50, num_classes=3, num_train=60, rng=np.random.default_rng(7))
    a, b = make(), make()
    for f in ("indices", "label0", "label1", "secret_bits"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
        assert getattr(a, f).dtype == np.int64
    with pytest.raises(ValueError):
        a.secret_bits[0] = 1 - a.secret_bits[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.num_classes = 4  # type: ignore[misc]
    # Relabelling a training set through the indices.
    labels = np.zeros(60, dtype=np.int64)
    labels[a.indices] = a.training_labels
    np.testing.assert_array_equal(labels[a.indices], a.training_labels)


def test_canary_scores_are_log_prob_differences():
    c = A.LabelCanaries(indices=[4, 1, 2], label0=[0, 2, 1], label1=[1, 0, 2], secret_bits=[1, 0, 1], num_classes=3)
    lp = np.log(np.array([[0.2, 0.7, 0.1], [0.5, 0.25, 0.25], [0.3, 0.3, 0.4]]))
    np.testing.assert_allclose(
        A.canary_scores(log_probs=lp, canaries=c), [np.log(0.7 / 0.2), np.log(0.5 / 0.25), np.log(0.4 / 0.3)]
    )
    lp[0, [0, 1]] = -np.inf  # both candidates impossible: no information
    lp[1, 2] = -np.inf  # label0 impossible: certain of bit 1
    scores = A.canary_scores(log_probs=lp, canaries=c)
    assert scores[0] == 0.0 and scores[1] == np.inf


# ---------------------------------------------------------------------------
# Guessing.
# ---------------------------------------------------------------------------


def test_guesses_take_the_extremes_and_abstain_elsewhere():
    scores = np.array([0.3, -2.0, 5.0, 0.0, -0.1, 1.0])
    g = A.guesses_from_scores(scores=scores, num_guesses=4)
    np.testing.assert_array_equal(g, [-1, 0, 1, -1, 0, 1])
    np.testing.assert_array_equal(A.guesses_from_scores(scores=scores, num_guesses=0), [-1] * 6)
    full = A.guesses_from_scores(scores=scores, num_guesses=6)
    assert np.all(full >= 0) and full.sum() == 3


@pytest.mark.parametrize("r", range(0, 12))
def test_guess_counts_are_exact_for_every_r(r):
    s = np.random.default_rng(r).normal(size=11)
    g = A.guesses_from_scores(scores=s, num_guesses=r)
    assert np.sum(g != -1) == r and abs(np.sum(g == 1) - np.sum(g == 0)) <= 1
    if 0 < r < 11:  # every guessed 1 outranks every abstention, and so on
        lo = s[g == 0].max(initial=-np.inf)
        hi = s[g == 1].min(initial=np.inf)
        mid = s[g == -1]
        assert np.all(lo <= mid) and np.all(mid <= hi)


def test_odd_guess_goes_to_the_more_confident_side_and_ties_are_stable():
    # Next-highest 4.0 vs next-lowest -1.0: the extra guess is a 1.
    s = np.array([-5.0, -1.0, 4.0, 6.0])
    np.testing.assert_array_equal(A.guesses_from_scores(scores=s, num_guesses=3), [0, -1, 1, 1])
    np.testing.assert_array_equal(A.guesses_from_scores(scores=-s, num_guesses=3), [1, -1, 0, 0])
    ties = np.zeros(6)
    g = A.guesses_from_scores(scores=ties, num_guesses=2)
    np.testing.assert_array_equal(g, [0, -1, -1, -1, -1, 1])  # by position
    np.testing.assert_array_equal(g, A.guesses_from_scores(scores=ties, num_guesses=2))


# ---------------------------------------------------------------------------
# The bound.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [0.0, 1e-5, 4e-4])
def test_bound_is_monotone_in_correct_guesses(delta):
    m, r = 1000, 200
    bounds = [
        A.epsilon_lower_bound(num_canaries=m, num_guesses=r, num_correct=v, delta=delta) for v in range(0, r + 1, 5)
    ]
    assert all(b >= 0.0 for b in bounds)
    assert all(b2 >= b1 for b1, b2 in zip(bounds, bounds[1:]))
    assert bounds[0] == 0.0 and bounds[r // 10] == 0.0  # all wrong, half right
    assert bounds[-1] > 1.5  # 200 / 200 right rejects eps = 1.5


@pytest.mark.parametrize("v", [0, 30, 50])
def test_all_wrong_or_half_right_gives_zero(v):
    assert A.epsilon_lower_bound(num_canaries=5000, num_guesses=100, num_correct=v, delta=0.0) == 0.0


def test_bound_shrinks_with_confidence_delta_and_canaries():
    kw = dict(num_guesses=300, num_correct=280)
    b = lambda **o: A.epsilon_lower_bound(**{**kw, "num_canaries": 1000, "delta": 1e-5, **o})
    assert b(confidence=0.99) < b(confidence=0.95) < b(confidence=0.5)
    assert b(delta=4e-4) < b(delta=1e-5) < b(delta=0.0)
    assert b(num_canaries=40_000) < b(num_canaries=1000)  # delta term ~ m
    with pytest.raises(ValueError, match="2 \\* num_canaries \\* delta"):
        b(num_canaries=100_000)  # 2 m delta = 2 > 1: not monotone, refused


@pytest.mark.parametrize(
    "r,v,confidence", [(10, 10, 0.95), (100, 80, 0.95), (500, 300, 0.9), (1000, 990, 0.99), (40, 27, 0.95), (3, 3, 0.5)]
)
def test_pure_dp_bound_matches_brute_force_scan(r, v, confidence):
    # delta = 0: the bound is the eps solving P[Bin(r, q_eps) >= v] = 1 - conf.
    grid = np.arange(0.0, 12.0, 1e-4)
    tail = stats.binom.sf(v - 1, r, special.expit(grid))
    rejected = grid[tail < 1.0 - confidence]
    expected = rejected.max() if rejected.size else 0.0
    got = A.epsilon_lower_bound(num_canaries=r, num_guesses=r, num_correct=v, delta=0.0, confidence=confidence)
    assert got == pytest.approx(expected, abs=1.5e-4)
    if got > 0:  # it is the root of the tail equation
        assert stats.binom.sf(v - 1, r, special.expit(got)) == pytest.approx(1.0 - confidence, rel=1e-6)


@pytest.mark.parametrize(
    "m,r,v,delta",
    [
        (1000, 100, 95, 1e-5),
        (1000, 1000, 990, 1e-5),
        (50, 50, 45, 1e-3),
        (5000, 2500, 2400, 1e-4),
        (20, 20, 20, 0.01),
        (40_000, 300, 290, 1e-5),
    ],
)
def test_approximate_dp_p_value_and_bound_match_the_theorem(m, r, v, delta):
    for eps in [0.0, 0.5, 1.0, 2.0, 4.0, 7.0]:
        assert A.p_value(num_canaries=m, num_guesses=r, num_correct=v, epsilon=eps, delta=delta) == pytest.approx(
            naive_p_value(m, r, v, eps, delta), rel=1e-9, abs=1e-300
        )
    bound = A.epsilon_lower_bound(num_canaries=m, num_guesses=r, num_correct=v, delta=delta)
    pure = A.epsilon_lower_bound(num_canaries=m, num_guesses=r, num_correct=v, delta=0.0)
    assert 0.0 < bound <= pure
    # The claim is rejected at the bound and at no eps just above it, and at
    # every eps below it (first crossing, checked on a grid).
    tol = 1e-12  # float noise between the two evaluations of the formula
    assert naive_p_value(m, r, v, bound, delta) < 0.05 + tol
    assert naive_p_value(m, r, v, bound + 1e-6, delta) >= 0.05 - tol
    assert all(naive_p_value(m, r, v, e, delta) < 0.05 + tol for e in np.linspace(0.0, bound, 25))


# ---------------------------------------------------------------------------
# The audit on randomized response (known epsilon).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [1.0, 2.0, 4.0, 8.0])
def test_rr_audit_is_sound_on_fixed_seeds(eps):
    # Measured at m = 2000, seeds 0-4, delta = 0 (1e-5): eps 1 -> 0.58-0.89
    # (0.57-0.88), eps 2 -> 1.51-1.93 (1.51-1.93), eps 4 -> 3.01-3.79
    # (2.99-3.77), eps 8 -> 4.95-5.31 (4.84-5.13). The attack is optimal for
    # RR, so a violation has probability up to 5% per run (e.g. seed 8 at
    # eps = 4, delta = 0 gives 4.005 > 4, a legitimate event); the rate test
    # below checks that frequency.
    for seed in range(5):
        pure = rr_audit(eps=eps, m=2000, seed=seed, delta=0.0)
        approx = rr_audit(eps=eps, m=2000, seed=seed, delta=1e-5)
        assert pure.epsilon_lower_bound <= eps
        assert approx.epsilon_lower_bound <= eps
        for (g0, v0, b0), (g1, v1, b1) in zip(pure.per_count, approx.per_count):
            assert (g0, v0) == (g1, v1) and b1 <= b0
        if eps >= 4.0:  # power: the audit detects real leakage
            assert approx.epsilon_lower_bound > {4.0: 2.5, 8.0: 4.0}[eps]


def test_rr_audit_violation_rate_is_within_the_confidence_level():
    trials, violations = 0, 0
    for eps in [1.0, 2.0, 4.0]:
        for seed in range(100, 150):
            res = rr_audit(eps=eps, m=1000, seed=seed, delta=0.0)
            violations += res.epsilon_lower_bound > eps
            trials += 1
    # Sound => violations ~ Binomial(trials, <= 0.05); the 99.9% quantile.
    assert violations <= stats.binom.ppf(0.999, trials, 0.05)


def test_perfect_attack_reaches_the_all_correct_bound():
    c = A.make_label_canaries(num_canaries=1000, num_classes=4, num_train=1000, rng=np.random.default_rng(3))
    lp = np.full((1000, 4), -50.0)
    lp[np.arange(1000), c.training_labels] = 0.0
    res = A.audit(log_probs=lp, canaries=c, delta=0.0, guess_counts=[100, 1000])
    assert res.per_count_confidence == pytest.approx(0.975)
    # With r = m the guesser says 1 for exactly m/2 canaries, so the excess
    # of one bit value over m/2 is forced to be wrong.
    forced = abs(int(c.secret_bits.sum()) - 500)
    assert [row[:2] for row in res.per_count] == [(100, 100), (1000, 1000 - forced)]
    best = max(res.per_count, key=lambda row: row[2])
    assert (res.best_num_guesses, res.best_num_correct) == best[:2]
    assert (
        res.epsilon_lower_bound
        == A.epsilon_lower_bound(
            num_canaries=1000, num_guesses=best[0], num_correct=best[1], delta=0.0, confidence=0.975
        )
        > 3.0
    )


def test_audit_defaults_bonferroni_and_json():
    res = rr_audit(eps=4.0, m=300, seed=1, delta=1e-5)
    counts = [row[0] for row in res.per_count]
    assert counts == [3, 6, 15, 30, 60, 150, 300]  # 0.01 .. 1.0 of m, >= 2
    assert res.per_count_confidence == pytest.approx(1 - 0.05 / 7)
    assert res.epsilon_lower_bound == max(row[2] for row in res.per_count)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["num_canaries"] == 300 and d["delta"] == 1e-5
    assert d["per_count"][0] == {
        "num_guesses": 3,
        "num_correct": res.per_count[0][1],
        "epsilon_lower_bound": res.per_count[0][2],
    }
    assert "Bonferroni" in d["method"]
    tiny = A.make_label_canaries(num_canaries=1, num_classes=2, num_train=1, rng=np.random.default_rng(0))
    one = A.audit(log_probs=np.zeros((1, 2)), canaries=tiny, delta=0.0)
    assert [row[0] for row in one.per_count] == [1]
    assert one.epsilon_lower_bound == 0.0


# ---------------------------------------------------------------------------
# Input validation.
# ---------------------------------------------------------------------------

_GOOD = dict(num_canaries=100, num_guesses=10, num_correct=5, delta=1e-5)
_C = A.make_label_canaries(num_canaries=5, num_classes=3, num_train=10, rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: A.epsilon_lower_bound(**{**_GOOD, "num_correct": 11}), "num_correct <= num_guesses"),
        (lambda: A.epsilon_lower_bound(**{**_GOOD, "num_guesses": 101}), "num_guesses <= num_canaries"),
        (lambda: A.epsilon_lower_bound(**{**_GOOD, "num_correct": -1}), "num_correct must be an integer >= 0"),
        (lambda: A.epsilon_lower_bound(**{**_GOOD, "num_canaries": 10.0}), "num_canaries must be an integer"),
        (lambda: A.epsilon_lower_bound(**{**_GOOD, "delta": 1.0}), "delta"),
        (lambda: A.epsilon_lower_bound(**{**_GOOD, "delta": -1e-5}), "delta"),
        (lambda: A.epsilon_lower_bound(**_GOOD, confidence=1.0), "confidence"),
        (lambda: A.epsilon_lower_bound(**_GOOD, confidence=95), "confidence"),
        (lambda: A.p_value(**_GOOD, epsilon=-1.0), "epsilon"),
        (
            lambda: A.make_label_canaries(num_canaries=11, num_classes=3, num_train=10, rng=np.random.default_rng()),
            "num_canaries .* <= num_train",
        ),
        (
            lambda: A.make_label_canaries(num_canaries=5, num_classes=1, num_train=10, rng=np.random.default_rng()),
            "num_classes must be an integer >= 2",
        ),
        (lambda: A.make_label_canaries(num_canaries=5, num_classes=3, num_train=10, rng=0), "rng"),
        (
            lambda: A.LabelCanaries(indices=[0, 0], label0=[0, 1], label1=[1, 0], secret_bits=[0, 1], num_classes=2),
            "distinct",
        ),
        (
            lambda: A.LabelCanaries(indices=[0, 1], label0=[0, 1], label1=[0, 0], secret_bits=[0, 1], num_classes=2),
            "label0 != label1",
        ),
        (
            lambda: A.LabelCanaries(indices=[0, 1], label0=[0, 1], label1=[1, 2], secret_bits=[0, 1], num_classes=2),
            "num_classes",
        ),
        (
            lambda: A.LabelCanaries(indices=[0, 1], label0=[0, 1], label1=[1, 0], secret_bits=[0, 2], num_classes=2),
            "secret_bits",
        ),
        (
            lambda: A.LabelCanaries(indices=[0, 1], label0=[0], label1=[1, 0], secret_bits=[0, 1], num_classes=2),
            "equal length",
        ),
        (lambda: A.canary_scores(log_probs=np.zeros((5, 4)), canaries=_C), r"\(m, K\) = \(5, 3\)"),
        (lambda: A.canary_scores(log_probs=np.full((5, 3), np.nan), canaries=_C), "NaN"),
        (lambda: A.guesses_from_scores(scores=np.zeros(3), num_guesses=4), "num_guesses <= len"),
        (lambda: A.guesses_from_scores(scores=[0.0, np.nan], num_guesses=1), "without NaN"),
        (lambda: A.audit(log_probs=np.zeros((5, 3)), canaries=_C, delta=0.0, guess_counts=[2, 6]), "guess_counts"),
        (lambda: A.audit(log_probs=np.zeros((5, 3)), canaries=_C, delta=0.0, guess_counts=[0]), "guess_counts entries"),
        (lambda: A.audit(log_probs=np.zeros((5, 3)), canaries=_C, delta=0.0, guess_counts=[]), "non-empty"),
        (lambda: A.audit(log_probs=np.zeros((5, 3)), canaries=_C, delta=0.5, confidence=0.0), "confidence"),
    ],
)
def test_invalid_inputs_raise_value_error_naming_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()
