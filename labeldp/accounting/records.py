"""The :class:`AccountingRecord` every DP-SGD-family run stores, and how it is made.

A record states the epsilon of the run under the relation that calibrated its
noise and under every other relation (``epsilon_by_relation``), with the
accounted event, so it can be re-accounted later without retraining.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
from typing import Any, Optional

from dp_accounting import dp_event as dp_event_lib

from labeldp.accounting.checks import (
    DEFAULT_RELATION,
    RELATIONS,
    Accountant,
    check_accountant,
    check_accountant_relation,
    check_delta,
    check_positive,
    check_sampling_rate,
    check_steps,
    check_vdi,
    Relation,
    relation_name,
    to_relation,
)
from labeldp.accounting.epsilon import calibrate_sigma_for, check_calibration, dpsgd_event, event_epsilon
from labeldp.accounting.events import describe_event, event_from_description

# ---------------------------------------------------------------------------
# Records.
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AccountingRecord:
    """What was accounted for a run, to be written next to its results.

    Attributes:
      accountant: 'pld' or 'rdp'.
      noise_multiplier: sigma used.
      sampling_rate: the Poisson rate of the run (recorded even when
        ``amplification`` is False, in which case the accountant ignored it).
      steps: number of noisy steps.
      amplification: whether amplification by subsampling was used.
      delta: delta of the guarantee.
      epsilon: epsilon computed by ``dp_accounting`` for this event under
        ``neighboring_relation``.
      target_epsilon: calibration target, or None if sigma was given.
      value_discretization_interval: PLD grid step (None for RDP).
      neighboring_relation: the relation ``epsilon`` (and the calibration) is
        for: 'add_or_remove' or 'label_substitution'.
      dp_accounting_version: installed ``dp_accounting`` version.
      event: :func:`describe_event` of the accounted event.
      event_repr: ``repr`` of the event.
      epsilon_by_relation: the run's epsilon at ``delta`` under every relation
        of :data:`RELATIONS` (the one of ``neighboring_relation`` is
        ``epsilon``).
      epsilon_by_relation_accountant: which accountant gave each of those
        ('pld' for label substitution, whatever ``accountant`` is).
    """

    accountant: str
    noise_multiplier: float
    sampling_rate: float
    steps: int
    amplification: bool
    delta: float
    epsilon: float
    target_epsilon: Optional[float]
    value_discretization_interval: Optional[float]
    neighboring_relation: str
    dp_accounting_version: str
    event: dict[str, Any]
    event_repr: str
    epsilon_by_relation: dict[str, float] = dataclasses.field(default_factory=dict)
    epsilon_by_relation_accountant: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain (JSON-serialisable) dict of all fields."""
        return dataclasses.asdict(self)

    def dp_event(self) -> dp_event_lib.DpEvent:
        """The accounted ``DpEvent``, rebuilt from :attr:`event`."""
        return event_from_description(self.event)


def installed_dp_accounting_version() -> str:
    try:
        return importlib.metadata.version("dp-accounting")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def epsilons_by_relation(
    event: dp_event_lib.DpEvent, *, delta: float, accountant: str = "pld", known: Optional[dict] = None
) -> tuple[dict[str, float], dict[str, str]]:
    """The event's epsilon under every relation of :data:`RELATIONS`.

    Args:
      event: the accounted event.
      delta: in (0, 1).
      accountant: the run's accountant; relations it cannot analyse (RDP:
        label substitution) are accounted with PLD.
      known: ``{relation: epsilon}`` already computed with ``accountant`` (not
        recomputed).

    Returns:
      ``({relation: epsilon}, {relation: accountant used})``.
    """
    known = dict(known or {})
    eps, used = {}, {}
    for relation in RELATIONS:
        acc = accountant if (accountant == "pld" or relation == "add_or_remove") else "pld"
        if relation in known:
            eps[relation] = float(known[relation])
        else:
            eps[relation] = float(event_epsilon(event, delta=delta, neighboring_relation=relation, accountant=acc)[0])
        used[relation] = acc
    return eps, used


def _record(
    *,
    sigma: float,
    q: float,
    t: int,
    amplification: bool,
    delta: float,
    accountant: str,
    vdi: Optional[float],
    target_epsilon: Optional[float],
    relation: Relation,
) -> AccountingRecord:
    event = dpsgd_event(noise_multiplier=sigma, sampling_rate=q, steps=t, amplification=amplification)
    eps, vdi = event_epsilon(
        event, delta=delta, neighboring_relation=relation, accountant=accountant, value_discretization_interval=vdi
    )
    by_rel, by_acc = epsilons_by_relation(
        event, delta=delta, accountant=accountant, known={relation_name(relation): eps}
    )
    return AccountingRecord(
        accountant=accountant,
        noise_multiplier=float(sigma),
        sampling_rate=float(q),
        steps=int(t),
        amplification=bool(amplification),
        delta=float(delta),
        epsilon=float(eps),
        target_epsilon=None if target_epsilon is None else float(target_epsilon),
        value_discretization_interval=vdi,
        neighboring_relation=relation_name(relation),
        dp_accounting_version=installed_dp_accounting_version(),
        event=describe_event(event),
        event_repr=repr(event),
        epsilon_by_relation=by_rel,
        epsilon_by_relation_accountant=by_acc,
    )


def dpsgd_record(
    *,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    amplification: bool = True,
    accountant: Accountant = "pld",
    value_discretization_interval: Optional[float] = None,
    neighboring_relation: Relation | str = DEFAULT_RELATION,
) -> AccountingRecord:
    """:class:`AccountingRecord` for a run with a given noise multiplier.

    Args: as :func:`dpsgd_epsilon`.

    Returns:
      The record, with ``epsilon = dpsgd_epsilon(...)`` under
      ``neighboring_relation`` and the epsilon under every relation.
    """
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    q = check_sampling_rate(sampling_rate)
    t = check_steps(steps)
    delta = check_delta(delta)
    accountant = check_accountant(accountant)
    relation = to_relation(neighboring_relation)
    check_accountant_relation(accountant, relation)
    vdi = check_vdi(value_discretization_interval)
    return _record(
        sigma=sigma,
        q=q,
        t=t,
        amplification=amplification,
        delta=delta,
        accountant=accountant,
        vdi=vdi,
        target_epsilon=None,
        relation=relation,
    )


def account_dpsgd(
    *,
    target_epsilon: float,
    target_delta: float,
    sampling_rate: float,
    steps: int,
    amplification: bool = True,
    accountant: Accountant = "pld",
    value_discretization_interval: Optional[float] = None,
    neighboring_relation: Relation | str = DEFAULT_RELATION,
) -> AccountingRecord:
    """Calibrates sigma for (target_epsilon, target_delta), then re-accounts.

    Guarantee: the returned record's ``epsilon`` (computed by ``dp_accounting``
    with the same accountant settings and relation as the calibration) is
    ``<= target_epsilon``; the run with ``record.noise_multiplier`` is
    ``(record.epsilon, target_delta)``-DP under ``neighboring_relation`` and
    ``(record.epsilon_by_relation[r], target_delta)``-DP under each relation r.

    Args: as :func:`calibrate_noise_multiplier`.

    Returns:
      :class:`AccountingRecord`.
    """
    checked = check_calibration(
        target_epsilon,
        target_delta,
        accountant,
        sampling_rate,
        steps,
        value_discretization_interval,
        neighboring_relation,
    )
    return _account_checked(*checked, bool(amplification))


@functools.lru_cache(maxsize=4096)
def _account_checked(target_epsilon, target_delta, accountant, q, t, vdi, relation, amplification) -> AccountingRecord:
    """:func:`account_dpsgd` on checked arguments, memoized: the accountant is a
    pure function of them, and the runs of a sweep that share eps, q and steps
    (000 Table 8's learning rates and clip norms, every seed) would otherwise
    calibrate the same sigma again (0.3-1.2 s each)."""
    sigma, vdi = calibrate_sigma_for(
        target_epsilon=target_epsilon,
        target_delta=target_delta,
        sampling_rate=q,
        steps=t,
        amplification=amplification,
        accountant=accountant,
        vdi=vdi,
        relation=relation,
    )
    return _record(
        sigma=sigma,
        q=q,
        t=t,
        amplification=amplification,
        delta=target_delta,
        accountant=accountant,
        vdi=vdi,
        target_epsilon=target_epsilon,
        relation=relation,
    )
