"""Successive halving (labeldp.halving): the kept points, the cell chosen among them, the sweeps, the header."""

from __future__ import annotations

import copy
import json

import pytest

from labeldp import halving, plan, records, sweeps
from labeldp.heldout_stopping import STOPPED_SELECTION_METRIC
from labeldp.report import render, tables
from tests.helpers import install_fake_methods, repo_config
from tests.helpers import write_table_record as _write

LRS = [0.05, 0.1, 0.2, 0.4]


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    install_fake_methods(monkeypatch, ["dpsgd"], axes=("learning_rate",))
    c = repo_config(results_dir=str(tmp_path / "results"))
    c["seeds"] = [0, 1, 2]
    c["grids"]["full"]["table5a"]["learning_rate"] = LRS
    t = c["tables"]["table5_mnist"]
    t.update(epsilons=[1.0], search={"successive_halving": {"keep": 2}}, search_cost=False)
    return c


def _cell(cfg, col_id="dpsgd", eps=1.0):
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}[col_id]
    return col, plan.cell_runs(cfg, "table5_mnist", col, eps)


def _plant(cfg, values):
    """``values[(lr, seed)] = accuracy`` written as records of the dpsgd cell at eps 1."""
    _, runs = _cell(cfg)
    for run in runs:
        key = (run.spec.hparams["learning_rate"], run.spec.seed)
        if key in values:
            acc = values[key]
            _write(cfg, run, acc, diverged=acc != acc)


def test_the_kept_points_are_the_best_first_seed_scores_and_a_diverged_run_ranks_last(cfg):
    _plant(cfg, {(0.05, 0): 80.0, (0.1, 0): 88.0, (0.2, 0): float("nan"), (0.4, 0): 85.0})
    _, runs = _cell(cfg)
    search = halving.search_cell(cfg, "table5_mnist", runs, metric="test_accuracy_pct")
    kept_lrs = [
        next(r.spec.hparams["learning_rate"] for r in runs if plan.hp_id(r.spec.hparams) == hp) for hp in search.kept
    ]
    assert kept_lrs == [0.1, 0.4]
    # stage 1 (4 runs) and the kept points' other seeds (2 x 2)
    assert len(search.planned) == 4 + 4
    assert {r.spec.hparams["learning_rate"] for r in search.candidates} == {0.1, 0.4}


def test_an_error_metric_keeps_the_lowest(cfg):
    _, runs = _cell(cfg)
    first = [r for r in runs if r.spec.seed == 0]
    for r, v in zip(first, [3.0, 1.0, 2.0, 4.0]):
        _write(cfg, r, 0.0)
        rec = json.loads(open(r.record_path).read())
        rec["metrics"]["test_mse"] = v
        open(r.record_path, "w").write(json.dumps(rec))
    kept = halving.kept_points(first, keep=2, metric="test_mse")
    assert kept == (plan.hp_id(first[1].spec.hparams), plan.hp_id(first[2].spec.hparams))


def test_a_stopped_metric_keeps_the_best_held_out_curves_not_the_plan_order(cfg):
    """The honest stopping metric (labeldp.heldout_stopping) is read from each record's curves: the points kept are
    those whose best held-out epoch is highest (lr 0.2, 0.4), not the first in plan order nor the test curve's best."""
    _, runs = _cell(cfg)
    first = [r for r in runs if r.spec.seed == 0]
    peaks = {0.05: 30.0, 0.1: 20.0, 0.2: 40.0, 0.4: 35.0}
    for r in first:
        _write(cfg, r, 50.0)
        rec = records.read_record(r.record_path)
        lr = r.spec.hparams["learning_rate"]
        rec["details"] = {
            "test_accuracy_by_epoch": [90.0 + 10 * lr, 60.0],
            "validation_noisy_accuracy_by_epoch": [10.0, peaks[lr]],
        }
        records.write_record(r.record_path, rec)
    kept = halving.kept_points(first, keep=2, metric=STOPPED_SELECTION_METRIC)
    assert kept == tuple(plan.hp_id({**first[0].spec.hparams, "learning_rate": lr}) for lr in (0.2, 0.4))


def test_stage_one_incomplete_keeps_nothing_and_the_cell_says_so(cfg):
    _plant(cfg, {(0.05, 0): 80.0, (0.1, 0): 88.0})
    res = tables.build_table(cfg, "table5_mnist")
    cell = res.cells[("dpsgd", 1.0)]
    assert cell.n_planned_runs == 4 and cell.n_runs == 2
    assert "stage 1 incomplete" in cell.reason and cell.n_seeds == 1 and cell.n_planned_seeds == 3


def test_before_the_checkpoint_a_cell_is_partial_even_where_a_point_has_every_seed(cfg):
    """Other seeds of a point can have records before stage 1 is complete (another table of the same results
    directory trained them): the cell is still a first-seed mean, partial, never the row's best."""
    _plant(cfg, {(0.05, 0): 80.0, (0.1, 0): 70.0, (0.1, 1): 99.0, (0.1, 2): 99.0})
    res = tables.build_table(cfg, "table5_mnist")
    cell = res.cells[("dpsgd", 1.0)]
    assert cell.mean == pytest.approx(80.0) and cell.n_seeds == 1 and cell.n_missing == 2
    assert "stage 1 incomplete" in cell.reason and res.best[1.0] == set()


def test_after_the_checkpoint_a_kept_point_without_its_seeds_keeps_the_cell_from_being_bold(cfg):
    """The cell picks among the kept points that have every seed, but the missing seeds of another kept point could
    still change it: shown, never the row's best, as the scorecard leaves it unscored."""
    values = {(0.05, 0): 80.0, (0.1, 0): 90.0, (0.2, 0): 85.0, (0.4, 0): 70.0}
    values.update({(0.2, 1): 85.0, (0.2, 2): 85.0})  # lr 0.1, kept, lacks seeds 1 and 2
    _plant(cfg, values)
    res = tables.build_table(cfg, "table5_mnist")
    cell = res.cells[("dpsgd", 1.0)]
    assert cell.best_hparams["learning_rate"] == 0.2 and cell.n_missing == 0
    assert cell.n_runs == 6 and cell.n_planned_runs == 8 and res.best[1.0] == set()
    values.update({(0.1, 1): 70.0, (0.1, 2): 70.0})
    _plant(cfg, values)
    assert tables.build_table(cfg, "table5_mnist").best[1.0] == {"dpsgd"}


def test_the_cell_is_the_best_mean_among_the_kept_points_only(cfg):
    values = {(0.05, 0): 80.0, (0.1, 0): 90.0, (0.2, 0): 85.0, (0.4, 0): 70.0}
    values.update({(0.1, 1): 70.0, (0.1, 2): 70.0, (0.2, 1): 85.0, (0.2, 2): 85.0})
    values.update({(0.05, 1): 99.0, (0.05, 2): 99.0})  # records of a point the search did not keep: ignored
    _plant(cfg, values)
    res = tables.build_table(cfg, "table5_mnist")
    cell = res.cells[("dpsgd", 1.0)]
    assert cell.best_hparams["learning_rate"] == 0.2 and cell.mean == pytest.approx(85.0) and cell.n_seeds == 3
    assert cell.n_planned_runs == 8 and cell.n_runs == 8 and cell.reason == ""
    header = "\n".join(render.header_lines(res))
    assert "successive halving" in header and "the 2 best" in header and "seeds 0, 1, 2" in header


def test_each_points_extra_seeds_are_a_sweep_of_their_own(cfg):
    by_table = {"table5_mnist": [r for r in plan.table_runs(cfg, "table5_mnist") if r.spec.method == "dpsgd"]}
    sw = sweeps.plan_sweeps(
        cfg,
        by_table["table5_mnist"],
        tables_of=sweeps.tables_of_records(by_table),
        apart=halving.stage_two_points(cfg),
    )
    stage1 = [s for s in sw.values() if {r.spec.seed for r in s.runs} == {0}]
    stage2 = [s for s in sw.values() if 0 not in {r.spec.seed for r in s.runs}]
    assert len(stage1) == 1 and len(stage1[0].runs) == len(LRS)
    assert len(stage2) == len(LRS) and all(len({plan.hp_id(r.spec.hparams) for r in s.runs}) == 1 for s in stage2)
    assert sum(len(s.runs) for s in sw.values()) == len(LRS) * 3


def test_a_full_grid_table_sharing_the_cell_never_makes_stage_one_train_other_seeds(cfg):
    """The base config's full-grid tables plan the same records (same results_dir): building the halving table
    must still train only seed 0 before its checkpoint, so a point's other seeds stay in that point's own sweep."""
    full = copy.deepcopy(cfg["tables"]["table5_mnist"])
    full.pop("search")
    cfg["tables"]["table5_full_grid"] = full
    by_table = {
        t: [r for r in plan.table_runs(cfg, t) if r.spec.method == "dpsgd"]
        for t in ("table5_mnist", "table5_full_grid")
    }
    sw = sweeps.workflow_sweeps(cfg, by_table)
    for s in sw.values():
        seeds = {r.spec.seed for r in s.runs}
        assert seeds == {0} or (0 not in seeds and len({plan.hp_id(r.spec.hparams) for r in s.runs}) == 1)
    assert len(sw) == 1 + len(LRS)  # stage 1, then one sweep per point's other seeds
    assert sum(len(s.runs) for s in sw.values()) == len(LRS) * 3  # the full-grid table still gets every run


@pytest.mark.parametrize(
    "search,match",
    [({"successive_halving": {"keep": 0}}, "keep must be an integer >= 1"), ({"halving": {}}, "successive_halving")],
)
def test_a_malformed_search_block_names_the_key(search, match):
    with pytest.raises(plan.ConfigError, match=match):
        halving.halving_keep({"search": search})


def test_the_checkpoint_command_writes_the_kept_points_and_refuses_an_incomplete_stage_one(cfg, tmp_path):
    out = tmp_path / "sel.json"
    argv = ["--config-json", json.dumps(cfg), "--table", "table5_mnist", "--column", "dpsgd", "--eps", "1.0"]
    _plant(cfg, {(0.05, 0): 80.0})
    with pytest.raises(SystemExit, match="lacks 3 records"):
        halving.main([*argv, "--out", str(out)])
    assert not out.exists()
    _plant(cfg, {(0.05, 0): 80.0, (0.1, 0): 90.0, (0.2, 0): 85.0, (0.4, 0): 70.0})
    assert halving.main([*argv, "--out", str(out)]) == 0
    kept = json.loads(out.read_text())["kept"]
    _, runs = _cell(cfg)
    assert kept == [
        plan.hp_id(r.spec.hparams)
        for lr in (0.1, 0.2)
        for r in runs
        if r.spec.seed == 0 and r.spec.hparams["learning_rate"] == lr
    ]


def test_the_cost_preview_counts_the_sub_grid_not_the_full_grid(cfg):
    cells = halving.halving_cells(cfg, "table5_mnist")
    searched = halving.searched_runs(cfg, "table5_mnist")
    points = [len(runs) // 3 for _, _, runs in cells]  # 3 seeds each
    assert len(searched) == sum(n + 2 * min(2, n) for n in points) < sum(len(runs) for _, _, runs in cells)
    _plant(cfg, {(0.05, 0): 80.0, (0.1, 0): 90.0, (0.2, 0): 85.0, (0.4, 0): 70.0})
    kept_lrs = {
        r.spec.hparams["learning_rate"]
        for r in halving.searched_runs(cfg, "table5_mnist")
        if r.spec.method == "dpsgd" and r.spec.seed != 0
    }
    assert kept_lrs == {0.1, 0.2}


def test_the_selections_are_not_read_as_run_records(cfg, tmp_path):
    from labeldp import records

    _plant(cfg, {(0.05, 0): 80.0})
    sel = tmp_path / "results" / ".halving" / "table5_mnist" / "dpsgd" / "eps1.0.json"
    sel.parent.mkdir(parents=True)
    sel.write_text(json.dumps({"kept": []}))
    assert [p.name for p in records.record_paths(tmp_path / "results")] == ["seed0.json"]
