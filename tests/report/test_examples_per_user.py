"""000 Figure 5 / 002 Figure 1: examples per user (labeldp.report.examples_per_user)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from labeldp.report.examples_per_user import (
    examples_per_user,
    main,
    write_examples_per_user_figure,
)


def _npz(path, user_train, user_test, source="synthetic_standin"):
    np.savez(
        path,
        user_train=np.asarray(user_train),
        user_test=np.asarray(user_test),
        metadata=np.asarray(json.dumps({"dataset": "criteo_attribution", "source": source})),
    )
    return path


def test_counts_shares_above_each_cap_and_the_stand_in_label(tmp_path):
    train = [0, 0, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]  # users with 3, 1 and 11 examples
    md = write_examples_per_user_figure(
        data_path=_npz(tmp_path / "d.npz", train, [0, 1, 1]), out_stem=tmp_path / "f" / "users"
    )
    assert list(examples_per_user(train)) == [3, 1, 11]
    rows = [r for r in csv.DictReader(md.with_suffix(".csv").open()) if r["split"] == "train"]
    assert {(int(r["examples"]), int(r["users"])) for r in rows} == {(1, 1), (3, 1), (11, 1)}
    text = md.read_text()
    assert "stand-in" in text
    # train: above k=1: 2 of 3 users; above 2: 2 of 3; above 5: 1 of 3; above 10: 1 of 3
    assert "| train | 3 | 15 | 5.00 | 3 | 11 | 66.7% | 66.7% | 33.3% | 33.3% |" in text
    assert md.with_suffix(".png").stat().st_size > 0 and md.with_suffix(".pdf").stat().st_size > 0
    real = write_examples_per_user_figure(
        data_path=_npz(tmp_path / "r.npz", train, [0], source="official"), out_stem=tmp_path / "real"
    )
    assert "stand-in" not in real.read_text()


def test_a_file_without_users_or_with_gaps_is_refused_naming_the_fix(tmp_path):
    np.savez(tmp_path / "x.npz", y_train=np.zeros(3))
    with pytest.raises(SystemExit, match="no user_train.*snakemake"):
        main(["--data", str(tmp_path / "x.npz"), "--out-stem", str(tmp_path / "o")])
    with pytest.raises(ValueError, match="0..U-1"):
        examples_per_user([0, 2, 2])
