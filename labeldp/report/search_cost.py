"""What a searched cell really spent: every run of the hyper-parameter search, composed.

000 D.2 reports, per cell, the configuration with the best mean TEST accuracy over a grid (000
Table 8) with 3 seeds. Each run is (eps, delta)-DP, but the selection looks at every run's model,
so the released cell depends on all of them: the privacy the protocol spent on the training labels
is that of releasing every run of the cell (selection on the test set is post-processing; the test
set is not the protected data). This module composes the runs' recorded DpEvents with
``dp_accounting`` (``ComposedDpEvent``; no hand-written bound), which is a valid guarantee for the
paper's deterministic grid search. Papernot and Steinke (ICLR 2022) show a randomized search (a
random number of trials, ``dp_accounting.RepeatAndSelectDpEvent``) can cost much less; that
protocol needs its own runs and is not what the paper ran.

Formal statement. A cell's runs are mechanisms on the same training set. Their parts:

* DP-SGD's (``privacy.accounting.event``): every run is its own release; composed by the
  accountant under the table's relation at the cell's delta: eps_G.
* Label releases (a label randomizer's ``privacy.event``, pure eps-label-DP under label
  substitution, :mod:`labeldp.accounting.label_events`; Hybrid's first phase, binary RR at
  ``accounting.phase1_epsilon``): runs of a method that declares ``LABEL_RELEASE_FIXED_BY_SEED``
  (:mod:`labeldp.methods.base`) with the same dataset, variant, event and seed entropy
  (``details.label_rng``) release the same labels, one release (the same random draw, so the later
  runs are post-processing of it); every other run is a release of its own. The distinct releases
  are composed at delta 0: eps_L, the sum of their epsilons (basic composition, tight for pure DP at
  delta 0; each release's epsilon from the PLD accountant, exact for randomized response).

Releasing every run is then (eps_G + eps_L, delta)-DP (basic composition of the two parts); a cell
of label releases alone is (eps_L, 0)-label-DP under label substitution, the relation label
randomizers are stated under in every table. Runs selected on held-out labels released once by
randomized response (:mod:`labeldp.selection`) add that release in parallel (other examples):
``max(spend, release eps)``. A record without a recorded event gives no search cost (``None``), and so
does a user-level record (``accounting.group_size`` > 1), whose composed search would need group privacy.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Sequence

from labeldp.methods import registry
from labeldp.plan import format_eps
from labeldp.report.table_header import RELATION_SHORT

__all__ = ["SearchSpend", "search_spend", "search_epsilon", "search_cost_lines", "SEARCH_ACCOUNTANT"]

#: The accountant per relation: RDP under add-or-remove (a valid upper bound, about 6x faster than
#: PLD on a 108-run cell here: 3.9 s against 22.7 s, 1.39 against 1.34), PLD under label
#: substitution (dp_accounting's RDP accountant handles add-or-remove only).
SEARCH_ACCOUNTANT = {"add_or_remove": "rdp", "label_substitution": "pld"}
#: The relation a label release's spend is stated under (its event's REPLACE_ONE: one label replaced);
#: the record name ``labeldp.accounting.relation_name(LABEL_SUBSTITUTION)`` gives, spelled out so that
#: building a table never imports dp_accounting (tested).
LABEL_RELATION = "label_substitution"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchSpend:
    """The privacy of releasing every run of a cell.

    Attributes:
      epsilon: the composed epsilon.
      delta: its delta (0 for label releases alone).
      relation: the neighbouring relation it is stated under.
      runs: the runs composed.
      label_releases: the distinct label releases among them (0: none).
    """

    epsilon: float
    delta: float
    relation: str
    runs: int
    label_releases: int


def _privacy(record: Mapping[str, Any]) -> Mapping[str, Any]:
    return record.get("privacy") or {}


def _accounting(record: Mapping[str, Any]) -> Mapping[str, Any]:
    return _privacy(record).get("accounting") or {}


def _release_fixed_by_seed(method: Any) -> bool:
    try:
        return bool(method) and bool(registry.declared(str(method), "LABEL_RELEASE_FIXED_BY_SEED", False))
    except KeyError:  # a method no module implements now: count each of its runs as its own release
        return False


def _release_key(record: Mapping[str, Any], index: int) -> tuple:
    """Runs with the same key share one label release (the same method, data as recorded, variant, event and
    seed entropy); the default is the run's own."""
    rng = (record.get("details") or {}).get("label_rng")
    if rng is not None and _release_fixed_by_seed(record.get("method")):
        parts = [record.get(k) for k in ("method", "dataset", "variant")] + [_privacy(record).get("event"), rng]
        return ("seed", json.dumps(parts, sort_keys=True))
    return ("run", index)


def _releases_under(digests: set) -> int:
    """The releases a shared key stands for, by the digests its runs recorded (None: a record from before
    ``details.label_release_sha256``): one where they agree; each distinct digest apart where they differ (the
    flag's claim broken), and the undigested runs as one more."""
    known = digests - {None}
    return 1 if len(known) <= 1 else len(known) + (None in digests)


def search_spend(records: Sequence[Mapping[str, Any]], *, delta: float, relation: str) -> SearchSpend | None:
    """The privacy of releasing every run in ``records`` (the module docstring's statement).

    Args:
      records: the cell's run records.
      delta: the cell's delta (used where a DP-SGD part is composed).
      relation: the table's relation, ``"add_or_remove"`` or ``"label_substitution"`` (label
        releases alone are stated under label substitution).

    Returns:
      The spend, or None when some record has no recorded event (or there is none), or is a user-level record
      (``accounting.group_size`` > 1: group privacy of a composed search is not computed here).
    """
    if not records:
        return None
    if len(records) == 1:  # one run: its own recorded eps (a label randomizer's under label substitution)
        priv = _privacy(records[0])
        acc = _accounting(records[0])
        label_run = not acc.get("event") and bool(priv.get("event"))
        rel = LABEL_RELATION if label_run else relation
        eps = (priv.get("epsilon_by_relation") or {}).get(rel)
        releases = int(label_run or float(acc.get("phase1_epsilon") or 0.0) > 0)
        if eps is None:
            return None
        return SearchSpend(
            epsilon=float(eps), delta=float(priv.get("delta") or 0.0), relation=rel, runs=1, label_releases=releases
        )
    # Imported here, where runs are composed: dp_accounting (with scipy.signal and scipy.stats) takes
    # 0.7 s of a table job, and a table whose cells hold one run each (every smoke table) never composes.
    import dp_accounting

    from labeldp.accounting import event_epsilon, event_from_description, label_events

    gaussian, releases, digests = [], {}, {}
    for i, r in enumerate(records):
        desc = _accounting(r).get("event")
        if int(_accounting(r).get("group_size") or 1) > 1:
            return None
        if desc:
            gaussian.append(event_from_description(desc))
            phase1 = float(_accounting(r).get("phase1_epsilon") or 0.0)  # Hybrid's RR phase: its own release
            if phase1 > 0:
                releases[("run", i)] = (label_events.pure_epsilon_event(epsilon=phase1), phase1)
            continue
        event = label_events.label_event_from_record(_privacy(r))
        if event is None:
            return None
        key = _release_key(r, i)
        releases.setdefault(key, (event, float(_privacy(r).get("epsilon") or 1.0)))
        digests.setdefault(key, set()).add((r.get("details") or {}).get("label_release_sha256"))
    eps, out_delta, out_relation = 0.0, 0.0, LABEL_RELATION
    if gaussian:
        event = gaussian[0] if len(gaussian) == 1 else dp_accounting.ComposedDpEvent(gaussian)
        eps, _ = event_epsilon(
            event, delta=delta, neighboring_relation=relation, accountant=SEARCH_ACCOUNTANT[relation]
        )
        out_delta, out_relation = float(delta), relation
    # pure releases at delta 0: basic composition, the sum of their epsilons, is tight there (the PLD of a
    # many-part composition truncates tails to infinity: measured, 61 RR releases at 0.2 gave inf at delta 0)
    counts = {key: _releases_under(digests.get(key, {None})) for key in releases}
    eps += sum(counts[k] * label_events.label_event_epsilon(e, delta=0.0, scale=s) for k, (e, s) in releases.items())
    # the held-out labels' release (labeldp.selection: one, public-seeded, per variant) reads other examples:
    # parallel composition; distinct releases of those rows (not made today) compose among themselves
    held_out = {
        json.dumps(_accounting(r)["validation_release"], sort_keys=True): float(
            _accounting(r)["validation_release"]["epsilon"]
        )
        for r in records
        if "validation_release" in _accounting(r)
    }
    return SearchSpend(
        epsilon=max(float(eps), sum(held_out.values())),
        delta=out_delta,
        relation=out_relation,
        runs=len(records),
        label_releases=sum(counts.values()),
    )


def search_epsilon(records: Sequence[Mapping[str, Any]], *, delta: float, relation: str) -> float | None:
    """:func:`search_spend`'s epsilon (None where it is None)."""
    spend = search_spend(records, delta=delta, relation=relation)
    return None if spend is None else spend.epsilon


def search_cost_lines(res, *, relation_label: str) -> list[str]:
    """Markdown lines under a table: the privacy every cell's search spent (each cell's
    :func:`search_spend`), for the columns whose cells hold more than one run; nothing when none does.

    Args:
      res: the table (:class:`labeldp.report.tables.TableResult`).
      relation_label: how the table's relation is printed (``add/remove``, ``label subst.``).
    """
    cols = [
        c
        for c in res.columns
        if any(
            res.cells[(c.id, e)].search_spend is not None and res.cells[(c.id, e)].search_spend.runs > 1
            for e in res.epsilons
        )
    ]
    if not cols:
        return []
    out = [
        "",
        f"Privacy the search spent ({relation_label}, or as the cell says): each cell "
        "above is the best of its runs (by test accuracy, or on held-out labels), so it depends on every run; eps of "
        "releasing all of a cell's runs: DP-SGD's recorded DpEvents composed by dp_accounting, plus the distinct label "
        "releases (runs of one seed share RR's or ALIBI's release) composed at delta 0 (runs, and label releases, in "
        "parentheses; labeldp/report/search_cost.py):",
        "",
        "| eps | " + " | ".join(c.label for c in cols) + " |",
        "|" + "---|" * (len(cols) + 1),
    ]
    for e in res.epsilons:
        row = [format_eps(e)]
        for c in cols:
            row.append(_spend_text(res.cells[(c.id, e)]))
        out.append("| " + " | ".join(row) + " |")
    return out


def _spend_text(cell) -> str:
    spend = cell.search_spend
    if spend is None:
        return "-"
    parts = [f"{spend.runs} run{'s' if spend.runs != 1 else ''}"]
    if spend.label_releases:
        parts.append(f"{spend.label_releases} label release{'s' if spend.label_releases != 1 else ''}")
    if spend.relation == LABEL_RELATION and not spend.delta:
        parts.append(f"{RELATION_SHORT[LABEL_RELATION]}, delta 0")
    return f"{spend.epsilon:.3g} ({'; '.join(parts)})"
