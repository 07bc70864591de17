"""How far the cost preview (labeldp.plan_cost) is from what finished runs cost, per method.

For every planned run of the given targets that has a record, compares the preview's estimate of the
run (``plan_cost.run_seconds`` on the CPU) with the record's ``timings.total_seconds`` (one run's wall
clock inside its sweep job: training, evaluation and accounting), grouped by the record's machine and
method. The ratio measured / estimated is what ``workflow/resources/run_costs.yaml``'s
``method_step_factor`` is set from; a ratio near 1 after that says the preview is calibrated.

Run::

    python benchmarks/plan_cost_calibration.py --configfile workflow/config/protocol_cpu.yaml \\
        table5_label_methods_halving_cpu --out benchmarks/results/plan_cost_calibration_protocol_cpu

(writes ``.md`` and ``.json``; the machine of every figure is the one its records name).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from labeldp import plan, plan_cost, records  # noqa: E402
from labeldp.atomic_io import write_text_atomic  # noqa: E402
from labeldp.config import load_config  # noqa: E402


def calibrate(config, targets) -> list[dict]:
    costs = plan_cost.load_costs()
    groups = defaultdict(list)
    for run in plan_cost.target_runs(config, targets, by_table=plan.runs_by_table(config)):
        if not Path(run.record_path).exists():
            continue
        rec = records.read_record(run.record_path)
        measured = rec["timings"].get("total_seconds")
        if measured is None:
            continue
        est = plan_cost.run_seconds(run, config=config, device="cpu", costs=costs)
        groups[(records.machine_description(rec["environment"]), run.spec.method)].append((measured, est))
    rows = []
    for (machine, method), pairs in sorted(groups.items()):
        ratios = [m / e for m, e in pairs]
        rows.append(
            {
                "machine": machine,
                "method": method,
                "runs": len(pairs),
                "measured_hours": sum(m for m, _ in pairs) / 3600,
                "estimated_hours": sum(e for _, e in pairs) / 3600,
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
        )
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="+")
    p.add_argument("--configfile", action="append", default=[])
    p.add_argument("--out", required=True, help="output path without extension")
    a = p.parse_args(argv)
    config = load_config(REPO / "workflow/config/config.yaml", *a.configfile)
    try:
        plan.check_known_tables(config, a.targets)
    except plan.ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rows = calibrate(config, a.targets)
    costs_sha = hashlib.sha256(plan_cost.COSTS.read_bytes()).hexdigest()[:12]
    rev = records.git_revision(REPO)
    at = f"{rev.get('commit', '?')[:8]}{'+dirty' if rev.get('dirty') else ''}"
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    records.write_json_atomic(
        out.with_suffix(".json"),
        {"configfiles": a.configfile, "targets": a.targets, "run_costs_sha256": costs_sha, "git": at, "rows": rows},
    )
    lines = [
        f"# Cost preview against finished runs: {', '.join(a.targets)} ({', '.join(a.configfile) or 'config.yaml'})",
        "",
        "Measured: each record's `timings.total_seconds` (one run's wall clock in its sweep job, on the "
        "machine named; other jobs may have shared it). Estimated: `labeldp.plan_cost.run_seconds` on the "
        f"CPU with `workflow/resources/run_costs.yaml` (sha256 {costs_sha}...) at git {at}. Ratio: "
        "measured / estimated per run.",
        "",
        "| machine | method | runs | measured h | estimated h | ratio median | ratio min | ratio max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['machine']} | {r['method']} | {r['runs']} | {r['measured_hours']:.2f} | "
            f"{r['estimated_hours']:.2f} | {r['ratio_median']:.2f} | {r['ratio_min']:.2f} | {r['ratio_max']:.2f} |"
        )
    write_text_atomic(out.with_suffix(".md"), "\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
