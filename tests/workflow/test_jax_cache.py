"""JAX's persistent compilation cache for every job: configured, passed to the jobs, and
numbers unchanged by a warm cache (same config and seed give the same record on CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from labeldp.config import JAX_CACHE_MAX_BYTES, jax_cache_env
from labeldp.plan import ConfigError
from tests.helpers import REPO

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def test_cache_env_names_the_directory_and_turns_on_the_locked_cache(tmp_path):
    env = jax_cache_env(".cache/jax", workdir=tmp_path)
    assert env.startswith(f"JAX_COMPILATION_CACHE_DIR={tmp_path / '.cache/jax'} ")
    assert "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 " in env
    # a size cap is what makes JAX lock the cache directory between concurrent jobs
    assert f"JAX_COMPILATION_CACHE_MAX_SIZE={JAX_CACHE_MAX_BYTES} " in env and env.endswith(" ")
    assert jax_cache_env(str(tmp_path / "abs"), workdir="/elsewhere").startswith(
        f"JAX_COMPILATION_CACHE_DIR={tmp_path / 'abs'} "
    )
    assert jax_cache_env(None, workdir=tmp_path) == ""


def test_a_directory_with_spaces_is_quoted_for_the_shell(tmp_path):
    env = jax_cache_env("my cache", workdir=tmp_path)
    assert env.startswith(f"JAX_COMPILATION_CACHE_DIR='{tmp_path / 'my cache'}' ")


@pytest.mark.parametrize("bad", ["", "  ", 3, True, ["a"]])
def test_bad_cache_dir_is_refused_with_the_fix(bad, tmp_path):
    with pytest.raises(ConfigError, match="jax_compilation_cache_dir.*null"):
        jax_cache_env(bad, workdir=tmp_path)


def _dry_run(tmp_path, *configfiles):
    return subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            str(tmp_path),
            "-n",
            "-p",
            "--cores",
            "2",
            "table15",
            "--configfile",
            str(REPO / "workflow/config/smoke.yaml"),
            *map(str, configfiles),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_jobs_get_the_cache_by_default_and_not_when_it_is_null(tmp_path):
    on = _dry_run(tmp_path)
    assert on.returncode == 0, on.stderr[-3000:]
    cmds = [l for l in on.stdout.splitlines() if "labeldp.sweep_runner" in l]
    assert cmds and all(f"JAX_COMPILATION_CACHE_DIR={tmp_path / '.cache/jax'} " in c for c in cmds)
    off_cfg = tmp_path / "off.yaml"
    off_cfg.write_text(yaml.safe_dump({"jax_compilation_cache_dir": None}))
    off = _dry_run(tmp_path, off_cfg)
    assert off.returncode == 0, off.stderr[-3000:]
    assert "labeldp.sweep_runner" in off.stdout and "JAX_COMPILATION_CACHE_DIR" not in off.stdout


def test_an_empty_cache_dir_in_the_config_fails_before_any_job(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"jax_compilation_cache_dir": ""}))
    proc = _dry_run(tmp_path, bad)
    assert proc.returncode != 0 and "jax_compilation_cache_dir" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_warm_cache_gives_the_same_record_as_a_cold_one(tmp_path):
    """DP-SGD on a tiny stand-in, three processes: no cache, a cold cache, the warm cache. The
    warm run must reuse compiled programs (no new cache entry) and produce the same numbers."""
    from labeldp.data.rawformats import make_standin_raw_files

    raw = tmp_path / "raw"
    make_standin_raw_files("kmnist", raw, n_train=256, n_test=64, seed=0)
    data = tmp_path / "kmnist.npz"
    env0 = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run(
        [sys.executable, "-m", "labeldp.data.prepare", "kmnist", "--raw-dir", str(raw), "--out", str(data)],
        check=True,
        env=env0,
        capture_output=True,
        timeout=300,
    )
    spec = {
        "dataset": "kmnist",
        "method": "dpsgd",
        "variant": "default",
        "epsilon": 1.0,
        "delta": 1e-5,
        "seed": 0,
        "hparams": {"learning_rate": 0.5, "epochs": 1, "batch_size": 64, "clip_norm": 5.0},
        "accountant": "pld",
        "profile": "smoke",
        "sampling": "poisson",
    }
    cache = tmp_path / "cache"

    def run(name, cached):
        env = dict(env0)
        if cached:
            for assignment in jax_cache_env(str(cache), workdir=tmp_path).split():
                key, value = assignment.split("=", 1)
                env[key] = value
        out = tmp_path / f"{name}.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "labeldp.runner",
                "--spec",
                json.dumps(spec),
                "--data",
                str(data),
                "--out",
                str(out),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(out.read_text())

    plain = run("plain", cached=False)
    assert not cache.exists()
    cold = run("cold", cached=True)
    entries = {p.name for p in cache.iterdir() if p.name.endswith("-cache")}
    assert entries, "the cold run wrote no cache entry"
    warm = run("warm", cached=True)
    assert {p.name for p in cache.iterdir() if p.name.endswith("-cache")} == entries, "the warm run compiled anew"
    for rec in (cold, warm):
        assert rec["metrics"] == plain["metrics"]
        assert rec["privacy"]["epsilon"] == plain["privacy"]["epsilon"]
