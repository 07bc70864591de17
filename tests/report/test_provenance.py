"""Table headers' provenance lines (labeldp.report.provenance)."""

from __future__ import annotations

from labeldp.report.provenance import MAX_LISTED_REVISIONS, pretrained_starts, revisions_text


def test_a_few_revisions_are_listed_and_many_are_counted_with_the_most_used_named():
    assert revisions_text(["b", "a", "b"]) == "a, b"
    assert revisions_text([]) == "-"
    many = [f"rev{i}" for i in range(MAX_LISTED_REVISIONS)] + ["rev1", "rev1", "rev2", "x+dirty"]
    text = revisions_text(many)
    assert text.startswith(f"{MAX_LISTED_REVISIONS + 1} revisions over {len(many)} records (1 of them")
    assert "the most used: rev1 (3 records), rev2 (2 records), rev0 (1 record)" in text
    assert "rev5" not in text


def test_the_pretrained_starting_points_are_named_with_their_state_and_counted():
    init = {
        "name": "p",
        "dataset": {"name": "cifar100", "source": "synthetic_standin", "n_train": 512},
        "config": {"epochs": 1},
        "test_accuracy_pct": 1.25,
        "state_sha256": "0123456789abcdef",
    }
    other = {**init, "state_sha256": "fedcba9876543210"}
    recs = [{"details": {"init_from": init}}, {"details": {"init_from": init}}, {"details": {"init_from": other}}, {}]
    text = pretrained_starts(recs)
    assert (
        "p (cifar100, synthetic_standin, n_train=512, 1 epochs, test accuracy 1.2%, state 0123456789ab): 2 records"
        in text
    )
    assert "state fedcba987654): 1 record" in text
    assert pretrained_starts([{}, {"details": {}}]) == ""
