"""Shared fixtures: repository paths and the data mirror."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labeldp import plan, sweeps
from labeldp.machine import describe as describe_machine
from tests.helpers import repo_config
from tests.workflow.smoke_dag import BackgroundSmokeDag, SmokeDag

REPO = Path(__file__).resolve().parents[1]


def mirror_dir() -> Path | None:
    env = os.environ.get("LABELDP_DATA_MIRROR")
    if env and Path(env).is_dir():
        return Path(env)
    default = REPO.parent / "shared" / "data"
    return default if default.is_dir() else None


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def mirror() -> Path:
    m = mirror_dir()
    if m is None:
        pytest.skip("no data mirror: set LABELDP_DATA_MIRROR to a directory of verified raw files")
    return m


SMOKE_DAG_KEY = pytest.StashKey[BackgroundSmokeDag]()


def pytest_terminal_summary(terminalreporter):
    """The machine and the smoke DAG's time, printed in the summary before the durations (CI's log then says where
    its time went: the tests' own time, the DAG beside them, and the cores they shared)."""
    terminalreporter.write_line(f"machine: {describe_machine().line()}")
    handle = terminalreporter.config.stash.get(SMOKE_DAG_KEY, None)
    if handle is not None:
        terminalreporter.write_line(handle.timing_line())


@pytest.fixture(scope="session", autouse=True)
def smoke_dag_in_background(request, tmp_path_factory):
    """Starts the smoke DAG (tests/workflow/smoke_dag.py) when the session begins, if a collected test is
    marked ``smoke_dag`` and the data mirror is here: the other tests run while it does."""
    wanted = any(item.get_closest_marker("smoke_dag") for item in request.session.items)
    if wanted and mirror_dir() is not None:
        work = tmp_path_factory.mktemp("smoke_dag") / "w"
        request.config.stash[SMOKE_DAG_KEY] = BackgroundSmokeDag(work, mirror_dir())
    yield
    handle = request.config.stash.get(SMOKE_DAG_KEY, None)
    if handle is not None:
        handle.stop()  # a session cut short (-x, Ctrl-C) leaves no Snakemake behind


@pytest.fixture(scope="session")
def smoke_dag(request) -> SmokeDag:
    """The finished smoke DAG (waits for the background run). Tests using it are marked ``smoke_dag``."""
    if mirror_dir() is None:
        pytest.skip("no data mirror: set LABELDP_DATA_MIRROR to a directory of verified raw files")
    handle = request.config.stash.get(SMOKE_DAG_KEY, None)
    if handle is None:
        raise AssertionError("the smoke DAG was not started: mark every test using the smoke_dag fixture smoke_dag")
    return handle.result()


@pytest.fixture(scope="session")
def full_reproduction_plan():
    """``(config, runs by table)`` of the repository's full reproduction (``workflow/config/config.yaml``),
    planned once per session: its 1.7 million table runs (884,884 distinct) take about 8 s to plan on the 2-core CPU
    (benchmarks/results/plan_full_config_cpu.md)."""
    cfg = repo_config()
    return cfg, plan.runs_by_table(cfg)


@pytest.fixture(scope="session")
def full_reproduction_sweeps(full_reproduction_plan):
    """:func:`labeldp.sweeps.workflow_sweeps` of the full reproduction, planned once per session (about
    6 s on the 2-core CPU)."""
    cfg, by_table = full_reproduction_plan
    return sweeps.workflow_sweeps(cfg, by_table)
