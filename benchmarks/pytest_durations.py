"""Where the test suite's time goes: pytest's ``--durations=0`` report summed per file and per test function.

CI runs README command 2 (``pytest -q``, the whole suite) on a fresh clone; this reports what that run spent,
so that a session trimming CI time starts from measured totals, not guesses. The smoke DAG that
``tests/conftest.py`` starts in the background shares the two cores with the tests for its first minutes, so the
tests that run then take longer than they do alone: compare revisions in one invocation, on the same machine.

Usage (runs the suite, or reads the log of a run made with ``--durations=0``)::

    .venv/bin/python benchmarks/pytest_durations.py --out benchmarks/results/pytest_durations_cpu
    .venv/bin/python benchmarks/pytest_durations.py --log /tmp/pytest.log --revision fbb3fdbe \\
        --out benchmarks/results/pytest_durations_cpu

Writes ``<out>.json`` and ``<out>.md``. pytest lists every phase (setup, call, teardown) of at least 5 ms;
shorter ones are not counted.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from labeldp.machine import describe, loadavg  # noqa: E402

from labeldp.atomic_io import write_text_atomic  # noqa: E402

#: the summary's machine line (tests/conftest.py): ``machine: AMD EPYC, 1996.250 MHz, ...``
MACHINE_LINE = re.compile(r"^machine: (.+)$", re.M)
#: one line of pytest's durations report: ``12.34s call     tests/x.py::test_y[param]``
DURATION_LINE = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S+)$")
#: pytest's summary line: ``1597 passed, 9 warnings in 1574.78s (0:26:14)``
SUMMARY_LINE = re.compile(r"^=*\s*(.*?) in ([\d.]+)s")


def summarize(log: str) -> dict:
    """Per-file and per-test-function totals of a ``--durations=0`` log.

    Args:
      log: the text pytest printed.

    Returns:
      ``{"wall_seconds", "outcome", "summed_seconds", "by_file", "by_test"}``; the last two are
      ``[name, seconds, phases]`` rows, largest first (``phases``: the listed setup, call and teardown
      phases of the parametrizations summed, each at least 5 ms).

    Raises:
      ValueError: the log has no durations report (run pytest with ``--durations=0``).
    """
    by_file, by_test, items_file, items_test = Counter(), Counter(), Counter(), Counter()
    wall, outcome = None, None
    for line in log.splitlines():
        m = DURATION_LINE.match(line.strip())
        if m:
            seconds, node = float(m.group(1)), m.group(3)
            path, test = node.split("::")[0], node.split("[")[0]
            by_file[path] += seconds
            by_test[test] += seconds
            items_file[path] += 1
            items_test[test] += 1
            continue
        s = SUMMARY_LINE.match(line.strip())
        if s and any(w in s.group(1) for w in ("passed", "failed", "error")):
            outcome, wall = s.group(1).strip("= "), float(s.group(2))
    if not by_file:
        raise ValueError("no durations report in the log: run pytest with --durations=0 (every item listed)")
    return {
        "wall_seconds": wall,
        "outcome": outcome,
        "summed_seconds": round(sum(by_file.values()), 2),
        "by_file": [[k, round(v, 2), items_file[k]] for k, v in by_file.most_common()],
        "by_test": [[k, round(v, 2), items_test[k]] for k, v in by_test.most_common()],
    }


def render(result: dict, *, top: int = 30) -> str:
    """The Markdown report.

    Args:
      result: what :func:`main` writes as JSON (machine, revision, source, conditions, summary).
      top: rows per table.

    Returns:
      The report's text.
    """
    s = result["summary"]
    lines = [
        "# Test suite durations (README command 2's pytest run), per file and per test function",
        "",
        f"`benchmarks/pytest_durations.py`, {result['machine']}, revision {result['revision']}, "
        f"written {result['when']}; source: {result['source']}; conditions: {result['conditions']}.",
        "",
        f"pytest: {s['outcome']} in {s['wall_seconds']} s wall; the listed phases' durations sum to {s['summed_seconds']} s "
        "(the background smoke DAG's own jobs are not listed: they share the cores with the first tests).",
        "",
        f"## Files, top {top}",
        "",
        "| seconds | phases listed | file |",
        "| ---: | ---: | --- |",
    ]
    lines += [f"| {sec:.1f} | {n} | `{name}` |" for name, sec, n in s["by_file"][:top]]
    lines += ["", f"## Test functions (parametrizations summed), top {top}", "", "| seconds | phases listed | test |"]
    lines += ["| ---: | ---: | --- |"]
    lines += [f"| {sec:.1f} | {n} | `{name}` |" for name, sec, n in s["by_test"][:top]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """Runs the suite (or reads ``--log``) and writes the report.

    Args:
      argv: command-line arguments (default: ``sys.argv[1:]``).

    Returns:
      The exit status: 0, or 1 when pytest itself failed to produce a report.
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", help="a pytest --durations=0 log to read instead of running the suite")
    ap.add_argument("--revision", help="the revision the log's run tested (required with --log)")
    ap.add_argument("--out", required=True, help="output path without extension")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--conditions", default="", help="what else the machine ran (stated in the report)")
    args = ap.parse_args(argv)
    if args.log:
        if not Path(args.log).is_file():
            ap.error(f"--log {args.log}: no such file (give the log of a pytest run with --durations=0)")
        if not args.revision:
            ap.error("--log needs --revision: the revision whose suite the log timed (HEAD may be another)")
        text = Path(args.log).read_text()
    else:
        cmd = [sys.executable, "-m", "pytest", "-q", "--durations=0", "-p", "no:cacheprovider"]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        text = done.stdout
        if done.returncode not in (0, 1):  # 1: some tests failed, still a durations report
            print(f"pytest exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}", file=sys.stderr)
            return 1
    try:
        summary = summarize(text)
    except ValueError as err:
        ap.error(f"{args.log or 'the pytest run'}: {err}")
    revision = (
        args.revision
        or subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    conditions = args.conditions or ("" if args.log else f"load average at the end {loadavg()}")
    if args.log:  # the machine the log's run was on, as tests/conftest.py's summary printed it
        stated = MACHINE_LINE.search(text)
        machine = stated.group(1).strip() if stated else "not stated in the log"
    else:
        machine = describe().line()
    result = {
        "machine": machine,
        "conditions": conditions or "not stated",
        "revision": revision,
        "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "source": args.log or "pytest run by this script",
        "summary": summary,
    }
    write_text_atomic(Path(f"{args.out}.json"), json.dumps(result, indent=1) + "\n")
    write_text_atomic(Path(f"{args.out}.md"), render(result, top=args.top))
    print(f"wrote {args.out}.json and {args.out}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
