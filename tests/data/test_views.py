"""Split views (labeldp.data.views): 002's random 80/20 Criteo Attribution split as a dataset of its own."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from labeldp import plan
from labeldp.data.sources import criteo_attribution as ca
from labeldp.data import views
from labeldp.data.prepare import load_prepared, main as prepare_main
from labeldp.report.tables import _ref_dataset

VIEW = "criteo_attribution_random_80_20"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp("view")
    ca.write_standin(d / "raw" / "criteo_attribution", n_rows=1500, seed=2)
    raw = d / "raw" / "criteo_attribution"
    assert prepare_main([VIEW, "--raw-dir", str(raw), "--out", str(d / "view.npz")]) == 0
    assert prepare_main(["criteo_attribution", "--raw-dir", str(raw), "--out", str(d / "base.npz")]) == 0
    return d / "view.npz", d / "base.npz"


def test_view_prepares_the_base_rows_with_002s_random_split(prepared):
    view, base = (load_prepared(p) for p in prepared)
    assert view.name == "criteo_attribution" and view.metadata["view"] == VIEW and "view" not in base.metadata
    assert view.metadata["split"]["kind"] == "random" and base.metadata["split"]["kind"] == "users"
    n_view = view.y_train.size + view.y_test.size
    assert n_view == view.metadata["preprocessing"]["rows_clicked"]  # every clicked impression is kept
    assert abs(view.y_test.size / n_view - 0.2) < 0.02  # 80/20 of the rows
    # the rows are the same clicked impressions with the same labels, only split differently
    assert n_view >= base.y_train.size + base.y_test.size
    assert view.y_train.sum() + view.y_test.sum() >= base.y_train.sum() + base.y_test.sum()
    assert views.held_dataset(view) == VIEW and views.held_dataset(base) == "criteo_attribution"
    assert view.is_synthetic  # the stand-in marker carries through


def test_view_layout_reads_the_base_raw_files_and_config():
    assert views.base_dataset(VIEW) == "criteo_attribution" and views.base_dataset("mnist") == "mnist"
    assert plan.raw_dir("d", VIEW, "standin") == plan.raw_dir("d", "criteo_attribution", "standin")
    cfg = {"data_dir": "d", "datasets": {"criteo_attribution": {"standin": True, "subset": None}}}
    assert plan.dataset_kind(VIEW) == "tabular"
    assert plan.prepared_path(cfg, VIEW) == f"d/prepared/{VIEW}-standin-full.npz"
    own = {"data_dir": "d", "datasets": {"criteo_attribution": {"standin": True}, VIEW: {"standin": False}}}
    assert plan.data_source(own, VIEW) == "official"  # an entry of its own wins
    assert _ref_dataset({"dataset": VIEW}) == "criteo_attribution"  # 002's cells are filed under the base


def test_hybrid_tables_2_and_3_use_the_random_split():
    from labeldp.config import load_config

    cfg = load_config("workflow/config/config.yaml")
    assert cfg["tables"]["hybrid_table2"]["dataset"] == VIEW and cfg["tables"]["hybrid_table3"]["dataset"] == VIEW
    assert cfg["tables"]["table7"]["dataset"] == "criteo_attribution"  # 000 Table 7: disjoint users


def test_runner_refuses_data_prepared_for_another_split(prepared, tmp_path):
    from labeldp import runner

    view_path, base_path = prepared
    spec = {
        "dataset": VIEW,
        "method": "rr",
        "variant": "default",
        "epsilon": 1.0,
        "delta": 0.0,
        "seed": 0,
        "hparams": {},
    }

    def args(path):
        return argparse.Namespace(spec=json.dumps(spec), data=str(path), out=str(tmp_path / "r.json"))

    with pytest.raises(SystemExit, match="holds 'criteo_attribution'.*run is for 'criteo_attribution_random_80_20'"):
        runner.load_run(args(base_path))
    s, d = runner.load_run(args(view_path))
    assert s.dataset == VIEW and d.name == "criteo_attribution"


def test_unknown_view_is_refused(tmp_path):
    with pytest.raises(KeyError):
        views.prepare_view("mnist", raw_dir=tmp_path, out_path=tmp_path / "x.npz", subset=None, source="official")
    assert np.all([v.base in plan.DATASET_KINDS for v in views.VIEWS.values()])


@pytest.mark.parametrize("view,k", [("mnist_k2", 2), ("mnist_k5", 5)])
def test_class_views_keep_exactly_mnists_first_k_classes(tmp_path, view, k):
    """000 Table 12(a): MNIST restricted to its first K classes, both splits, as a dataset of its own."""
    from tests.data.test_prepare import _need

    raw = _need("mnist")
    assert prepare_main([view, "--raw-dir", str(raw), "--out", str(tmp_path / "v.npz")]) == 0
    data = load_prepared(tmp_path / "v.npz")
    counts = {2: (12665, 2115), 5: (30596, 5139)}[k]  # MNIST's digits 0..K-1 in the official splits
    assert (data.y_train.size, data.y_test.size) == counts
    assert set(np.unique(data.y_train).tolist()) == set(range(k)) == set(np.unique(data.y_test).tolist())
    assert data.num_classes == k and data.name == "mnist" and data.metadata["view"] == view
    assert data.metadata["classes_kept"] == list(range(k)) and views.held_dataset(data) == view
    assert plan.dataset_kind(view) == "image" and views.base_dataset(view) == "mnist"
    # the subset applies after the restriction: the first n examples of the K classes
    assert prepare_main([view, "--raw-dir", str(raw), "--out", str(tmp_path / "s.npz"), "--subset", "100"]) == 0
    sub = load_prepared(tmp_path / "s.npz")
    np.testing.assert_array_equal(sub.y_train, data.y_train[:100])


def test_a_class_restriction_outside_the_datasets_classes_is_refused(tmp_path):
    from labeldp.data.prepare import prepare_image_dataset
    from tests.data.test_prepare import _need

    raw = _need("mnist")
    for bad in (1, 11):
        with pytest.raises(ValueError, match=r"classes must be an integer in \[2, 10\]"):
            prepare_image_dataset("mnist", raw_dir=raw, out_path=tmp_path / "x.npz", classes=bad)
    assert not (tmp_path / "x.npz").exists()
