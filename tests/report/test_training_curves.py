"""000 Figure 2 from records (labeldp.report.training_curves): the reported configuration's seeds, averaged."""

from __future__ import annotations

import pytest

from labeldp import plan, records
from labeldp.config_semantics import validate_semantics
from labeldp.plan import ConfigError
from labeldp.report import training_curves
from tests.helpers import install_fake_methods, repo_config
from tests.helpers import write_table_record as _write


def test_each_lambdas_curve_is_the_seed_mean_of_its_reported_configuration(tmp_path, monkeypatch):
    install_fake_methods(monkeypatch, ["labeldp_pro"], axes=("learning_rate", "smoothing"))
    cfg = repo_config(results_dir=str(tmp_path / "results"))
    cfg["seeds"] = [0, 1]
    cfg["grids"]["full"]["table5a"]["learning_rate"] = [0.1, 0.2]
    tcfg = cfg["tables"]["figure2_sweep"]
    for col in plan.columns(tcfg):
        for run in plan.cell_runs(cfg, "figure2_sweep", col, 0.1):
            lr, seed = run.spec.hparams["learning_rate"], run.spec.seed
            _write(cfg, run, 90.0 if lr == 0.2 else 50.0)  # lr 0.2 is every cell's reported configuration
            if col.id == "lambda05":
                continue  # its records predate the curves
            rec = records.read_record(run.record_path)
            rec["details"] = {
                "training_curves": {
                    "steps_per_point": 3,
                    "loss": [2.0 + seed, 1.0 + seed],
                    "grad_norm": [10.0 * lr + seed, 4.0],
                }
            }
            records.write_record(run.record_path, rec)
    rows = training_curves.build_rows(cfg, "figure2")
    ok = [r for r in rows if r["column"] == "lambda1"]
    assert [(r["step"], r["loss"], r["grad_norm"], r["n_seeds"]) for r in ok] == [(3, 2.5, 2.5, 2), (6, 1.5, 4.0, 2)]
    (missing,) = [r for r in rows if r["column"] == "lambda05"]
    assert missing["status"] == "not run" and "training curves" in missing["reason"]


def test_a_source_eps_the_table_does_not_have_is_refused():
    cfg = repo_config()
    cfg["tables"]["figure2"]["source"] = {"table": "figure2_sweep", "epsilon": 0.3}
    with pytest.raises(ConfigError, match=r"figure2.source.epsilon: \[0.3\] is not an eps of figure2_sweep"):
        validate_semantics(cfg)
