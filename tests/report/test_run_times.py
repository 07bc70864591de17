"""000 Table 11 from records (labeldp.report.run_times): medians per machine, never pooled; no
runs of its own; not scored."""

from __future__ import annotations

import pytest

from labeldp import plan, records
from labeldp.config_semantics import validate_semantics
from labeldp.report import run_times, scorecard, tables
from tests.helpers import install_fake_methods, repo_config


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    install_fake_methods(
        monkeypatch, ["rr", "rr_debiased", "lp_2st", "alibi", "dpsgd", "labeldp_pro"], axes=("learning_rate",)
    )
    c = repo_config(results_dir=str(tmp_path / "results"))
    c["seeds"] = [0, 1, 2]
    c["grids"]["full"]["table5a"]["learning_rate"] = [0.1]
    c["tables"]["table5_mnist"]["epsilons"] = [0.1]
    c["tables"]["table11"]["sources"] = [{"table": "table5_mnist", "ref_dataset": "mnist_table5"}]
    return c


def _write(run, seconds, cpu):
    spec = run.spec
    records.write_record(
        run.record_path,
        {
            "schema_version": 1,
            "run_id": run.run_id,
            "dataset": {"name": spec.dataset, "source": "official"},
            "method": spec.method,
            "variant": spec.variant,
            "seed": spec.seed,
            "hparams": dict(spec.hparams),
            "privacy": {
                "target_epsilon": spec.epsilon,
                "epsilon": spec.epsilon,
                "delta": spec.delta,
                "valid": True,
                "mechanism": "test",
            },
            "metrics": {"test_accuracy_pct": 90.0},
            "timings": {"seconds_per_epoch": seconds},
            "environment": {"cpu": cpu, "jax_backend": "cpu", "cpu_count": 2},
            "config": {},
            "created": "now",
        },
    )


def test_medians_per_machine_and_missing_methods_not_run(cfg):
    t11 = plan.select_runs(cfg, ["table11"])
    assert t11 and {r.record_path for r in t11} <= {r.record_path for r in plan.select_runs(cfg, ["table5_mnist"])}
    dpsgd = [r for r in t11 if r.spec.method == "dpsgd"]
    _write(dpsgd[0], 10.0, "cpu A")
    _write(dpsgd[1], 30.0, "cpu A")
    _write(dpsgd[2], 1.0, "cpu B")
    rows = run_times.build_rows(cfg, "table11", tables.load_reference(cfg["reference_dir"]))
    got = {(r["method"], r["machine"]): r for r in rows}
    a = got[("dpsgd", records.machine_description({"cpu": "cpu A", "jax_backend": "cpu", "cpu_count": 2}))]
    b = got[("dpsgd", records.machine_description({"cpu": "cpu B", "jax_backend": "cpu", "cpu_count": 2}))]
    assert (a["mean"], a["n_runs"], b["mean"], b["n_runs"]) == (20.0, 2, 1.0, 1)  # never pooled
    assert a["paper"] == 44.52  # 000 Table 11, MNIST DP-SGD on a P100
    assert got[("rr", "")]["status"] == "not run"
    md = run_times._markdown(cfg, "table11", rows)
    assert "20 [2] (44.52)" in md and "not run (2.4)" in md


def test_the_scorecard_does_not_score_timings(cfg, tmp_path):
    rows = run_times.build_rows(cfg, "table11", tables.load_reference(cfg["reference_dir"]))
    path = tmp_path / "table11.csv"
    tables.write_csv(path, rows)
    cells, summary, claims = scorecard.build(cfg, [path])
    assert cells == [] and summary == [] and claims == []


def test_a_source_that_is_not_a_table_is_refused(cfg):
    cfg["tables"]["table11"]["sources"] = [{"table": "nope", "ref_dataset": "mnist_table5"}]
    with pytest.raises(plan.ConfigError, match="sources"):
        validate_semantics(cfg)
