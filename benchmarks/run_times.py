"""Per-method run times from result records (what a full run of each method cost, where).

Reads every record under a results directory and writes, per (hardware, dataset, method,
variant), the number of runs and the median / min / max of ``timings.total_seconds`` and of
``timings.seconds_per_epoch``, with the hyper-parameters that drive the cost. The machine is
taken from each record's ``environment`` (CPU model, JAX backend and devices).

Run: ``python benchmarks/run_times.py reports/gpu-2026-11-22/results --out benchmarks/results/run_times_gpu-2026-11-22``
(writes ``.md`` and ``.json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from labeldp import records  # noqa: E402


def summarize(results_dir: Path) -> list[dict]:
    groups = defaultdict(list)
    for p in records.record_paths(results_dir):
        r = records.read_record(p)
        opts = (r.get("config") or {}).get("run_spec", {}).get("options") or {}
        key = (
            records.machine_description(r["environment"]),
            r["dataset"]["name"],
            r["method"],
            r["variant"],
            json.dumps(
                {k: v for k, v in r["hparams"].items() if k not in ("learning_rate", "clip_norm", "smoothing")},
                sort_keys=True,
            ),
            json.dumps(opts, sort_keys=True),
        )
        groups[key].append(r["timings"])
    rows = []
    for (machine, ds, method, variant, hp, opts), ts in sorted(groups.items()):
        tot = [t["total_seconds"] for t in ts if "total_seconds" in t]
        spe = [t["seconds_per_epoch"] for t in ts if "seconds_per_epoch" in t]
        rows.append(
            {
                "machine": machine,
                "dataset": ds,
                "method": method,
                "variant": variant,
                "cost_hparams": hp,
                "options": opts,
                "runs": len(ts),
                "total_s_median": statistics.median(tot),
                "total_s_min": min(tot),
                "total_s_max": max(tot),
                "s_per_epoch_median": statistics.median(spe) if spe else None,
                "peak_rss_mib_max": max(
                    (t["process_peak_rss_mib"] for t in ts if t.get("process_peak_rss_mib")), default=None
                ),
            }
        )
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results_dir", type=Path)
    p.add_argument("--out", required=True, help="output path without extension")
    a = p.parse_args(argv)
    rows = summarize(a.results_dir)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    records.write_json_atomic(out.with_suffix(".json"), {"results_dir": str(a.results_dir), "rows": rows})
    lines = [
        f"# Run times from the records in `{a.results_dir}`",
        "",
        "Wall-clock seconds per run (training + evaluation + accounting, one process per run, "
        "JAX compilation included), grouped by machine, dataset, method and the settings that drive "
        "the cost. Several runs shared the machine at once (see the report's logs), so these are "
        "throughput figures, not isolated timings. Peak RSS is the process's peak resident memory "
        "(records from before 2026-11-22 18:40 UTC did not store it: '-').",
        "",
        "| machine | dataset | method | variant | cost settings | options | runs | median s | min s | max s | median s/epoch | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        spe = "-" if r["s_per_epoch_median"] is None else f"{r['s_per_epoch_median']:.2f}"
        rss = "-" if r["peak_rss_mib_max"] is None else f"{r['peak_rss_mib_max']:.0f}"
        lines.append(
            f"| {r['machine']} | {r['dataset']} | {r['method']} | {r['variant']} | `{r['cost_hparams']}` | "
            f"`{r['options']}` | {r['runs']} | {r['total_s_median']:.1f} | {r['total_s_min']:.1f} | "
            f"{r['total_s_max']:.1f} | {spe} | {rss} |"
        )
    tmp = out.with_suffix(".md.part")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out.with_suffix(".md"))
    print(f"wrote {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
