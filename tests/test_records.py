import json
import os

import pytest

from labeldp import records


def _minimal():
    return {k: {} for k in records.REQUIRED_KEYS} | {
        "schema_version": 1,
        "run_id": "x",
        "method": "m",
        "variant": "default",
        "seed": 0,
        "created": "now",
        "privacy": {"target_epsilon": 1.0, "epsilon": 0.99, "delta": 1e-5, "valid": True},
        "metrics": {"test_accuracy_pct": 50.0},
    }


def test_write_and_read_roundtrip(tmp_path):
    p = records.write_record(tmp_path / "a" / "r.json", _minimal())
    assert records.read_record(p)["privacy"]["epsilon"] == 0.99
    assert os.listdir(p.parent) == ["r.json"]


def test_missing_key_is_rejected_and_nothing_written(tmp_path):
    rec = _minimal()
    del rec["privacy"]
    with pytest.raises(ValueError, match="privacy"):
        records.write_record(tmp_path / "r.json", rec)
    assert not (tmp_path / "r.json").exists()


def test_failed_serialisation_leaves_no_partial_file(tmp_path):
    rec = _minimal()
    rec["metrics"]["bad"] = object()
    with pytest.raises(TypeError):
        records.write_record(tmp_path / "r.json", rec)
    assert os.listdir(tmp_path) == []


def test_existing_record_is_replaced_atomically(tmp_path):
    p = tmp_path / "r.json"
    records.write_record(p, _minimal())
    rec = _minimal()
    rec["metrics"]["test_accuracy_pct"] = 60.0
    records.write_record(p, rec)
    assert json.loads(p.read_text())["metrics"]["test_accuracy_pct"] == 60.0


def test_environment_has_versions_and_git():
    env = records.environment()
    assert env["packages"]["jax"] and env["packages"]["dp-accounting"]
    assert "commit" in env["git"] and env["cpu_count"] >= 1


def test_epsilon_encoding():
    assert records.encode_epsilon(float("inf")) == "inf"
    assert records.decode_epsilon("inf") == float("inf")
    assert records.decode_epsilon(0.5) == 0.5


def test_git_revision_falls_back_to_the_stated_revision(tmp_path, monkeypatch):
    # a copy of the work tree without .git (e.g. a lent GPU machine): the caller states it
    monkeypatch.setenv("LABELDP_GIT_REVISION", "abc123+dirty")
    assert records.git_revision(tmp_path) == {"commit": "abc123", "dirty": True, "source": "LABELDP_GIT_REVISION"}
    monkeypatch.setenv("LABELDP_GIT_REVISION", "abc123")
    assert records.git_revision(tmp_path)["dirty"] is False
    monkeypatch.delenv("LABELDP_GIT_REVISION")
    assert records.git_revision(tmp_path) == {"commit": None, "dirty": None}


def test_machine_description_names_the_accelerator_only_off_cpu():
    gpu = {"cpu": "Xeon", "jax_backend": "gpu", "jax_devices": ["gpu:H100", "gpu:H100"], "cpu_count": 16}
    assert records.machine_description(gpu) == "Xeon (gpu: gpu:H100, 16 cpus)"
    cpu = {"cpu": "EPYC", "jax_backend": "cpu", "jax_devices": ["cpu:"], "cpu_count": 2}
    assert records.machine_description(cpu) == "EPYC (cpu, 2 cpus)"


def test_record_names_the_revision_the_run_started_at(monkeypatch):
    """A long run can outlive a commit: the record names the code that ran (the start revision)
    and keeps the write-time revision beside it when the checkout moved."""
    start = {"commit": "aaa111", "dirty": False}
    monkeypatch.setattr(records, "git_revision", lambda repo_dir=None: {"commit": "bbb222", "dirty": False})
    env = records.environment(git_at_start=start)
    assert env["git"] == start and env["git_at_write"] == {"commit": "bbb222", "dirty": False}
    same = records.environment(git_at_start={"commit": "bbb222", "dirty": False})
    assert same["git"]["commit"] == "bbb222" and "git_at_write" not in same
    assert records.environment()["git"]["commit"] == "bbb222"


def test_runner_takes_the_revision_before_training(tmp_path, monkeypatch):
    from labeldp import runner
    from labeldp.methods.base import MethodResult, PrivacyOutcome

    revisions = iter([{"commit": "start", "dirty": False}] + [{"commit": "later", "dirty": False}] * 10)
    monkeypatch.setattr(records, "git_revision", lambda repo_dir=None: next(revisions))
    result = MethodResult(
        metrics={"test_accuracy_pct": 50.0},
        privacy=PrivacyOutcome(
            epsilon=1.0, delta=0.0, valid=True, mechanism="test", neighboring_relation="label_substitution"
        ),
        timings={},
        details={},
    )
    monkeypatch.setattr(runner, "run_spec", lambda spec, data: result)
    import numpy as np
    import types

    data = types.SimpleNamespace(name="mnist", x_train=np.zeros((4, 28, 28, 1)), x_test=np.zeros((2, 28, 28, 1)))
    monkeypatch.setattr(runner, "load_prepared", lambda path: data)  # where runner.load_run looks it up
    out = tmp_path / "rec.json"
    spec = '{"dataset": "mnist", "method": "rr", "variant": "default", "epsilon": 1.0, "delta": 0.0, "seed": 0, "hparams": {}}'
    assert runner.main(["--spec", spec, "--data", "x.npz", "--out", str(out)]) == 0
    rec = records.read_record(out)
    assert rec["environment"]["git"]["commit"] == "start"
    assert rec["environment"]["git_at_write"]["commit"] == "later"


def test_git_revision_can_ignore_the_report_being_rebuilt(tmp_path, monkeypatch):
    import subprocess

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "reports" / "r1").mkdir(parents=True)
    (tmp_path / "reports" / "r1" / "t.md").write_text("old\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init")
    monkeypatch.chdir(tmp_path)  # relative exclusions are relative to the working directory
    assert records.git_revision(tmp_path)["dirty"] is False
    (tmp_path / "reports" / "r1" / "t.md").write_text("rebuilt\n")
    assert records.git_revision(tmp_path)["dirty"] is True
    assert records.git_revision(tmp_path, exclude=("reports/r1",))["dirty"] is False
    assert records.git_revision(tmp_path, exclude=(str(tmp_path / "reports" / "r1"),))["dirty"] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert records.git_revision(tmp_path, exclude=("reports/r1",))["dirty"] is True
    # excluded paths outside the checkout must not make a dirty tree look clean
    assert records.git_revision(tmp_path, exclude=("/elsewhere/results", "../results"))["dirty"] is True


def test_git_revision_unknown_state_is_not_clean(tmp_path, monkeypatch):
    import subprocess

    real_run = subprocess.run

    def failing_status(cmd, *a, **kw):
        out = real_run(cmd, *a, **kw)
        if cmd[:2] == ["git", "status"]:
            return subprocess.CompletedProcess(cmd, 128, "", "fatal: bad pathspec")
        return out

    monkeypatch.setattr(subprocess, "run", failing_status)
    rev = records.git_revision()
    assert rev["commit"] and rev["dirty"] is None


def test_a_stated_revision_is_kept_beside_the_one_git_detects(tmp_path, monkeypatch):
    """A lent machine's copy of .git can be an older snapshot than the tree that travelled: the
    record keeps what git saw there and what the caller states, so neither hides the other."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(
        ["git", "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init"], cwd=tmp_path, check=True
    )
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    monkeypatch.delenv("LABELDP_GIT_REVISION", raising=False)
    assert records.git_revision(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "code.py").write_text("x = 2\n")
    monkeypatch.setenv("LABELDP_GIT_REVISION", "abc123")
    got = records.git_revision(tmp_path)
    assert got["commit"] == head and got["dirty"] is True
    assert got["stated"] == {"commit": "abc123", "dirty": False}


def test_table_header_names_stated_and_dirty_revisions():
    from labeldp.report.tables import revision_text

    assert revision_text({"commit": "aaa", "dirty": False}) == "aaa"
    assert revision_text({"commit": "aaa", "dirty": True}) == "aaa+dirty"
    assert (
        revision_text({"commit": "aaa", "dirty": True, "stated": {"commit": "bbb", "dirty": False}})
        == "aaa+dirty (stated: bbb)"
    )
    assert revision_text({"commit": "bbb", "dirty": False, "stated": {"commit": "bbb", "dirty": False}}) == "bbb"
    # a short stated hash of the detected commit is the same revision
    assert revision_text({"commit": "bbb123", "dirty": False, "stated": {"commit": "bbb", "dirty": False}}) == "bbb123"
    # git could not tell: never shown as a clean revision
    assert revision_text({"commit": "aaa", "dirty": None}) == "aaa (tree state unknown)"


def test_a_privacy_outcome_must_state_its_relation():
    """A method that forgets to say which neighbouring relation its eps is for cannot write a
    record (an add/remove eps must never pass for label DP by default)."""
    from labeldp.methods.base import PrivacyOutcome

    import pytest

    with pytest.raises(ValueError, match="states no neighbouring relation"):
        PrivacyOutcome(epsilon=1.0, delta=0.0, mechanism="m").to_dict(target_epsilon=1.0)
    with pytest.raises(ValueError, match="epsilon_by_relation"):
        PrivacyOutcome(
            epsilon=1.0, delta=1e-5, mechanism="m", accounting={"event": {}}, neighboring_relation="add_or_remove"
        ).to_dict(target_epsilon=1.0)
    d = PrivacyOutcome(epsilon=1.0, delta=0.0, mechanism="m", neighboring_relation="label_substitution").to_dict(
        target_epsilon=1.0
    )
    assert d["epsilon_by_relation"] == {"label_substitution": 1.0}


def test_record_paths_skip_pretraining_files_and_every_sweep_marker_or_halving_selection(tmp_path):
    from labeldp.records import record_paths

    (tmp_path / "mnist/rr/default/eps1.0/hp").mkdir(parents=True)
    (tmp_path / "mnist/rr/default/eps1.0/hp/seed0.json").write_text("{}")
    (tmp_path / "ssl/mnist-official-full/simclr-x/checkpoints/1").mkdir(parents=True)
    (tmp_path / "ssl/mnist-official-full/simclr-x/pretrain.json").write_text("{}")
    (tmp_path / "ssl/mnist-official-full/simclr-x/checkpoints/1/_METADATA.json").write_text("{}")
    (tmp_path / "pretrained/cifar100_cifar_cnn/0123456789ab").mkdir(parents=True)
    (tmp_path / "pretrained/cifar100_cifar_cnn/0123456789ab/pretrain.json").write_text("{}")
    for marker in (".sweeps/mnist/rr/default/eps1.0/sweep-0123.json", "audit/.sweeps/mnist/audit-0123.json"):
        (tmp_path / marker).parent.mkdir(parents=True)
        (tmp_path / marker).write_text("{}")
    (tmp_path / ".halving/table5/rr/eps1.0.json").parent.mkdir(parents=True)
    (tmp_path / ".halving/table5/rr/eps1.0.json").write_text("{}")
    (tmp_path / "audit/mnist/rr/default/eps1.0/hp").mkdir(parents=True)
    (tmp_path / "audit/mnist/rr/default/eps1.0/hp/seed0.json").write_text("{}")
    assert record_paths(tmp_path) == [
        tmp_path / "audit/mnist/rr/default/eps1.0/hp/seed0.json",
        tmp_path / "mnist/rr/default/eps1.0/hp/seed0.json",
    ]
