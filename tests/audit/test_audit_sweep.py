"""The audit's jobs (labeldp.audit.plan.audit_sweeps, labeldp.audit.sweep): one process per prepared data
file, every audited run once, records equal to those the one-run ``audit_run`` rule writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labeldp import plan
from labeldp.audit import plan as audit_plan
from labeldp.audit import runner as audit_runner
from labeldp.audit import sweep as audit_sweep
from labeldp.methods.base import RunSpec
from labeldp.sweeps import Sweep

from tests.helpers import audit_config as _config
from tests.helpers import write_prepared_mnist as _prepared

AUDIT_ARGS = ["--train-subset", "160", "--num-canaries", "40", "--confidence", "0.95"]


def test_one_audit_job_per_data_file_holds_every_audited_run_once(tmp_path):
    cfg = _config(tmp_path)
    runs = sorted(r.record_path for r in audit_plan.audit_runs(cfg))
    jobs = audit_plan.audit_sweeps(cfg)
    assert len(runs) == 14 and len(jobs) == 1  # 7 columns x 2 eps, all on MNIST
    ((marker, job),) = jobs.items()
    assert marker == job.marker_path
    assert marker.startswith(str(tmp_path / "results/audit/.sweeps/mnist/audit-")) and marker.endswith(".json")
    assert sorted(r.record_path for r in job.runs) == runs
    assert job.prepared_path == audit_plan.audit_runs(cfg)[0].prepared_path
    capped = audit_plan.audit_sweeps({**cfg, "sweep_max_runs": 5})
    assert len(capped) == 3 and sorted(r.record_path for j in capped.values() for r in j.runs) == runs
    # a changed audit setting gives new jobs (their finished records are still skipped, never redone)
    assert set(audit_plan.audit_sweeps(_config(tmp_path, num_canaries=500))).isdisjoint(jobs)
    assert audit_plan.audit_sweeps({**cfg, "audit": None}) == {}
    # the ids do not depend on the order the config lists columns and eps in
    shuffled = _config(tmp_path, columns=cfg["audit"]["columns"][::-1], epsilons=cfg["audit"]["epsilons"][::-1])
    assert set(audit_plan.audit_sweeps(shuffled)) == set(jobs)


def _stable(record: dict) -> dict:
    """A record without what differs between two executions of one run (times, machine, creation)."""
    out = {k: v for k, v in record.items() if k not in ("timings", "environment", "created")}
    out["audit"] = {k: v for k, v in record["audit"].items() if k != "seconds"}
    return out


def test_an_audit_job_writes_the_records_of_single_audit_runs_and_never_redoes_one(tmp_path):
    """The job trains RR then DP-SGD in one process; the single runs go in the reverse order, so a
    cached program or random stream one left behind that changed the other's numbers fails this."""
    data = _prepared(tmp_path / "mnist.npz")
    planned = []
    for method, eps, extra in (("rr", 8.0, {}), ("dpsgd", 4.0, {"clip_norm": 1.0})):
        spec = RunSpec(
            dataset="mnist",
            method=method,
            variant="default",
            epsilon=eps,
            delta=1e-5,
            seed=0,
            hparams=dict(learning_rate=0.3, epochs=1, batch_size=32, **extra),
            profile="smoke",
        )
        path = str(tmp_path / "results/audit" / f"{plan.run_id(spec)}.json")
        planned.append(plan.PlannedRun(spec=spec, record_path=path, prepared_path=str(data)))
    marker = tmp_path / "results/audit/.sweeps/mnist/audit-test.json"
    job = Sweep(id="mnist/audit-test", runs=tuple(planned), prepared_path=str(data), marker_path=str(marker))
    sweep_json = json.dumps(job.to_dict())
    argv = ["--sweep", sweep_json, "--data", str(data), "--marker", str(marker), *AUDIT_ARGS]
    assert audit_sweep.main(argv) == 0
    assert json.loads(marker.read_text())["records"] == [r.record_path for r in planned]
    for run in reversed(planned):
        single = tmp_path / "single" / Path(run.record_path).name
        spec_json = json.dumps(run.spec.to_dict())
        assert audit_runner.main(["--spec", spec_json, "--data", str(data), "--out", str(single), *AUDIT_ARGS]) == 0
        got, alone = json.loads(Path(run.record_path).read_text()), json.loads(single.read_text())
        assert got["method"] == run.spec.method and got["audit"]["num_canaries"] == 40
        assert _stable(got) == _stable(alone)
    # rerun after the marker is gone: nothing is trained again, the records stay byte-identical
    before = {r.record_path: Path(r.record_path).read_bytes() for r in planned}
    marker.unlink()
    assert audit_sweep.main(["--sweep", sweep_json, "--marker", str(marker), *AUDIT_ARGS]) == 0
    assert marker.exists() and {p: Path(p).read_bytes() for p in before} == before
    Path(planned[0].record_path).unlink()
    with pytest.raises(SystemExit, match="has 1 runs to train but no --data"):
        audit_sweep.main(["--sweep", sweep_json, "--marker", str(marker), *AUDIT_ARGS])
