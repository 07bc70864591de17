"""The background smoke DAG's timing line (printed in the suite's summary: where CI's time went)."""

from __future__ import annotations

import time

import pytest

from tests.workflow import smoke_dag


def test_the_timing_line_states_the_dags_time_and_the_tests_wait(monkeypatch, tmp_path):
    monkeypatch.setattr(smoke_dag, "run_smoke_dag", lambda work, mirror: time.sleep(0.3) or "done")
    handle = smoke_dag.BackgroundSmokeDag(tmp_path, tmp_path)
    assert handle.timing_line() == "smoke DAG (background): not finished when the session ended"
    assert handle.result() == "done"
    assert handle.waited_s >= 0.2 and handle.finished >= handle.started + 0.3
    assert handle.timing_line().startswith(
        "smoke DAG (background, beside the other tests): 0 s; the smoke tests waited 0 s"
    )


def test_a_failed_dag_still_has_a_finish_time(monkeypatch, tmp_path):
    def fail(work, mirror):
        raise RuntimeError("boom")

    monkeypatch.setattr(smoke_dag, "run_smoke_dag", fail)
    handle = smoke_dag.BackgroundSmokeDag(tmp_path, tmp_path)
    with pytest.raises(AssertionError, match="the smoke DAG failed: boom"):
        handle.result()
    assert handle.finished is not None and "beside the other tests" in handle.timing_line()
