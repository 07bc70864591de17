"""workflow/scripts/run_planned.py: the one-process executor writes exactly the planned records."""

from __future__ import annotations

import importlib.util
import json
import math
import os

import yaml

from labeldp import plan, records
from labeldp.config import load_config
from tests.helpers import REPO

SMOKE = REPO / "workflow/config/smoke.yaml"


def _script():
    spec = importlib.util.spec_from_file_location("run_planned", REPO / "workflow/scripts/run_planned.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _override(tmp_path):
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"), "results_dir": str(tmp_path / "results")}))
    return over


def test_shards_partition_the_plan(tmp_path):
    mod = _script()
    cfg = load_config(REPO / "workflow/config/config.yaml", SMOKE, _override(tmp_path))
    every = mod.select_runs(cfg, ["table5_mnist", "table14"])
    parts = [mod.select_runs(cfg, ["table5_mnist", "table14"], shard=(i, 3)) for i in range(3)]
    paths = [r.record_path for p in parts for r in p]
    assert sorted(paths) == sorted(r.record_path for r in every) and len(set(paths)) == len(paths)
    assert {r.record_path for r in every} == {r.record_path for t in ("table5_mnist", "table14")
                                              for r in plan.table_runs(cfg, t)}


def test_writes_planned_records_and_never_redoes_them(tmp_path, capsys):
    mod = _script()
    over = _override(tmp_path)
    args = ["--configfile", str(SMOKE), "--configfile", str(over), "--tables", "table15", "--methods", "nonprivate,rr"]
    assert mod.main(args) == 0
    cfg = load_config(REPO / "workflow/config/config.yaml", SMOKE, over)
    planned = [r for r in plan.table_runs(cfg, "table15") if r.spec.method in ("nonprivate", "rr")]
    assert planned
    mtimes = {}
    for r in planned:
        rec = records.read_record(r.record_path)
        records.validate_record(rec)
        assert rec["run_id"] == r.run_id and rec["method"] == r.spec.method
        assert rec["timings"]["total_seconds"] > 0 and rec["timings"]["process_peak_rss_mib"] > 50  # JAX alone
        assert rec["dataset"]["source"] == "synthetic_standin"  # smoke's KMNIST stand-in, flagged
        if r.spec.method == "rr":
            assert rec["privacy"]["epsilon"] == r.spec.epsilon and rec["privacy"]["valid"]
        else:
            assert math.isinf(records.decode_epsilon(rec["privacy"]["epsilon"]))
        mtimes[r.record_path] = os.stat(r.record_path).st_mtime_ns
    capsys.readouterr()
    assert mod.main(args) == 0
    out = capsys.readouterr().out
    assert "0 to run" in out
    assert all(os.stat(p).st_mtime_ns == t for p, t in mtimes.items())
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["done"] == 0 and summary["failed"] == []


def test_prepare_only_prepares_every_shards_data_and_runs_nothing(tmp_path, capsys):
    mod = _script()
    over = _override(tmp_path)
    args = ["--configfile", str(SMOKE), "--configfile", str(over), "--tables", "table5_mnist", "table15",
            "--methods", "rr", "--shard", "1/7", "--prepare-only"]
    assert mod.main(args) == 0
    cfg = load_config(REPO / "workflow/config/config.yaml", SMOKE, over)
    datasets = {r.spec.dataset for t in ("table5_mnist", "table15") for r in plan.table_runs(cfg, t)}
    assert datasets == {"mnist", "kmnist"}
    for d in datasets:  # every dataset, whichever shard was named
        assert os.path.exists(plan.prepared_path(cfg, d)), d
    assert not (tmp_path / "results").exists()  # no run
    assert capsys.readouterr().out.count("prepared ") == 2


def test_run_sharded_prepares_once_then_writes_every_record(tmp_path):
    import subprocess
    import sys

    over = _override(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    env = dict(os.environ, PYTHON=sys.executable, SHARD_LOG_DIR=str(logs), JAX_PLATFORMS="cpu")
    env.pop("WHEEL_DIR", None)
    args = ["--configfile", str(SMOKE), "--configfile", str(over), "--tables", "table15", "--methods", "rr"]
    out = subprocess.run(["bash", str(REPO / "workflow/scripts/run_sharded.sh"), "2", *args], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + "".join(p.read_text() for p in logs.glob("*.log"))
    assert "prepared kmnist" in (logs / "prepare.log").read_text()
    cfg = load_config(REPO / "workflow/config/config.yaml", SMOKE, over)
    planned = [r for r in plan.table_runs(cfg, "table15") if r.spec.method == "rr"]
    assert planned and all(os.path.exists(r.record_path) for r in planned)
    assert sorted(p.name for p in logs.iterdir()) == ["prepare.log", "shard0.log", "shard1.log"]


def test_prepare_only_skips_datasets_whose_runs_are_done_and_excludes_dry_run(tmp_path, capsys):
    mod = _script()
    over = _override(tmp_path)
    base = ["--configfile", str(SMOKE), "--configfile", str(over), "--tables", "table15", "--methods", "rr"]
    assert mod.main(base) == 0  # every run of the selection done
    capsys.readouterr()
    data = tmp_path / "data"
    for p in sorted(data.rglob("*.npz")):
        p.unlink()
    assert mod.main([*base, "--prepare-only"]) == 0
    assert "prepared " not in capsys.readouterr().out and not list(data.rglob("*.npz"))  # nothing left to run
    import pytest

    with pytest.raises(SystemExit):
        mod.main([*base, "--prepare-only", "--dry-run"])
    assert "not allowed with" in capsys.readouterr().err


def test_run_sharded_refuses_a_missing_shard_count(tmp_path):
    import subprocess

    out = subprocess.run(["bash", str(REPO / "workflow/scripts/run_sharded.sh"), "--configfile", str(SMOKE)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and "usage:" in out.stderr and "N = number of shards" in out.stderr
    assert not (tmp_path / "prepare.log").exists()
