"""The prepared tabular format: bad input is refused with the value and the fix, nothing is
half-written; and the RAND HIE stand-in prepares from the statsmodels wheel."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.data.tabular import TabularDataError, load_prepared_tabular, save_prepared_tabular


def _arrays(n=10, m=4):
    rng = np.random.default_rng(0)
    return {
        "x_num_train": rng.normal(size=(n, 2)),
        "x_num_test": rng.normal(size=(m, 2)),
        "x_cat_train": np.ones((n, 1), int),
        "x_cat_test": np.ones((m, 1), int),
        "y_train": rng.integers(0, 5, n).astype(float),
        "y_test": rng.integers(0, 5, m).astype(float),
    }


META = {
    "dataset": "t",
    "source": "synthetic_standin",
    "label": "y",
    "label_lower": 0,
    "label_upper": 5,
    "label_integer": True,
    "cat_vocab_sizes": [2],
}


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda a: a.__setitem__("y_train", a["y_train"] + 10), "outside the configured range"),
        (lambda a: a["x_num_train"].__setitem__((3, 1), np.nan), "NaN/infinite"),
        (
            lambda a: (
                a.__setitem__("y_test", a["y_test"][:0]),
                a.__setitem__("x_num_test", a["x_num_test"][:0]),
                a.__setitem__("x_cat_test", a["x_cat_test"][:0]),
            ),
            "test split is empty",
        ),
        (lambda a: a.__setitem__("x_cat_train", a["x_cat_train"] * 7), "outside their vocabularies"),
    ],
)
def test_bad_input_is_refused_and_nothing_written(tmp_path, mutate, match):
    arrays = _arrays()
    mutate(arrays)
    out = tmp_path / "d.npz"
    with pytest.raises(TabularDataError, match=match):
        save_prepared_tabular(out, arrays, META)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_round_trip(tmp_path):
    d = load_prepared_tabular(save_prepared_tabular(tmp_path / "d.npz", _arrays(), META))
    assert d.kind == "tabular" and d.label_support.tolist() == [0, 1, 2, 3, 4, 5] and d.is_standin


def test_rand_hie_prepares_from_the_package(tmp_path):
    pytest.importorskip("statsmodels")
    from labeldp.data.prepare import load_prepared
    from labeldp.data.sources.rand_hie import fetch_packaged, prepare_dataset

    (raw,) = fetch_packaged(data_dir=tmp_path / "raw", quiet=True)
    d = load_prepared(prepare_dataset(raw_dir=raw.parent, out_path=tmp_path / "r.npz"))
    assert d.source == "package_standin" and d.is_standin and not d.is_synthetic
    assert d.y_train.size + d.y_test.size == 20190 and d.y_train.size == 16152
    assert d.y_train.max() <= 20 and d.metadata["preprocessing"]["labels_clipped_at_upper"] > 0


def test_rand_hie_refuses_a_changed_file(tmp_path):
    pytest.importorskip("statsmodels")
    from labeldp.data.sources.rand_hie import fetch_packaged, prepare_dataset

    (raw,) = fetch_packaged(data_dir=tmp_path / "raw", quiet=True)
    raw.write_text(raw.read_text().replace("\n0,", "\n1,", 1))
    with pytest.raises(TabularDataError, match="sha256"):
        prepare_dataset(raw_dir=raw.parent, out_path=tmp_path / "r.npz")
    assert not (tmp_path / "r.npz").exists()


BINARY_META = {**META, "task": "binary_classification", "label_upper": 1, "sensitive_features": ["c0"]}


def _binary_arrays(n=10, m=4):
    a = _arrays(n, m)
    a["y_train"], a["y_test"] = a["y_train"] % 2, a["y_test"] % 2
    a["user_train"], a["user_test"] = np.arange(n) // 2, np.arange(m) // 2
    return a


def test_binary_task_with_users_and_validation_split_round_trips(tmp_path):
    a = _binary_arrays()
    a.update(x_num_val=a["x_num_test"], x_cat_val=a["x_cat_test"], y_val=a["y_test"], user_val=a["user_test"])
    d = load_prepared_tabular(save_prepared_tabular(tmp_path / "d.npz", a, BINARY_META))
    assert d.task == "binary_classification" and d.sensitive_features == ["c0"]
    np.testing.assert_array_equal(d.user_train, np.arange(10) // 2)
    np.testing.assert_array_equal(d.y_val, a["y_test"])
    assert load_prepared_tabular(save_prepared_tabular(tmp_path / "r.npz", _arrays(), META)).user_train is None


@pytest.mark.parametrize(
    "mutate,meta,match",
    [
        (lambda a: None, {**BINARY_META, "label_upper": 5}, "integer labels in \\[0, 1\\]"),
        (
            lambda a: a.__setitem__("user_train", a["user_train"][:3]),
            BINARY_META,
            "one non-negative user index per row",
        ),
        (lambda a: a.__setitem__("y_val", a["y_test"]), BINARY_META, "x_num_val, x_cat_val and y_val together"),
        (lambda a: None, {**META, "task": "ranking"}, "not one of"),
    ],
)
def test_bad_binary_or_user_data_is_refused(tmp_path, mutate, meta, match):
    a = _binary_arrays()
    mutate(a)
    with pytest.raises(TabularDataError, match=match):
        save_prepared_tabular(tmp_path / "d.npz", a, meta)
    assert not list(tmp_path.iterdir())
