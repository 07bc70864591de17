"""The privacy a searched cell spent (labeldp.report.search_cost): its runs' DpEvents composed."""

from __future__ import annotations

import dp_accounting
import pytest

from labeldp import accounting
from labeldp.report.search_cost import search_epsilon


def _record(eps: float, steps: int = 50, q: float = 0.02) -> dict:
    acc = accounting.account_dpsgd(target_epsilon=eps, target_delta=1e-5, sampling_rate=q, steps=steps)
    return {"privacy": {"accounting": acc.to_dict(), "epsilon_by_relation": dict(acc.epsilon_by_relation)}}


def test_one_run_costs_its_own_recorded_epsilon():
    r = _record(0.5)
    assert (
        search_epsilon([r], delta=1e-5, relation="add_or_remove")
        == r["privacy"]["epsilon_by_relation"]["add_or_remove"]
    )


def test_a_search_costs_dp_accountings_composition_of_its_runs_and_more_than_any_run():
    runs = [_record(0.5), _record(0.5, steps=80), _record(1.0)]
    got = search_epsilon(runs, delta=1e-5, relation="add_or_remove")
    acct = dp_accounting.rdp.RdpAccountant()
    for r in runs:
        acct.compose(accounting.event_from_description(r["privacy"]["accounting"]["event"]))
    assert got == pytest.approx(acct.get_epsilon(1e-5), rel=1e-9)
    assert 1.0 < got < 0.5 + 0.5 + 1.0  # more than the largest run, less than basic composition


def test_label_substitution_is_accounted_too_and_costs_more():
    runs = [_record(0.5), _record(0.5)]
    add = search_epsilon(runs, delta=1e-5, relation="add_or_remove")
    sub = search_epsilon(runs, delta=1e-5, relation="label_substitution")
    assert sub > add


def test_a_run_without_a_recorded_event_gives_no_search_cost():
    runs = [_record(0.5), {"privacy": {"epsilon": 1.0, "mechanism": "randomized_response"}}]
    assert search_epsilon(runs, delta=1e-5, relation="add_or_remove") is None
