"""000 Table 12's eps* (labeldp.report.intersection): the bracket, its open ends, the paper's values, the config
checks, and the variant delta that Table 12(b) runs at."""

from __future__ import annotations

import pytest

from labeldp import plan
from labeldp.config_semantics import validate_semantics
from labeldp.plan import ConfigError
from labeldp.report import intersection
from tests.helpers import repo_config


@pytest.mark.parametrize(
    "pro,base,want",
    [
        ([90, 88, 85, 80], [70, 80, 86, 90], (0.9, 1.0, "0.9 ~ 1", 1)),  # RR first better at 1.0
        ([90, 88, 85, 80], [70, 88, 84, 79], (1.1, None, "> 1.1", 0)),  # a tie is not a win; never better
        ([60, 61, 62, 63], [70, 71, 72, 73], (None, 0.8, "< 0.8", 0)),  # better everywhere
        ([90, 80, 85, 80], [70, 85, 80, 90], (0.8, 0.9, "0.8 ~ 0.9", 3)),  # noisy curves: first crossing, flips counted
    ],
)
def test_bracket_is_the_first_eps_where_the_baseline_wins(pro, base, want):
    eps = [0.8, 0.9, 1.0, 1.1]
    got = intersection.bracket(eps, pro, base)
    assert (got["low"], got["high"], got["text"], got["crossings"]) == want


def test_bracket_refuses_unordered_or_mismatched_curves():
    with pytest.raises(ValueError, match="eps must increase"):
        intersection.bracket([1.0, 0.9], [1, 2], [2, 1])
    with pytest.raises(ValueError, match="one LabelDP-Pro and one baseline value per eps"):
        intersection.bracket([1.0, 1.1], [1], [2, 1])


def test_the_papers_brackets_are_read_for_every_row_of_table12():
    cfg = repo_config()
    paper = intersection.load_paper_brackets(cfg["reference_dir"])
    keys = [(r["part"], r["key"]) for r in cfg["tables"]["table12"]["rows"]]
    assert [paper[k] for k in keys] == ["1 ~ 1.1", "1.1 ~ 1.2", "1.2 ~ 1.3", "1.3 ~ 1.4", "1.2 ~ 1.3", "1 ~ 1.1"]


def test_table12_plans_only_its_sweeps_runs():
    cfg = repo_config("smoke.yaml")
    by_table = plan.runs_by_table(cfg)
    sources = plan.source_tables(cfg["tables"]["table12"])
    assert sources == ["table12_k2", "table12_k5", "table12_k10", "table12_delta"]
    assert {r.record_path for r in by_table["table12"]} == {r.record_path for s in sources for r in by_table[s]}


def test_a_row_naming_a_missing_column_is_refused_before_any_job():
    cfg = repo_config()
    cfg["tables"]["table12"]["rows"][0] = {**cfg["tables"]["table12"]["rows"][0], "pro": "labeldp_pro_typo"}
    with pytest.raises(ConfigError, match="'labeldp_pro_typo' is not a column of table12_k2"):
        validate_semantics(cfg)


def test_a_variants_delta_is_its_runs_target_delta_and_is_checked():
    cfg = repo_config()
    runs = plan.table_runs(cfg, "table12_delta")  # that table alone (the full config plans 606k runs)
    deltas = {r.spec.variant: r.spec.delta for r in runs if r.spec.method == "labeldp_pro"}
    assert deltas == {
        "delta_inv_n": pytest.approx(1 / 60000),
        "delta_inv_n1.1": pytest.approx(60000**-1.1),
        "delta_inv_n1.2": pytest.approx(60000**-1.2),
    }
    assert all("delta" not in r.spec.options for r in runs)  # the method never sees it as an option
    assert {r.spec.delta for r in runs if r.spec.method in ("rr", "rr_debiased")} == {cfg["delta"]}
    cfg["variants"]["labeldp_pro"]["delta_inv_n"]["delta"] = 2.0
    with pytest.raises(ConfigError, match=r"variants.labeldp_pro.delta_inv_n.delta must be a number in \(0, 1\)"):
        plan.table_runs(cfg, "table12_delta")


def test_table12_rows_come_from_the_sweeps_records(tmp_path, monkeypatch):
    """A planted K = 10 sweep: LabelDP-Pro ahead until eps 1.1, RR-Debiased ahead from 1.2 (RR never): eps* is
    1.1 ~ 1.2; the rows whose sweeps have no records say not run."""
    from tests.helpers import install_fake_methods
    from tests.helpers import write_table_record as _write

    install_fake_methods(monkeypatch, ["rr", "rr_debiased", "labeldp_pro"], axes=("learning_rate",))
    cfg = repo_config(results_dir=str(tmp_path / "results"), reference_dir=repo_config()["reference_dir"])
    cfg["seeds"] = [0]
    cfg["grids"]["full"]["table5a"]["learning_rate"] = [0.1]
    acc = {
        "labeldp_pro": {1.0: 90, 1.1: 89, 1.2: 88, 1.3: 87},
        "rr_debiased": {1.0: 85, 1.1: 88, 1.2: 89, 1.3: 95},
        "rr": {1.0: 10, 1.1: 10, 1.2: 10, 1.3: 10},
    }
    cfg["tables"]["table12_k10"]["epsilons"] = [1.0, 1.1, 1.2, 1.3]
    for col in plan.columns(cfg["tables"]["table12_k10"]):
        for eps in (1.0, 1.1, 1.2, 1.3):
            for run in plan.cell_runs(cfg, "table12_k10", col, eps):
                _write(cfg, run, acc[col.id][eps])
    rows = {r["key"]: r for r in intersection.build_rows(cfg, "table12")}
    k10 = rows["K=10"]
    assert (k10["status"], k10["eps_star"], k10["paper"], k10["crossings"]) == ("ok", "1.1 ~ 1.2", "1.2 ~ 1.3", 1)
    assert k10["baseline_column"].split() == ["rr_debiased"] * 4
    assert rows["K=2"]["status"] == "not run" and "no eps of table12_k2" in rows["K=2"]["reason"]
