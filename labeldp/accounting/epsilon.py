"""Epsilon of DP-SGD events and noise calibration, under a neighbouring relation.

All numbers come from ``dp_accounting`` (PLD by default, RDP for add/remove as
an option); see the package docstring of :mod:`labeldp.accounting`.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import dp_accounting
from dp_accounting import dp_event as dp_event_lib
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from labeldp.accounting.checks import (
    DEFAULT_RELATION,
    RELATIVE_DISCRETIZATION,
    Accountant,
    MAX_VDI,
    MIN_VDI,
    SIGMA_MAX,
    SIGMA_MIN,
    SIGMA_RTOL,
    check_accountant,
    check_accountant_relation,
    check_delta,
    check_positive,
    check_sampling_rate,
    check_steps,
    check_vdi,
    LABEL_SUBSTITUTION,
    Relation,
    to_relation,
)

# ---------------------------------------------------------------------------
# Events and accountants.
# ---------------------------------------------------------------------------


def dpsgd_event(
    *, noise_multiplier: float, sampling_rate: float, steps: int, amplification: bool = True
) -> dp_event_lib.DpEvent:
    """The ``dp_accounting`` event of a DP-SGD / LabelDP-Pro run.

    Args:
      noise_multiplier: sigma, noise standard deviation / clipping norm, > 0.
      sampling_rate: Poisson sampling rate q = n1 / n, in (0, 1].
      steps: number of noisy gradient steps, >= 1.
      amplification: if False, the subsampling is ignored (q treated as 1), as
        required for SelfSpan / SelfConv (000 Section 3.4).

    Returns:
      ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)),
      steps)``, or ``SelfComposedDpEvent(GaussianDpEvent(sigma), steps)``
      without amplification.
    """
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    q = check_sampling_rate(sampling_rate)
    t = check_steps(steps)
    if not isinstance(amplification, bool):
        raise ValueError(f"amplification must be True or False, got {amplification!r}.")
    gaussian = dp_accounting.GaussianDpEvent(sigma)
    step_event = dp_accounting.PoissonSampledDpEvent(q, gaussian) if amplification else gaussian
    return dp_accounting.SelfComposedDpEvent(step_event, t)


def make_accountant(
    accountant: Accountant = "pld",
    *,
    value_discretization_interval: Optional[float] = None,
    neighboring_relation: Relation | str = DEFAULT_RELATION,
) -> dp_accounting.PrivacyAccountant:
    """A fresh ``dp_accounting`` accountant for ``neighboring_relation``.

    Args:
      accountant: 'pld' (``PLDAccountant``) or 'rdp' (``RdpAccountant`` with
        its default orders).
      value_discretization_interval: PLD grid step; ``1e-3`` when None (the
        public functions pass ``RELATIVE_DISCRETIZATION * epsilon`` instead).
        Ignored for RDP.
      neighboring_relation: ``'add_or_remove'`` (default) or
        ``'label_substitution'`` (PLD only).

    Returns:
      An empty accountant.
    """
    accountant = check_accountant(accountant)
    relation = to_relation(neighboring_relation)
    check_accountant_relation(accountant, relation)
    if accountant == "rdp":
        return rdp_privacy_accountant.RdpAccountant()
    vdi = check_vdi(value_discretization_interval)
    return pld_privacy_accountant.PLDAccountant(
        neighboring_relation=relation, value_discretization_interval=1e-3 if vdi is None else vdi
    )


def _clamp_vdi(vdi: float) -> float:
    return min(MAX_VDI, max(MIN_VDI, vdi))


def _epsilon(
    event: dp_event_lib.DpEvent,
    delta: float,
    accountant: str,
    vdi: Optional[float],
    relation: Relation = DEFAULT_RELATION,
) -> float:
    acc = make_accountant(accountant, value_discretization_interval=vdi, neighboring_relation=relation)
    return float(acc.compose(event).get_epsilon(delta))


def _pld_epsilon_adaptive(
    event: dp_event_lib.DpEvent, delta: float, relation: Relation = DEFAULT_RELATION
) -> tuple[float, float]:
    """PLD epsilon with VDI <= RELATIVE_DISCRETIZATION * epsilon."""
    vdi = MAX_VDI
    eps = _epsilon(event, delta, "pld", vdi, relation)
    for _ in range(8):
        wanted = _clamp_vdi(RELATIVE_DISCRETIZATION * eps)
        if vdi <= wanted:
            break
        vdi = wanted
        eps = _epsilon(event, delta, "pld", vdi, relation)
    return eps, vdi


def event_epsilon(
    event: dp_event_lib.DpEvent,
    *,
    delta: float,
    neighboring_relation: Relation | str,
    accountant: Accountant = "pld",
    value_discretization_interval: Optional[float] = None,
) -> tuple[float, Optional[float]]:
    """Epsilon of any recorded event at ``delta`` under a relation.

    Used to re-account stored records (their :func:`describe_event` dicts)
    without retraining.

    Args:
      event: a ``dp_accounting`` event.
      delta: in (0, 1).
      neighboring_relation: ``'add_or_remove'`` or ``'label_substitution'``.
      accountant: 'pld' (default) or 'rdp' (add/remove only).
      value_discretization_interval: fixed PLD grid step; None adapts it to
        ``RELATIVE_DISCRETIZATION * epsilon``.

    Returns:
      ``(epsilon, vdi used)`` (vdi None for RDP).
    """
    delta = check_delta(delta)
    accountant = check_accountant(accountant)
    relation = to_relation(neighboring_relation)
    check_accountant_relation(accountant, relation)
    vdi = check_vdi(value_discretization_interval)
    if accountant == "rdp":
        return _epsilon(event, delta, "rdp", None, relation), None
    if vdi is not None:
        return _epsilon(event, delta, "pld", vdi, relation), vdi
    return _pld_epsilon_adaptive(event, delta, relation)


def dpsgd_epsilon(
    *,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    amplification: bool = True,
    accountant: Accountant = "pld",
    value_discretization_interval: Optional[float] = None,
    neighboring_relation: Relation | str = DEFAULT_RELATION,
) -> float:
    """Epsilon of DP-SGD at ``delta``, from ``dp_accounting``.

    Guarantee: the run is ``(epsilon, delta)``-DP under ``neighboring_relation``
    (``'label_substitution'``: label DP, 000 Definition 2, exactly;
    ``'add_or_remove'``: the papers' convention); the PLD value is a
    pessimistic upper bound.

    Args:
      noise_multiplier: sigma, > 0.
      sampling_rate: Poisson rate q = n1 / n, in (0, 1].
      steps: number of steps, >= 1.
      delta: target delta, in (0, 1).
      amplification: see :func:`dpsgd_event`.
      accountant: 'pld' (default) or 'rdp' (add/remove only).
      value_discretization_interval: fixed PLD grid step; default None picks
        ``RELATIVE_DISCRETIZATION * epsilon`` adaptively (module docstring).
      neighboring_relation: ``'add_or_remove'`` (default) or
        ``'label_substitution'``.

    Returns:
      epsilon.
    """
    event = dpsgd_event(
        noise_multiplier=noise_multiplier, sampling_rate=sampling_rate, steps=steps, amplification=amplification
    )
    return event_epsilon(
        event,
        delta=delta,
        neighboring_relation=neighboring_relation,
        accountant=accountant,
        value_discretization_interval=value_discretization_interval,
    )[0]


def _bracket(eps_of: Callable[[float], float], target: float, start: float) -> tuple[float, float]:
    """Geometric search for lo < hi with eps(lo) > target >= eps(hi)."""
    sigma = start
    if eps_of(sigma) > target:
        lo = sigma
        hi = 2.0 * sigma
        while eps_of(hi) > target:
            lo, hi = hi, 2.0 * hi
            if hi > SIGMA_MAX:
                raise ValueError(
                    f"target_epsilon={target} needs noise_multiplier > {SIGMA_MAX:g}; "
                    "increase target_epsilon or reduce steps / sampling_rate."
                )
    else:
        hi = sigma
        lo = 0.5 * sigma
        while eps_of(lo) <= target:
            lo, hi = 0.5 * lo, lo
            if lo < SIGMA_MIN:
                raise ValueError(
                    f"target_epsilon={target} is met with noise_multiplier < "
                    f"{SIGMA_MIN:g}; that is no meaningful privacy -- lower "
                    "target_epsilon."
                )
    return lo, hi


def calibrate_sigma_for(
    *,
    target_epsilon: float,
    target_delta: float,
    sampling_rate: float,
    steps: int,
    amplification: bool,
    accountant: str,
    vdi: Optional[float],
    relation: Relation,
) -> tuple[float, Optional[float]]:
    """Returns (sigma, vdi used)."""

    def make_event(sigma: float) -> dp_event_lib.DpEvent:
        return dpsgd_event(
            noise_multiplier=sigma, sampling_rate=sampling_rate, steps=steps, amplification=amplification
        )

    def eps_with(acc_vdi: Optional[float]) -> Callable[[float], float]:
        return lambda s: _epsilon(make_event(s), target_delta, accountant, acc_vdi, relation)

    # Start the search at the sigma that the exact (analytic) Gaussian
    # mechanism composed `steps` times needs without subsampling (sensitivity 2
    # under label substitution): it is exact for amplification=False and an
    # upper bound otherwise, so the search only visits sigmas whose epsilon is
    # near or below the target (cheap for PLD).
    sensitivity = 2.0 if relation is LABEL_SUBSTITUTION else 1.0
    start = dp_accounting.get_sigma_gaussian(target_epsilon, target_delta) * math.sqrt(steps) * sensitivity
    if accountant == "rdp":
        vdi = None
        lo, hi = _bracket(eps_with(None), target_epsilon, start)
    else:
        if vdi is None:
            vdi = _clamp_vdi(RELATIVE_DISCRETIZATION * target_epsilon)
        # Cheap coarse bracket first (10x coarser grid, still pessimistic, so
        # eps_fine(hi) <= eps_coarse(hi) <= target), then fix the lower end.
        coarse = _clamp_vdi(10.0 * vdi)
        lo, hi = _bracket(eps_with(coarse), target_epsilon, start)
        fine = eps_with(vdi)
        if coarse != vdi:
            while fine(lo) <= target_epsilon:
                lo, hi = 0.5 * lo, lo
                if lo < SIGMA_MIN:
                    raise ValueError(
                        f"target_epsilon={target_epsilon} is met with noise_multiplier "
                        f"< {SIGMA_MIN:g}; lower target_epsilon."
                    )

    sigma = dp_accounting.calibrate_dp_mechanism(
        lambda: make_accountant(accountant, value_discretization_interval=vdi, neighboring_relation=relation),
        make_event,
        target_epsilon,
        target_delta,
        bracket_interval=dp_accounting.ExplicitBracketInterval(lo, hi),
        tol=SIGMA_RTOL * lo,
    )
    return float(sigma), vdi


def check_calibration(target_epsilon, target_delta, accountant, sampling_rate, steps, vdi, relation):
    target_epsilon = check_positive(target_epsilon, "target_epsilon")
    target_delta = check_delta(target_delta, "target_delta")
    accountant = check_accountant(accountant)
    relation = to_relation(relation)
    check_accountant_relation(accountant, relation)
    return (
        target_epsilon,
        target_delta,
        accountant,
        check_sampling_rate(sampling_rate),
        check_steps(steps),
        check_vdi(vdi),
        relation,
    )


def calibrate_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    sampling_rate: float,
    steps: int,
    amplification: bool = True,
    accountant: Accountant = "pld",
    value_discretization_interval: Optional[float] = None,
    neighboring_relation: Relation | str = DEFAULT_RELATION,
) -> float:
    """Smallest noise multiplier (to 0.01 %) whose run is (eps, delta)-DP.

    Uses ``dp_accounting.calibrate_dp_mechanism`` (Brent's method with a final
    check that the returned sigma's epsilon does not exceed the target) on a
    bracket found by geometric search, started at the analytic Gaussian sigma
    without subsampling (``dp_accounting.get_sigma_gaussian``). The achieved
    epsilon under ``neighboring_relation``, with the same accountant settings,
    is ``<= target_epsilon`` and within 1 % of it (0.02 % in the measurements;
    :func:`account_dpsgd` records it).

    Args:
      target_epsilon: > 0.
      target_delta: in (0, 1).
      sampling_rate: Poisson rate q = n1 / n, in (0, 1].
      steps: number of steps, >= 1.
      amplification: see :func:`dpsgd_event`.
      accountant: 'pld' (default) or 'rdp' (add/remove only).
      value_discretization_interval: PLD grid step; default
        ``RELATIVE_DISCRETIZATION * target_epsilon``.
      neighboring_relation: the relation the target is met under:
        ``'add_or_remove'`` (default, the papers' convention) or
        ``'label_substitution'`` (label DP exactly; about twice the sigma).

    Returns:
      sigma.
    """
    (target_epsilon, target_delta, accountant, q, t, vdi, relation) = check_calibration(
        target_epsilon,
        target_delta,
        accountant,
        sampling_rate,
        steps,
        value_discretization_interval,
        neighboring_relation,
    )
    return calibrate_sigma_for(
        target_epsilon=target_epsilon,
        target_delta=target_delta,
        sampling_rate=q,
        steps=t,
        amplification=amplification,
        accountant=accountant,
        vdi=vdi,
        relation=relation,
    )[0]
