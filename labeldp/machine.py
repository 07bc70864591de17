"""What machine a record, a benchmark figure or a test run came from: one description for all three.

Machines with the same CPU model name and core count differed about 2x in speed here
(``benchmarks/results/ci_time_experiments_cpu.md``, 2026-12-07), so a description names the clock
and bogomips as well as the model, the CPUs this process may use and the memory. Everything is read
from ``/proc`` (Linux); elsewhere the fields that cannot be read are ``None`` and the model falls back
to :func:`platform.processor`.
"""

from __future__ import annotations

import dataclasses
import os
import platform
from pathlib import Path
from typing import Any

__all__ = ["Machine", "describe", "cpu_model", "loadavg"]

PROC = Path("/proc")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Machine:
    """A CPU machine as a benchmark or a test summary states it.

    Attributes:
      cpu_model: the first CPU's ``model name`` (``"unknown"`` where nothing names it).
      cpu_mhz: the first CPU's ``cpu MHz`` at the time it was read (``None`` where absent).
      bogomips: the first CPU's ``bogomips`` (``None`` where absent).
      cpus: the CPUs this process may run on (its affinity mask; ``os.cpu_count()`` without one).
      memory_gib: total memory (``MemTotal``) in GiB (``None`` where absent).
    """

    cpu_model: str
    cpu_mhz: float | None
    bogomips: float | None
    cpus: int
    memory_gib: float | None

    def line(self) -> str:
        """One line for a log or a results file.

        Returns:
          ``'<model>, <MHz> MHz, bogomips <b>, <n> CPUs, <m> GiB'``, leaving out what is unknown.
        """
        parts = [
            self.cpu_model,
            f"{self.cpu_mhz:.3f} MHz" if self.cpu_mhz is not None else None,
            f"bogomips {self.bogomips:.2f}" if self.bogomips is not None else None,
            f"{self.cpus} CPUs",
            f"{self.memory_gib:.0f} GiB" if self.memory_gib is not None else None,
        ]
        return ", ".join(p for p in parts if p)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (what a record's ``environment.machine`` holds).

        Returns:
          ``{"cpu_model", "cpu_mhz", "bogomips", "cpus", "memory_gib"}``.
        """
        return dataclasses.asdict(self)


def _lines(proc: Path, name: str) -> list[str]:
    try:
        return (proc / name).read_text().splitlines()
    except OSError:  # not Linux, or no such file
        return []


def _first_cpu(proc: Path) -> dict[str, str]:
    """The first CPU's ``key: value`` fields of ``cpuinfo``."""
    fields: dict[str, str] = {}
    for line in _lines(proc, "cpuinfo"):
        if not line.strip():
            if fields:
                break  # the blank line that ends the first CPU's block
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _model_name(cpu: dict[str, str]) -> str:
    return cpu.get("model name") or platform.processor() or "unknown"


def cpu_model(*, proc: Path = PROC) -> str:
    """The CPU's model name.

    Args:
      proc: where ``cpuinfo`` is read (``/proc``; a test passes a folder of its own).

    Returns:
      The first CPU's ``model name``; where there is none, :func:`platform.processor`, else ``"unknown"``.
    """
    return _model_name(_first_cpu(proc))


def describe(*, proc: Path = PROC) -> Machine:
    """This machine's :class:`Machine`.

    Args:
      proc: where ``cpuinfo`` and ``meminfo`` are read (``/proc``; a test passes a folder of its own).

    Returns:
      The description; fields that cannot be read are ``None``.
    """
    cpu = _first_cpu(proc)
    mem_kib = next((line.split()[1] for line in _lines(proc, "meminfo") if line.startswith("MemTotal:")), None)
    return Machine(
        cpu_model=_model_name(cpu),
        cpu_mhz=_float(cpu.get("cpu MHz")),
        bogomips=_float(cpu.get("bogomips")),
        cpus=_usable_cpus(),
        memory_gib=int(mem_kib) / 2**20 if mem_kib and mem_kib.isdigit() else None,
    )


def loadavg(*, proc: Path = PROC) -> list[float]:
    """The machine's load averages.

    Args:
      proc: where ``loadavg`` is read (``/proc``; a test passes a folder of its own).

    Returns:
      The 1-, 5- and 15-minute load averages; ``[]`` where they cannot be read.
    """
    lines = _lines(proc, "loadavg")
    try:
        return [float(v) for v in lines[0].split()[:3]] if lines else []
    except ValueError:
        return []
