"""The privacy a searched cell spent (labeldp.report.search_cost): its runs' DpEvents composed."""

from __future__ import annotations

import json
import subprocess
import sys

import dp_accounting
import pytest

from labeldp import accounting
from labeldp.report.search_cost import search_epsilon

from tests.helpers import REPO


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


def test_table_jobs_import_dp_accounting_only_to_compose_a_search(tmp_path):
    """A table or figure job (labeldp.report.build) whose cells hold one run each reads their recorded
    eps and never imports dp_accounting (0.7 s of each of the smoke's 54 table and figure jobs); a
    cell of several runs still composes their events with it."""
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([_record(0.5), _record(1.0)]))
    code = (
        "import json, sys\n"
        "import labeldp.report.build\n"
        "from labeldp.report.search_cost import search_epsilon\n"
        f"runs = json.load(open({str(path)!r}))\n"
        "one = search_epsilon(runs[:1], delta=1e-5, relation='add_or_remove')\n"
        "assert 'dp_accounting' not in sys.modules, 'a one-run cell imported dp_accounting'\n"
        "both = search_epsilon(runs, delta=1e-5, relation='add_or_remove')\n"
        "assert 'dp_accounting' in sys.modules and both > 1.0 > one, (one, both)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
