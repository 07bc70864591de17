"""labeldp.machine: the one machine description (records, benchmarks, the test summary)."""

from __future__ import annotations

import platform

import pytest

from labeldp import machine, records

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
cpu MHz\t\t: 1996.250
bogomips\t: 3992.50

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: Another CPU
cpu MHz\t\t: 3000.000
bogomips\t: 6000.00
"""
MEMINFO = "MemTotal:       25165824 kB\nMemFree:         1000000 kB\n"


@pytest.fixture
def proc(tmp_path):
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    (tmp_path / "meminfo").write_text(MEMINFO)
    (tmp_path / "loadavg").write_text("1.50 0.75 0.25 3/400 12345\n")
    return tmp_path


def test_the_first_cpus_fields_and_the_memory_are_read(proc):
    m = machine.describe(proc=proc)
    assert (m.cpu_model, m.cpu_mhz, m.bogomips, m.memory_gib) == ("AMD EPYC", 1996.25, 3992.5, 24.0)
    assert m.line() == f"AMD EPYC, 1996.250 MHz, bogomips 3992.50, {m.cpus} CPUs, 24 GiB"
    assert m.to_dict() == {
        "cpu_model": "AMD EPYC",
        "cpu_mhz": 1996.25,
        "bogomips": 3992.5,
        "cpus": m.cpus,
        "memory_gib": 24.0,
    }


def test_the_cpus_are_those_this_process_may_use(proc, monkeypatch):
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert machine.describe(proc=proc).cpus == 3


def test_what_cannot_be_read_is_left_out_not_invented(tmp_path, monkeypatch):
    monkeypatch.setattr(platform, "processor", lambda: "")
    m = machine.describe(proc=tmp_path)  # no cpuinfo, meminfo or loadavg here
    assert (m.cpu_model, m.cpu_mhz, m.bogomips, m.memory_gib) == ("unknown", None, None, None)
    assert m.line() == f"unknown, {m.cpus} CPUs"
    assert machine.loadavg(proc=tmp_path) == []


def test_an_unparsable_field_is_none(tmp_path):
    (tmp_path / "cpuinfo").write_text("model name\t: X\ncpu MHz\t: n/a\n")
    (tmp_path / "meminfo").write_text("MemTotal: lots kB\n")
    m = machine.describe(proc=tmp_path)
    assert (m.cpu_model, m.cpu_mhz, m.memory_gib) == ("X", None, None)


def test_load_averages(proc):
    assert machine.loadavg(proc=proc) == [1.5, 0.75, 0.25]


def test_only_the_first_cpus_block_is_read(tmp_path):
    # the first CPU states no clock or bogomips: the second CPU's must not stand in for them
    (tmp_path / "cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: First\n\nprocessor\t: 1\nmodel name\t: Second\ncpu MHz\t: 3000.0\nbogomips\t: 6000.00\n"
    )
    m = machine.describe(proc=tmp_path)
    assert (m.cpu_model, m.cpu_mhz, m.bogomips) == ("First", None, None)


def test_the_model_name_the_records_store(proc, tmp_path, monkeypatch):
    assert machine.cpu_model(proc=proc) == "AMD EPYC"
    monkeypatch.setattr(platform, "processor", lambda: "x86_64")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert machine.cpu_model(proc=empty) == machine.describe(proc=empty).cpu_model == "x86_64"


def test_an_unparsable_load_average_is_empty(tmp_path):
    (tmp_path / "loadavg").write_text("high\n")
    assert machine.loadavg(proc=tmp_path) == []


def test_a_machine_is_built_by_keyword_only():
    with pytest.raises(TypeError):
        machine.Machine("AMD EPYC", 1996.25, 3992.5, 2, 24.0)


def test_records_state_the_machine():
    env = records.environment()
    assert env["cpu"] == machine.cpu_model()
    assert env["machine"]["cpu_model"] == env["cpu"]
    assert set(env["machine"]) == {"cpu_model", "cpu_mhz", "bogomips", "cpus", "memory_gib"}
