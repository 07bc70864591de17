"""Seconds to plan a config's runs and sweeps (what every ``snakemake`` invocation does before any job), before
and after a change.

The full reproduction (``workflow/config/config.yaml``) plans about 1.7 million table runs (884,884 distinct); a dry
run pays this before it prints anything. For each git revision given, this checks the revision out into a temporary
worktree and times, in a fresh process each, :func:`labeldp.plan.runs_by_table` and
:func:`labeldp.sweeps.workflow_sweeps` on each config. The revisions alternate (A B A B ...), so their
ratio is measured side by side under the same load; each process also prints a digest of every planned
record path and sweep, which must be equal across revisions (a faster planner that plans something else
is a bug, not a speed-up: exit status 1), and a digest of the config it loaded (each revision loads its own
worktree's config, so revisions whose configs differ are refused: exit status 1).

Usage::

    .venv/bin/python benchmarks/bench_plan.py --revisions 9b146c3a HEAD --repeats 2 \\
        --configs workflow/config/config.yaml --out benchmarks/results/plan_full_config_cpu

Writes ``<out>.json`` and ``<out>.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from labeldp.atomic_io import write_text_atomic  # noqa: E402
from labeldp.machine import cpu_model, loadavg  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

#: run in a fresh interpreter inside the revision's worktree: prints one JSON line
_CHILD = r"""
import hashlib, json, os, sys, time
from labeldp import plan, sweeps
from labeldp.config import load_workflow_config
cfg = load_workflow_config(sys.argv[1])
t0 = time.perf_counter(); by = plan.runs_by_table(cfg); t1 = time.perf_counter()
sw = sweeps.workflow_sweeps(cfg, by); t2 = time.perf_counter()
h = hashlib.sha256()
for table, runs in by.items():
    for r in runs:
        h.update(f"{table}|{r.record_path}|{r.prepared_path}".encode())
for key, sweep in sw.items():
    h.update(f"{key}|{sweep.id}|{json.dumps([r.record_path for r in sweep.runs])}".encode())
config_text = json.dumps(cfg, sort_keys=True, default=str).replace(os.getcwd(), "<repo>")  # the worktree's path
config_digest = hashlib.sha256(config_text.encode()).hexdigest()
print(json.dumps({"runs": sum(len(v) for v in by.values()), "sweeps": len(sw), "plan_s": t1 - t0,
                  "sweeps_s": t2 - t1, "digest": h.hexdigest(), "config_digest": config_digest}))
"""


def _worktree(revision: str, root: Path) -> Path:
    path = root / revision.replace("/", "_")
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(path), revision], check=True)
    return path


def _time_once(tree: Path, config: str, python: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([python, "-c", _CHILD, config], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--revisions", nargs="+", required=True)
    ap.add_argument("--configs", nargs="+", default=["workflow/config/config.yaml"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    rows, load_before = [], loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {rev: _worktree(rev, Path(tmp)) for rev in args.revisions}
        try:
            for config in args.configs:
                for rep in range(args.repeats):
                    for rev, tree in trees.items():
                        rows.append(
                            {"revision": rev, "config": config, "repeat": rep, **_time_once(tree, config, args.python)}
                        )
                        print(json.dumps(rows[-1]), flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    result = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "rows": rows,
    }
    write_text_atomic(args.out + ".json", json.dumps(result, indent=1) + "\n")
    lines = [
        "# Planning a config's runs and sweeps (every `snakemake` invocation pays this first)",
        "",
        f"`benchmarks/bench_plan.py`, {result['date']}, {result['cpu_model']}, {result['cores']} cores, load average "
        f"{result['loadavg_before']} before and {result['loadavg_after']} after (other jobs running: compare the ratio "
        "within this run, not the seconds with another machine's). Revisions alternate, a fresh process each; "
        "median over repeats.",
        "",
        "| config | revision | runs | sweeps | plan s | sweeps s | total s | ratio to the first | digest |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for config in args.configs:
        first = None
        for rev in args.revisions:
            mine = [r for r in rows if r["config"] == config and r["revision"] == rev]
            plan_s = statistics.median(r["plan_s"] for r in mine)
            sweeps_s = statistics.median(r["sweeps_s"] for r in mine)
            total = plan_s + sweeps_s
            first = first or total
            digests = sorted({r["digest"][:16] for r in mine})
            lines.append(
                f"| `{config}` | {rev} | {mine[0]['runs']:,} | {mine[0]['sweeps']:,} | {plan_s:.1f} | {sweeps_s:.1f} | "
                f"{total:.1f} | {first / total:.2f}x | {', '.join(digests)} |"
            )
    write_text_atomic(args.out + ".md", "\n".join(lines) + "\n")
    status = 0
    for config in args.configs:
        mine = [r for r in rows if r["config"] == config]
        if len({r["config_digest"] for r in mine}) > 1:
            print(f"{config}: the revisions load different configs; compare revisions whose configs are equal")
            status = 1
        elif len({r["digest"] for r in mine}) > 1:
            print(f"{config}: the revisions plan different runs or sweeps from the same config (a planner bug)")
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
