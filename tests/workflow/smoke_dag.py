"""The smoke profile's whole DAG through Snakemake, run ONCE per test session and shared by the smoke tests.

:func:`run_smoke_dag` does what README command 1 does, in a fresh directory, and checks resumption on
the way: a partial run (MNIST's fetch), the whole DAG killed (SIGKILL) once its first run record is
written, then resumed; a dry run must then have nothing to do; finally the HTML report. The facts the
resume tests assert are returned in a :class:`SmokeDag`, the outputs stay in its directory.

The run takes minutes, so ``tests/conftest.py`` starts it in a background thread when the session
begins (:class:`BackgroundSmokeDag`) if a collected test is marked ``smoke_dag``; the other tests run
meanwhile, and each smoke test waits for it through the ``smoke_dag`` fixture.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from labeldp.records import record_paths

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
SMOKE = REPO / "workflow/config/smoke.yaml"
#: the smoke profile's tables and figures (targets of the same name), and those that print "not run"
TABLES = [
    "table2",
    "table3",
    "table5_mnist",
    "table5_cifar10",
    "table13",
    "table14",
    "table15",
    "table6",
    "table6_fashion_mnist",
    "table7",
    "tableG3",
    "hybrid_table1",
    "hybrid_table2",
    "hybrid_table3",
    "hybrid_table5",
    "table11",
    "lpmst_table4_mnist",
    "lpmst_table4_fashion_mnist",
    "lpmst_table3",
    "lpmst_table1",
    "lpmst_table2",
    "lpmst_table5",
    "figure2_sweep",
    "pro_figure4_sweep",
    "pro_figure4_fashion_mnist_sweep",
    "table12_k2",
    "table12_k5",
    "table12_k10",
    "table12_delta",
    "table12",
    "lpmst_figure2_priors",
    "lpmst_figure2_priors_fashion_mnist",
    "lpmst_figure4a_sweep",
    "lpmst_figure4b_sweep",
]
FIGURES = ["figure3", "figure4", "figure4_honest", "figure5a", "figure5a_honest"]
HYBRID_FIGURES = ["hybrid_figure2", "hybrid_figure3", "hybrid_figure4"]  # 002's figures, from the Hybrid tables
NOT_RUN = {
    "tables": ["hybrid_table4"],  # proprietary data
    "figures": ["hybrid_figure3_pcvr", "figure5b"],
}
#: datasets the smoke profile reads from SYNTHETIC stand-ins (records and tables must say so)
STANDIN_DATASETS = (
    "cifar10",
    "cifar100",
    "cifar10_simclr",
    "kmnist",
    "criteo_search",
    "census1940",
    "criteo_attribution",
    "criteo_pctr",
    "movielens_1m",
)

__all__ = [
    "REPO",
    "SNAKEMAKE",
    "SMOKE",
    "STANDIN_DATASETS",
    "TABLES",
    "FIGURES",
    "HYBRID_FIGURES",
    "NOT_RUN",
    "SmokeDag",
    "BackgroundSmokeDag",
    "run_snakemake",
    "incomplete_outputs",
    "csv_rows",
    "run_records",
    "run_smoke_dag",
    "kill_group",
    "LIVE",
]


#: Snakemake processes running now (each the leader of its own process group), killed by :func:`kill_group`
LIVE: set[subprocess.Popen] = set()


def kill_group(child: subprocess.Popen) -> None:
    """SIGKILLs ``child``'s process group (Snakemake and its jobs) if it still runs, and reaps it."""
    if child.poll() is None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()


def run_snakemake(workdir: Path, *args: str, mirror: Path, check=True, timeout=2400, extra_config=()):
    """Snakemake on the smoke profile in ``workdir`` (2 cores, ``--rerun-incomplete``); raises with the
    tail of its output if it fails and ``check``."""
    cmd = [
        SNAKEMAKE,
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "2",
        "--rerun-incomplete",
        *args,
        "--configfile",
        str(SMOKE),
        *extra_config,
    ]
    env = dict(os.environ, LABELDP_DATA_MIRROR=str(mirror))
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as child:
        LIVE.add(child)
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except BaseException:
            kill_group(child)
            raise
        finally:
            LIVE.discard(child)
    proc = subprocess.CompletedProcess(cmd, child.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def incomplete_outputs(work: Path) -> set[str]:
    """Output paths Snakemake has marked as started but not finished (its persistence keeps
    one file per path under .snakemake/incomplete, named by the urlsafe base64 of the path,
    split into '@'-prefixed chunks when long)."""
    root = work / ".snakemake" / "incomplete"
    out = set()
    if not root.exists():
        return out
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f == "migration_underway":
                continue
            rel = Path(dirpath, f).relative_to(root).parts
            b64 = "".join(p[1:] if p.startswith("@") else p for p in rel)
            try:
                out.add(base64.urlsafe_b64decode(b64.encode()).decode())
            except Exception:  # a marker being written right now
                continue
    return out


def csv_rows(path: Path) -> list[dict]:
    """The rows of a CSV output as dicts."""
    with open(path) as f:
        return list(csv.DictReader(f))


def run_records(work: Path) -> list[Path]:
    """The run records under ``results/smoke``, sorted: :func:`labeldp.records.record_paths` (not the
    pre-trainings' files, the sweeps' markers, the halving selections or the paper examples')."""
    root = work / "results/smoke"
    return record_paths(root) if root.exists() else []


@dataclasses.dataclass(frozen=True)
class SmokeDag:
    """A finished smoke DAG and what its resumption showed.

    Attributes:
      work: the directory it ran in (``reports/smoke``, ``results/smoke``, ...).
      fetch_redone: the resumed run fetched MNIST again (it must not).
      first_record_redone: the record finished before the kill was written again (it must not).
      dry_run_after: the output of a dry run after the resumed run (must say nothing is left).
      report_html: the HTML report Snakemake built.
    """

    work: Path
    fetch_redone: bool
    first_record_redone: bool
    dry_run_after: str
    report_html: Path

    @property
    def reports(self) -> Path:
        """The smoke profile's reports directory (tables, figures, scorecard, audit)."""
        return self.work / "reports/smoke"


def run_smoke_dag(work: Path, mirror: Path) -> SmokeDag:
    """Runs the smoke DAG in ``work`` (created): partial run, kill, resume, dry run, report (module docstring).

    Raises:
      AssertionError: a Snakemake call failed, or no record appeared before the kill.
    """
    work.mkdir(parents=True, exist_ok=True)
    run_snakemake(work, "fetch_mnist", mirror=mirror)
    manifest = work / "data/raw/mnist/MANIFEST.json"
    m_time = manifest.stat().st_mtime_ns
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", "2"]
    proc = subprocess.Popen(
        [*cmd, "--configfile", str(SMOKE)],
        env=dict(os.environ, LABELDP_DATA_MIRROR=str(mirror)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    LIVE.add(proc)
    first = None
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        # a record counts as a finished job once Snakemake has also cleared its incomplete
        # marker (the runner writes the file just before its process exits)
        done = [r for r in run_records(work) if str(r.relative_to(work)) not in incomplete_outputs(work)]
        if done:
            first = done[0]
            break
        time.sleep(0.2)
    kill_group(proc)
    LIVE.discard(proc)
    if first is None:
        raise AssertionError("no result record appeared before the kill")
    first_time = first.stat().st_mtime_ns
    run_snakemake(work, "--unlock", mirror=mirror)  # a SIGKILLed Snakemake leaves its lock behind
    run_snakemake(work, mirror=mirror)
    again = run_snakemake(work, "-n", mirror=mirror)
    html = work / "report.html"
    run_snakemake(work, "--report", str(html), mirror=mirror)
    return SmokeDag(
        work=work,
        fetch_redone=manifest.stat().st_mtime_ns != m_time,
        first_record_redone=first.stat().st_mtime_ns != first_time,
        dry_run_after=again.stdout + again.stderr,
        report_html=html,
    )


class BackgroundSmokeDag:
    """:func:`run_smoke_dag` in a thread started at once; :meth:`result` waits for it (and re-raises its
    error in the waiting test)."""

    def __init__(self, work: Path, mirror: Path):
        self.work = work
        self.started = time.time()
        self.finished: float | None = None  # when run_smoke_dag returned or raised
        self.waited_s = 0.0  # how long the tests waited for it (0: it was done before a smoke test needed it)
        self.outcome: SmokeDag | BaseException | None = None
        self.thread = threading.Thread(target=self.run, args=(work, mirror), name="smoke-dag", daemon=True)
        self.thread.start()

    def run(self, work: Path, mirror: Path) -> None:
        try:
            self.outcome = run_smoke_dag(work, mirror)
        except BaseException as exc:  # handed to the waiting test
            self.outcome = exc
        finally:
            self.finished = time.time()

    def stop(self) -> None:
        """Kills the Snakemake run in progress, if any (the session ends before a smoke test waited)."""
        for child in list(LIVE):
            kill_group(child)
        self.thread.join(timeout=60)

    def timing_line(self) -> str:
        """Where the session's time went: the DAG's wall time beside the other tests (or how long it ran before it
        failed or was stopped), and how long the smoke tests waited for it."""
        if self.finished is None:
            return "smoke DAG (background): still running when the session ended"
        ran = f"{self.finished - self.started:.0f} s"
        if isinstance(self.outcome, BaseException):
            return f"smoke DAG (background): failed or stopped after {ran} ({type(self.outcome).__name__})"
        return f"smoke DAG (background, beside the other tests): {ran}; the smoke tests waited {self.waited_s:.0f} s for it"

    def result(self) -> SmokeDag:
        before = time.time()
        self.thread.join()
        self.waited_s += time.time() - before
        if isinstance(self.outcome, BaseException):
            raise AssertionError(f"the smoke DAG failed: {self.outcome}") from self.outcome
        return self.outcome
