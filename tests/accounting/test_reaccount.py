"""Re-accounting stored records under every relation, without retraining."""

import json
import subprocess
import sys

import pytest

from labeldp import accounting, records
from labeldp.accounting.reaccount import reaccount_record
from labeldp.accounting import label_events
from tests.helpers import REPO, assert_label_event_reaccounts

RESULTS = REPO / "reports/gpu-2026-11-22/results/mnist"


def _legacy(path):
    """A committed record as it was before the relation was a parameter."""
    rec = records.read_record(path)
    priv = rec["privacy"]
    for k in ("neighboring_relation", "epsilon_by_relation", "reaccounted", "dp_accounting_relation", "event"):
        priv.pop(k, None)
    if priv.get("accounting"):
        acc = priv["accounting"]
        acc.pop("epsilon_by_relation", None)
        acc.pop("epsilon_by_relation_accountant", None)
        acc["neighboring_relation"] = "add_or_remove_one"
    return rec


def _one(method, eps="1.0"):
    return next((RESULTS / method / "default" / f"eps{eps}").rglob("seed0.json"))


def test_dpsgd_record_gains_its_label_substitution_epsilon():
    legacy = _legacy(_one("dpsgd"))
    new, changed = reaccount_record(legacy, revision="abc")
    assert changed
    acc, priv = new["privacy"]["accounting"], new["privacy"]
    assert priv["epsilon"] == legacy["privacy"]["epsilon"]  # the accounted number is kept
    assert priv["neighboring_relation"] == acc["neighboring_relation"] == "add_or_remove"
    assert priv["epsilon_by_relation"]["add_or_remove"] == priv["epsilon"]
    direct = accounting.dpsgd_epsilon(
        noise_multiplier=acc["noise_multiplier"],
        sampling_rate=acc["sampling_rate"],
        steps=acc["steps"],
        delta=acc["delta"],
        neighboring_relation="label_substitution",
    )
    assert priv["epsilon_by_relation"]["label_substitution"] == pytest.approx(direct, rel=1e-12)
    assert 1.8 < direct < 1.95  # the 1.88 for sigma 1.7556
    assert priv["reaccounted"]["revision"] == "abc"
    again, changed2 = reaccount_record(new)
    assert not changed2 and again == new


def test_label_randomizer_record_is_stated_under_label_substitution():
    legacy = _legacy(_one("rr"))
    new, changed = reaccount_record(legacy)
    assert changed
    assert new["privacy"]["neighboring_relation"] == "label_substitution"
    assert new["privacy"]["epsilon_by_relation"] == {"label_substitution": legacy["privacy"]["epsilon"]}
    # the RR event, rebuilt from the stored keep probability (K = 10), re-accounts to the record's eps
    assert new["privacy"]["dp_accounting_relation"] == "REPLACE_ONE"
    assert label_events.label_event_from_record(new["privacy"]) == label_events.randomized_response_event(
        epsilon=1.0, num_classes=10
    )
    assert_label_event_reaccounts(new["privacy"])
    again, changed2 = reaccount_record(new)
    assert not changed2 and again == new


@pytest.mark.parametrize(
    "pattern",
    [
        "reports/table6-fashion-mnist-cpu-2026-11-23/results/fashion_mnist_simclr/rr_with_prior/*/eps0.5/*/seed0.json",
        "reports/gpu-2026-11-22/results/mnist/alibi/*/eps1.0/*/seed0.json",
        "reports/gpu-2026-11-22/results/mnist/rr_debiased/*/eps1.0/*/seed0.json",
        "reports/lpmst-table4-cpu-2026-11-26/results/mnist/lp_mst/*/eps4.0/*/seed0.json",
        "reports/regression-rand-hie-2026-11-23/results/rand_hie/optimal_unbiased/*/eps1.0/*/seed0.json",
        "reports/regression-rand-hie-2026-11-23/results/rand_hie/staircase/*/eps1.0/*/seed0.json",
    ],
)
def test_committed_label_randomizer_records_get_an_event_that_reaccounts(pattern):
    path = sorted(REPO.glob(pattern))[0]
    new, changed = reaccount_record(_legacy(path))
    assert changed and new["privacy"]["event_backfilled"]
    assert_label_event_reaccounts(new["privacy"])
    assert new["privacy"]["epsilon"] == records.read_record(path)["privacy"]["epsilon"]


def test_a_label_record_whose_event_does_not_reach_its_epsilon_is_refused():
    new, _ = reaccount_record(_legacy(_one("rr")))
    new["privacy"]["epsilon"] = 0.5  # the stored RR event is at eps 1
    with pytest.raises(ValueError, match="does not hold"):
        reaccount_record(new)


def test_inconsistent_record_is_refused():
    legacy = _legacy(_one("dpsgd"))
    legacy["privacy"]["accounting"]["epsilon"] = 0.5  # not what its event accounts to
    with pytest.raises(ValueError, match="does not match its stored event"):
        reaccount_record(legacy)


def test_script_rewrites_in_place_and_is_idempotent(tmp_path):
    for m in ("dpsgd", "rr"):
        dst = tmp_path / m / "seed0.json"
        dst.parent.mkdir(parents=True)
        records.write_record(dst, _legacy(_one(m)))
    script = [sys.executable, str(REPO / "workflow/scripts/reaccount_records.py"), str(tmp_path)]
    out = subprocess.run(script, capture_output=True, text=True, check=True).stdout
    assert "re-accounted 2 records" in out
    rec = json.loads((tmp_path / "dpsgd/seed0.json").read_text())
    assert set(rec["privacy"]["epsilon_by_relation"]) == {"add_or_remove", "label_substitution"}
    assert not list(tmp_path.rglob("*.part"))
    out2 = subprocess.run(script, capture_output=True, text=True, check=True).stdout
    assert "re-accounted 0 records; 2 already complete" in out2
    bad = subprocess.run(script[:2] + [str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and "not a directory" in bad.stderr
