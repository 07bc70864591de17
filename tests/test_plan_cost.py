"""The cost preview (labeldp.plan_cost): counts, pending runs, jobs, and hours that follow the plan."""

from __future__ import annotations

import pytest
import yaml

from labeldp import plan, plan_cost
from labeldp.config import SCHEMA, validate_config
from tests.helpers import repo_config


def test_counts_runs_records_and_jobs():
    cfg = repo_config("smoke.yaml")
    runs = plan.select_runs(cfg, ["table15"])
    done = {r.record_path for r in runs[: len(runs) // 2]}
    est = plan_cost.estimate(cfg, ["table15"], exists=lambda p: p in done)
    assert est["runs"] == len(runs) and est["with_record"] == len(done) and est["pending"] == len(runs) - len(done)
    assert 1 <= est["jobs"] <= est["pending"]
    none_left = plan_cost.estimate(cfg, ["table15"], exists=lambda p: True)
    assert none_left["pending"] == 0 and none_left["jobs"] == 0 and none_left["hours"]["cpu"] == 0


def test_hours_grow_with_the_work():
    cfg = repo_config("smoke.yaml")
    costs = plan_cost.load_costs()
    run = plan.select_runs(cfg, ["table15"], methods=["dpsgd"])[0]
    longer = plan.PlannedRun(
        spec=type(run.spec)(
            **{**run.spec.__dict__, "hparams": {**run.spec.hparams, "epochs": 10 * run.spec.hparams["epochs"]}}
        ),
        record_path="x",
        prepared_path=run.prepared_path,
    )
    for device in ("cpu", "gpu"):
        assert plan_cost.run_seconds(longer, config=cfg, device=device, costs=costs) > plan_cost.run_seconds(
            run, config=cfg, device=device, costs=costs
        )


def test_a_full_table_points_the_user_elsewhere(full_reproduction_plan, full_reproduction_sweeps):
    cfg, by_table = full_reproduction_plan
    est = plan_cost.estimate(
        cfg, ["table14"], exists=lambda p: False, by_table=by_table, all_sweeps=full_reproduction_sweeps
    )
    assert est["runs"] > 10_000 and est["hours"]["cpu"] > 24
    assert "quick profile" in plan_cost.render(est)


def test_unknown_target_is_refused():
    with pytest.raises(plan.ConfigError, match="unknown table"):
        plan_cost.estimate(repo_config("smoke.yaml"), ["table99"], exists=lambda p: False)


def test_a_runs_fixed_cost_can_depend_on_its_method():
    """A GPU's vmapped DP-SGD runs share compilation: their fixed cost is the method's entry, every
    other method's the default."""
    cfg = repo_config("smoke.yaml")
    costs = {**plan_cost.load_costs(), "seconds_per_run": {"cpu": 6.0, "gpu": {"default": 10.0, "dpsgd": 0.5}}}
    dp = plan.select_runs(cfg, ["table15"], methods=["dpsgd"])[0]
    rr = plan.select_runs(cfg, ["table15"], methods=["rr"])[0]
    zero = {
        **costs,
        "seconds_per_step": {
            d: {m: {"sgd": 0.0, "dpsgd": 0.0, "labeldp_pro": {1024: 0.0}} for m in costs["seconds_per_step"][d]}
            for d in ("cpu", "gpu")
        },
    }
    assert plan_cost.run_seconds(dp, config=cfg, device="gpu", costs=zero) == pytest.approx(0.5)
    assert plan_cost.run_seconds(rr, config=cfg, device="gpu", costs=zero) == pytest.approx(10.0)
    assert plan_cost.run_seconds(dp, config=cfg, device="cpu", costs=zero) == pytest.approx(6.0)


def test_a_methods_step_factor_scales_only_that_methods_step_on_that_device():
    """LP-2ST's and ALIBI's steps do more than RR's (run_costs.yaml's method_step_factor): the factor
    multiplies the named method's step on the named device and nothing else."""
    cfg = repo_config("smoke.yaml")
    base = {k: v for k, v in plan_cost.load_costs().items() if k != "method_step_factor"}
    scaled = {**base, "method_step_factor": {"cpu": {"lp_2st": 2.5}, "gpu": {}}}
    lp = plan.select_runs(cfg, ["table15"], methods=["lp_2st"])[0].spec
    rr = plan.select_runs(cfg, ["table15"], methods=["rr"])[0].spec
    one = plan_cost.step_seconds(lp, device="cpu", costs=base)
    assert one > 0
    assert plan_cost.step_seconds(lp, device="cpu", costs=scaled) == pytest.approx(2.5 * one)
    for spec, device in ((rr, "cpu"), (lp, "gpu"), (rr, "gpu")):
        assert plan_cost.step_seconds(spec, device=device, costs=scaled) == pytest.approx(
            plan_cost.step_seconds(spec, device=device, costs=base)
        )


def test_the_committed_costs_charge_lp_2st_alibi_and_labeldp_pro_their_measured_cpu_factor():
    """The factors measured by benchmarks/plan_cost_calibration.py (LP-2ST 2.1, ALIBI 1.7, LabelDP-Pro 1.75 times
    their family's step on the CPU) stay in the committed costs and scale exactly their method's step: without
    them a preview is 2-5x short. At least 1.5 each (what the calibration measured, rounded down)."""
    cfg = repo_config("smoke.yaml")
    costs = plan_cost.load_costs()
    unscaled = {**costs, "method_step_factor": {}}
    for method, table in (("lp_2st", "table15"), ("alibi", "table15"), ("labeldp_pro", "table2")):
        spec = plan.select_runs(cfg, [table], methods=[method])[0].spec
        ratio = plan_cost.step_seconds(spec, device="cpu", costs=costs) / plan_cost.step_seconds(
            spec, device="cpu", costs=unscaled
        )
        assert ratio == pytest.approx(costs["method_step_factor"]["cpu"][method]) and ratio >= 1.5, method
    rr = plan.select_runs(cfg, ["table15"], methods=["rr"])[0].spec
    assert plan_cost.step_seconds(rr, device="cpu", costs=costs) == plan_cost.step_seconds(
        rr, device="cpu", costs=unscaled
    )


def test_sweep_order_sets_which_ready_job_starts_first_and_stays_below_the_upstream_priority():
    """``sweep_order``: longest_first gives the costlier job the higher priority, shortest_first the
    cheaper one; both stay in [0, PRIORITY_CEILING], below UPSTREAM_PRIORITY (the Snakefile's priority of
    fetch, prepare, pre-training and halving checkpoints), however large the estimate."""
    cheap, costly, huge = 60.0, 3_600.0, 1e12
    assert plan_cost.sweep_priority(costly) > plan_cost.sweep_priority(cheap)  # the default
    assert plan_cost.sweep_priority(cheap, order="shortest_first") > plan_cost.sweep_priority(
        costly, order="shortest_first"
    )
    assert plan_cost.PRIORITY_CEILING < plan_cost.UPSTREAM_PRIORITY
    for order in plan_cost.SWEEP_ORDERS:
        for seconds in (0.0, cheap, costly, huge):
            assert 0 <= plan_cost.sweep_priority(seconds, order=order) <= plan_cost.PRIORITY_CEILING
    with pytest.raises(ValueError, match="sweep_order: 'random' is not one of longest_first, shortest_first"):
        plan_cost.sweep_priority(cheap, order="random")


def test_a_jobs_priority_follows_the_configs_sweep_order():
    """:func:`plan_cost.job_priority` (what train.smk and audit.smk give a job) reads ``sweep_order``:
    a cheap and a costly job of the smoke plan swap places between the two orders."""
    cfg = repo_config("smoke.yaml")
    by_cost = sorted(
        (plan.select_runs(cfg, [t]) for t in ("table15", "table5_mnist")),
        key=lambda rs: plan_cost.runs_seconds(rs, config=cfg, device="cpu"),
    )
    cheap, costly = by_cost[0][:1], by_cost[1]
    assert plan_cost.runs_seconds(cheap, config=cfg, device="cpu") < plan_cost.runs_seconds(
        costly, config=cfg, device="cpu"
    )
    assert plan_cost.job_priority(costly, config=cfg) > plan_cost.job_priority(cheap, config=cfg)  # default
    longest = {**cfg, "sweep_order": "longest_first"}
    assert plan_cost.job_priority(costly, config=longest) > plan_cost.job_priority(cheap, config=longest)
    shortest = {**cfg, "sweep_order": "shortest_first"}
    assert plan_cost.job_priority(cheap, config=shortest) > plan_cost.job_priority(costly, config=shortest)


def test_the_schema_takes_exactly_the_sweep_orders():
    schema = yaml.safe_load(SCHEMA.read_text())
    assert schema["properties"]["sweep_order"]["enum"] == list(plan_cost.SWEEP_ORDERS)
    for order in plan_cost.SWEEP_ORDERS:
        validate_config(repo_config("smoke.yaml", sweep_order=order), SCHEMA)
    with pytest.raises(plan.ConfigError, match="sweep_order"):
        validate_config(repo_config("smoke.yaml", sweep_order="random"), SCHEMA)
