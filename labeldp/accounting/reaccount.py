"""Re-accounts stored result records under every neighbouring relation, without retraining.

A DP-SGD-family record stores its accounted ``DpEvent`` (``privacy.accounting.event``); this
module rebuilds the event and adds the run's epsilon under each relation of
:data:`labeldp.accounting.RELATIONS` (``privacy.epsilon_by_relation``), so records written before
the relation was a parameter state both. A label randomizer's record (pure eps-label-DP, exact per
label) is stated under ``label_substitution``; one written before records stored the randomizer's
event (:mod:`labeldp.accounting.label_events`) gets it from the parameters it recorded
(:func:`label_event_of_record`, marked ``privacy.event_backfilled``), and every stored label event
is re-accounted and must give the record's epsilon. Every record names its ``dp_accounting``
relation (``privacy.dp_accounting_relation``). The accounted numbers of a record are never
changed: only the epsilons under the other relations, the events and the names are added.
"""

from __future__ import annotations

import datetime
import math
from typing import Any, Mapping

from dp_accounting import dp_event as dp_event_lib

from labeldp.accounting import label_events
from labeldp.accounting.checks import check_relation, to_relation
from labeldp.accounting.events import event_from_description
from labeldp.accounting.records import installed_dp_accounting_version, epsilons_by_relation

__all__ = ["label_event_of_record", "reaccount_record"]

#: Label randomizers whose every label is randomised once by one eps-DP randomizer (no split).
_SINGLE_PURE_EPSILON = ("alibi", "lp_2st", "lp_mst")


def label_event_of_record(record: Mapping[str, Any]) -> dp_event_lib.DpEvent | None:
    """The label event of a randomizer's record made before records stored one.

    Rebuilt from what the record stored: RR and RR-Debiased from their keep probability (which
    fixes K), RRWithPrior from its ``prior_epsilon`` and ``rr_epsilon``, 003's randomizers from
    ``epsilon1`` (the prior) and ``epsilon2``, ALIBI and LP-MST as one eps-DP randomizer.

    Args:
      record: a result record without ``privacy.accounting``.

    Returns:
      The event, or None for a method this function does not know (its record is left as is).

    Raises:
      ValueError: the stored parameters do not fit the method's mechanism.
    """
    method, d = record.get("method"), record.get("details") or {}
    eps = float(record["privacy"]["epsilon"])
    if method in ("rr", "rr_debiased"):
        e = math.exp(eps)
        if "rr_keep_probability" in d:  # RR: e^eps / (e^eps + K - 1)
            keep = float(d["rr_keep_probability"])
            k = int(round(1 + e * (1 / keep - 1)))
        elif "rr_p" in d:  # RR-Debiased: the noise parameter p = K / (e^eps + K - 1)
            noise = float(d["rr_p"])
            k = max(1, int(round(noise * (e - 1) / (1 - noise))))
            keep = 1 - noise + noise / k
        else:
            raise ValueError(f"record {record.get('run_id')!r}: no stored RR parameter to rebuild its event")
        if k < 2 or not math.isclose(e / (e + k - 1), keep, rel_tol=1e-9):
            raise ValueError(f"record {record.get('run_id')!r}: its stored RR parameter is not K-ary RR's at eps {eps}")
        return label_events.randomized_response_event(epsilon=eps, num_classes=k)
    if method == "rr_with_prior":
        parts = [float(d["prior_epsilon"]), float(d["rr_epsilon"])]
    elif "epsilon1" in d and "epsilon2" in d:  # 003's randomizers (epsilon1: the private prior)
        parts = [float(d["epsilon1"]), float(d["epsilon2"])]
    elif method in _SINGLE_PURE_EPSILON:
        parts = [eps]
    else:
        return None
    return label_events.composed_label_event([label_events.pure_epsilon_event(epsilon=p) for p in parts if p > 0])


def _with_label_event(rec: dict[str, Any], revision: str | None) -> bool:
    """Adds (or re-accounts) the label event of a randomizer's record in place; True if added."""
    priv = rec["privacy"]
    added = False
    if priv.get("event") is None:
        event = label_event_of_record(rec)
        if event is None:
            return False
        priv.update(label_events.describe_label_event(event))
        priv["event_backfilled"] = {
            "what": "the randomizer's dp_accounting event, rebuilt from the record's parameters (no retraining)",
            "revision": revision,
        }
        added = True
    event = label_events.label_event_from_record(priv)
    eps = float(priv["epsilon"])
    got = label_events.label_event_epsilon(event, delta=float(priv.get("delta", 0.0)), scale=eps)
    if got > eps + label_events.label_event_tolerance(event, epsilon=eps):
        raise ValueError(
            f"record {rec.get('run_id')!r} states epsilon {eps} but its label event accounts to {got}: "
            "the stated guarantee does not hold; re-run it."
        )
    return added


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
    # a held-out selection's release (labeldp.selection.with_validation_release) is recorded beside the
    # accountant's record, and is all a label randomizer's `accounting` holds: not an accountant's record
    acc = {k: v for k, v in (priv.get("accounting") or {}).items() if k != "validation_release"}
    if acc and not acc.get("event"):
        raise ValueError(
            f"record {record.get('run_id')!r} has an accountant's record but no stored event: it cannot "
            "be re-accounted under another relation; re-run it"
        )
    if not acc:
        changed = False
        if not (priv.get("neighboring_relation") and priv.get("epsilon_by_relation")):
            # a label randomizer (or non-private): its epsilon is per label change, exactly
            priv.setdefault("neighboring_relation", "label_substitution")
            priv["epsilon_by_relation"] = {priv["neighboring_relation"]: priv["epsilon"]}
            changed = True
        if priv["epsilon"] != "inf":
            changed = _with_label_event(rec, revision) or changed
        return (rec, True) if _named_relation(priv) or changed else (dict(record), False)
    relation = check_relation(acc.get("neighboring_relation", "add_or_remove"))
    if (
        acc.get("neighboring_relation") == relation
        and acc.get("epsilon_by_relation")
        and priv.get("epsilon_by_relation")
    ):
        return (rec, True) if _named_relation(priv) else (dict(record), False)
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
    _named_relation(priv)
    priv["reaccounted"] = {
        "what": "epsilon_by_relation added from the stored event (no retraining)",
        "dp_accounting_version": installed_dp_accounting_version(),
        "revision": revision,
        "date": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
    }
    return rec, True


def _named_relation(priv: dict[str, Any]) -> bool:
    """Adds ``dp_accounting_relation`` (the enum's name) where missing; True if added."""
    if priv.get("dp_accounting_relation"):
        return False
    priv["dp_accounting_relation"] = to_relation(priv["neighboring_relation"]).name
    return True
