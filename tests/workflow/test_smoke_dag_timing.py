"""The background smoke DAG's timing line (printed in the suite's summary: where CI's time went)."""

from __future__ import annotations

import re
import threading

import pytest

from tests.workflow import smoke_dag


def _fake_dag(monkeypatch, release: threading.Event, *, error: Exception | None = None):
    def run(work, mirror):
        assert release.wait(timeout=60)
        if error is not None:
            raise error
        return "done"

    monkeypatch.setattr(smoke_dag, "run_smoke_dag", run)


def test_the_timing_line_states_the_dags_time_and_the_tests_wait(monkeypatch, tmp_path):
    release = threading.Event()
    _fake_dag(monkeypatch, release)
    handle = smoke_dag.BackgroundSmokeDag(tmp_path, tmp_path)
    assert handle.timing_line() == "smoke DAG (background): still running when the session ended"
    threading.Timer(0.2, release.set).start()
    assert handle.result() == "done"
    assert handle.waited_s > 0 and handle.finished > handle.started
    assert re.fullmatch(
        r"smoke DAG \(background, beside the other tests\): \d+ s; the smoke tests waited \d+ s for it",
        handle.timing_line(),
    )


def test_a_failed_dag_says_so_with_its_time(monkeypatch, tmp_path):
    release = threading.Event()
    _fake_dag(monkeypatch, release, error=RuntimeError("boom"))
    handle = smoke_dag.BackgroundSmokeDag(tmp_path, tmp_path)
    release.set()
    with pytest.raises(AssertionError, match="the smoke DAG failed: boom"):
        handle.result()
    assert re.fullmatch(
        r"smoke DAG \(background\): failed or stopped after \d+ s \(RuntimeError\)", handle.timing_line()
    )
