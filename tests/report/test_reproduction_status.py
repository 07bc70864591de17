"""The reproduction status: each published cell's best complete evidence across reports, strictly scored."""

from __future__ import annotations

import csv
import json

import pytest

from labeldp.report import reproduction_status as status
from labeldp.report import tables
from tests.helpers import repo_config

FIELDS = [
    "table", "paper_table", "dataset", "column", "method", "variant", "paper_method", "paper_variant", "metric",
    "column_metric", "selection", "epsilon", "status", "mean", "std", "n_seeds", "n_missing_seeds", "n_runs",
    "n_planned_runs", "best_hparams", "valid", "reference_only", "paper",
]  # fmt: skip


def _ref(table, dataset, method, eps, value, variant=""):
    return dict(table=table, dataset=dataset, method=method, variant=variant, epsilon=str(eps), k="",
                metric="test_accuracy_pct", value=str(value))  # fmt: skip


REF = [
    _ref("5a", "mnist", "rr", 2.0, 96.7),
    _ref("5a", "mnist", "rr", 2.0, 96.7),  # the reference file repeats rows: one cell
    _ref("5a", "mnist", "alibi", 0.01, 10.0),  # at chance
    _ref("5a", "mnist", "dpsgd", 1.0, 92.8),
    _ref("5a", "mnist", "lp_2st", 1.0, 90.0),
    _ref("3", "mnist", "labeldp_pro_selfspan", 0.1, 86.1, variant="amp_reference_only"),
    _ref("3", "mnist", "labeldp_pro_selfspan", 0.1, 64.5, variant="no_amp"),
    _ref("14", "fashion_mnist", "rr", 1.0, 70.0),
    _ref("5a", "mnist", "rr", float("inf"), 99.0),  # non-private: no cell
    _ref("6", "mnist", "rr", 2.0, 50.0),  # a table outside the chosen ones
]


def _row(column, mean, *, eps=2.0, method="rr", paper_table="5a", dataset="mnist", variant="", **kw):
    row = dict(
        table="t", paper_table=paper_table, dataset=dataset, column=column, method=method, variant="default",
        paper_method=method, paper_variant=variant, metric="test_accuracy_pct", column_metric="test_accuracy_pct",
        selection="paper", epsilon=f"{eps:g}", status="ok", mean=mean, std=0.5, n_seeds=3, n_missing_seeds=0,
        n_runs=3, n_planned_runs=3, best_hparams=json.dumps({"learning_rate": 0.2}), valid="True",
        reference_only="False", paper="",
    )  # fmt: skip
    row.update(kw)
    return row


def _csv(path, rows, fields=FIELDS):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture
def sources(tmp_path):
    grid = _csv(
        tmp_path / "reports" / "grid-report" / "tables" / "table5_grid.csv",
        [
            _row("rr", 93.7),
            _row("dpsgd", 90.5, eps=1.0, method="dpsgd"),  # outside by 2.3; explained below
            _row("lp_2st", 88.0, eps=1.0, method="lp_2st", std=5.0),  # 2.0 below: within, exactly at the tolerance
            _row("rr_heldout", 99.0, selection="held-out"),  # an honest selection: counted in the scorecards only
            _row("rr_partial", 99.5, n_runs=2),  # a partly searched grid
            _row("rr_two_seeds", 99.6, n_seeds=2, n_missing_seeds=1),
            _row("rr_invalid", 99.7, valid="False"),
            _row("rr_stopped", 99.8, column_metric="heldout_stopped_test_accuracy_pct"),
        ],
    )
    probe = _csv(tmp_path / "reports" / "probe-report" / "tables" / "rr_momentum.csv", [_row("rr", 96.0)])
    stale = _csv(
        tmp_path / "reports" / "old-report" / "tables" / "table5_old.csv",
        [_row("rr", 99.9)],
        fields=[f for f in FIELDS if f not in ("paper_method", "paper_variant")],
    )
    other = _csv(  # 000 Table 6, built before the fields: not one of the chosen tables, so not named
        tmp_path / "reports" / "old-report" / "tables" / "table6.csv",
        [_row("rr", 50.0, paper_table="6")],
        fields=[f for f in FIELDS if f not in ("paper_method", "paper_variant")],
    )
    return [grid, probe, stale, other]


def test_each_cell_takes_the_best_complete_paper_selection_row_of_any_source(sources):
    explanations = {"5a/mnist/dpsgd/eps*": {"why": "the grid's corner", "section": "Why eps 0.5-2 stop near 90%"}}
    rows, stale = status.build_status(csv_paths=sources, ref=REF, explanations=explanations)
    by_key = {r["key"]: r for r in rows}
    assert set(by_key) == {
        "5a/mnist/rr/eps2", "5a/mnist/alibi/eps0.01", "5a/mnist/dpsgd/eps1", "5a/mnist/lp_2st/eps1",
        "3/mnist/labeldp_pro_selfspan:amp_reference_only/eps0.1", "3/mnist/labeldp_pro_selfspan:no_amp/eps0.1",
        "14/fashion_mnist/rr/eps1",
    }  # fmt: skip
    rr = by_key["5a/mnist/rr/eps2"]
    # 96.0 of the probe beats the grid's 93.7; the held-out, partial, 2-seed, invalid, stopped and stale rows
    # (99.0-99.9) are not evidence of the paper's selection
    assert (rr["best"], rr["source"], rr["status"], rr["n_candidates"]) == (
        96.0,
        "probe-report/rr_momentum",
        "within",
        2,
    )
    assert rr["abs_diff"] == pytest.approx(0.7)
    assert stale == [str(sources[2])]
    assert by_key["5a/mnist/lp_2st/eps1"]["status"] == "within"  # |88 - 90| = 2: within the strict 2 points
    dpsgd = by_key["5a/mnist/dpsgd/eps1"]
    assert (dpsgd["status"], dpsgd["why"]) == ("outside", "the grid's corner")
    assert by_key["5a/mnist/alibi/eps0.01"]["status"] == "at chance"
    assert by_key["3/mnist/labeldp_pro_selfspan:amp_reference_only/eps0.1"]["status"] == "reference only"
    assert by_key["3/mnist/labeldp_pro_selfspan:no_amp/eps0.1"]["status"] == "not run"
    assert by_key["14/fashion_mnist/rr/eps1"]["why"] == ""


def test_the_strict_tolerance_ignores_the_std_and_the_counts_name_what_is_unexplained(sources):
    rows, stale = status.build_status(csv_paths=sources, ref=REF, settings={"tolerance_points": 1.9})
    by_key = {r["key"]: r for r in rows}
    assert by_key["5a/mnist/lp_2st/eps1"]["status"] == "outside"  # a std of 5 does not pass a 2-point miss
    (total,) = [s for s in status.summarise(rows) if s["paper_table"] == "all"]
    assert total == {
        "paper_table": "all", "cells": 5, "with_results": 3, "within": 1, "outside": 2, "not_run": 2,
        "unexplained": 4, "at_chance": 1, "reference_only": 1,
    }  # fmt: skip
    md = status.render_markdown(rows, stale, {"tolerance_points": 1.9})
    assert "no explanation yet" in md and "table5_old.csv" in md and "| all | 5 | 3 | 1 | 2 | 2 | 4 | 1 | 1 |" in md


def test_min_seeds_and_chance_are_settings(sources):
    rows, _ = status.build_status(csv_paths=sources, ref=REF, settings={"min_seeds": 4, "chance_pct": 95.0})
    by_key = {r["key"]: r for r in rows}
    assert by_key["5a/mnist/rr/eps2"]["status"] == "not run"  # no source has 4 seeds
    assert by_key["5a/mnist/dpsgd/eps1"]["status"] == "at chance"  # 92.8 <= 95


def test_an_explanation_for_no_published_cell_is_refused_with_its_key(sources):
    with pytest.raises(ValueError, match=r"5a/mnist/rr/eps3"):
        status.build_status(csv_paths=sources, ref=REF, explanations={"5a/mnist/rr/eps3": {"why": "x"}})


def test_explanations_file_needs_a_why(tmp_path):
    path = tmp_path / "why.yaml"
    path.write_text("5a/mnist/rr/eps2: {section: somewhere}\n")
    with pytest.raises(ValueError, match=r"'5a/mnist/rr/eps2' needs a 'why'"):
        status.load_explanations(path)
    path.write_text("5a/mnist/rr/eps2: {why: the optimiser, section: RR family at eps 2}\n")
    assert status.load_explanations(path) == {
        "5a/mnist/rr/eps2": {"why": "the optimiser", "section": "RR family at eps 2"}
    }


def test_a_reference_giving_one_cell_two_values_is_refused():
    with pytest.raises(ValueError, match="two values"):
        status.paper_cells([_ref("5a", "mnist", "rr", 2.0, 96.7), _ref("5a", "mnist", "rr", 2.0, 95.0)],
                           tables=["5a"], metric="test_accuracy_pct")  # fmt: skip


def test_main_writes_both_files(sources, tmp_path):
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    with open(ref_dir / "labeldp_pro_tables.csv", "w", newline="") as f:
        w = csv.DictWriter(
            f, fieldnames=["paper", "table", "dataset", "method", "variant", "epsilon", "k", "metric", "value"]
        )
        w.writeheader()
        w.writerows({"paper": "000", **r} for r in REF)
    out = tmp_path / "out"
    cfg = {"reproduction_status": {"sources": ["unused"], "tables": ["5a"]}}
    argv = ["--config-json", json.dumps(cfg), "--reference-dir", str(ref_dir), "--out-dir", str(out)]
    assert status.main([*argv, *map(str, sources)]) == 0
    with open(out / "reproduction_status.csv") as f:
        assert [r["key"] for r in csv.DictReader(f)] == [
            "5a/mnist/rr/eps2", "5a/mnist/alibi/eps0.01", "5a/mnist/dpsgd/eps1", "5a/mnist/lp_2st/eps1",
        ]  # fmt: skip
    assert (out / "reproduction_status.md").read_text().startswith("# Reproduction status")


def test_tidy_rows_name_the_published_cell_each_column_stands_beside(tmp_path):
    cfg = repo_config(results_dir=str(tmp_path / "results"))
    res = tables.build_table(cfg, "table2")
    tidy = {r["column"]: r for r in tables.tidy_rows(res)}
    assert (tidy["vanilla"]["paper_method"], tidy["vanilla"]["paper_variant"]) == (
        "labeldp_pro_altconv",
        "vanilla_lambda1",
    )
    assert tidy["smoothed"]["paper_variant"] == "smoothed_lambda0.75" and tidy["vanilla"]["method"] == "labeldp_pro"
