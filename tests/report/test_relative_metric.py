"""002's relative AUC loss: the formula per record, the non-private reference it needs, lower is
better in the bold and in the scorecard, and 002's published values found beside the cells.

Records are fabricated on disk for ``hybrid_table2`` (Criteo Attribution, 002 Table 2) with the
table's methods faked as implemented; every number checked is computed by hand from them."""

from __future__ import annotations

import csv
import math

import pytest

from labeldp import plan, records
from labeldp.config import SCHEMA, validate_config
from labeldp.plan import ConfigError
from labeldp.report import scorecard, tables
from tests.helpers import REPO, install_fake_methods, repo_config
from tests.helpers import write_table_record as _write

REF = REPO / "workflow/resources/reference"
T = "hybrid_table2"
HYBRID_METHODS = ["hybrid_rr", "hybrid_dpsgd", "hybrid", "nonprivate"]
NO_NP = "the non-private reference (needed for the relative AUC loss) has no records"


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    for fake in install_fake_methods(monkeypatch, HYBRID_METHODS, axes=("learning_rate",)).values():
        fake.DATASET_KINDS = ("tabular",)  # criteo_attribution is tabular
    c = repo_config(results_dir=str(tmp_path / "results"))
    c["seeds"] = [0, 1, 2]
    c["grids"]["full"]["hybrid_attribution"] = {"learning_rate": [0.1, 0.2]}
    c["tables"][T]["epsilons"] = [1.0, 3.0]
    c["tables"][T]["claims"] = [
        {
            "id": "hybrid_beats_baselines",
            "text": "hybrid beats rr and dpsgd",
            "winner": "hybrid",
            "losers": ["rr", "dpsgd"],
            "epsilons": [3.0],
        }
    ]
    return c


def _fill(cfg, col_id, eps, by_lr):
    """Writes one record per (learning rate, seed) with ``test_auc = by_lr[lr][seed]``."""
    tcfg = cfg["tables"][T]
    col = plan.nonprivate_column(tcfg) if col_id == "nonprivate" else {c.id: c for c in plan.columns(tcfg)}[col_id]
    for run in plan.cell_runs(cfg, T, col, eps):
        _write(cfg, run, None)
        rec = records.read_record(run.record_path)
        auc = by_lr[run.spec.hparams["learning_rate"]][run.spec.seed]
        rec["metrics"] = {"test_auc": auc, "diverged": not math.isfinite(auc)}
        records.write_record(run.record_path, rec)


def _same(auc):
    return {0.1: [auc] * 3, 0.2: [auc - 0.05] * 3}


def _row(md, eps):
    return next(line for line in md.splitlines() if line.startswith(f"| {eps} |"))


# ----------------------------------------------------------------------------- the formula


def test_formula_and_per_record_derivation():
    assert tables.relative_auc_loss_pct(0.80, 0.80) == 0.0
    assert tables.relative_auc_loss_pct(0.70, 0.80) == pytest.approx(50.0)  # error 0.30 vs 0.20
    rec = {"metrics": {"test_auc": 0.75}}
    assert tables._metric(rec, "relative_auc_loss_pct", 0.8) == pytest.approx(25.0)
    assert math.isnan(tables._metric(rec, "relative_auc_loss_pct", None))
    assert "relative_auc_loss_pct" in tables.LOWER_IS_BETTER


def test_cell_is_the_per_record_loss_averaged_with_the_lowest_mean_configuration(cfg):
    # non-private: lr 0.1 has the higher AUC (mean 0.80, std 0.02), so AUC_np = 0.80
    _fill(cfg, "nonprivate", math.inf, {0.1: [0.80, 0.82, 0.78], 0.2: [0.70, 0.70, 0.70]})
    # hybrid at eps 3: lr 0.1 -> losses 20, 30, 25 (mean 25, std 5); lr 0.2 -> 50, 40, 45 (mean 45)
    _fill(cfg, "hybrid", 3.0, {0.1: [0.76, 0.74, 0.75], 0.2: [0.70, 0.72, 0.71]})
    res = tables.build_table(cfg, T)
    assert res.nonprivate.status == "ok" and res.nonprivate.mean == pytest.approx(0.80)
    cell = res.cells[("hybrid", 3.0)]
    assert cell.status == "ok" and cell.best_hparams == {"learning_rate": 0.1}
    assert cell.mean == pytest.approx(25.0) and cell.std == pytest.approx(5.0) and cell.n_seeds == 3
    # the header says how the metric is derived and which AUC_np was used; the non-private row is an AUC
    md = tables.render_markdown(res)
    assert "100 ((1 - AUC) - (1 - AUC_np)) / (1 - AUC_np)" in md
    assert "AUC_np = 0.8000 ± 0.0200 (mean ± std over 3 seeds)" in md
    assert "Non-private reference (test AUC): 0.800 ± 0.020" in md
    assert "25.000 ± 5.000" in _row(md, "3.0")
    assert "AUC_np = 0.8000 ± 0.0200" in tables.render_latex(res)
    tidy = {(r["column"], r["epsilon"]): r for r in tables.tidy_rows(res)}
    assert tidy[("nonprivate", "inf")]["metric"] == "test_auc" and tidy[("nonprivate", "inf")]["mean"] == pytest.approx(
        0.8
    )
    assert tidy[("hybrid", "3.0")]["metric"] == "relative_auc_loss_pct"


def test_without_nonprivate_records_no_private_cell_has_a_number(cfg):
    for col in ("rr", "dpsgd", "hybrid"):
        for eps in (1.0, 3.0):
            _fill(cfg, col, eps, _same(0.75))  # private records exist, the reference does not
    res = tables.build_table(cfg, T)
    assert res.nonprivate.status == tables.NOT_RUN
    for cell in res.cells.values():
        assert cell.status == tables.NOT_RUN and cell.reason == NO_NP and cell.mean is None
    assert all(not b for b in res.best.values())
    md = tables.render_markdown(res)
    for eps in ("1.0", "3.0"):
        assert all(c.strip().startswith("not run") for c in _row(md, eps).split("|")[2:-1])
    assert "AUC_np: none" in md and NO_NP in md
    assert all(r["mean"] is None for r in tables.tidy_rows(res))


def test_all_diverged_nonprivate_runs_give_no_reference_either(cfg):
    _fill(cfg, "nonprivate", math.inf, {0.1: [math.nan] * 3, 0.2: [math.nan] * 3})
    _fill(cfg, "hybrid", 3.0, _same(0.75))
    cell = tables.build_table(cfg, T).cells[("hybrid", 3.0)]
    assert cell.status == tables.NOT_RUN and "no usable records" in cell.reason and cell.mean is None


def test_the_lowest_loss_is_bold(cfg):
    _fill(cfg, "nonprivate", math.inf, _same(0.80))
    # eps 3: hybrid has the highest AUC (lowest loss); eps 1: rr does
    for col, (auc1, auc3) in {"rr": (0.78, 0.70), "dpsgd": (0.70, 0.72), "hybrid": (0.74, 0.76)}.items():
        _fill(cfg, col, 1.0, _same(auc1))
        _fill(cfg, col, 3.0, _same(auc3))
    res = tables.build_table(cfg, T)
    assert res.best == {1.0: {"rr"}, 3.0: {"hybrid"}}
    assert res.cells[("hybrid", 3.0)].mean == pytest.approx(20.0)  # 100 (0.24 - 0.20) / 0.20
    row3 = _row(tables.render_markdown(res), "3.0")
    assert "**20.000 ± 0.000**" in row3 and row3.count("**") == 2
    assert "**10.000 ± 0.000**" in _row(tables.render_markdown(res), "1.0")  # rr: 100 (0.22 - 0.20) / 0.20


@pytest.mark.parametrize("hybrid_auc, verdict", [(0.76, "holds"), (0.68, "fails")])
def test_scorecard_reads_a_lower_loss_as_better(cfg, tmp_path, hybrid_auc, verdict):
    """rr and dpsgd have AUC 0.70 and 0.72 (loss 50, 40): hybrid at 0.76 (loss 20) beats them, at
    0.68 (loss 60) does not; a higher-is-better reading would give the opposite verdicts."""
    _fill(cfg, "nonprivate", math.inf, _same(0.80))
    for col, auc in {"rr": 0.70, "dpsgd": 0.72, "hybrid": hybrid_auc}.items():
        _fill(cfg, col, 3.0, _same(auc))
    path = tmp_path / f"{T}.csv"
    tables.write_csv(path, tables.tidy_rows(tables.build_table(cfg, T)))
    _, summary, claims = scorecard.build(cfg, [path])
    assert [c.verdict for c in claims] == [verdict]
    assert summary[0]["cells_run"] == 3


def test_scorecard_claim_on_hand_rows():
    def rows(hybrid, rr, dpsgd):
        return [
            {
                "column": c,
                "epsilon": "3.0",
                "status": "ok",
                "mean": str(m),
                "reference_only": "False",
                "n_missing_seeds": "0",
            }
            for c, m in (("hybrid", hybrid), ("rr", rr), ("dpsgd", dpsgd))
        ]

    claim = {"id": "h", "text": "", "winner": "hybrid", "losers": ["rr", "dpsgd"], "epsilons": [3.0]}
    assert scorecard.evaluate_claim("t", claim, rows(5.0, 12.0, 11.0), "relative_auc_loss_pct").verdict == "holds"
    assert scorecard.evaluate_claim("t", claim, rows(15.0, 12.0, 11.0), "relative_auc_loss_pct").verdict == "fails"


# ----------------------------------------------------------------------------- published values


def _csv_value(table, dataset, method, eps, cap=""):
    with open(REF / "hybrid_semisensitive_tables.csv") as f:
        (row,) = [
            r
            for r in csv.DictReader(f)
            if (r["table"], r["dataset"], r["method"], r["example_cap"]) == (table, dataset, method, cap)
            and float(r["epsilon"]) == eps
        ]
    return float(row["value"])


def test_002_values_are_looked_up_without_touching_000s():
    ref = tables.load_reference(REF)
    expected = _csv_value("2", "criteo_attribution", "hybrid", 3.0)
    assert expected == pytest.approx(5.343)
    v = tables.paper_value(
        ref,
        table="002:2",
        dataset="criteo_attribution",
        method="hybrid",
        variant=None,
        epsilon=3.0,
        k=None,
        metric="relative_auc_loss_pct",
    )
    assert v == expected
    v3 = tables.paper_value(
        ref,
        table="002:3",
        dataset="criteo_attribution",
        method="rr",
        variant=None,
        epsilon=3.0,
        k=10,
        metric="relative_auc_loss_pct",
    )
    assert v3 == _csv_value("3", "criteo_attribution", "rr", 3.0, "10")
    # 002's "2" is not 000's Table 2
    assert (
        tables.paper_value(
            ref,
            table="2",
            dataset="criteo_attribution",
            method="hybrid",
            variant=None,
            epsilon=3.0,
            k=None,
            metric="relative_auc_loss_pct",
        )
        is None
    )
    v000 = tables.paper_value(
        ref, table="7", dataset="criteo_attribution", method="rr", variant=None, epsilon=0.1, k=2, metric="test_auc"
    )
    assert v000 == pytest.approx(0.562)


def test_the_paper_value_sits_beside_each_cell_even_when_not_run(cfg):
    res = tables.build_table(cfg, T)  # no records at all
    assert res.cells[("hybrid", 3.0)].paper == _csv_value("2", "criteo_attribution", "hybrid", 3.0)
    assert res.cells[("rr", 1.0)].paper == _csv_value("2", "criteo_attribution", "rr", 1.0)
    assert "not run (5.343)" in _row(tables.render_markdown(res), "3.0")


def test_schema_requires_the_nonprivate_runs_for_the_relative_metric():
    cfg = repo_config()
    validate_config(cfg, SCHEMA)
    cfg["tables"][T]["nonprivate"] = False
    with pytest.raises(ConfigError, match="nonprivate"):
        validate_config(cfg, SCHEMA)


def test_the_nonprivate_reference_is_its_best_configuration_not_its_first(cfg):
    """The non-private cell reports test AUC and is chosen on it (not on the table's derived metric)."""
    _fill(cfg, "nonprivate", math.inf, {0.1: [0.70, 0.70, 0.70], 0.2: [0.80, 0.82, 0.78]})
    res = tables.build_table(cfg, T)
    assert res.nonprivate.best_hparams == {"learning_rate": 0.2} and res.nonprivate.mean == pytest.approx(0.80)
