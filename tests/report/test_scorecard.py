"""The scorecard: tolerance per metric, claims evaluated on hand-made tidy rows."""

from __future__ import annotations

import csv

import pytest

from labeldp.config_semantics import validate_semantics
from labeldp.plan import ConfigError
from labeldp.report import scorecard as S
from labeldp.report.metrics import selection_kind
from tests.helpers import repo_config


def _row(column, eps, mean, *, std=0.5, paper=None, status="ok", table="t", metric="test_accuracy_pct", ref_only=False):
    return {
        "table": table,
        "paper_table": "X",
        "column": column,
        "method": column,
        "epsilon": str(eps),
        "metric": metric,
        "status": status,
        "mean": "" if mean is None else str(mean),
        "std": "" if std is None else str(std),
        "n_seeds": "3",
        "paper": "" if paper is None else str(paper),
        "valid": str(not ref_only),
        "reference_only": str(ref_only),
        "selection": "paper",
    }


def _write_csv(path, rows):
    """``rows`` as a tidy table CSV (the fields of the row with the most); returns ``path``."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(max(rows, key=len)))
        w.writeheader()
        w.writerows(rows)
    return path


def test_tolerance_per_metric():
    tol = {"accuracy_points": 2.0, "auc": 0.01, "mse_relative": 0.1}
    assert S.tolerance_for("test_accuracy_pct", paper=90.0, std=0.4, tol=tol) == 2.0
    assert S.tolerance_for("test_accuracy_pct", paper=90.0, std=3.0, tol=tol) == 6.0  # 2 std
    assert S.tolerance_for("test_auc", paper=0.7, std=0.1, tol=tol) == 0.01
    assert S.tolerance_for("test_mse", paper=50.0, std=None, tol=tol) == pytest.approx(5.0)


def test_strict_tolerance_never_passes_a_cell_through_its_std():
    strict = {"accuracy_points": 2.0, "accuracy_std_multiplier": 0.0}
    assert S.tolerance_for("test_accuracy_pct", paper=90.0, std=17.6, tol=strict) == 2.0
    rows = S.score_cells([_row("a", 0.1, 85.0, std=4.0, paper=88.0), _row("a", 0.2, 89.0, std=4.0, paper=88.0)], strict)
    assert [r["within_tolerance"] for r in rows] == [False, True]  # 3 points off fails despite a std of 4
    cfg = {**repo_config(), "tolerance": strict}
    assert "strict: the std over seeds is shown, never used" in S.render_markdown(cfg, rows, [], [])


def test_cells_scored_only_when_run_and_published():
    rows = [
        _row("a", 0.1, 91.0, paper=90.0),
        _row("a", 0.2, 80.0, paper=90.0),
        _row("b", 0.1, None, paper=85.0, status="not run"),
        _row("b", 0.2, 70.0),
    ]
    scored = S.score_cells(rows, {})
    by = {(r["column"], r["epsilon"]): r for r in scored}
    assert by[("a", "0.1")]["within_tolerance"] is True and by[("a", "0.1")]["abs_diff"] == pytest.approx(1.0)
    assert by[("a", "0.2")]["within_tolerance"] is False
    assert by[("b", "0.1")]["within_tolerance"] == "" and by[("b", "0.1")]["regenerated"] is None
    assert by[("b", "0.2")]["within_tolerance"] == ""  # no published value: not scored


def test_claim_holds_fails_and_not_evaluable():
    rows = [
        _row("pro", 0.1, 90.0),
        _row("sgd", 0.1, 85.0),
        _row("pro", 1.0, 92.0),
        _row("sgd", 1.0, 93.0),
        _row("rr", 0.1, None, status="not run"),
    ]
    small = {"id": "c", "winner": "pro", "losers": ["sgd"], "eps_max": 0.5}
    assert S.evaluate_claim("t", small, rows, "test_accuracy_pct").verdict == "holds"
    every = {"id": "c", "winner": "pro", "losers": ["sgd"]}
    res = S.evaluate_claim("t", every, rows, "test_accuracy_pct")
    assert res.verdict == "fails" and "eps 1" in res.detail
    with_rr = {"id": "c", "winner": "pro", "losers": ["sgd", "rr"], "epsilons": [0.1]}
    res = S.evaluate_claim("t", with_rr, rows, "test_accuracy_pct")
    assert res.verdict == "not evaluable" and "rr@0.1" in res.detail
    # lower is better for MSE
    mse = [_row("pro", 1.0, 10.0, metric="test_mse"), _row("sgd", 1.0, 12.0, metric="test_mse")]
    assert S.evaluate_claim("t", every, mse, "test_mse").verdict == "holds"
    # a reference-only winner cannot support a claim
    ref = [_row("pro", 0.1, 99.0, ref_only=True), _row("sgd", 0.1, 85.0)]
    assert S.evaluate_claim("t", small, ref, "test_accuracy_pct").verdict == "not evaluable"


def test_build_and_render_from_csv(tmp_path):
    cfg = repo_config()
    rows = [_row("labeldp_pro", e, 90.0 + e, paper=91.0, table="table5_mnist") for e in (0.1, 0.2, 0.5)]
    rows += [
        _row(c, e, 50.0, paper=50.0, table="table5_mnist")
        for c in ("dpsgd", "rr", "rr_debiased", "lp_2st", "alibi")
        for e in (0.1, 0.2, 0.5)
    ]
    cells, summary, claims = S.build(cfg, [_write_csv(tmp_path / "table5_mnist.csv", rows)])
    assert summary[0]["cells_compared"] == 18 and summary[0]["within_tolerance"] == 18
    verdicts = {c.claim: c.verdict for c in claims}
    assert verdicts["pro_beats_dpsgd_and_baselines_small_eps"] == "holds"
    assert verdicts["rr_beats_pro_eps2"] == "not evaluable"
    md = S.render_markdown(cfg, cells, summary, claims)
    assert "| table5_mnist | 5a | 18 | 18 | 18 | 18 / 18 | - |" in md and "**holds**" in md


def test_held_out_selection_columns_are_counted_apart_from_the_papers_selection(tmp_path):
    """The goal counts cells under the paper's selection; an honest column beside them (tidy ``selection``
    "held-out") has its own count, and a row from a CSV built before the field is in neither and says so."""
    cfg = repo_config()
    rows = [
        _row("alibi", 1.0, 94.0, paper=94.1, table="table5_mnist"),
        _row("rr", 1.0, 60.0, paper=51.3, table="table5_mnist"),
    ]
    rows += [
        {**_row("alibi_heldout", 1.0, 95.0, paper=94.1, table="table5_mnist"), "selection": "held-out"},
        {**_row("rr_heldout", 1.0, 70.0, paper=51.3, table="table5_mnist"), "selection": "held-out"},
        {**_row("lp_2st_heldout", 1.0, 80.0, paper=83.3, table="table5_mnist"), "selection": "held-out"},
    ]
    rows[0]["selection"] = rows[1]["selection"] = "paper"
    rows.append({**_row("alibi", 2.0, 96.0, paper=96.6, table="table5_mnist"), "selection": ""})  # an older CSV
    cells, summary, claims = S.build(cfg, [_write_csv(tmp_path / "table5_mnist.csv", rows)])
    assert (summary[0]["cells_compared"], summary[0]["within_tolerance"]) == (2, 1)
    assert (summary[0]["heldout_compared"], summary[0]["heldout_within_tolerance"]) == (3, 1)
    assert summary[0]["unknown_selection"] == 1
    md = S.render_markdown(cfg, cells, summary, claims)
    assert "| table5_mnist | 5a | 6 | 6 | 2 | 1 / 2 | 1 / 3 |" in md
    assert "- table5_mnist: tidy CSVs built before the `selection` field; their cells are not counted" in md


def test_a_whole_honest_table_is_held_out_and_the_papers_protocol_is_not():
    """003's figures: the paper's protocol (best test MSE) and an ``*_honest`` table (noisy held-out MSE), a table-level
    selection; a column's own held-out selection overrides its table's."""
    cfg = repo_config()
    assert selection_kind(cfg["tables"]["figure4"]) == "paper"
    honest = [t for t, c in cfg["tables"].items() if c.get("selection_metric") == "validation_noisy_mse"]
    assert honest and all(selection_kind(cfg["tables"][t]) == "held-out" for t in honest)
    assert selection_kind({}, {"selection_metric": "validation_noisy_accuracy_pct"}) == "held-out"
    assert selection_kind({"selection_metric": "validation_noisy_mse"}, {"selection_metric": "test_mse"}) == "paper"


def test_claims_must_name_columns_of_their_table():
    cfg = repo_config()
    cfg["tables"]["table5_mnist"]["claims"] = [{"id": "x", "winner": "labeldp_pro", "losers": ["no_such_column"]}]
    with pytest.raises(ConfigError, match="no_such_column"):
        validate_semantics(cfg)


def test_agreement_check_uses_the_standard_error_of_the_difference():
    claim = {"id": "v", "agree": ["opacus", "jax"], "epsilons": [0.1, 1.0], "max_standard_errors": 2}
    # SE = sqrt(0.5^2/3 + 0.5^2/3) = 0.408; 2 SE = 0.816
    close = [_row("opacus", 0.1, 84.0), _row("jax", 0.1, 84.5), _row("opacus", 1.0, 90.0), _row("jax", 1.0, 90.7)]
    res = S.evaluate_claim("t", claim, close, "test_accuracy_pct")
    assert res.verdict == "holds" and "2 SE = 0.816" in res.detail
    far = [_row("opacus", 0.1, 80.6), _row("jax", 0.1, 84.4), _row("opacus", 1.0, 90.0), _row("jax", 1.0, 90.7)]
    res = S.evaluate_claim("t", claim, far, "test_accuracy_pct")
    assert res.verdict == "fails" and "eps 0.1" in res.detail
    # a larger spread widens the band
    noisy = [_row("opacus", 0.1, 80.6, std=3.0), _row("jax", 0.1, 84.4, std=3.0)] + close[2:]
    assert S.evaluate_claim("t", claim, noisy, "test_accuracy_pct").verdict == "holds"
    # a cell not run, or with one seed (no spread), makes it not evaluable
    missing = close[:2] + [_row("opacus", 1.0, None, status="not run"), close[3]]
    assert S.evaluate_claim("t", claim, missing, "test_accuracy_pct").verdict == "not evaluable"
    one = [dict(r, n_seeds="1") if r["column"] == "opacus" else r for r in close]
    res = S.evaluate_claim("t", claim, one, "test_accuracy_pct")
    assert res.verdict == "not evaluable" and "fewer than 2 seeds" in res.detail


def test_claims_are_either_orderings_or_agreements():
    cfg = repo_config()
    validate_semantics(cfg)  # the repo's own claims, incl. the Opacus agreement check, are valid
    cfg["tables"]["table5_mnist"]["claims"] = [
        {"id": "x", "agree": ["dpsgd", "labeldp_pro"], "winner": "dpsgd", "losers": ["rr"]}
    ]
    with pytest.raises(ConfigError, match="either winner"):
        validate_semantics(cfg)
    cfg["tables"]["table5_mnist"]["claims"] = [{"id": "x", "agree": ["dpsgd", "nope"]}]
    with pytest.raises(ConfigError, match="nope"):
        validate_semantics(cfg)


def test_partial_cells_make_a_claim_not_evaluable_never_hold_or_fail():
    """A mean over fewer seeds than planned is not the cell the claim is about (tidy CSV column
    ``n_missing_seeds``): an ordering or an agreement that needs it is "not evaluable"."""
    full = {"id": "c", "winner": "pro", "losers": ["sgd"], "epsilons": [0.1]}
    partial_winner = [{**_row("pro", 0.1, 99.0), "n_seeds": "1", "n_missing_seeds": "2"}, _row("sgd", 0.1, 85.0)]
    res = S.evaluate_claim("t", full, partial_winner, "test_accuracy_pct")
    assert res.verdict == "not evaluable" and "pro@0.1 (1 of 3 seeds)" in res.detail
    partial_loser = [_row("pro", 0.1, 80.0), {**_row("sgd", 0.1, 85.0), "n_seeds": "2", "n_missing_seeds": "1"}]
    res = S.evaluate_claim("t", full, partial_loser, "test_accuracy_pct")
    assert res.verdict == "not evaluable" and "sgd@0.1 (2 of 3 seeds)" in res.detail  # not "fails"
    agree = {"id": "a", "agree": ["pro", "sgd"], "epsilons": [0.1]}
    rows = [_row("pro", 0.1, 85.0), {**_row("sgd", 0.1, 85.0), "n_seeds": "2", "n_missing_seeds": "1"}]
    assert S.evaluate_claim("t", agree, rows, "test_accuracy_pct").verdict == "not evaluable"
    complete = [{**_row("pro", 0.1, 90.0), "n_missing_seeds": "0"}, _row("sgd", 0.1, 85.0)]
    assert S.evaluate_claim("t", full, complete, "test_accuracy_pct").verdict == "holds"


def test_min_margin_makes_far_above_a_stronger_claim_than_above():
    rows = [_row("rrp", 0.1, 50.0), _row("rr", 0.1, 35.0), _row("rrp", 0.5, 78.0), _row("rr", 0.5, 6.0)]
    above = {"id": "c", "winner": "rrp", "losers": ["rr"], "eps_max": 0.5}
    far = {**above, "min_margin": 20}
    assert S.evaluate_claim("t", above, rows, "test_accuracy_pct").verdict == "holds"
    res = S.evaluate_claim("t", far, rows, "test_accuracy_pct")
    assert res.verdict == "fails" and "eps 0.1" in res.detail and "margin of 20" in res.detail
    assert "eps 0.5" not in res.detail


def test_a_partly_searched_cell_shows_its_difference_but_is_not_scored():
    from labeldp.report.scorecard import score_cells

    tol = {"accuracy_points": 2.0, "accuracy_std_multiplier": 0, "auc": 0.01, "mse_relative": 0.1}
    base = {
        "table": "t",
        "paper_table": "14",
        "column": "dpsgd",
        "method": "dpsgd",
        "epsilon": "0.5",
        "metric": "test_accuracy_pct",
        "status": "ok",
        "mean": "77.2",
        "std": "1.5",
        "n_seeds": "3",
        "paper": "79.7",
        "valid": "True",
    }
    partial, full = score_cells(
        [{**base, "n_runs": "29", "n_planned_runs": "108"}, {**base, "n_runs": "108", "n_planned_runs": "108"}], tol
    )
    assert partial["within_tolerance"] == "" and partial["search"] == "partial: 29 of 108 runs"
    assert partial["abs_diff"] == pytest.approx(2.5)
    assert full["within_tolerance"] is False and full["search"] == ""


def _write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_claim_tables_give_their_claims_but_not_their_cells(tmp_path):
    cfg = repo_config(scorecard_tables=["table5_mnist"], claim_tables=["table14"])
    scored = [_row(c, 0.1, 90.0, paper=90.0, table="table5_mnist") for c in ("labeldp_pro", "dpsgd")]
    # table14: LabelDP-Pro below DP-SGD and both far from the paper; its claim must fail, its cells stay unscored
    exp = [_row("labeldp_pro", e, 60.0, paper=80.0, table="table14") for e in (0.1, 0.2, 0.5)]
    exp += [
        _row(c, e, 70.0, paper=75.0, table="table14")
        for c in ("dpsgd", "rr", "rr_debiased", "lp_2st", "alibi")
        for e in (0.1, 0.2, 0.5)
    ]
    paths = [_write(tmp_path / "table5_mnist.csv", scored), _write(tmp_path / "table14.csv", exp)]
    cells, summary, claims = S.build(cfg, paths)
    assert [s["table"] for s in summary] == ["table5_mnist"]
    assert {r["table"] for r in cells} == {"table5_mnist"}
    by_table = {(c.table, c.claim): c.verdict for c in claims}
    assert by_table[("table14", "pro_beats_dpsgd_and_baselines_small_eps")] == "fails"
    md = S.render_markdown(cfg, cells, summary, claims)
    assert "whose cells are not scored: table14" in md
    # without scorecard_tables every table is scored, claim_tables changes nothing
    cfg_all = repo_config(claim_tables=["table14"])
    assert S.claims_only(cfg_all) == []
    assert {s["table"] for s in S.build(cfg_all, paths)[1]} == {"table5_mnist", "table14"}


def test_claim_tables_must_be_tables_with_claims():
    validate_semantics(repo_config(scorecard_tables=["table5_mnist"], claim_tables=["table14"]))
    with pytest.raises(ConfigError, match=r"claim_tables: \['table99'\]"):
        validate_semantics(repo_config(scorecard_tables=["table5_mnist"], claim_tables=["table99"]))
    with pytest.raises(ConfigError, match="claim_tables: without scorecard_tables"):
        validate_semantics(repo_config(claim_tables=["table14"]))
    cfg = repo_config(scorecard_tables=["table5_mnist"], claim_tables=["table14"])
    del cfg["tables"]["table14"]["claims"]
    with pytest.raises(ConfigError, match="claim_tables: 'table14' has no claims"):
        validate_semantics(cfg)
