"""Table content from hand-made records: selection, std, Delta columns, bold, not run, marks."""

import re
import statistics
from pathlib import Path

import pytest

from labeldp import plan, records
from labeldp.report import tables

from tests.helpers import install_fake_methods, repo_config
from tests.helpers import write_table_record as _write


@pytest.fixture
def cfg(table5_cfg):
    return table5_cfg


def _fill(cfg, table, col_id, eps, by_lr):
    col = {c.id: c for c in plan.columns(cfg["tables"][table])}[col_id]
    for run in plan.cell_runs(cfg, table, col, eps):
        _write(cfg, run, by_lr[run.spec.hparams["learning_rate"]][run.spec.seed])


def test_best_mean_configuration_is_selected_with_its_std(cfg):
    _fill(cfg, "table5_mnist", "dpsgd", 0.1, {0.1: [90, 91, 92], 0.2: [95, 80, 99]})
    res = tables.build_table(cfg, "table5_mnist")
    cell = res.cells[("dpsgd", 0.1)]
    # means: lr0.1 -> 91.0, lr0.2 -> 91.33; the higher mean wins even with a worse median
    assert cell.mean == pytest.approx(statistics.fmean([95, 80, 99]))
    assert cell.std == pytest.approx(statistics.stdev([95, 80, 99]))
    assert cell.n_seeds == 3 and cell.best_hparams == {"learning_rate": 0.2}
    assert res.cells[("rr", 0.1)].status == tables.NOT_RUN


def test_diverged_runs_are_counted_not_averaged(cfg):
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["rr"]
    for run in plan.cell_runs(cfg, "table5_mnist", col, 1.0):
        lr, s = run.spec.hparams["learning_rate"], run.spec.seed
        if lr == 0.2 and s == 1:
            _write(cfg, run, float("nan"), diverged=True)
        else:
            _write(cfg, run, 99.0 if lr == 0.2 else 50.0 + s)
    res = tables.build_table(cfg, "table5_mnist")
    cell = res.cells[("rr", 1.0)]
    assert cell.n_diverged == 1 and cell.mean == pytest.approx(51.0)
    md = tables.render_markdown(res)
    assert "[1 diverged]" in md


def test_delta_columns_bold_and_paper_values(cfg):
    vals = {"rr": 80, "rr_debiased": 70, "lp_2st": 85, "alibi": 60, "dpsgd": 88, "labeldp_pro": 91}
    for m, v in vals.items():
        _fill(cfg, "table5_mnist", m, 0.1, {lr: [v, v, v] for lr in (0.1, 0.2)})
    res = tables.build_table(cfg, "table5_mnist")
    assert res.deltas[("baseline", 0.1)] == pytest.approx(91 - 85)
    assert res.deltas[("dpsgd", 0.1)] == pytest.approx(91 - 88)
    assert res.deltas[("baseline", 1.0)] is None  # nothing ran at eps = 1
    assert res.best[0.1] == {"labeldp_pro"}
    md = tables.render_markdown(res)
    row = next(line for line in md.splitlines() if line.startswith("| 0.1 |"))
    assert "**91.0 ± 0.0**" in row and "+6.0" in row and "+3.0" in row
    # the published MNIST LabelDP-Pro value at eps = 0.1 (000 Table 5a) sits beside the cell
    ref = tables.paper_value(
        tables.load_reference(cfg["reference_dir"]),
        table="5a",
        dataset="mnist",
        method="labeldp_pro",
        variant=None,
        epsilon=0.1,
        k=None,
        metric="test_accuracy_pct",
    )
    assert ref is not None and f"({ref:.1f})" in row
    row1 = next(line for line in md.splitlines() if line.startswith("| 1.0 |"))
    n_cols = len(plan.columns(cfg["tables"]["table5_mnist"]))
    assert row1.count("not run") == n_cols + 3  # every column, both Delta columns, the other-relation eps
    # a validation column (DP-SGD via Opacus) is shown but never bold
    assert any(c.validation for c in plan.columns(cfg["tables"]["table5_mnist"]))


def test_one_seed_cells_say_so_instead_of_a_zero_std(cfg):
    cfg["seeds"] = [0]
    _fill(cfg, "table5_mnist", "dpsgd", 0.1, {lr: [80.0] for lr in (0.1, 0.2)})
    res = tables.build_table(cfg, "table5_mnist")
    row = next(line for line in tables.render_markdown(res).splitlines() if line.startswith("| 0.1 |"))
    assert "80.0 (1 seed)" in row and "± 0.0" not in row


def test_reference_only_cells_are_marked_and_never_best(tmp_path, monkeypatch):
    install_fake_methods(monkeypatch, ["dpsgd", "labeldp_pro"], axes=("learning_rate",))
    cfg = repo_config(results_dir=str(tmp_path / "r"))
    cfg["seeds"] = [0]
    cfg["grids"]["full"]["table5a"]["learning_rate"] = [0.1]
    cfg["tables"]["table3"]["epsilons"] = [0.1]
    for col in plan.columns(cfg["tables"]["table3"]):
        for run in plan.cell_runs(cfg, "table3", col, 0.1):
            amp_ref = col.reference_only
            _write(
                cfg,
                run,
                99.0 if amp_ref else 80.0,
                valid=not amp_ref,
                reason="amplification claimed for a self-batch denoiser" if amp_ref else None,
            )
    res = tables.build_table(cfg, "table3")
    assert "selfspan_amp" not in res.best[0.1] and "selfconv_amp" not in res.best[0.1]
    md = tables.render_markdown(res)
    assert md.count("†") >= 2 and "amplification claimed" in md
    rows = {r["column"]: r for r in tables.tidy_rows(res)}
    assert rows["selfspan_amp"]["valid"] is False and rows["noop_amp"]["valid"] is True


def test_table_numbers_come_only_from_records_or_reference(cfg):
    _fill(cfg, "table5_mnist", "dpsgd", 0.1, {0.1: [90.0, 91.0, 92.0], 0.2: [10.0, 11.0, 12.0]})
    res = tables.build_table(cfg, "table5_mnist")
    md = tables.render_markdown(res)
    body = md.split("| eps |", 1)[1]
    ref = tables.load_reference(cfg["reference_dir"])
    allowed = {f"{float(r['value']):.1f}" for r in ref} | {"91.0", "1.0", "0.1", "0.01", "0.2", "0.5", "2.0"}
    for num in re.findall(r"(?<![\w.])\d+\.\d+", body):
        assert num in allowed, num


def test_not_run_reason_shown_for_missing_data(cfg):
    res = tables.build_table(cfg, "table7")
    md = tables.render_markdown(res)
    assert "not run" in md and "criteo_attribution" in md
    assert all(c.status == tables.NOT_RUN for c in res.cells.values())


def test_validation_column_is_never_bold(cfg):
    for m, v in {"dpsgd": 88, "dpsgd_opacus": 95}.items():
        _fill(cfg, "table5_mnist", m, 0.1, {lr: [v, v, v] for lr in (0.1, 0.2)})
    res = tables.build_table(cfg, "table5_mnist")
    assert res.cells[("dpsgd_opacus", 0.1)].mean == 95 and res.best[0.1] == {"dpsgd"}


def test_header_states_machine_revisions_and_method_options(cfg):
    _fill(cfg, "table5_mnist", "dpsgd", 0.1, {lr: [80.0, 81.0, 82.0] for lr in (0.1, 0.2)})
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["dpsgd"]
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        rec = records.read_record(run.record_path)
        rec["environment"].update(git={"commit": "feedbeef"}, jax_backend="gpu", jax_devices=["gpu:H100"])
        rec["config"] = {"run_spec": {"options": {"alt_batch_size": 256}}}
        records.write_record(run.record_path, rec)
    head = "\n".join(tables.header_lines(tables.build_table(cfg, "table5_mnist")))
    assert "hardware: testcpu (gpu: gpu:H100, 2 cpus)" in head
    assert "code revisions of the records: feedbeef" in head
    assert 'method options of the runs: dpsgd/default: {"alt_batch_size": 256}' in head


def test_partial_cells_say_how_many_seeds_and_notes_name_the_eps(cfg):
    # two of three seeds at eps 0.1 and 1.0 for the one configuration: both cells are partial
    cfg["grids"]["full"]["table5a"]["learning_rate"] = [0.2]
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["dpsgd"]
    for eps in (0.1, 1.0):
        for run in plan.cell_runs(cfg, "table5_mnist", col, eps):
            if run.spec.seed != 2:
                _write(cfg, run, 80.0 + run.spec.seed)
    res = tables.build_table(cfg, "table5_mnist")
    assert res.cells[("dpsgd", 0.1)].n_missing == 1 and res.cells[("dpsgd", 0.1)].n_seeds == 2
    md = tables.render_markdown(res)
    row = next(line for line in md.splitlines() if line.startswith("| 0.1 |"))
    assert "80.5 ± 0.7 (2 of 3 seeds)" in row
    assert f"- {col.label} (eps 0.1, 1.0; in each): 1 of 3 planned runs missing" in md.splitlines()
    # a complete cell carries no seed count
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        _write(cfg, run, 80.0 + run.spec.seed)
    row = next(
        line
        for line in tables.render_markdown(tables.build_table(cfg, "table5_mnist")).splitlines()
        if line.startswith("| 0.1 |")
    )
    assert "81.0 ± 1.0" in row and "seeds)" not in row


def test_seed_count_is_that_of_the_reported_configuration(cfg):
    """With several configurations, missing runs of a configuration that is not reported do not
    make the reported one look partial (the note still counts them)."""
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["dpsgd"]
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        lr, seed = run.spec.hparams["learning_rate"], run.spec.seed
        if lr == 0.2 or seed == 0:  # lr 0.2 complete and better; lr 0.1 has seed 0 only
            _write(cfg, run, (90.0 if lr == 0.2 else 50.0) + seed)
    res = tables.build_table(cfg, "table5_mnist")
    cell = res.cells[("dpsgd", 0.1)]
    assert cell.best_hparams == {"learning_rate": 0.2} and cell.n_missing == 0 and cell.n_seeds == 3
    md = tables.render_markdown(res)
    row = next(line for line in md.splitlines() if line.startswith("| 0.1 |"))
    assert "91.0 ± 1.0" in row and "seeds)" not in row
    assert f"- {col.label} (eps 0.1): 2 of 6 planned runs missing" in md.splitlines()
    assert {r["column"]: r for r in tables.tidy_rows(res) if r["epsilon"] == "0.1"}["dpsgd"]["n_missing_seeds"] == 0
    # the reported configuration partial: counted against its own planned seeds
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        if run.spec.hparams["learning_rate"] == 0.2 and run.spec.seed == 2:
            Path(run.record_path).unlink()
    row = next(
        line
        for line in tables.render_markdown(tables.build_table(cfg, "table5_mnist")).splitlines()
        if line.startswith("| 0.1 |")
    )
    assert "90.5 ± 0.7 (2 of 3 seeds)" in row


def test_complete_configuration_outranks_a_partial_one_with_a_higher_mean(cfg):
    """Best-mean selection (000 D.2) is over configurations with all their seeds: one lucky seed
    of an unfinished configuration must not be reported in place of a finished one."""
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["dpsgd"]
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        lr, seed = run.spec.hparams["learning_rate"], run.spec.seed
        if lr == 0.1 or seed == 0:  # lr 0.1 complete (mean 81); lr 0.2 seed 0 only, at 99
            _write(cfg, run, 99.0 if lr == 0.2 else 80.0 + seed)
    cell = tables.build_table(cfg, "table5_mnist").cells[("dpsgd", 0.1)]
    assert cell.best_hparams == {"learning_rate": 0.1} and cell.mean == pytest.approx(81.0)
    assert cell.n_missing == 0 and cell.n_seeds == 3
    # with no complete configuration the best partial one is reported, as partial
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        if run.spec.hparams["learning_rate"] == 0.1 and run.spec.seed == 2:
            Path(run.record_path).unlink()
    cell = tables.build_table(cfg, "table5_mnist").cells[("dpsgd", 0.1)]
    assert cell.best_hparams == {"learning_rate": 0.2} and cell.n_seeds == 1 and cell.n_missing == 2


def test_partial_cells_are_never_marked_best(cfg):
    cfg["grids"]["full"]["table5a"]["learning_rate"] = [0.2]
    by_method = {"dpsgd": [80.0, 81.0, 82.0], "labeldp_pro": [95.0]}  # LabelDP-Pro: 1 of 3 seeds
    cols = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}
    for m, vals in by_method.items():
        for run in plan.cell_runs(cfg, "table5_mnist", cols[m], 0.1):
            if run.spec.seed < len(vals):
                _write(cfg, run, vals[run.spec.seed])
    res = tables.build_table(cfg, "table5_mnist")
    assert res.best[0.1] == {"dpsgd"}
    row = next(line for line in tables.render_markdown(res).splitlines() if line.startswith("| 0.1 |"))
    assert "**81.0 ± 1.0**" in row and "95.0 (1 of 3 seeds)" in row and "**95.0" not in row
    tidy = {r["column"]: r for r in tables.tidy_rows(res) if r["epsilon"] == "0.1"}
    assert tidy["labeldp_pro"]["is_best"] is False and tidy["dpsgd"]["is_best"] is True


def test_header_spells_a_dirty_tree_the_same_way_for_the_table_and_its_records(cfg, monkeypatch):
    _fill(cfg, "table5_mnist", "dpsgd", 0.1, {lr: [80.0, 81.0, 82.0] for lr in (0.1, 0.2)})
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["dpsgd"]
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        rec = records.read_record(run.record_path)
        rec["environment"]["git"] = {"commit": "feedbeef", "dirty": True}
        records.write_record(run.record_path, rec)
    monkeypatch.setattr(records, "git_revision", lambda **kw: {"commit": "cafe1234", "dirty": True})
    head = tables.header_lines(tables.build_table(cfg, "table5_mnist"))
    assert "- git revision: cafe1234+dirty" in head
    assert "- code revisions of the records: feedbeef+dirty" in head


def test_one_of_three_seeds_says_so(cfg):
    cfg["grids"]["full"]["table5a"]["learning_rate"] = [0.2]
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["dpsgd"]
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        if run.spec.seed == 0:
            _write(cfg, run, 80.0)
    row = next(
        line
        for line in tables.render_markdown(tables.build_table(cfg, "table5_mnist")).splitlines()
        if line.startswith("| 0.1 |")
    )
    assert "80.0 (1 of 3 seeds)" in row


def test_complete_configuration_with_a_diverged_seed_yields_to_a_finite_partial_one(cfg):
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["dpsgd"]
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        lr, seed = run.spec.hparams["learning_rate"], run.spec.seed
        if lr == 0.1:  # complete, one seed diverged
            _write(cfg, run, float("nan") if seed == 1 else 90.0, diverged=seed == 1)
        elif seed < 2:  # lr 0.2: 2 of 3 seeds, finite
            _write(cfg, run, 70.0 + seed)
    res = tables.build_table(cfg, "table5_mnist")
    cell = res.cells[("dpsgd", 0.1)]
    assert cell.best_hparams == {"learning_rate": 0.2} and cell.n_missing == 1 and cell.n_diverged == 1
    assert res.best[0.1] == set()
    row = next(line for line in tables.render_markdown(res).splitlines() if line.startswith("| 0.1 |"))
    assert "70.5 ± 0.7 (2 of 3 seeds) [1 diverged]" in row


def test_delta_from_a_partial_cell_says_partial(cfg):
    cfg["grids"]["full"]["table5a"]["learning_rate"] = [0.2]
    cols = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}
    for m, v in {"rr": 80, "rr_debiased": 70, "lp_2st": 85, "alibi": 60, "dpsgd": 88, "labeldp_pro": 91}.items():
        for run in plan.cell_runs(cfg, "table5_mnist", cols[m], 0.1):
            if m != "labeldp_pro" or run.spec.seed == 0:  # LabelDP-Pro: 1 of 3 seeds
                _write(cfg, run, float(v))
    res = tables.build_table(cfg, "table5_mnist")
    assert res.deltas[("dpsgd", 0.1)] == pytest.approx(3.0)
    row = next(line for line in tables.render_markdown(res).splitlines() if line.startswith("| 0.1 |"))
    assert row.endswith("| +6.0 (partial) | +3.0 (partial) |")
    for run in plan.cell_runs(cfg, "table5_mnist", cols["labeldp_pro"], 0.1):
        _write(cfg, run, 91.0)
    row = next(
        line
        for line in tables.render_markdown(tables.build_table(cfg, "table5_mnist")).splitlines()
        if line.startswith("| 0.1 |")
    )
    assert row.endswith("| +6.0 | +3.0 |")


def test_error_metrics_select_and_bold_the_lowest_mean(tmp_path, monkeypatch):
    install_fake_methods(monkeypatch, ["dpsgd", "labeldp_pro"], axes=("learning_rate",))
    cfg = repo_config(results_dir=str(tmp_path / "r"))
    cfg["seeds"] = [0, 1]
    cfg["grids"]["full"]["table5a"]["learning_rate"] = [0.1, 0.2]
    tcfg = cfg["tables"]["table5_mnist"]
    tcfg.update(metric="test_mse", epsilons=[1.0], deltas=False)
    tcfg["columns"] = [c for c in tcfg["columns"] if c["id"] in ("dpsgd", "labeldp_pro")]
    cols = {c.id: c for c in plan.columns(tcfg)}
    for m, by_lr in {"dpsgd": {0.1: 5.0, 0.2: 9.0}, "labeldp_pro": {0.1: 7.0, 0.2: 8.0}}.items():
        for run in plan.cell_runs(cfg, "table5_mnist", cols[m], 1.0):
            rec_val = by_lr[run.spec.hparams["learning_rate"]]
            _write(cfg, run, None)
            rec = records.read_record(run.record_path)
            rec["metrics"] = {"test_mse": rec_val, "diverged": False}
            records.write_record(run.record_path, rec)
    res = tables.build_table(cfg, "table5_mnist")
    assert res.cells[("dpsgd", 1.0)].mean == 5.0 and res.cells[("labeldp_pro", 1.0)].mean == 7.0
    assert res.best[1.0] == {"dpsgd"}


def test_header_names_the_relation_and_the_column_gives_the_other_eps(cfg, monkeypatch):
    """A DP-SGD-family table says which relation calibrated it; the extra column is the max over
    the row's DP-SGD-family records of their eps under the other relation; records made before
    the relation existed are said to be not accounted, never shown as a number."""
    from labeldp.methods import registry

    fake = registry.get_method("dpsgd")
    monkeypatch.setattr(fake, "CALIBRATES_WITH_ACCOUNTANT", True, raising=False)
    col = {c.id: c for c in plan.columns(cfg["tables"]["table5_mnist"])}["dpsgd"]
    for run in plan.cell_runs(cfg, "table5_mnist", col, 0.1):
        _write(cfg, run, 90.0)
        rec = records.read_record(run.record_path)
        rec["privacy"]["epsilon_by_relation"] = {
            "add_or_remove": 0.1,
            "label_substitution": 0.21 + 0.001 * run.spec.seed,
        }
        records.write_record(run.record_path, rec)
    for run in plan.cell_runs(cfg, "table5_mnist", col, 1.0):
        _write(cfg, run, 91.0)  # no epsilon_by_relation: a legacy record
    md = tables.render_markdown(tables.build_table(cfg, "table5_mnist"))
    assert "privacy relation: DP-SGD-family noise calibrated so that eps is met under **add-or-remove-one" in md
    head = next(line for line in md.splitlines() if line.startswith("| eps |"))
    assert head.startswith("| eps | eps (label subst.) |")
    row = next(line for line in md.splitlines() if line.startswith("| 0.1 |"))
    assert row.startswith("| 0.1 | 0.212 |")  # the max over the reported configuration's seeds
    row1 = next(line for line in md.splitlines() if line.startswith("| 1.0 |"))
    assert "not accounted (records predate it" in row1
    csv_rows = tables.tidy_rows(tables.build_table(cfg, "table5_mnist"))
    dp = next(r for r in csv_rows if r["column"] == "dpsgd" and r["epsilon"] == "0.1")
    assert dp["calibration_relation"] == "add_or_remove" and dp["epsilon_label_substitution"] == pytest.approx(0.212)
    cfg["tables"]["table5_mnist"]["calibration_relation"] = "label_substitution"
    md2 = tables.render_markdown(tables.build_table(cfg, "table5_mnist"))
    assert "met under **label substitution" in md2
    assert next(line for line in md2.splitlines() if line.startswith("| eps |")).startswith(
        "| eps | eps (add/remove) |"
    )


def test_a_quoted_column_shows_the_published_value_labelled_never_a_number_of_ours(tmp_path):
    from labeldp.report.render import cell_text

    c = repo_config(results_dir=str(tmp_path / "results"))
    col = {x.id: x for x in plan.columns(c["tables"]["table6"])}["pate_fm"]
    ref = tables.load_reference(c["reference_dir"])
    cell = tables.build_cell(c, "table6", col, 0.18, ref)
    assert cell.status == "quoted" and cell.mean is None and cell.paper == 73.4
    assert cell_text(cell, "test_accuracy_pct") == "quoted: 73.4"
    absent = tables.build_cell(c, "table6", col, 0.01, ref)  # 000 Table 6 quotes no PATE-FM value at 0.01
    assert cell_text(absent, "test_accuracy_pct") == "quoted: -"
    assert "quoted from Malek et al. (2021)" in cell.reason


def test_001s_published_cells_are_read_with_its_non_private_model():
    """001's tables (lp_mst_tables.csv) become "001:<n>"; its LP-1ST at eps inf is Table 4's non-private model."""
    cfg = repo_config()
    ref = tables.load_reference(cfg["reference_dir"])

    def value(method, dataset, eps):
        return tables.paper_value(
            ref,
            table="001:4",
            dataset=dataset,
            method=method,
            variant=None,
            epsilon=eps,
            k=None,
            metric="test_accuracy_pct",
        )

    assert value("lp_2st", "mnist", 1.0) == 95.82 and value("lp_1st", "fashion_mnist", 4.0) == 93.5
    assert value("non_private", "mnist", float("inf")) == 99.33 == value("lp_1st", "mnist", float("inf"))
    assert value("lp_3st", "mnist", 1.0) is None and value("lp_2st", "mnist", 8.0) is None  # 001 prints neither
    assert value("lp_2st", "kmnist", 2.0) is None  # Table 5, not 4


def test_a_tables_non_private_column_runs_its_variant():
    cfg = repo_config()
    col = plan.nonprivate_column(cfg["tables"]["lpmst_table4_mnist"])
    assert (col.method, col.variant, col.ref_method) == ("nonprivate", "recipe001", "non_private")
    runs = [r for r in plan.table_runs(cfg, "lpmst_table4_mnist") if r.spec.method == "nonprivate"]
    assert runs and all(
        r.spec.options["momentum"] == 0.9 and r.spec.options["lr_schedule"] == "warmup_linear_decay" for r in runs
    )
    assert plan.nonprivate_column(cfg["tables"]["table5_mnist"]).variant == "default"
