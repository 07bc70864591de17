"""The label randomizers' guarantees as dp_accounting events (labeldp.accounting.label_events).

Properties checked: K-ary RR's event is RR as the mechanism draws it and re-accounts to exactly
its epsilon; binary RR at eps (the event stated for every other eps-DP randomizer) dominates
K-ary RR, the 1-D Laplace mechanism, ALIBI's two-coordinate change and random eps-DP matrices at
every epsilon' (hockey-stick divergences); compositions add up at delta = 0; a record refuses an
epsilon its event does not reach, and stores an event that rebuilds equal.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from labeldp.accounting import label_events as le
from labeldp.mechanisms import classification as cls
from labeldp.methods.base import PrivacyOutcome


def _binary_rr_delta(epsilon: float, eps_prime: float) -> float:
    """Hockey-stick divergence of binary RR at ``epsilon``, at ``e^eps_prime`` (closed form)."""
    return max(0.0, (math.exp(epsilon) - math.exp(eps_prime)) / (math.exp(epsilon) + 1))


def _matrix_delta(row_a: np.ndarray, row_b: np.ndarray, eps_prime: float) -> float:
    return float(np.maximum(row_a - math.exp(eps_prime) * row_b, 0.0).sum())


@pytest.mark.parametrize("epsilon,k", [(0.05, 10), (0.5, 10), (1.0, 2), (2.0, 10), (8.0, 10), (0.3, 100)])
def test_rr_event_is_the_mechanism_and_reaccounts_to_its_epsilon(epsilon, k):
    event = le.randomized_response_event(epsilon=epsilon, num_classes=k)
    keep = 1 - event.noise_parameter + event.noise_parameter / k
    matrix = cls.randomized_response_matrix(num_classes=k, epsilon=epsilon)
    assert keep == pytest.approx(matrix[0, 0], rel=1e-12)
    assert event.noise_parameter / k == pytest.approx(matrix[0, 1], rel=1e-12)
    got = le.label_event_epsilon(event, scale=epsilon)
    assert epsilon - 1e-9 <= got <= epsilon + le.label_event_tolerance(event, epsilon=epsilon)


@pytest.mark.parametrize("epsilon", [0.1, 0.7, 2.0, 5.0])
def test_binary_rr_dominates_every_eps_dp_randomizer(epsilon):
    """The event stated for RRWithPrior, the staircase, the Laplace mechanisms, ... bounds them."""
    rng = np.random.default_rng(int(epsilon * 10))
    grid = np.linspace(0.0, epsilon, 9)
    # K-ary RR at eps
    rr = cls.randomized_response_matrix(num_classes=10, epsilon=epsilon)
    # random eps-DP matrices: rows proportional to exp(eps * u) with u in [0, 1/2]
    mats = []
    for _ in range(20):
        w = np.exp(epsilon * rng.uniform(0, 0.5, size=(6, 12)))
        mats.append(w / w.sum(axis=1, keepdims=True))
    # Laplace: the 1-D shift by the sensitivity (regression), and ALIBI's one-hot change (two
    # coordinates by 1 each, scale 2 / eps) as a composition of two halves
    lap_1d = pld_lib.from_laplace_mechanism(parameter=1 / epsilon, value_discretization_interval=1e-5)
    lap_2d = pld_lib.from_laplace_mechanism(parameter=2 / epsilon, value_discretization_interval=1e-5).self_compose(2)
    for e in grid:
        bound = _binary_rr_delta(epsilon, e)
        assert _matrix_delta(rr[0], rr[1], e) <= bound + 1e-12
        for m in mats:
            assert max(_matrix_delta(m[i], m[j], e) for i in range(6) for j in range(6)) <= bound + 1e-12
        assert lap_1d.get_delta_for_epsilon(e) <= bound + 1e-4
        assert lap_2d.get_delta_for_epsilon(e) <= bound + 1e-4
    event = le.pure_epsilon_event(epsilon=epsilon)
    assert le.label_event_epsilon(event, scale=epsilon) == pytest.approx(epsilon, rel=1e-5)


def test_compositions_add_at_delta_zero():
    prior_then_rr = le.composed_label_event([le.pure_epsilon_event(epsilon=0.1), le.pure_epsilon_event(epsilon=0.4)])
    assert le.label_event_epsilon(prior_then_rr, scale=0.5) == pytest.approx(0.5, rel=1e-5)
    user = le.per_user_label_event(le.randomized_response_event(epsilon=0.25, num_classes=2), labels_per_user=4)
    assert le.label_event_epsilon(user, scale=1.0) == pytest.approx(1.0, rel=1e-5)
    # at delta > 0 the accountant's bound is below the sum (the records state the sum)
    assert le.label_event_epsilon(user, delta=1e-5, scale=1.0) < 1.0
    single = le.pure_epsilon_event(epsilon=1.0)
    assert le.composed_label_event([single]) is single
    assert le.per_user_label_event(single, labels_per_user=1) is single


def test_dp_accounting_0_6_ignores_the_count_of_a_self_composed_rr():
    """Why label_event_epsilon writes self-compositions out: the PLD accountant drops the count of
    a self-composed RR event (dp_accounting 0.6.0). When this test fails, upstream fixed it."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import pld_privacy_accountant

    rr = le.randomized_response_event(epsilon=0.25, num_classes=2)
    acc = pld_privacy_accountant.PLDAccountant(NeighboringRelation.REPLACE_ONE, value_discretization_interval=1e-6)
    acc.compose(dp_event.SelfComposedDpEvent(rr, 4))
    assert acc.get_epsilon(0.0) == pytest.approx(0.25, rel=1e-4)  # wrong upstream: 4 x 0.25 is 1.0
    assert le.label_event_epsilon(dp_event.SelfComposedDpEvent(rr, 4), scale=1.0) == pytest.approx(1.0, rel=1e-5)


def test_a_record_refuses_an_epsilon_its_event_does_not_reach():
    event = le.randomized_response_event(epsilon=2.0, num_classes=10)
    outcome = PrivacyOutcome(
        epsilon=1.0, delta=0.0, mechanism="rr", neighboring_relation="label_substitution", event=event
    )
    with pytest.raises(ValueError, match="does not hold"):
        outcome.to_dict(target_epsilon=1.0)
    # stating more than the event needs is allowed (conservative), and the event is stored
    d = PrivacyOutcome(
        epsilon=2.5, delta=0.0, mechanism="rr", neighboring_relation="label_substitution", event=event
    ).to_dict(target_epsilon=2.5)
    assert d["event_relation"] == "REPLACE_ONE" and d["dp_accounting_relation"] == "REPLACE_ONE"
    assert le.label_event_from_record(d) == event


def test_records_name_dp_accountings_relation():
    d = PrivacyOutcome(epsilon=1.0, delta=1e-5, mechanism="m", neighboring_relation="add_or_remove").to_dict(
        target_epsilon=1.0
    )
    assert d["dp_accounting_relation"] == "ADD_OR_REMOVE_ONE" and "event" not in d
    assert le.label_event_from_record(d) is None


def test_bad_input_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="positive finite"):
        le.randomized_response_event(epsilon=0.0, num_classes=10)
    with pytest.raises(ValueError, match="positive finite"):
        le.pure_epsilon_event(epsilon=math.inf)
    with pytest.raises(ValueError, match="num_classes must be an integer >= 2"):
        le.randomized_response_event(epsilon=1.0, num_classes=1)
    with pytest.raises(ValueError, match="labels_per_user"):
        le.per_user_label_event(le.pure_epsilon_event(epsilon=1.0), labels_per_user=0)
    with pytest.raises(ValueError, match="non-empty"):
        le.composed_label_event([])
    with pytest.raises(ValueError, match="REPLACE_ONE"):
        le.label_event_from_record({"event": {}, "event_relation": "ADD_OR_REMOVE_ONE"})
