"""Sweeps (labeldp.sweeps, labeldp.sweep_runner): planning, and records equal to single runs,
kept across a kill."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labeldp import plan, sweeps
from labeldp.methods.base import RunSpec
from tests.helpers import REPO, repo_config, write_prepared_mnist


def test_sweeps_group_runs_that_share_all_but_grid_point_and_seed():
    cfg = repo_config("smoke.yaml", sweep_max_runs=2, sweep_grouping="cell")
    runs = plan.all_runs(cfg)
    sw = sweeps.plan_sweeps(cfg, runs.values())
    members = [r for s in sw.values() for r in s.runs]
    assert sorted(r.record_path for r in members) == sorted(runs)  # every run once
    for s in sw.values():
        assert 1 <= len(s.runs) <= 2
        first = s.runs[0].spec
        for r in s.runs:
            d, f = r.spec.to_dict(), first.to_dict()
            for k in ("dataset", "method", "variant", "epsilon", "delta", "options", "sampling"):
                assert d.get(k) == f.get(k)
            assert r.prepared_path == s.prepared_path
        assert s.marker_path == os.path.join(cfg["results_dir"], ".sweeps", f"{s.id}.json")
    # the same config plans the same ids; a bigger cap plans fewer, larger jobs
    assert list(sweeps.plan_sweeps(cfg, runs.values())) == list(sw)
    big = sweeps.plan_sweeps({**cfg, "sweep_max_runs": 1000}, runs.values())
    assert len(big) < len(sw)


def test_runs_sharing_one_options_object_plan_the_sweeps_of_runs_with_equal_copies():
    """The planner serialises a shared options object once (a memo by identity): runs whose options are
    separate but equal dicts plan the same sweeps, and a run whose options differ is never grouped with them."""
    cfg = repo_config("smoke.yaml", sweep_max_runs=3, sweep_grouping="cell")
    runs = list(plan.all_runs(cfg).values())
    copied = [dataclasses.replace(r, spec=dataclasses.replace(r.spec, options=dict(r.spec.options))) for r in runs]
    shared = sweeps.plan_sweeps(cfg, runs)
    assert len({id(r.spec.options) for r in runs}) < len(runs)  # the planner does share options objects
    assert {k: [r.record_path for r in s.runs] for k, s in shared.items()} == {
        k: [r.record_path for r in s.runs] for k, s in sweeps.plan_sweeps(cfg, copied).items()
    }
    group = next(s.runs for s in shared.values() if len(s.runs) >= 2)
    first = group[0]
    changed = dataclasses.replace(first, spec=dataclasses.replace(first.spec, options={**first.spec.options, "x": 1}))
    apart = sweeps.plan_sweeps(cfg, [changed if r is first else r for r in runs])
    (home,) = [s for s in apart.values() if any(r is changed for r in s.runs)]
    # its former companions are in another sweep
    assert not {r.record_path for r in group[1:]} & {r.record_path for r in home.runs if r is not changed}


def test_a_targets_sweeps_hold_only_its_tables_runs():
    """Two tables share a cell (dataset, method, variant, eps) on different grids: the workflow's sweeps keep the
    runs only one table needs apart from the shared ones, so building one table never trains the other's
    (``sweep_grouping: cell``, the default; the ``method`` and ``data`` groupings (the smoke profile's) trade this for fewer jobs)."""
    cfg = repo_config("smoke.yaml", sweep_grouping="cell")
    cfg["grids"]["smoke"]["wide"] = {**cfg["grids"]["smoke"]["table5a"], "learning_rate": [0.5, 0.1]}
    cfg["tables"]["wide_t5"] = {**cfg["tables"]["table5_mnist"], "grid": "wide", "epsilons": [0.1]}
    by_table = plan.runs_by_table(cfg)
    sw = sweeps.workflow_sweeps(cfg, by_table)
    of_record = sweeps.sweep_of_record(sw)
    t5 = {r.record_path for r in by_table["table5_mnist"]}
    for marker in {of_record[p] for p in t5}:
        assert {r.record_path for r in sw[marker].runs} <= t5, marker
    extra = {r.record_path for r in by_table["wide_t5"]} - t5
    assert extra and all(of_record[p] not in {of_record[q] for q in t5} for p in extra)
    # without the tables the same runs share jobs (what the grouping prevents)
    mixed = sweeps.sweep_of_record(sweeps.plan_sweeps(cfg, plan.all_runs(cfg, by_table).values()))
    assert any(mixed[p] in {mixed[q] for q in t5} for p in extra)


@pytest.mark.parametrize("grouping", ["cell", "method", "data"])
def test_payload_round_trip(grouping):
    cfg = repo_config("smoke.yaml", sweep_grouping=grouping)
    for sw in sweeps.workflow_sweeps(cfg).values():
        pairs = sweeps.Sweep.specs_from_dict(json.loads(json.dumps(sw.to_dict())))
        assert [(s, p) for s, p in pairs] == [(r.spec, r.record_path) for r in sw.runs]


def _coarser_grouping(coarse: str, fine: str) -> dict:
    """The smoke config's sweeps under ``coarse``, checked against ``fine``'s: fewer jobs, every run once, and
    ids that do not depend on the order the config lists its tables in (Snakemake's merged config differs)."""
    cfg = repo_config("smoke.yaml", sweep_grouping=coarse)
    by_table = plan.runs_by_table(cfg)
    coarse_sweeps = sweeps.workflow_sweeps(cfg, by_table)
    fine_sweeps = sweeps.workflow_sweeps({**cfg, "sweep_grouping": fine}, by_table)
    assert len(coarse_sweeps) < len(fine_sweeps)
    reordered = {**cfg, "tables": dict(reversed(list(cfg["tables"].items())))}
    assert sorted(sweeps.workflow_sweeps(reordered)) == sorted(coarse_sweeps)
    members = sorted(r.record_path for s in coarse_sweeps.values() for r in s.runs)
    assert members == sorted(r.record_path for s in fine_sweeps.values() for r in s.runs)  # every run once
    for s in coarse_sweeps.values():
        assert len(s.runs) <= sweeps.max_runs(cfg)
    return coarse_sweeps


def test_method_grouping_puts_a_methods_eps_and_variants_in_one_job():
    """``sweep_grouping: method``: one job per prepared data file and method; the id says where eps and
    variants differ."""
    per_method = _coarser_grouping("method", "cell")
    mixed = [s for s in per_method.values() if len({r.spec.epsilon for r in s.runs}) > 1]
    assert mixed and all("/epsmany/" in s.id for s in mixed)
    for s in per_method.values():
        assert len({(r.prepared_path, r.spec.dataset, r.spec.method) for r in s.runs}) == 1
        if len({r.spec.variant for r in s.runs}) > 1:
            assert s.id.split("/")[2] == "variants"


def test_an_unknown_grouping_is_refused():
    with pytest.raises(ValueError, match="sweep_grouping must be one of"):
        sweeps.workflow_sweeps(repo_config("smoke.yaml", sweep_grouping="table"))


@pytest.mark.parametrize("n,cap", [(0, 3), (1, 3), (6, 3), (7, 3), (5, 1), (4, 108)])
def test_job_chunks_cut_in_order_into_full_jobs_but_the_last(n, cap):
    items = list(range(n))
    chunks = sweeps.job_chunks(items, {"sweep_max_runs": cap})
    assert [x for c in chunks for x in c] == items
    assert all(len(c) == cap for c in chunks[:-1]) and all(1 <= len(c) <= cap for c in chunks)
    assert len(chunks) == -(-n // cap)


def test_bad_cap_is_refused():
    with pytest.raises(ValueError, match="sweep_max_runs"):
        sweeps.max_runs({"sweep_max_runs": -1})


def test_full_reproduction_is_a_few_thousand_jobs(full_reproduction_plan, full_reproduction_sweeps):
    """The papers' protocol (606k runs) plans at most 10,000 jobs."""
    cfg, by_table = full_reproduction_plan  # planned once, for both groupings
    runs = plan.all_runs(cfg, by_table)
    assert len(runs) > 100_000
    assert len(sweeps.plan_sweeps(cfg, runs.values())) <= 10_000
    assert len(full_reproduction_sweeps) <= 10_000


# ---------------------------------------------------------------------------------- execution


_prepared = write_prepared_mnist


def _payload(tmp_path: Path, lrs=(0.1, 0.3), seeds=(0, 1)) -> dict:
    runs = []
    for lr in lrs:
        for seed in seeds:
            spec = RunSpec(
                dataset="mnist",
                method="dpsgd",
                variant="default",
                epsilon=1.0,
                delta=1e-5,
                seed=seed,
                hparams=dict(learning_rate=lr, epochs=1, batch_size=64, clip_norm=1.0),
                profile="smoke",
            )
            runs.append((spec, str(tmp_path / "results" / f"{plan.run_id(spec)}.json")))
    common = {k: v for k, v in runs[0][0].to_dict().items() if k not in ("hparams", "seed")}
    return {
        "id": "mnist/dpsgd/default/eps1.0/sweep-test",
        "common": common,
        "runs": [[dict(s.hparams), s.seed, p] for s, p in runs],
    }


def _stable(record: dict) -> dict:
    """A record without the fields that differ between two executions of the same run."""
    return {k: v for k, v in record.items() if k not in ("timings", "environment", "created")}


def test_a_sweep_writes_the_records_of_single_runs(tmp_path):
    from labeldp import runner
    from labeldp.sweep_runner import run_sweep

    data = _prepared(tmp_path / "mnist.npz")
    payload = _payload(tmp_path)
    marker = tmp_path / "marker.json"
    assert run_sweep(payload, data_path=str(data), marker=str(marker), log=lambda m: None) == 0
    assert json.loads(marker.read_text())["records"] == [p for _, _, p in payload["runs"]]
    for spec, path in sweeps.Sweep.specs_from_dict(payload):
        single = tmp_path / "single" / Path(path).name
        runner.main(["--spec", json.dumps(spec.to_dict()), "--data", str(data), "--out", str(single)])
        a, b = json.loads(Path(path).read_text()), json.loads(single.read_text())
        assert _stable(a) == _stable(b)  # metrics, eps, sigma, steps: identical on CPU
        assert a["timings"]["sweep"]["id"] == payload["id"]
    # rerun: nothing to train, the data is not even needed
    assert run_sweep(payload, data_path=None, marker=str(marker), log=lambda m: None) == 0


def test_a_method_sweep_trains_each_run_at_its_own_eps(tmp_path):
    """``sweep_grouping: method``: one job holds runs at several eps (the payload's per-run fields); each record
    is its own run's (eps, sigma), the marker lists every record."""
    from labeldp.sweep_runner import run_sweep

    data = _prepared(tmp_path / "mnist.npz")
    planned = []
    for eps in (0.5, 4.0):
        spec = RunSpec(
            dataset="mnist",
            method="dpsgd",
            variant="default",
            epsilon=eps,
            delta=1e-5,
            seed=0,
            hparams=dict(learning_rate=0.3, epochs=1, batch_size=64, clip_norm=1.0),
            profile="smoke",
        )
        path = str(tmp_path / "results" / f"{plan.run_id(spec)}.json")
        planned.append(plan.PlannedRun(spec=spec, record_path=path, prepared_path=str(data)))
    cfg = {"results_dir": str(tmp_path / "results"), "sweep_grouping": "method"}
    sw = sweeps.sweep_of_runs(planned, config=cfg)
    assert "/epsmany/" in sw.id
    payload = json.loads(json.dumps(sw.to_dict()))
    marker = tmp_path / "marker.json"
    assert run_sweep(payload, data_path=str(data), marker=str(marker), log=lambda m: None) == 0
    assert json.loads(marker.read_text())["records"] == [r.record_path for r in planned]
    sigmas = []
    for r in planned:
        record = json.loads(Path(r.record_path).read_text())
        assert record["config"]["run_spec"]["epsilon"] == record["privacy"]["target_epsilon"] == r.spec.epsilon
        assert record["privacy"]["epsilon"] <= r.spec.epsilon + 1e-9
        sigmas.append(record["details"]["noise_multiplier"])
    assert sigmas[0] > sigmas[1]  # the smaller eps got the larger noise
    with pytest.raises(ValueError, match="sweep_grouping"):
        sweeps.sweep_of_runs(planned, config={**cfg, "sweep_grouping": "dataset_and_table"})
    with pytest.raises(ValueError, match="share everything but grid point and seed"):
        sweeps.sweep_of_runs(planned, config={**cfg, "sweep_grouping": "cell"})


def test_a_failed_run_leaves_no_marker_and_the_rest_is_trained(tmp_path, monkeypatch):
    from labeldp import sweep_runner
    from labeldp.sweep_runner import run_sweep

    data = _prepared(tmp_path / "mnist.npz")
    payload = _payload(tmp_path, lrs=(0.1,), seeds=(0, 1, 2))
    real = sweep_runner.run_and_record
    monkeypatch.setattr(
        sweep_runner,
        "run_and_record",
        lambda spec, data, config=None: (
            (_ for _ in ()).throw(RuntimeError("boom")) if spec.seed == 1 else real(spec, data, config=config)
        ),
    )
    marker = tmp_path / "marker.json"
    assert run_sweep(payload, data_path=str(data), marker=str(marker), log=lambda m: None) == 1
    assert not marker.exists()
    paths = [p for _, _, p in payload["runs"]]
    assert [os.path.exists(p) for p in paths] == [True, False, True]
    monkeypatch.setattr(sweep_runner, "run_and_record", real)
    assert run_sweep(payload, data_path=str(data), marker=str(marker), log=lambda m: None) == 0
    assert all(os.path.exists(p) for p in paths) and marker.exists()


def test_a_killed_sweep_keeps_its_records_and_a_rerun_trains_only_the_rest(tmp_path):
    data = _prepared(tmp_path / "mnist.npz")
    payload = _payload(tmp_path, lrs=(0.1, 0.2, 0.3), seeds=(0, 1))
    paths = [p for _, _, p in payload["runs"]]
    marker = tmp_path / "marker.json"
    cmd = [
        sys.executable,
        "-m",
        "labeldp.sweep_runner",
        "--sweep",
        json.dumps(payload),
        "--data",
        str(data),
        "--marker",
        str(marker),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not os.path.exists(paths[1]):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = {p: Path(p).read_bytes() for p in paths if os.path.exists(p)}
    assert len(kept) >= 2 and len(kept) < len(paths), "the kill did not land mid-sweep"
    assert not marker.exists()
    leftovers = [f for f in (tmp_path / "results").rglob("*") if f.is_file() and not f.name.endswith(".json")]
    assert not leftovers, f"half-written files: {leftovers}"
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"{len(kept)} with a record, {len(paths) - len(kept)} to train" in done.stdout
    assert all(Path(p).read_bytes() == b for p, b in kept.items())  # finished records untouched
    assert all(os.path.exists(p) for p in paths) and marker.exists()


def test_markers_are_not_run_records(tmp_path):
    from labeldp import records

    (tmp_path / ".sweeps/mnist").mkdir(parents=True)
    (tmp_path / ".sweeps/mnist/sweep-x.json").write_text("{}")
    (tmp_path / "mnist/dpsgd").mkdir(parents=True)
    (tmp_path / "mnist/dpsgd/seed0.json").write_text("{}")
    assert records.record_paths(tmp_path) == [tmp_path / "mnist/dpsgd/seed0.json"]


def test_slurm_profile_gives_sweeps_a_gpu_and_the_rule_a_runtime_from_the_plan():
    import yaml

    prof = yaml.safe_load((REPO / "workflow/profiles/slurm/config.yaml").read_text())
    assert "gpu" in prof["set-resources"]["sweep"]["slurm_extra"] and "runtime" not in prof["set-resources"]["sweep"]
    rule = (REPO / "workflow/rules/train.smk").read_text()
    assert "runtime=lambda wc: _sweep_runtime_minutes(wc)" in rule
    # the audit's jobs (labeldp/audit/plan.py) too
    assert (
        "gpu" in prof["set-resources"]["audit_sweep"]["slurm_extra"]
        and "runtime" not in prof["set-resources"]["audit_sweep"]
    )
    assert prof["set-threads"]["audit_sweep"] == prof["set-threads"]["sweep"]
    assert (
        "runtime=lambda wc: _runtime_minutes(_audit_sweep(wc).runs)" in (REPO / "workflow/rules/audit.smk").read_text()
    )


def test_data_grouping_puts_every_method_of_a_data_file_in_one_job():
    """``sweep_grouping: data`` (the smoke profile): one job per prepared data file; the id names ``methods``
    where the runs' methods differ."""
    per_data = _coarser_grouping("data", "method")
    for s in per_data.values():
        assert len({(r.prepared_path, r.spec.dataset) for r in s.runs}) == 1
        assert (s.id.split("/")[1] == "methods") == (len({r.spec.method for r in s.runs}) > 1)
    assert any(s.id.split("/")[1] == "methods" for s in per_data.values())


def test_a_data_sweep_writes_each_methods_record_as_a_single_run_does(tmp_path):
    """One process trains several methods on one data file (``sweep_grouping: data``): each record equals the
    record of the same run trained alone, and the single runs go in the reverse order, so a state one method
    left in the process (a cached program, a random stream) that changed another's numbers would fail this."""
    from labeldp import runner
    from labeldp.sweep_runner import run_sweep

    data = _prepared(tmp_path / "mnist.npz")
    planned = []
    for method, extra in (("rr", {}), ("dpsgd", {"clip_norm": 1.0}), ("alibi", {}), ("nonprivate", {})):
        spec = RunSpec(
            dataset="mnist",
            method=method,
            variant="default",
            epsilon=float("inf") if method == "nonprivate" else 1.0,
            delta=0.0 if method == "nonprivate" else 1e-5,
            seed=0,
            hparams=dict(learning_rate=0.3, epochs=1, batch_size=64, **extra),
            profile="smoke",
        )
        path = str(tmp_path / "results" / f"{plan.run_id(spec)}.json")
        planned.append(plan.PlannedRun(spec=spec, record_path=path, prepared_path=str(data)))
    cfg = {"results_dir": str(tmp_path / "results"), "sweep_grouping": "data"}
    sw = sweeps.sweep_of_runs(planned, config=cfg)
    assert sw.id.startswith("mnist/methods/default/epsmany/")
    payload = json.loads(json.dumps(sw.to_dict()))
    marker = tmp_path / "marker.json"
    assert run_sweep(payload, data_path=str(data), marker=str(marker), log=lambda m: None) == 0
    assert json.loads(marker.read_text())["records"] == [r.record_path for r in planned]
    for spec, path in reversed(sweeps.Sweep.specs_from_dict(payload)):
        single = tmp_path / "single" / Path(path).name
        runner.main(["--spec", json.dumps(spec.to_dict()), "--data", str(data), "--out", str(single)])
        a, b = json.loads(Path(path).read_text()), json.loads(single.read_text())
        assert a["method"] == spec.method
        assert _stable(a) == _stable(b)
    with pytest.raises(ValueError, match="share their prepared data, dataset, method and profile"):
        sweeps.sweep_of_runs(planned, config={**cfg, "sweep_grouping": "method"})


@pytest.mark.parametrize("vmap_runs", [1, 4])
def test_a_method_that_cannot_import_fails_only_its_own_runs(tmp_path, monkeypatch, vmap_runs):
    """``sweep_grouping: data`` puts every method of a data file in one job: a method whose module fails to
    import (a package missing) fails its runs, named in the log; the other methods' runs get their records."""
    from labeldp.sweep_runner import run_sweep

    pkg = tmp_path / f"mylab_broken_{vmap_runs}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "broken.py").write_text(
        "import no_such_package_for_this_test\nNAME = 'broken'\nHYPERPARAMETERS = ('learning_rate', 'epochs', "
        "'batch_size')\nDATASET_KINDS = ('image',)\ndef run(data, spec):\n    raise NotImplementedError\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LABELDP_METHOD_PACKAGES", pkg.name)
    data = _prepared(tmp_path / "mnist.npz")
    planned = []
    for method in ("broken", "rr"):
        spec = RunSpec(
            dataset="mnist",
            method=method,
            variant="default",
            epsilon=1.0,
            delta=0.0,
            seed=0,
            hparams=dict(learning_rate=0.3, epochs=1, batch_size=64),
            profile="smoke",
        )
        path = str(tmp_path / "results" / f"{plan.run_id(spec)}.json")
        planned.append(plan.PlannedRun(spec=spec, record_path=path, prepared_path=str(data)))
    sw = sweeps.sweep_of_runs(planned, config={"results_dir": str(tmp_path / "results"), "sweep_grouping": "data"})
    marker, logged = tmp_path / "marker.json", []
    payload = json.loads(json.dumps(sw.to_dict()))
    assert run_sweep(payload, data_path=str(data), marker=str(marker), log=logged.append, vmap_runs=vmap_runs) == 1
    assert not marker.exists() and not os.path.exists(planned[0].record_path)
    assert os.path.exists(planned[1].record_path)
    assert any("FAILED" in m and "no_such_package_for_this_test" in m for m in logged)
