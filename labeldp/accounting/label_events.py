"""The guarantees of the label randomizers as ``dp_accounting`` events.

A label randomizer (RR, RRWithPrior, ALIBI's Laplace, 003's regression randomizers, ...) queries
each training label once; its guarantee is pure epsilon-label-DP under label substitution, which
is ``dp_accounting``'s ``REPLACE_ONE`` relation for one label. This module states that guarantee
as a ``DpEvent`` that a record stores (``privacy.event``) and that anyone can re-account with the
PLD accountant (:func:`label_event_epsilon`), instead of a sentence in ``privacy.mechanism``:

* K-ary randomized response at epsilon (001 eq. 1: keep the label with probability
  ``e^eps / (e^eps + K - 1)``) is exactly ``RandomizedResponseDpEvent(p, K)`` with
  ``p = K / (e^eps + K - 1)`` (with probability ``p`` a uniform bucket, the true one included).
* Any other epsilon-DP randomizer (RRWithPrior, the staircase, 003's optimal unbiased randomizer,
  the Laplace mechanisms, the discrete-Laplace histograms of a prior) is stated by
  :func:`pure_epsilon_event`: binary randomized response at epsilon, whose privacy region contains
  that of every epsilon-DP mechanism (Kairouz, Oh and Viswanath 2015, Theorem 2.4), so accounting
  it bounds the randomizer at every delta and is exact at delta = 0. (``dp_accounting``'s
  ``LaplaceDpEvent`` cannot be used for delta = 0: its PLD truncates the tails, and measured with
  dp_accounting 0.6.0 its epsilon at delta = 0 is infinite; it has no ``REPLACE_ONE`` analysis.)
* A budget split (a private prior at eps_p, then a randomizer at eps_r) is a
  ``ComposedDpEvent``, as is 002's Hybrid (RR at eps1 on every label, then DP-SGD's event: its
  label-substitution epsilon is checked against the sum the record states); a user's k labels each randomised at eps / k (000 Table 7's user-level RR,
  group privacy) are ``SelfComposedDpEvent(event, k)``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping, Sequence

import dp_accounting
from dp_accounting import dp_event as dp_event_lib
from dp_accounting.pld import pld_privacy_accountant

from labeldp.accounting.checks import RELATIVE_DISCRETIZATION, check_positive
from labeldp.accounting.events import describe_event, event_from_description

__all__ = [
    "LABEL_EVENT_RELATION",
    "composed_label_event",
    "describe_label_event",
    "label_event_epsilon",
    "label_event_from_record",
    "label_event_tolerance",
    "per_user_label_event",
    "pure_epsilon_event",
    "randomized_response_event",
]

#: The relation a label event is accounted under: one example's label is replaced.
LABEL_EVENT_RELATION = dp_accounting.NeighboringRelation.REPLACE_ONE
#: PLD grid step relative to the epsilon stated (the accountant rounds up by at most one step per
#: composed part).
_RELATIVE_VDI = 1e-6


def _check_count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def randomized_response_event(*, epsilon: float, num_classes: int) -> dp_event_lib.RandomizedResponseDpEvent:
    """K-ary randomized response at ``epsilon`` as a ``dp_accounting`` event (exact).

    Args:
      epsilon: the randomizer's budget, > 0.
      num_classes: K >= 2.

    Returns:
      ``RandomizedResponseDpEvent(noise_parameter=K / (e^eps + K - 1), num_buckets=K)``: it keeps
      the label with probability ``1 - p + p / K = e^eps / (e^eps + K - 1)``, as 001 eq. 1.
    """
    eps = check_positive(epsilon, "epsilon")
    k = _check_count(num_classes, "num_classes", 2)
    return dp_event_lib.RandomizedResponseDpEvent(noise_parameter=k / (math.exp(eps) + k - 1), num_buckets=k)


def pure_epsilon_event(*, epsilon: float) -> dp_event_lib.RandomizedResponseDpEvent:
    """The event that states "epsilon-DP" for any randomizer: binary RR at ``epsilon``.

    Binary randomized response at epsilon dominates every epsilon-DP mechanism (Kairouz, Oh and
    Viswanath 2015, Theorem 2.4), so its accounted epsilon bounds the randomizer's at every delta,
    exactly at delta = 0.

    Args:
      epsilon: the randomizer's budget, > 0.

    Returns:
      ``RandomizedResponseDpEvent(noise_parameter=2 / (e^eps + 1), num_buckets=2)``.
    """
    return randomized_response_event(epsilon=epsilon, num_classes=2)


def composed_label_event(events: Sequence[dp_event_lib.DpEvent]) -> dp_event_lib.DpEvent:
    """Sequential composition of label events on the same labels (a prior, then a randomizer).

    Args:
      events: one or more events, each a label event of this module.

    Returns:
      The single event when there is one, else ``ComposedDpEvent(events)``.
    """
    events = list(events)
    if not events or not all(isinstance(e, dp_event_lib.DpEvent) for e in events):
        raise ValueError(f"events must be a non-empty sequence of dp_accounting DpEvents, got {events!r}.")
    return events[0] if len(events) == 1 else dp_event_lib.ComposedDpEvent(events)


def per_user_label_event(event: dp_event_lib.DpEvent, *, labels_per_user: int) -> dp_event_lib.DpEvent:
    """A user's ``k`` labels, each randomised once by ``event`` (group privacy over the user).

    Args:
      event: the per-label event (at eps / k).
      labels_per_user: k >= 1.

    Returns:
      ``SelfComposedDpEvent(event, k)`` (``event`` itself when k = 1).
    """
    k = _check_count(labels_per_user, "labels_per_user", 1)
    return event if k == 1 else dp_event_lib.SelfComposedDpEvent(event, k)


def _only_randomized_response(event: dp_event_lib.DpEvent) -> bool:
    """True when every leaf of ``event`` is a ``RandomizedResponseDpEvent`` (a pure label event)."""
    if isinstance(event, dp_event_lib.ComposedDpEvent):
        return all(_only_randomized_response(e) for e in event.events)
    if isinstance(event, dp_event_lib.SelfComposedDpEvent):
        return _only_randomized_response(event.event)
    return isinstance(event, dp_event_lib.RandomizedResponseDpEvent)


def _parts(event: dp_event_lib.DpEvent) -> int:
    """Grid steps the PLD may round up by: one per randomized-response part, one per other leaf."""
    if isinstance(event, dp_event_lib.ComposedDpEvent):
        return sum(_parts(e) for e in event.events)
    if isinstance(event, dp_event_lib.SelfComposedDpEvent):
        return event.count * _parts(event.event) if _only_randomized_response(event.event) else 1
    return 1


def _relative_vdi(event: dp_event_lib.DpEvent) -> float:
    """The PLD grid relative to the epsilon: fine for pure label events, the DP-SGD accountant's
    (:data:`labeldp.accounting.RELATIVE_DISCRETIZATION`) where a Gaussian part is composed in."""
    return _RELATIVE_VDI if _only_randomized_response(event) else RELATIVE_DISCRETIZATION


def _expanded(event: dp_event_lib.DpEvent) -> dp_event_lib.DpEvent:
    """``event`` with every ``SelfComposedDpEvent`` written out as a ``ComposedDpEvent``.

    dp_accounting 0.6.0's PLD accountant ignores the count of a self-composed
    ``RandomizedResponseDpEvent`` (measured: ``SelfComposedDpEvent(RR at 0.25, 4)`` accounts to
    0.25, not 1.0; ``tests/accounting/test_label_events.py`` keeps checking), so the label events
    are composed part by part (their counts are small: a user's labels).
    """
    if isinstance(event, dp_event_lib.SelfComposedDpEvent) and _only_randomized_response(event.event):
        return dp_event_lib.ComposedDpEvent([_expanded(event.event)] * int(event.count))
    if isinstance(event, dp_event_lib.ComposedDpEvent):
        return dp_event_lib.ComposedDpEvent([_expanded(e) for e in event.events])
    return event


def label_event_epsilon(event: dp_event_lib.DpEvent, *, delta: float = 0.0, scale: float = 1.0) -> float:
    """Epsilon of a label event at ``delta``, from ``dp_accounting``'s PLD accountant.

    Args:
      event: a label event (``REPLACE_ONE``: one label replaced).
      delta: in [0, 1); 0 gives the pure-DP epsilon the records state.
      scale: the epsilon expected, to size the PLD grid (``1e-6 * scale``); any positive value
        gives an upper bound.

    Returns:
      The accountant's epsilon; pessimistic by at most one grid step per composed part.

    Raises:
      ValueError: an event the PLD accountant cannot analyse under ``REPLACE_ONE``.
    """
    if not 0.0 <= float(delta) < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}.")
    vdi = _relative_vdi(event) * max(float(scale), 1e-3)
    accountant = pld_privacy_accountant.PLDAccountant(LABEL_EVENT_RELATION, value_discretization_interval=vdi)
    if not accountant.supports(event):
        raise ValueError(f"dp_accounting's PLD accountant cannot analyse {event!r} under {LABEL_EVENT_RELATION.name}.")
    accountant.compose(_expanded(event))
    return float(accountant.get_epsilon(float(delta)))


def label_event_tolerance(event: dp_event_lib.DpEvent, *, epsilon: float) -> float:
    """How far above ``epsilon`` :func:`label_event_epsilon` may round (one grid step per part)."""
    return _parts(event) * _relative_vdi(event) * max(float(epsilon), 1e-3) + 1e-12


def label_event_from_record(privacy: Mapping[str, Any]) -> dp_event_lib.DpEvent | None:
    """The label event a record's privacy block stores (``privacy.event``), or None."""
    description = privacy.get("event")
    if description is None:
        return None
    relation = privacy.get("event_relation")
    if relation != LABEL_EVENT_RELATION.name:
        raise ValueError(
            f"a label event must be stated under {LABEL_EVENT_RELATION.name}, the record says {relation!r}; "
            "re-run the record's method."
        )
    return event_from_description(description)


def describe_label_event(event: dp_event_lib.DpEvent) -> dict[str, Any]:
    """The ``privacy`` keys a record stores for a label event: ``event`` and ``event_relation``."""
    return {"event": describe_event(event), "event_relation": LABEL_EVENT_RELATION.name}
