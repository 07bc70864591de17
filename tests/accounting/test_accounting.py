"""Tests for labeldp.accounting (a thin layer over dp_accounting)."""

import json
import math

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant
import pytest

from labeldp import accounting as A

Q = 1024 / 60000  # MNIST-like batch 1024 of 60k
STEPS = 600
DELTA = 1e-5


def direct_event(sigma, q, steps, amplification=True):
    g = dp_accounting.GaussianDpEvent(sigma)
    inner = dp_accounting.PoissonSampledDpEvent(q, g) if amplification else g
    return dp_accounting.SelfComposedDpEvent(inner, steps)


@pytest.mark.parametrize("amplification", [True, False])
@pytest.mark.parametrize("sigma", [0.7, 1.5, 8.0])
def test_epsilon_equals_dp_accounting_direct(sigma, amplification):
    if not amplification:
        sigma *= 30  # keep epsilon (and the PLD grid) in the range of interest
    direct_pld = (
        pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
        .compose(direct_event(sigma, Q, STEPS, amplification))
        .get_epsilon(DELTA)
    )
    ours = A.dpsgd_epsilon(
        noise_multiplier=sigma,
        sampling_rate=Q,
        steps=STEPS,
        delta=DELTA,
        amplification=amplification,
        value_discretization_interval=1e-3,
    )
    assert ours == direct_pld
    direct_rdp = (
        rdp_privacy_accountant.RdpAccountant().compose(direct_event(sigma, Q, STEPS, amplification)).get_epsilon(DELTA)
    )
    ours_rdp = A.dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=Q, steps=STEPS, delta=DELTA, amplification=amplification, accountant="rdp"
    )
    assert ours_rdp == direct_rdp


@pytest.mark.parametrize("sigma", [0.6, 2.0, 30.0, 120.0])
def test_default_pld_is_accurate_and_pessimistic(sigma):
    # Adaptive grid vs. a very fine grid: within 0.5 %, and never below the
    # exact value by more than the fine grid's own error.
    ours = A.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=Q, steps=STEPS, delta=DELTA)
    fine = A.dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=Q, steps=STEPS, delta=DELTA, value_discretization_interval=ours * 1e-4
    )
    assert fine * (1 - 1e-4) <= ours <= fine * 1.005


def test_no_amplification_is_gaussian_composition():
    # T-fold Gaussian with sigma == one Gaussian with sigma / sqrt(T); compare
    # with dp_accounting's exact (analytic) Gaussian epsilon.
    for sigma in (20.0, 90.0):
        ours = A.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=Q, steps=STEPS, delta=DELTA, amplification=False)
        exact = dp_accounting.get_epsilon_gaussian(sigma / math.sqrt(STEPS), DELTA)
        assert exact <= ours <= exact * 1.005


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_epsilon_decreases_with_sigma(accountant):
    eps = [
        A.dpsgd_epsilon(noise_multiplier=s, sampling_rate=Q, steps=STEPS, delta=DELTA, accountant=accountant)
        for s in (0.6, 0.8, 1.0, 2.0, 5.0, 20.0)
    ]
    assert all(a > b for a, b in zip(eps, eps[1:]))


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_no_amplification_costs_more(accountant):
    for sigma in (0.8, 3.0, 50.0):
        amp = A.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=Q, steps=STEPS, delta=DELTA, accountant=accountant)
        no_amp = A.dpsgd_epsilon(
            noise_multiplier=sigma,
            sampling_rate=Q,
            steps=STEPS,
            delta=DELTA,
            amplification=False,
            accountant=accountant,
        )
        assert no_amp > amp
    # With q = 1 subsampling changes nothing.
    kw = dict(noise_multiplier=10.0, sampling_rate=1.0, steps=50, delta=DELTA, value_discretization_interval=1e-3)
    assert A.dpsgd_epsilon(**kw) == pytest.approx(A.dpsgd_epsilon(amplification=False, **kw), rel=1e-3)


@pytest.mark.parametrize("sigma", [0.7, 1.2, 5.0])
@pytest.mark.parametrize("amplification", [True, False])
def test_rdp_and_pld_agree_up_to_a_sane_factor(sigma, amplification):
    kw = dict(
        noise_multiplier=sigma * (1 if amplification else 30),
        sampling_rate=Q,
        steps=STEPS,
        delta=DELTA,
        amplification=amplification,
    )
    pld = A.dpsgd_epsilon(accountant="pld", **kw)
    rdp = A.dpsgd_epsilon(accountant="rdp", **kw)
    # RDP is a looser upper bound than the (near-tight) PLD bound.
    assert pld <= rdp * 1.001
    assert rdp <= 1.6 * pld


@pytest.mark.parametrize("amplification", [True, False])
@pytest.mark.parametrize("target", [0.01, 0.1, 1.0, 8.0])
def test_calibration_pld(target, amplification):
    rec = A.account_dpsgd(
        target_epsilon=target, target_delta=DELTA, sampling_rate=Q, steps=STEPS, amplification=amplification
    )
    assert isinstance(rec, A.AccountingRecord)
    assert 0.99 * target <= rec.epsilon <= target
    # Re-accounting from scratch with the recorded settings gives the same.
    assert rec.epsilon == A.dpsgd_epsilon(
        noise_multiplier=rec.noise_multiplier,
        sampling_rate=Q,
        steps=STEPS,
        delta=DELTA,
        amplification=amplification,
        value_discretization_interval=rec.value_discretization_interval,
    )
    # The default (adaptive) accounting of the calibrated sigma agrees.
    eps_default = A.dpsgd_epsilon(
        noise_multiplier=rec.noise_multiplier, sampling_rate=Q, steps=STEPS, delta=DELTA, amplification=amplification
    )
    assert eps_default == pytest.approx(rec.epsilon, rel=2e-3)
    # sigma is (near-)minimal: 1 % less noise overshoots the target.
    assert (
        A.dpsgd_epsilon(
            noise_multiplier=0.99 * rec.noise_multiplier,
            sampling_rate=Q,
            steps=STEPS,
            delta=DELTA,
            amplification=amplification,
        )
        > target
    )
    sigma = A.calibrate_noise_multiplier(
        target_epsilon=target, target_delta=DELTA, sampling_rate=Q, steps=STEPS, amplification=amplification
    )
    assert sigma == rec.noise_multiplier


@pytest.mark.parametrize("target,amplification", [(0.1, True), (2.0, True), (1.0, False)])
def test_calibration_rdp(target, amplification):
    rec = A.account_dpsgd(
        target_epsilon=target,
        target_delta=DELTA,
        sampling_rate=Q,
        steps=STEPS,
        amplification=amplification,
        accountant="rdp",
    )
    assert 0.99 * target <= rec.epsilon <= target
    assert rec.value_discretization_interval is None
    direct = (
        rdp_privacy_accountant.RdpAccountant()
        .compose(direct_event(rec.noise_multiplier, Q, STEPS, amplification))
        .get_epsilon(DELTA)
    )
    assert rec.epsilon == direct
    pld_sigma = A.calibrate_noise_multiplier(
        target_epsilon=target, target_delta=DELTA, sampling_rate=Q, steps=STEPS, amplification=amplification
    )
    assert pld_sigma < rec.noise_multiplier  # PLD is tighter, needs less noise


def test_record_contents_and_event_round_trip():
    rec = A.account_dpsgd(target_epsilon=1.0, target_delta=DELTA, sampling_rate=Q, steps=STEPS)
    d = rec.to_dict()
    json.dumps(d)  # serialisable
    assert d["accountant"] == "pld" and d["steps"] == STEPS
    assert d["sampling_rate"] == Q and d["amplification"] is True
    assert d["delta"] == DELTA and d["target_epsilon"] == 1.0
    assert d["neighboring_relation"] == "add_or_remove"
    assert d["event"]["class_name"] == "SelfComposedDpEvent"
    assert d["event"]["count"] == STEPS
    inner = d["event"]["event"]
    assert inner["class_name"] == "PoissonSampledDpEvent"
    assert inner["sampling_probability"] == Q
    assert inner["event"]["noise_multiplier"] == rec.noise_multiplier
    expected = A.dpsgd_event(noise_multiplier=rec.noise_multiplier, sampling_rate=Q, steps=STEPS)
    assert rec.dp_event() == expected
    assert A.event_from_description(json.loads(json.dumps(d["event"]))) == expected
    assert rec.event_repr == repr(expected)
    # The rebuilt event accounts to the recorded epsilon.
    acc = A.make_accountant("pld", value_discretization_interval=rec.value_discretization_interval)
    assert acc.compose(rec.dp_event()).get_epsilon(DELTA) == rec.epsilon

    no_amp = A.dpsgd_record(noise_multiplier=50.0, sampling_rate=Q, steps=10, delta=DELTA, amplification=False)
    assert no_amp.event["event"]["class_name"] == "GaussianDpEvent"
    assert no_amp.target_epsilon is None
    assert no_amp.epsilon == A.dpsgd_epsilon(
        noise_multiplier=50.0, sampling_rate=Q, steps=10, delta=DELTA, amplification=False
    )
    with pytest.raises(Exception):
        rec.epsilon = 0.0  # frozen


GOOD = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=100, delta=1e-5)
GOOD_CAL = dict(target_epsilon=1.0, target_delta=1e-5, sampling_rate=0.01, steps=100)


@pytest.mark.parametrize(
    "fn,kwargs,match",
    [
        (A.dpsgd_epsilon, dict(GOOD, sampling_rate=0.0), "sampling_rate"),
        (A.dpsgd_epsilon, dict(GOOD, sampling_rate=1.5), "sampling_rate"),
        (A.dpsgd_epsilon, dict(GOOD, steps=0), "steps"),
        (A.dpsgd_epsilon, dict(GOOD, steps=2.5), "steps"),
        (A.dpsgd_epsilon, dict(GOOD, delta=0.0), "delta"),
        (A.dpsgd_epsilon, dict(GOOD, delta=1.0), "delta"),
        (A.dpsgd_epsilon, dict(GOOD, noise_multiplier=0.0), "noise_multiplier"),
        (A.dpsgd_epsilon, dict(GOOD, accountant="gdp"), "accountant"),
        (A.dpsgd_epsilon, dict(GOOD, value_discretization_interval=-1.0), "value_discretization_interval"),
        (A.dpsgd_epsilon, dict(GOOD, amplification="yes"), "amplification"),
        (A.calibrate_noise_multiplier, dict(GOOD_CAL, target_epsilon=0.0), "target_epsilon"),
        (A.calibrate_noise_multiplier, dict(GOOD_CAL, target_epsilon=-1.0), "target_epsilon"),
        (A.calibrate_noise_multiplier, dict(GOOD_CAL, target_delta=0.0), "target_delta"),
        (A.calibrate_noise_multiplier, dict(GOOD_CAL, sampling_rate=2.0), "sampling_rate"),
        (A.calibrate_noise_multiplier, dict(GOOD_CAL, accountant="PLD"), "accountant"),
        (A.account_dpsgd, dict(GOOD_CAL, steps=-3), "steps"),
        (A.dpsgd_event, dict(noise_multiplier=1.0, sampling_rate=0.0, steps=1), "sampling_rate"),
        (A.event_from_description, dict(description={"class_name": "os"}), "module"),
    ],
)
def test_bad_input_raises_value_error(fn, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fn(**kwargs)


def test_account_dpsgd_is_memoized_and_equal_to_a_fresh_calibration():
    """A sweep's runs that share eps, q and steps calibrate once; the cached record is the one a
    fresh calibration returns (the accountant is a pure function of its checked arguments)."""
    from labeldp.accounting import records

    kw = dict(target_epsilon=0.7, target_delta=1e-5, sampling_rate=0.03, steps=40)
    first = A.account_dpsgd(**kw)
    assert A.account_dpsgd(**kw) is first
    fresh = records._account_checked.__wrapped__(0.7, 1e-5, "pld", 0.03, 40, None, A.DEFAULT_RELATION, True)
    assert fresh == first
    assert A.account_dpsgd(**{**kw, "steps": 41}) != first
