"""Table headers (labeldp.report.render)."""

from __future__ import annotations

from labeldp.report.render import MAX_LISTED_REVISIONS, revisions_text


def test_a_few_revisions_are_listed_and_many_are_counted_with_the_most_used_named():
    assert revisions_text(["b", "a", "b"]) == "a, b"
    assert revisions_text([]) == "-"
    many = [f"rev{i}" for i in range(MAX_LISTED_REVISIONS)] + ["rev1", "rev1", "rev2", "x+dirty"]
    text = revisions_text(many)
    assert text.startswith(f"{MAX_LISTED_REVISIONS + 1} revisions over {len(many)} records (1 of them")
    assert "the most used: rev1 (3 records), rev2 (2 records), rev0 (1 record)" in text
    assert "rev5" not in text
