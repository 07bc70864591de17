"""Wall time of the smoke reproduction (README command 1 without the install), before and after a change.

Issue 28's goal: the smoke DAG in at most 8 minutes on the 2-core CPU. For each git revision given,
this clones the repository into a temporary directory (a fresh clone: empty results, an empty JAX
compilation cache), links the given virtual environment, runs
``snakemake --profile workflow/profiles/smoke`` and records the wall time, the number of jobs and the
training records' summed ``total_seconds`` per method. The revisions run one after another on the
same machine, so their ratio is measured side by side; run it on an idle machine.

Usage::

    LABELDP_DATA_MIRROR=../shared/data .venv/bin/python benchmarks/bench_smoke.py \\
        --revisions c4588fd9 HEAD --venv .venv --out benchmarks/results/smoke_cpu

Writes ``<out>.json`` and ``<out>.md``.
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from labeldp.machine import cpu_model, describe  # noqa: E402


def _records_by_method(results: Path) -> dict[str, dict[str, float]]:
    seconds, runs = collections.Counter(), collections.Counter()
    for path in results.rglob("*.json"):
        if any(part.startswith(".") for part in path.relative_to(results).parts):
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or "method" not in record or "timings" not in record:
            continue
        seconds[record["method"]] += float(record["timings"].get("total_seconds") or 0.0)
        runs[record["method"]] += 1
    return {m: {"runs": runs[m], "total_seconds": round(s, 1)} for m, s in seconds.most_common()}


_STAMP = re.compile(r"^\[(\w{3} \w{3}\s+\d+ \d\d:\d\d:\d\d \d{4})\]")


def job_seconds_by_rule(log: str) -> dict[str, dict[str, float]]:
    """Summed wall seconds of Snakemake's jobs per rule (a sweep job: per rule and method), from the
    time stamps Snakemake prints when a job starts and when it finishes (1-second resolution)."""
    stamp, started, name_of = None, {}, {}
    seconds, jobs = collections.Counter(), collections.Counter()
    rule = None
    for line in log.splitlines():
        if m := _STAMP.match(line):
            stamp = _dt.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := re.match(r"(?:local)?rule (\w+):", line):
            rule = m.group(1)
        elif (m := re.match(r"\s+jobid: (\d+)", line)) and rule:
            started[m.group(1)], name_of[m.group(1)] = stamp, rule
        elif (m := re.match(r"\s+wildcards: sweep=[^/]+/([^/,]+)", line)) and rule == "sweep" and name_of:
            name_of[list(name_of)[-1]] = f"sweep/{m.group(1)}"
        elif (m := re.match(r"Finished jobid: (\d+)", line)) and m.group(1) in started:
            j = m.group(1)
            seconds[name_of[j]] += (stamp - started[j]).total_seconds()
            jobs[name_of[j]] += 1
    return {k: {"jobs": jobs[k], "job_seconds": v} for k, v in seconds.most_common()}


def run_smoke(revision: str, *, venv: Path) -> dict:
    """Clones ``revision``, runs the smoke profile there; wall time, jobs and per-method seconds."""
    sha = subprocess.run(["git", "rev-parse", revision], cwd=REPO, check=True, capture_output=True, text=True)
    sha = sha.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-smoke-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", sha], cwd=clone, check=True)
        (clone / ".venv").symlink_to(venv.resolve())
        t0 = time.perf_counter()
        proc = subprocess.run(
            [".venv/bin/snakemake", "--profile", "workflow/profiles/smoke"],
            cwd=clone,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        log = proc.stdout + proc.stderr
        done = re.findall(r"(\d+) of (\d+) steps \(100%\) done", log)
        return {
            "revision": sha[:10],
            "returncode": proc.returncode,
            "wall_seconds": round(wall, 1),
            "jobs": int(done[-1][1]) if done else None,
            "records_by_method": _records_by_method(clone / "results" / "smoke"),
            "job_seconds_by_rule": job_seconds_by_rule(log),
            "log_tail": log[-2000:] if proc.returncode else "",
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--revisions", nargs="+", required=True, help="git revisions, timed in this order")
    ap.add_argument("--venv", type=Path, default=REPO / ".venv")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "smoke_cpu")
    a = ap.parse_args()
    runs = [run_smoke(r, venv=a.venv) for r in a.revisions]
    result = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores ({platform.node()})",
        "cpu_model": cpu_model(),
        "machine_description": describe().line(),
        "runs": runs,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(a.out.with_suffix(".json"))
    base = runs[0]["wall_seconds"]
    lines = [
        "# Smoke reproduction wall time (README command 1 without the install), fresh clones",
        "",
        f"{result['date']}, {result['cpu_model']}, {os.cpu_count()} cores; revisions run one after the other.",
        "",
        "| revision | exit | jobs | wall | vs first | top methods by summed record seconds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        top = ", ".join(
            f"{m} {v['total_seconds']:.0f} s ({v['runs']})" for m, v in list(r["records_by_method"].items())[:4]
        )
        lines.append(
            f"| {r['revision']} | {r['returncode']} | {r['jobs']} | {r['wall_seconds'] / 60:.1f} min | "
            f"{base / r['wall_seconds']:.2f}x | {top} |"
        )
    for r in runs:
        by_rule = r.get("job_seconds_by_rule") or {}
        if by_rule:
            total = sum(v["job_seconds"] for v in by_rule.values())
            top = ", ".join(f"{k} {v['job_seconds']:.0f} s ({v['jobs']})" for k, v in list(by_rule.items())[:10])
            lines += ["", f"{r['revision']}: job-seconds {total:.0f} (jobs by rule, from Snakemake's log): {top}"]
    md = a.out.with_suffix(".md.tmp")
    md.write_text("\n".join(lines) + "\n")
    md.replace(a.out.with_suffix(".md"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
