"""The locked environment (issue 17): the lock covers pyproject's dependencies with hashes, the
conda file pins the same versions, the README commands and CI install from it, and records say
whether the packages that ran are the locked ones."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from labeldp import lockfile, records

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
TORCH = ROOT / "requirements" / "torch-cpu.txt"


def _requirement_name(spec: str) -> str:
    return lockfile.normalise_name(re.split(r"[\[<>=!~;\s]", spec, maxsplit=1)[0])


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _blocks(path: Path) -> dict[str, str]:
    """name -> the text of its requirement block (the pin line and its continuation lines)."""
    out: dict[str, str] = {}
    current = None
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line)
        if match:
            current = lockfile.normalise_name(match.group(1))
            out[current] = line
        elif current is not None and line.startswith("    "):
            out[current] += "\n" + line
        else:
            current = None
    return out


def test_lock_pins_every_dependency_of_pyproject_and_its_extras():
    project = _pyproject()["project"]
    wanted = list(project["dependencies"])
    for extra in ("test", "slurm"):
        wanted += project["optional-dependencies"][extra]
    pins = {**lockfile.read_pins(LOCK), **lockfile.read_pins(TORCH)}
    missing = [spec for spec in wanted if _requirement_name(spec) not in pins]
    assert not missing, f"not in the lock: {missing}; run bash requirements/refresh.sh"


def test_every_locked_package_has_a_sha256_hash():
    for path in (LOCK, TORCH):
        blocks = _blocks(path)
        assert blocks, path
        unhashed = [name for name, text in blocks.items() if "--hash=sha256:" not in text]
        assert not unhashed, f"{path.name}: no hash for {unhashed}"


def test_torch_is_the_cpu_build_of_pyprojects_pin_and_only_in_its_own_file():
    pin = next(d for d in _pyproject()["project"]["dependencies"] if d.startswith("torch"))
    version = pin.split("==")[1]
    assert lockfile.read_pins(TORCH) == {"torch": f"{version}+cpu"}
    assert "torch" not in lockfile.read_pins(LOCK)
    # nothing of the CUDA build (it would pull GBs of nvidia wheels)
    assert not [n for n in lockfile.read_pins(LOCK) if n.startswith(("nvidia-", "triton"))]


def test_conda_environment_pins_the_locked_versions():
    env = yaml.safe_load((ROOT / "envs" / "labeldp.yaml").read_text())
    pip_entries = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    locked = {**lockfile.read_pins(LOCK), **lockfile.read_pins(TORCH)}
    pinned = [e for e in pip_entries if not e.startswith("-")]
    assert len(pinned) >= 15
    for entry in pinned:
        name, _, version = entry.partition("==")
        assert version, f"envs/labeldp.yaml: {entry} has no exact version"
        assert locked.get(lockfile.normalise_name(name)) == version, entry
    assert "python=3.11" in env["dependencies"]


def test_readme_commands_and_ci_install_from_the_lock():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)[:2]
    assert len(blocks) == 2
    for block in blocks:
        assert "bash requirements/install.sh" in block
        assert "pip install -e" not in block
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = [l for l in blocks[1].splitlines() if l and not l.startswith("#")][0]
    assert test_command in ci


def test_read_pins_refuses_a_package_pinned_twice(tmp_path):
    path = tmp_path / "lock.txt"
    path.write_text("numpy==2.0.0 \\\n    --hash=sha256:ab\nnumpy==2.1.0\n")
    with pytest.raises(ValueError, match="numpy is pinned twice"):
        lockfile.read_pins(path)


def test_lock_status_names_a_package_that_differs_from_the_lock(tmp_path):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "lock.txt").write_text(
        "pytest==0.0.1 \\\n    --hash=sha256:00\nno-such-package-xyz==1.0 \\\n    --hash=sha256:00\n"
    )
    (tmp_path / "requirements" / "torch-cpu.txt").write_text("--index-url https://x\n")
    status = lockfile.lock_status(tmp_path)
    assert status["installed_matches_lock"] is False
    assert {d["package"] for d in status["differences"]} == {"pytest", "no-such-package-xyz"}
    assert {d["installed"] is None for d in status["differences"]} == {True, False}
    assert all(len(sha) == 64 for sha in status["files"].values())


def test_lock_status_without_lock_files_compares_nothing(tmp_path):
    status = lockfile.lock_status(tmp_path)
    assert status["installed_matches_lock"] is None
    assert status["files"] == {rel: None for rel in lockfile.LOCK_FILES}


def test_records_store_the_lock_files_hashes():
    env = records.environment()
    assert set(env["lock"]["files"]) == set(lockfile.LOCK_FILES)
    assert env["lock"]["files"]["requirements/lock.txt"] == lockfile.lock_status()["files"]["requirements/lock.txt"]


def test_install_script_refuses_a_python_other_than_3_11(tmp_path):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Python 3.10.4'; exit 0; fi\nexit 1\n")
    fake.chmod(0o755)
    proc = subprocess.run(
        ["bash", str(ROOT / "requirements" / "install.sh"), str(tmp_path / "venv")],
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Python 3.11" in proc.stderr and "3.10.4" in proc.stderr
    assert not (tmp_path / "venv").exists()
