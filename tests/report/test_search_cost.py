"""The privacy a searched cell spent (labeldp.report.search_cost): its runs' DpEvents composed."""

from __future__ import annotations

import json
import subprocess
import sys

import dp_accounting
import pytest

from labeldp import accounting
from labeldp.accounting import label_events
from labeldp.report.search_cost import LABEL_RELATION, search_cost_lines, search_epsilon, search_spend

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


def _label_record(method: str, *, eps: float, seed: int, config: int, variant: str = "momentum09") -> dict:
    """A label randomizer's record as RR / LP-2ST / ALIBI write it: its event under label substitution."""
    event = label_events.randomized_response_event(epsilon=eps, num_classes=10)
    privacy = {"epsilon": eps, "delta": 0.0, "accounting": None, "epsilon_by_relation": {"label_substitution": eps}}
    privacy.update(label_events.describe_label_event(event))
    stream = 1 if method in ("rr", "rr_debiased") else 4
    return {
        "method": method,
        "dataset": {"name": "fashion_mnist", "n_train": 60000, "n_test": 10000, "source": "official", "subset": None},
        "variant": variant,
        "seed": seed,
        "hparams": {"learning_rate": [0.01, 0.05, 0.1, 0.2][config % 4], "epochs": [2, 5, 10][config // 4]},
        "privacy": privacy,
        "details": {"label_rng": [seed, stream]},
    }


def _halving_cell(method: str, eps: float) -> list[dict]:
    """A successive-halving cell: 12 grid points with seed 0, then 3 of them with seeds 1 and 2 (18 runs)."""
    runs = [_label_record(method, eps=eps, seed=0, config=c) for c in range(12)]
    return runs + [_label_record(method, eps=eps, seed=s, config=c) for s in (1, 2) for c in (11, 10, 7)]


@pytest.mark.parametrize("relation", ["add_or_remove", "label_substitution"])
def test_runs_of_one_seed_share_a_release_fixed_by_the_seed(relation):
    """RR's released labels depend on the seed alone (baselines.rr LABEL_RELEASE_FIXED_BY_SEED): an 18-run cell
    over 3 seeds is 3 releases, (3 eps, 0)-label-DP, stated under label substitution whatever the table's relation."""
    spend = search_spend(_halving_cell("rr", 1.0), delta=1e-5, relation=relation)
    assert (spend.runs, spend.label_releases, spend.relation, spend.delta) == (18, 3, "label_substitution", 0.0)
    assert spend.epsilon == pytest.approx(3.0, abs=1e-4) and spend.epsilon >= 3.0 - 1e-9


def test_a_release_that_depends_on_the_run_is_composed_per_run():
    """LP-2ST's stage 2 uses the stage-1 model (no LABEL_RELEASE_FIXED_BY_SEED): every run is a release of its own."""
    spend = search_spend(_halving_cell("lp_2st", 0.5), delta=1e-5, relation="add_or_remove")
    assert (spend.runs, spend.label_releases) == (18, 18)
    assert spend.epsilon == pytest.approx(18 * 0.5, abs=1e-4) and spend.epsilon >= 9.0 - 1e-9


def test_a_shared_release_needs_the_same_seed_event_and_variant():
    runs = [_label_record("rr", eps=1.0, seed=0, config=0), _label_record("rr", eps=1.0, seed=0, config=5)]
    assert search_spend(runs, delta=1e-5, relation="add_or_remove").label_releases == 1
    other_variant = [runs[0], _label_record("rr", eps=1.0, seed=0, config=5, variant="momentum09_heldout10")]
    other_eps = [runs[0], _label_record("rr", eps=2.0, seed=0, config=5)]
    unknown_method = [_label_record("no_such_method", eps=1.0, seed=0, config=c) for c in (0, 5)]
    no_rng = [runs[0], {**runs[1], "details": {}}]
    for cell in (other_variant, other_eps, unknown_method, no_rng):
        assert search_spend(cell, delta=1e-5, relation="add_or_remove").label_releases == 2
    assert search_epsilon(other_eps, delta=1e-5, relation="add_or_remove") == pytest.approx(3.0, abs=1e-4)


def test_a_held_out_release_composes_in_parallel_with_the_label_releases():
    runs = _halving_cell("rr", 1.0)
    for r in runs:
        r["privacy"]["accounting"] = {"validation_release": {"epsilon": 5.0}}
    assert search_epsilon(runs, delta=1e-5, relation="add_or_remove") == 5.0
    for r in runs:
        r["privacy"]["accounting"] = {"validation_release": {"epsilon": 1.0}}
    assert search_epsilon(runs, delta=1e-5, relation="add_or_remove") == pytest.approx(3.0, abs=1e-4)


def test_hybrids_rr_phase_is_added_to_its_dpsgd_composition():
    """002's Hybrid: binary RR at phase1_epsilon on every label, then DP-SGD; both parts are spent per run."""
    runs = [_record(0.5), _record(0.5, steps=80)]
    dpsgd_only = search_epsilon(runs, delta=1e-5, relation="add_or_remove")
    for r in runs:
        r["privacy"]["accounting"]["phase1_epsilon"] = 0.25
    spend = search_spend(runs, delta=1e-5, relation="add_or_remove")
    assert spend.label_releases == 2 and spend.relation == "add_or_remove" and spend.delta == 1e-5
    assert spend.epsilon == pytest.approx(dpsgd_only + 2 * 0.25, abs=1e-5)


def test_a_one_run_label_cell_costs_its_label_substitution_epsilon():
    spend = search_spend([_label_record("rr", eps=2.0, seed=0, config=0)], delta=1e-5, relation="add_or_remove")
    assert (spend.epsilon, spend.relation, spend.runs, spend.label_releases) == (2.0, "label_substitution", 1, 1)


def test_equal_keys_with_other_released_labels_stay_apart():
    """The release digest (details.label_release_sha256, new records) is a necessary condition of one release; a
    record from before the digest joins the release its key names when the digested runs agree."""
    runs = [_label_record("rr", eps=1.0, seed=0, config=c) for c in (0, 5, 7)]
    runs[0]["details"]["label_release_sha256"] = "a" * 64
    runs[1]["details"]["label_release_sha256"] = "b" * 64
    spend = search_spend(runs, delta=1e-5, relation="add_or_remove")
    assert spend.label_releases == 3 and spend.epsilon == pytest.approx(3.0, abs=1e-4)  # a, b and the undigested
    runs[1]["details"]["label_release_sha256"] = "a" * 64
    assert search_spend(runs, delta=1e-5, relation="add_or_remove").label_releases == 1
    assert search_spend(runs[:2], delta=1e-5, relation="add_or_remove").label_releases == 1


def test_a_user_level_search_gives_no_spend():
    """002 Table 3's user-level Hybrid records an item-level event and group_size k: the composed search would need
    group privacy, which is not computed here, so no spend is stated (rather than an item-level one)."""
    runs = [_record(0.5), _record(0.5, steps=80)]
    for r in runs:
        r["privacy"]["accounting"].update(phase1_epsilon=0.1, group_size=4)
    assert search_spend(runs, delta=1e-5, relation="add_or_remove") is None
    for r in runs:
        r["privacy"]["accounting"]["group_size"] = 1
    assert search_spend(runs, delta=1e-5, relation="add_or_remove") is not None


def test_distinct_held_out_releases_compose_among_themselves():
    runs = _halving_cell("rr", 1.0)
    for i, r in enumerate(runs):
        r["privacy"]["accounting"] = {"validation_release": {"epsilon": 4.0, "fraction": 0.1 if i % 2 else 0.2}}
    assert search_epsilon(runs, delta=1e-5, relation="add_or_remove") == 8.0


def test_records_without_privacy_give_no_spend():
    assert search_spend([{"privacy": None}, {"privacy": None}], delta=1e-5, relation="add_or_remove") is None
    assert search_spend([], delta=1e-5, relation="add_or_remove") is None


def test_many_releases_at_small_eps_sum_to_a_finite_epsilon():
    """61 LP-2ST runs at eps 0.2 (a table of issue 29): dp_accounting's PLD of the 61-part composition
    truncates tails to infinity at delta 0; basic composition, tight for pure DP at delta 0, gives 61 * 0.2."""
    runs = [_label_record("lp_2st", eps=0.2, seed=s, config=c) for s in range(3) for c in range(12)]
    runs += [_label_record("lp_2st", eps=0.2, seed=s, config=c) for s in range(3, 8) for c in range(5)]
    spend = search_spend(runs, delta=1e-5, relation="add_or_remove")
    assert (spend.runs, spend.label_releases) == (61, 61)
    assert spend.epsilon == pytest.approx(61 * 0.2, abs=1e-4) and spend.epsilon >= 61 * 0.2 - 1e-9


def test_the_lines_under_a_table_state_runs_releases_and_the_label_relation():
    """search_cost_lines prints each multi-run column's spend: the runs, the distinct label releases, and for a label
    randomizer's cell the relation and delta its spend is stated under; a column of one-run cells is left out."""
    from types import SimpleNamespace as NS

    rr_cell = _halving_cell("rr", 1.0)
    cells = {
        ("rr", 1.0): NS(search_spend=search_spend(rr_cell, delta=1e-5, relation="add_or_remove")),
        ("rr", 2.0): NS(search_spend=search_spend(rr_cell[:1], delta=1e-5, relation="add_or_remove")),
        ("one", 1.0): NS(search_spend=search_spend(rr_cell[:1], delta=1e-5, relation="add_or_remove")),
        ("one", 2.0): NS(search_spend=None),
    }
    columns = [NS(id="rr", label="RR"), NS(id="one", label="One run")]
    lines = search_cost_lines(NS(columns=columns, epsilons=[1.0, 2.0], cells=cells), relation_label="add/remove")
    assert "| eps | RR |" in lines
    assert "| 1.0 | 3 (18 runs; 3 label releases; label subst., delta 0) |" in lines
    assert "| 2.0 | 1 (1 run; 1 label release; label subst., delta 0) |" in lines
    assert search_cost_lines(NS(columns=columns[1:], epsilons=[1.0, 2.0], cells=cells), relation_label="x") == []


def test_the_label_relation_is_the_accountants_name_for_one_label_replaced():
    """search_cost spells the name out (no dp_accounting import while tables build); it must be the record name."""
    assert LABEL_RELATION == accounting.relation_name(accounting.LABEL_SUBSTITUTION)
