"""Experiments on proprietary data (labeldp.report.not_run): "not run" with the reason, beside the paper."""

from __future__ import annotations

from labeldp import plan
from tests.helpers import repo_config


def test_proprietary_experiments_print_not_run_beside_every_published_cell():
    from labeldp.report import not_run

    cfg = repo_config()
    rows = not_run.build_rows(cfg, "hybrid_table4")
    assert len(rows) == 21 and all(r["status"] == "not run" and "proprietary" in r["reason"] for r in rows)
    assert {r["dataset"] for r in rows} == {"proprietary_pcvr"} and all(r["paper"] is not None for r in rows)
    (only,) = not_run.build_rows(cfg, "figure5b")  # 003 prints no App Ads values in the reference files
    assert only["status"] == "not run" and only["paper"] is None
    assert plan.table_runs(cfg, "hybrid_table4") == []  # nothing is planned for it
