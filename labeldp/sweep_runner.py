"""Trains one sweep in one process (the ``sweep`` rule's job; :mod:`labeldp.sweeps`).

Usage::

    python -m labeldp.sweep_runner --sweep '<Sweep.to_dict() JSON>' --data data/prepared/mnist-official-full.npz \
        --marker results/.sweeps/mnist/dpsgd/default/eps1.0/sweep-0123abcd4567.json

Every run whose record already exists is skipped (never redone). The data is loaded once; each
remaining run is trained exactly as :mod:`labeldp.runner` trains it (:func:`labeldp.runner.
run_and_record`) and its record written atomically as soon as it finishes, so a sweep killed at
any point keeps the records of its finished runs and leaves no half-written file. A run that
raises is reported and the sweep goes on with the others; the job then fails without its marker,
and rerunning it retries only the runs without a record. The marker (the job's output) is written
last, atomically, listing every record of the sweep.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Sequence

from labeldp import records
from labeldp.atomic_io import write_text_atomic
from labeldp.data.prepare import load_prepared
from labeldp.data.views import held_dataset
from labeldp.runner import run_and_record
from labeldp.sweeps import Sweep


def pending_runs(payload: dict) -> tuple[list, list]:
    """``(pending, done)``: ``(spec, record path)`` pairs without and with a record on disk."""
    pairs = Sweep.specs_from_dict(payload)
    done = [(s, p) for s, p in pairs if os.path.exists(p)]
    return [(s, p) for s, p in pairs if not os.path.exists(p)], done


def run_sweep(payload: dict, *, data_path: str | None, marker: str, workflow_config: dict | None = None,
              log=print) -> int:
    """Trains the sweep's pending runs, then writes the marker; returns the exit status.

    Args:
      payload: :meth:`labeldp.sweeps.Sweep.to_dict`.
      data_path: the prepared data every run loads (not read when no run is pending).
      marker: the marker path (the job's output).
      workflow_config: the workflow config subset each record stores.
      log: a print-like function.

    Returns:
      0 when every run has its record (the marker is written), 1 when some run failed.
    """
    pending, done = pending_runs(payload)
    log(f"sweep {payload['id']}: {len(payload['runs'])} runs, {len(done)} with a record, {len(pending)} to train")
    failed = []
    t_sweep = time.perf_counter()
    if pending:
        t0 = time.perf_counter()
        data = load_prepared(data_path)
        dataset = pending[0][0].dataset
        if held_dataset(data) != dataset:
            raise SystemExit(f"error: prepared data {data_path} holds {held_dataset(data)!r}, but the sweep is for "
                             f"{dataset!r}; prepare it with: snakemake <data_dir>/prepared/{dataset}-<source>-<size>.npz")
        log(f"data loaded once in {time.perf_counter() - t0:.1f}s")
        for i, (spec, path) in enumerate(pending):
            if os.path.exists(path):  # another process finished it meanwhile
                continue
            try:
                record = run_and_record(spec, data, config=workflow_config or {})
            except Exception:  # noqa: BLE001 -- reported, the other runs go on; the job then fails
                failed.append(path)
                log(f"[{i + 1}/{len(pending)}] FAILED {path}\n{traceback.format_exc()}")
                continue
            record.setdefault("timings", {})["sweep"] = {"id": payload["id"], "position": i, "pending": len(pending)}
            records.write_record(path, record)
            acc = record["metrics"].get("test_accuracy_pct", record["metrics"].get("test_auc"))
            log(f"[{i + 1}/{len(pending)}] {record['run_id']}: metric={acc} "
                f"({record['timings']['total_seconds']:.1f}s)")
    if failed:
        log(f"sweep {payload['id']}: {len(failed)} run(s) failed; no marker written. Rerun the same command to retry "
            "them (finished records are kept).")
        return 1
    write_text_atomic(marker, json.dumps({"sweep": payload["id"], "records": [p for _, _, p in payload["runs"]],
                                          "trained": len(pending), "already_there": len(done),
                                          "seconds": time.perf_counter() - t_sweep}, indent=1) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", required=True, help="Sweep.to_dict() as JSON")
    p.add_argument("--data", default=None, help="prepared data (.npz); needed when a run is pending")
    p.add_argument("--marker", required=True, help="the marker to write when every run has its record")
    p.add_argument("--workflow-config", default="{}", help="workflow config subset to store (JSON)")
    a = p.parse_args(argv)
    payload = json.loads(a.sweep)
    pending, _ = pending_runs(payload)
    if pending and not a.data:
        raise SystemExit(f"error: sweep {payload['id']} has {len(pending)} runs to train but no --data was given")
    return run_sweep(payload, data_path=a.data, marker=a.marker, workflow_config=json.loads(a.workflow_config),
                     log=lambda m: print(m, flush=True))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
