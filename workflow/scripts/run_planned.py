"""Runs a slice of the planned runs in ONE Python process, without Snakemake.

For machines where Snakemake is not installed or where starting one process per run costs
more than the run (a lent GPU box running hundreds of short jobs). It executes exactly the
runs :mod:`labeldp.plan` plans for the given config and tables, with the same runner
(:func:`labeldp.runner.run_spec` / :func:`labeldp.runner.build_record`), and writes the same
records to the same paths (atomically), so Snakemake and the table builders treat them like
records the ``train`` rule wrote. Finished records are never redone; a failed run writes
nothing and is listed at the end (its cell then reads "not run: N of M planned runs missing").

Examples::

    # every Table 5a / Table 14 run of the GPU report config, 4 shards in parallel on one GPU
    # (workflow/scripts/run_sharded.sh does exactly this)
    python workflow/scripts/run_planned.py --configfile workflow/config/gpu_report.yaml \\
        --tables table5_mnist table14 --prepare-only
    for i in 0 1 2 3; do
      python workflow/scripts/run_planned.py --configfile workflow/config/gpu_report.yaml \\
          --tables table5_mnist table14 --shard $i/4 --time-budget 500 &
    done; wait

Data: the raw files are fetched (mirror first: ``--mirror`` / ``data_mirror`` /
``LABELDP_DATA_MIRROR``) and prepared exactly as the ``fetch`` and ``prepare`` rules do.
``--prepare-only`` does only that, for every selected run still to do, of every shard
(``workflow/scripts/run_sharded.sh`` calls it once before it starts the shards).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from labeldp import plan  # noqa: E402
from labeldp.config import load_workflow_config  # noqa: E402
from labeldp.plan import ConfigError  # noqa: E402


def _prepare(cfg, dataset: str, mirror: str | None) -> str:
    """The prepared .npz of ``dataset``, fetched and prepared as the fetch / prepare rules do."""
    from labeldp.data.fetch import fetch_dataset
    from labeldp.data.prepare import prepare_image_dataset
    from labeldp.data.rawformats import STANDIN_SIZES, make_standin_raw_files

    out = plan.prepared_path(cfg, dataset)
    if Path(out).exists():
        return out
    source = plan.data_source(cfg, dataset)
    raw = Path(plan.raw_dir(cfg["data_dir"], dataset, source))
    if source == "standin":
        raw.mkdir(parents=True, exist_ok=True)
        make_standin_raw_files(dataset, raw, n_train=STANDIN_SIZES[0], n_test=STANDIN_SIZES[1], seed=0)
    else:
        fetch_dataset(dataset, data_dir=raw.parent, mirror=mirror)
    prepare_image_dataset(dataset, raw_dir=raw, out_path=out, subset=plan.dataset_cfg(cfg, dataset).get("subset"))
    return out


def select_runs(cfg, tables, *, methods=(), epsilons=(), seeds=(), shard=(0, 1)):
    """:func:`labeldp.plan.select_runs`, then every ``n``-th run starting at ``i`` for
    ``shard = (i, n)``: the list is in plan order (method, eps, seed), so each shard gets a
    similar mix of cheap and expensive methods."""
    i, n = shard
    return plan.select_runs(cfg, tables, methods=methods, epsilons=epsilons, seeds=seeds)[i::n]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configfile", action="append", default=[], help="config overrides, in order")
    p.add_argument("--tables", nargs="+", required=True)
    p.add_argument("--methods", default="", help="comma-separated method ids (default: all)")
    p.add_argument("--eps", default="", help="comma-separated epsilons ('inf' = non-private)")
    p.add_argument("--seeds", default="", help="comma-separated seeds")
    p.add_argument("--shard", default="0/1", help="i/n: run every n-th planned run starting at i")
    p.add_argument("--time-budget", type=float, default=math.inf,
                   help="seconds: start no run once the elapsed time plus the slowest run so far of the "
                        "same method would exceed this")
    p.add_argument("--mirror", default=None, help="raw-data mirror directory")
    once = p.add_mutually_exclusive_group()
    once.add_argument("--dry-run", action="store_true", help="list the runs still to do, run nothing")
    once.add_argument("--prepare-only", action="store_true",
                      help="fetch and prepare the data of every selected run still to do (all shards), run "
                           "nothing: do this once before starting shards so that they do not all prepare it")
    a = p.parse_args(argv)

    try:
        cfg = load_workflow_config(*a.configfile)
    except ConfigError as err:
        raise SystemExit(f"error: invalid configuration:\n{err}") from None
    methods = set(filter(None, a.methods.split(",")))
    eps = {math.inf if e == "inf" else float(e) for e in filter(None, a.eps.split(","))}
    seeds = {int(s) for s in filter(None, a.seeds.split(","))}
    i, n = (int(x) for x in a.shard.split("/"))
    if not 0 <= i < n:
        raise SystemExit(f"error: --shard {a.shard}: need 0 <= i < n")
    try:
        every = select_runs(cfg, a.tables, methods=methods, epsilons=eps, seeds=seeds)
    except ConfigError as err:
        raise SystemExit(f"error: {err}") from None
    runs = every[i::n]  # the shard, as select_runs(..., shard=(i, n)) gives it
    if a.prepare_only:
        mirror = a.mirror or plan.data_mirror(cfg)
        for dataset in sorted({r.spec.dataset for r in every if not Path(r.record_path).exists()}):
            print(f"prepared {dataset}: {_prepare(cfg, dataset, mirror)}", flush=True)
        return 0
    todo = [r for r in runs if not Path(r.record_path).exists()]
    print(f"shard {i}/{n}: {len(runs)} planned, {len(todo)} to run", flush=True)
    if a.dry_run:
        for r in todo:
            print(r.record_path)
        return 0

    from labeldp import records
    from labeldp.data.prepare import load_prepared
    from labeldp.runner import run_and_record

    mirror = a.mirror or plan.data_mirror(cfg)
    wf = {"profile": cfg["profile"], "grid": cfg["grid"], "sampling": cfg["sampling"], "delta": cfg["delta"],
          "executor": "workflow/scripts/run_planned.py"}
    data_cache: dict[str, object] = {}
    slowest: dict[str, float] = {}
    failed, done = [], 0
    t_start = time.perf_counter()
    for r in todo:
        elapsed = time.perf_counter() - t_start
        if elapsed + slowest.get(r.spec.method, 0.0) > a.time_budget:
            print(f"time budget: skipping {r.record_path}", flush=True)
            continue
        try:
            path = _prepare(cfg, r.spec.dataset, mirror)
            if path not in data_cache:
                data_cache[path] = load_prepared(path)
            data = data_cache[path]
            rec = run_and_record(r.spec, data, config=wf)
            records.write_record(r.record_path, rec)
            total = rec["timings"]["total_seconds"]
            slowest[r.spec.method] = max(slowest.get(r.spec.method, 0.0), total)
            done += 1
            print(f"[{time.perf_counter() - t_start:7.1f}s] {rec['run_id']}: "
                  f"acc={rec['metrics'].get('test_accuracy_pct')} eps={rec['privacy']['epsilon']} "
                  f"valid={rec['privacy']['valid']} ({total:.1f}s)", flush=True)
        except Exception:  # one failed run must not stop the others; it writes nothing
            failed.append(r.record_path)
            traceback.print_exc()
    print(json.dumps({"shard": a.shard, "done": done, "failed": failed,
                      "skipped_for_time": len(todo) - done - len(failed)}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
