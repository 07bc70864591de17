"""Re-accounts stored result records under every neighbouring relation, without retraining.

A DP-SGD-family record stores its accounted ``DpEvent`` (``privacy.accounting.event``); this
module rebuilds the event and adds the run's epsilon under each relation of
:data:`labeldp.accounting.RELATIONS` (``privacy.epsilon_by_relation``), so records written before
the relation was a parameter state both. Label randomizers' records (no event: pure eps-label-DP,
exact per label) are marked as stated under ``label_substitution``. The accounted numbers of a
record are never changed: only the epsilons under the other relations are added.
"""

from __future__ import annotations

import datetime
from typing import Any, Mapping

from labeldp.accounting.checks import check_relation
from labeldp.accounting.events import event_from_description
from labeldp.accounting.records import _dp_accounting_version, epsilons_by_relation

__all__ = ["reaccount_record"]


def reaccount_record(record: Mapping[str, Any], *, revision: str | None = None) -> tuple[dict[str, Any], bool]:
    """A copy of ``record`` with its epsilon under every relation.

    Args:
      record: a result record (``labeldp.records``).
      revision: the code revision doing the re-accounting (stored with what was added).

    Returns:
      ``(new_record, changed)``; ``changed`` is False when the record already stated every
      relation it can (then ``new_record`` equals ``record``).

    Raises:
      ValueError: the stored event is not a ``dp_accounting`` event, or the stored epsilon
        disagrees with the event re-accounted under its own relation by more than 1 %.
    """
    rec = {**record, "privacy": dict(record["privacy"])}
    priv = rec["privacy"]
    acc = priv.get("accounting")
    if acc and not acc.get("event"):
        raise ValueError(
            f"record {record.get('run_id')!r} has an accountant's record but no stored event: it cannot "
            "be re-accounted under another relation; re-run it"
        )
    if not acc:
        if priv.get("neighboring_relation") and priv.get("epsilon_by_relation"):
            return dict(record), False
        # a label randomizer (or non-private): its epsilon is per label change, exactly
        priv.setdefault("neighboring_relation", "label_substitution")
        priv["epsilon_by_relation"] = {priv["neighboring_relation"]: priv["epsilon"]}
        return rec, True
    relation = check_relation(acc.get("neighboring_relation", "add_or_remove"))
    if (
        acc.get("neighboring_relation") == relation
        and acc.get("epsilon_by_relation")
        and priv.get("epsilon_by_relation")
    ):
        return dict(record), False
    event = event_from_description(acc["event"])
    stated = float(acc["epsilon"])
    eps, used = epsilons_by_relation(event, delta=float(acc["delta"]), accountant=acc["accountant"])
    if abs(eps[relation] - stated) > 0.01 * stated:
        raise ValueError(
            f"record {record.get('run_id')!r}: its stored epsilon {stated} does not match its stored event "
            f"re-accounted under {relation} ({eps[relation]}); the record is inconsistent, re-run it."
        )
    eps[relation] = stated  # keep the number accounted when the run was made
    acc = dict(acc, neighboring_relation=relation, epsilon_by_relation=eps, epsilon_by_relation_accountant=used)
    priv["accounting"] = acc
    priv["neighboring_relation"] = relation
    priv["epsilon_by_relation"] = dict(eps)
    priv["reaccounted"] = {
        "what": "epsilon_by_relation added from the stored event (no retraining)",
        "dp_accounting_version": _dp_accounting_version(),
        "revision": revision,
        "date": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
    }
    return rec, True
