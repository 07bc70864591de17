"""The audit pipeline: canary data, every classification method reports its model's
log-probabilities at the canaries, the audit record, the table's verdicts and the loud check."""

import csv
import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from labeldp import records
from labeldp.audit import plan as audit_plan
from labeldp.audit import runner as audit_runner
from labeldp.audit import table as audit_table
from labeldp.data.prepare import PreparedData
from labeldp.methods import registry
from labeldp.methods.base import RunSpec
from labeldp.plan import ConfigError

from tests.helpers import REPO
from tests.helpers import audit_config as _config

CLASSIFIERS = ["rr", "rr_debiased", "lp_2st", "alibi", "dpsgd", "labeldp_pro", "dpsgd_opacus", "nonprivate"]


def _data(n_train=256, n_test=64, k=10, seed=0):
    rng = np.random.default_rng(seed)
    return PreparedData(
        x_train=rng.integers(0, 256, (n_train, 28, 28, 1), dtype=np.uint8),
        y_train=rng.integers(0, k, n_train),
        x_test=rng.integers(0, 256, (n_test, 28, 28, 1), dtype=np.uint8),
        y_test=rng.integers(0, k, n_test),
        num_classes=k,
        name="mnist",
        source="official",
        subset=None,
    )


def _spec(method, eps=4.0, seed=0):
    hp = {
        "learning_rate": 0.1,
        "epochs": 1,
        "batch_size": 64,
        "clip_norm": 5.0,
        "proj_step_size": "auto",
        "proj_steps": 3,
        "smoothing": 0.75,
    }
    mod = registry.get_method(method)
    axes = tuple(mod.HYPERPARAMETERS)
    options = {"denoiser": "alt_conv", "alt_batch_size": 16} if method == "labeldp_pro" else {}
    return RunSpec(
        dataset="mnist",
        method=method,
        variant="default",
        epsilon=eps if method != "nonprivate" else float("inf"),
        delta=1e-5 if method in ("dpsgd", "labeldp_pro", "dpsgd_opacus") else 0.0,
        seed=seed,
        hparams={a: hp[a] for a in axes},
        options=options,
    )


def test_canary_data_relabels_exactly_the_canaries():
    data = _data()
    audited, can = audit_runner.canary_data(data, train_subset=200, num_canaries=50, seed=3)
    assert audited.x_train.shape[0] == 200
    changed = np.flatnonzero(audited.y_train != data.y_train[:200])
    assert set(changed) <= set(can.indices.tolist())  # only canaries change (some keep their label)
    np.testing.assert_array_equal(audited.y_train[can.indices], can.training_labels)
    np.testing.assert_array_equal(audited.audit_inputs, data.x_train[:200][can.indices])
    assert data.audit_inputs is None  # the input data is not modified
    again, can2 = audit_runner.canary_data(data, train_subset=200, num_canaries=50, seed=3)
    np.testing.assert_array_equal(can.secret_bits, can2.secret_bits)  # seeded
    with pytest.raises(ValueError, match="num_canaries"):
        audit_runner.canary_data(data, train_subset=20, num_canaries=50, seed=0)


@pytest.mark.parametrize("method", CLASSIFIERS)
def test_every_classification_method_reports_log_probs_at_the_audit_inputs(method):
    data = dataclasses.replace(_data(n_train=192), audit_inputs=_data(seed=1).x_train[:7])
    res = registry.get_method(method).run(data, _spec(method))
    lp = np.asarray(res.audit_log_probs)
    assert lp.shape == (7, 10)
    np.testing.assert_allclose(np.exp(lp).sum(axis=1), 1.0, rtol=1e-4)  # log-probabilities
    plain = registry.get_method(method).run(_data(n_train=192), _spec(method))
    assert plain.audit_log_probs is None


def test_audit_record_of_rr_at_large_eps(tmp_path):
    """RR at eps 8 on a memorisable canary set: the record carries the audit, the claimed eps
    under label substitution, and a lower bound in [0, eps]."""
    data = _data(n_train=400)
    rec = audit_runner.run_audit(_spec("rr", eps=8.0), data, train_subset=400, num_canaries=200, confidence=0.95)
    au = rec["audit"]
    assert au["num_canaries"] == 200 and au["train_subset"] == 400
    assert au["claimed_epsilon_by_relation"] == {"label_substitution": 8.0}
    assert 0.0 <= au["epsilon_lower_bound"] <= 8.0
    records.write_record(tmp_path / "r.json", rec)
    json.loads((tmp_path / "r.json").read_text())


def test_audit_plan_of_the_cpu_config(tmp_path):
    cfg = _config(tmp_path)
    runs = audit_plan.audit_runs(cfg)
    assert len(runs) == 7 * 2  # every classification column of Table 5a x eps {1, 4}, one seed
    assert {r.spec.epsilon for r in runs} == {1.0, 4.0}
    assert all(r.record_path.startswith(str(tmp_path / "results/audit/mnist/")) for r in runs)
    dp = next(r for r in runs if r.spec.method == "dpsgd")
    assert dp.spec.calibration_relation is None and dp.spec.hparams["epochs"] == 10  # the papers' convention
    cfg_full = dict(cfg, grid="full")
    with pytest.raises(ConfigError, match="one-point grid"):
        audit_plan.audit_runs(cfg_full)
    with pytest.raises(ConfigError, match="audit.columns"):
        audit_plan.audit_runs(_config(tmp_path, columns=["nope"]))
    with pytest.raises(ConfigError, match="num_canaries"):
        audit_plan.audit_runs(_config(tmp_path, num_canaries=60000))  # 2 m delta > 1


@pytest.mark.parametrize("method", ["rr", "alibi"])
def test_the_audit_plan_refuses_a_column_that_selects_on_held_out_rows(tmp_path, method):
    """The runner's held-out score reads the model at data.audit_inputs, as the canary audit does: refused when
    the audit is planned, before any job, not when the audited run starts."""
    cfg = _config(tmp_path, columns=[method])
    assert [r.spec.method for r in audit_plan.audit_runs(cfg)] == [method, method]  # eps 1 and 4
    tcfg = cfg["tables"]["table5_mnist"]
    cols = [dict(c, variant="heldout10") if c["id"] == method else c for c in tcfg["columns"]]
    cfg["tables"] = {**cfg["tables"], "table5_mnist": {**tcfg, "columns": cols}}
    cfg["variants"] = {
        **cfg["variants"],
        method: {**cfg["variants"].get(method, {}), "heldout10": {"validation_fraction": 0.1}},
    }
    with pytest.raises(ConfigError, match="selects on held-out rows"):
        audit_plan.audit_runs(cfg)


def test_planning_the_audit_loads_no_accountant_and_no_statistics():
    """Every Snakefile parse imports labeldp.audit.plan (workflow/rules/audit.smk): its held-out check reads the
    method's flag without the selection code, which brings dp_accounting, and the package does not load the
    audit's statistics (scipy.stats: about 1 s of a 2-core CPU per parse)."""
    code = "import sys, labeldp.audit.plan; print('dp_accounting' in sys.modules, 'scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False False"


def _fake_audit_record(run, *, r, v, sub, ar=None, valid=True, lb=0.0):
    by_rel = {"label_substitution": sub} if ar is None else {"label_substitution": sub, "add_or_remove": ar}
    rec = {
        "schema_version": 1,
        "run_id": "x",
        "dataset": {"name": "mnist", "source": "official"},
        "method": run.spec.method,
        "variant": "default",
        "seed": run.spec.seed,
        "hparams": {},
        "privacy": {
            "target_epsilon": run.spec.epsilon,
            "epsilon": sub if ar is None else ar,
            "delta": 1e-5,
            "valid": valid,
            "invalid_reason": None,
            "epsilon_by_relation": by_rel,
        },
        "metrics": {"test_accuracy_pct": 50.0},
        "timings": {},
        "environment": {},
        "config": {},
        "created": "now",
        "audit": {
            "epsilon_lower_bound": lb,
            "confidence": 0.95,
            "num_canaries": 1000,
            "best_num_guesses": r,
            "best_num_correct": v,
            "train_subset": 10000,
            "delta": 1e-5,
            "per_count": [{"num_guesses": r, "num_correct": v, "epsilon_lower_bound": lb}],
        },
    }
    records.write_record(run.record_path, rec)


def test_table_verdicts_and_the_check_fails_loudly(tmp_path, capsys):
    cfg = _config(tmp_path, columns=["rr", "dpsgd"], epsilons=[1.0])
    rr, dp = audit_plan.audit_runs(cfg)
    # family-wise: 2 runs x 1 guess count -> each bound at confidence 0.975 (1.535 for 90 of 100)
    _fake_audit_record(rr, r=10, v=5, sub=1.0, lb=0.4)
    _fake_audit_record(dp, r=100, v=90, sub=1.88, ar=1.0)
    rows = audit_table.write_table(cfg, tmp_path / "reports/audit")
    assert rows[0]["verdict"].startswith(audit_table.CONSISTENT) and rows[1]["verdict"] == audit_table.ABOVE_ADD_REMOVE
    assert rows[1]["family_lower_bound"] == pytest.approx(1.535, abs=2e-3)
    md = (tmp_path / "reports/audit/audit.md").read_text()
    assert "| RR | 1.0 | 0 | n/a | 1 | 0.4 / 0 |" in md
    assert audit_table.check(tmp_path / "reports/audit/audit.csv") == 0
    assert "exceeds the add/remove eps" in capsys.readouterr().err
    _fake_audit_record(dp, r=300, v=290, sub=1.88, ar=1.0)  # above the label-DP eps: a failed privacy test
    audit_table.write_table(cfg, tmp_path / "reports/audit")
    assert audit_table.check(tmp_path / "reports/audit/audit.csv") == 1
    err = capsys.readouterr().err
    assert (
        "PRIVACY TEST FAILED: DP-SGD eps 1.0 seed 0: audited lower bound 2.737 > claimed label-substitution eps 1.880"
        in err
    )
    # a claim above what the game can detect is said to be untestable
    _fake_audit_record(dp, r=10, v=5, sub=30.0, ar=20.0)
    rows = audit_table.write_table(cfg, tmp_path / "reports/audit")
    assert "cannot fail at this size" in rows[1]["verdict"]
    # a missing record fails the gate unless allowed
    (tmp_path / "results/audit").joinpath(rr.record_path.split("/results/audit/")[1]).unlink()
    rows = audit_table.write_table(cfg, tmp_path / "reports/audit")
    assert rows[0]["verdict"].startswith("not run") and rows[0]["audited_lower_bound"] is None
    assert audit_table.check(tmp_path / "reports/audit/audit.csv") == 1
    assert "AUDIT INCOMPLETE: RR" in capsys.readouterr().err
    assert audit_table.check(tmp_path / "reports/audit/audit.csv", allow_missing=True) == 0
    with open(tmp_path / "reports/audit/audit.csv") as f:
        assert len(list(csv.DictReader(f))) == 2
