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

Formal statement: if the cell's runs are mechanisms M_1..M_m on the same training set with
recorded events E_1..E_m, releasing (M_1(D), ..., M_m(D)) and anything computed from them and
public data is (eps, delta)-DP under the table's neighbouring relation with
eps = accountant(ComposedDpEvent([E_1..E_m]), delta). A record without an event (the label
randomizers state a pure eps in text) gives no search cost: ``None``. Runs selected on held-out
labels released once by randomized response (:mod:`labeldp.selection`) add that release in
parallel: ``max(composed eps, release eps)``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from labeldp.plan import format_eps

__all__ = ["search_epsilon", "search_cost_lines", "SEARCH_ACCOUNTANT"]

#: The accountant per relation: RDP under add-or-remove (a valid upper bound, about 6x faster than
#: PLD on a 108-run cell here: 3.9 s against 22.7 s, 1.39 against 1.34), PLD under label
#: substitution (dp_accounting's RDP accountant handles add-or-remove only).
SEARCH_ACCOUNTANT = {"add_or_remove": "rdp", "label_substitution": "pld"}


def search_epsilon(records: Sequence[Mapping[str, Any]], *, delta: float, relation: str) -> float | None:
    """Epsilon at ``delta`` of releasing every run in ``records``, under ``relation``.

    Args:
      records: the cell's run records (each with ``privacy.accounting.event``).
      delta: the cell's delta.
      relation: ``"add_or_remove"`` or ``"label_substitution"``.

    Returns:
      The composed epsilon, or None when some record has no recorded DpEvent (or there is none).
    """
    if len(records) == 1:  # one run: its own recorded eps under the relation
        return ((records[0].get("privacy") or {}).get("epsilon_by_relation") or {}).get(relation)
    # Imported here, where runs are composed: dp_accounting (with scipy.signal and scipy.stats) takes
    # 0.7 s of a table job, and a table whose cells hold one run each (every smoke table) never composes.
    import dp_accounting

    from labeldp.accounting import event_epsilon, event_from_description

    events = []
    for r in records:
        desc = ((r.get("privacy") or {}).get("accounting") or {}).get("event")
        if not desc:
            return None
        events.append(event_from_description(desc))
    if not events:
        return None
    event = events[0] if len(events) == 1 else dp_accounting.ComposedDpEvent(events)
    eps, _ = event_epsilon(event, delta=delta, neighboring_relation=relation, accountant=SEARCH_ACCOUNTANT[relation])
    # the held-out labels' one release (labeldp.selection) reads other examples: parallel composition
    releases = [
        float(r["privacy"]["accounting"]["validation_release"]["epsilon"])
        for r in records
        if "validation_release" in r["privacy"]["accounting"]
    ]
    return max([float(eps)] + releases)


def search_cost_lines(res, *, relation_label: str) -> list[str]:
    """Markdown lines under a table: the privacy every cell's search spent (each cell's
    ``search_epsilon``), for the columns whose cells hold more than one run; nothing when none does.

    Args:
      res: the table (:class:`labeldp.report.tables.TableResult`).
      relation_label: how the table's relation is printed (``add/remove``, ``label subst.``).
    """
    cols = [
        c
        for c in res.columns
        if any(
            res.cells[(c.id, e)].search_epsilon is not None and res.cells[(c.id, e)].n_runs > 1 for e in res.epsilons
        )
    ]
    if not cols:
        return []
    out = [
        "",
        f"Privacy the search spent ({relation_label}): each cell above is the best of its runs (by test "
        "accuracy, or on held-out labels), so it depends on every run; eps of releasing all of a cell's runs, their recorded DpEvents "
        "composed by dp_accounting (runs in the cell in parentheses; labeldp/report/search_cost.py):",
        "",
        "| eps | " + " | ".join(c.label for c in cols) + " |",
        "|" + "---|" * (len(cols) + 1),
    ]
    for e in res.epsilons:
        row = [format_eps(e)]
        for c in cols:
            cell = res.cells[(c.id, e)]
            row.append("-" if cell.search_epsilon is None else f"{cell.search_epsilon:.3g} ({cell.n_runs})")
        out.append("| " + " | ".join(row) + " |")
    return out
