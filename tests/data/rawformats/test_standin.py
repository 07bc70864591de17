"""The tabular stand-in writers' common start: the marker first, the row count, the default split."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.data.rawformats.standin import begin_tabular_standin, is_standin_dir, read_standin_marker


def test_the_marker_is_written_with_the_sizes_and_the_rng_is_the_seeds(tmp_path):
    directory, n_rows, rng = begin_tabular_standin(tmp_path / "raw", dataset="toy", seed=3, n_train=40, n_test=10)
    assert n_rows == 50 and is_standin_dir(directory)
    marker = read_standin_marker(directory)
    assert (marker["dataset"], marker["seed"], marker["n_train"], marker["n_test"], marker["n_rows"]) == (
        "toy",
        3,
        40,
        10,
        50,
    )
    assert rng.integers(0, 10**9) == np.random.default_rng(3).integers(0, 10**9)


def test_rows_alone_give_an_80_20_split_with_a_test_row(tmp_path):
    _, n_rows, _ = begin_tabular_standin(tmp_path / "a", dataset="toy", seed=0, n_rows=3)
    marker = read_standin_marker(tmp_path / "a")
    assert n_rows == 3 and marker["n_test"] == 1 and marker["n_train"] == 2


@pytest.mark.parametrize("kwargs", [{"n_rows": 1}, {"n_train": 1, "n_test": 0}])
def test_fewer_than_two_rows_are_refused_before_anything_is_written(tmp_path, kwargs):
    with pytest.raises(ValueError, match="toy stand-in needs at least 2 rows"):
        begin_tabular_standin(tmp_path / "raw", dataset="toy", seed=0, **kwargs)
    assert not (tmp_path / "raw").exists()


def test_neither_rows_nor_both_splits_is_refused(tmp_path):
    with pytest.raises(ValueError, match="n_rows, or n_train and n_test"):
        begin_tabular_standin(tmp_path / "raw", dataset="toy", seed=0, n_train=10)
