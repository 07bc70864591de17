import json
import os

import pytest

from labeldp import records


def _minimal():
    return {k: {} for k in records.REQUIRED_KEYS} | {
        "schema_version": 1, "run_id": "x", "method": "m", "variant": "default", "seed": 0, "created": "now",
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
