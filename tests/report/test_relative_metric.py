"""002's relative AUC loss: the formula per record, the non-private reference it needs, lower is
better in the scorecard, and 002's published values found beside the cells."""

from __future__ import annotations

import pytest

from labeldp.report import tables
from labeldp.report.scorecard import evaluate_claim
from tests.helpers import REPO

REF = REPO / "workflow/resources/reference"


def test_formula_and_per_record_derivation():
    assert tables.relative_auc_loss_pct(0.80, 0.80) == 0.0
    assert tables.relative_auc_loss_pct(0.70, 0.80) == pytest.approx(50.0)  # error 0.30 vs 0.20
    rec = {"metrics": {"test_auc": 0.75}}
    assert tables._metric(rec, "relative_auc_loss_pct", 0.8) == pytest.approx(25.0)
    assert tables._metric(rec, "relative_auc_loss_pct", None) != tables._metric(rec, "relative_auc_loss_pct", None)  # nan
    assert "relative_auc_loss_pct" in tables.LOWER_IS_BETTER


def test_002_values_are_looked_up_without_touching_000s():
    ref = tables.load_reference(REF)
    v = tables.paper_value(ref, table="002:2", dataset="criteo_attribution", method="hybrid", variant=None,
                           epsilon=3.0, k=None, metric="relative_auc_loss_pct")
    assert v == pytest.approx(5.3, abs=0.05)
    v3 = tables.paper_value(ref, table="002:3", dataset="criteo_attribution", method="rr", variant=None,
                            epsilon=3.0, k=10, metric="relative_auc_loss_pct")
    assert v3 is not None and v3 > 0
    assert tables.paper_value(ref, table="2", dataset="criteo_attribution", method="hybrid", variant=None,
                              epsilon=3.0, k=None, metric="relative_auc_loss_pct") is None
    v000 = tables.paper_value(ref, table="7", dataset="criteo_attribution", method="rr", variant=None, epsilon=0.1,
                              k=2, metric="test_auc")
    assert v000 == pytest.approx(0.562)


def _rows(hybrid, rr, dpsgd):
    return [{"column": c, "epsilon": "3.0", "status": "ok", "mean": str(m), "reference_only": "False", "n_missing_seeds": "0"}
            for c, m in (("hybrid", hybrid), ("rr", rr), ("dpsgd", dpsgd))]


def test_scorecard_reads_a_lower_loss_as_better():
    claim = {"id": "h", "text": "", "winner": "hybrid", "losers": ["rr", "dpsgd"], "epsilons": [3.0]}
    assert evaluate_claim("t", claim, _rows(5.0, 12.0, 11.0), "relative_auc_loss_pct").verdict == "holds"
    assert evaluate_claim("t", claim, _rows(15.0, 12.0, 11.0), "relative_auc_loss_pct").verdict == "fails"
