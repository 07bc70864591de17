"""Curves against eps drawn from other tables' cells (labeldp.report.eps_curves; 002 Figures 2-4): a series is the
best of its columns per eps, the lowest for a lower-is-better metric (002's minimum over example caps)."""

from __future__ import annotations

import pytest

from labeldp import plan
from labeldp.config_semantics import validate_semantics
from labeldp.plan import ConfigError
from labeldp.report import eps_curves
from tests.helpers import install_fake_methods, repo_config
from tests.helpers import write_table_record as _write


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    install_fake_methods(
        monkeypatch, ["rr", "rr_debiased", "dpsgd", "labeldp_pro", "lp_2st", "alibi"], axes=("learning_rate",)
    )
    c = repo_config(results_dir=str(tmp_path / "results"))
    c["seeds"] = [0]
    c["grids"]["full"]["table5a"]["learning_rate"] = [0.1]
    c["tables"]["table5_mnist"]["epsilons"] = [0.1, 1.0]
    c["tables"]["curves"] = {
        "paper_table": "test",
        "kind": "figure",
        "renderer": "eps_curves",
        "title": "t",
        "panels": [
            {
                "table": "table5_mnist",
                "title": "MNIST",
                "series": [
                    {"label": "RR family", "ref_method": "rr"},
                    {"label": "LabelDP-Pro", "ref_method": "labeldp_pro"},
                ],
            }
        ],
    }
    return c


def _plant(cfg, values):
    for col in plan.columns(cfg["tables"]["table5_mnist"]):
        for eps in (0.1, 1.0):
            if (col.id, eps) in values:
                for run in plan.cell_runs(cfg, "table5_mnist", col, eps):
                    _write(cfg, run, values[(col.id, eps)])


def test_a_series_takes_the_best_of_its_columns_and_says_which(cfg, monkeypatch):
    # two columns share ref_method "rr" when one is relabelled: the series is their best (higher accuracy)
    cols = cfg["tables"]["table5_mnist"]["columns"]
    cfg["tables"]["table5_mnist"]["columns"] = [
        {**c, "ref_method": "rr"} if c["id"] == "rr_debiased" else c for c in cols
    ]
    _plant(
        cfg,
        {
            ("rr", 0.1): 30.0,
            ("rr_debiased", 0.1): 40.0,
            ("rr", 1.0): 80.0,
            ("rr_debiased", 1.0): 70.0,
            ("labeldp_pro", 0.1): 85.0,
        },
    )
    rows = {(r["series"], r["epsilon"]): r for r in eps_curves.build_rows(cfg, "curves")}
    assert (rows[("RR family", 0.1)]["value"], rows[("RR family", 0.1)]["column"]) == (40.0, "rr_debiased")
    assert (rows[("RR family", 1.0)]["value"], rows[("RR family", 1.0)]["column"]) == (80.0, "rr")
    assert rows[("LabelDP-Pro", 0.1)]["value"] == 85.0 and rows[("LabelDP-Pro", 0.1)]["paper"] is not None
    assert rows[("LabelDP-Pro", 1.0)]["status"] == "not run"
    # a lower-is-better metric takes the lowest (002's minimum over caps)
    monkeypatch.setattr(eps_curves, "LOWER_IS_BETTER", ("test_accuracy_pct",))
    rows = {(r["series"], r["epsilon"]): r for r in eps_curves.build_rows(cfg, "curves")}
    assert rows[("RR family", 0.1)]["value"] == 30.0 and rows[("RR family", 1.0)]["value"] == 70.0


def test_a_panel_naming_a_missing_table_is_refused(cfg):
    cfg["tables"]["curves"]["panels"][0]["table"] = "no_such_table"
    with pytest.raises(ConfigError, match=r"tables.curves.panels\[0\].table: 'no_such_table'"):
        validate_semantics(cfg)
