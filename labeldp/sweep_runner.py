"""Trains one sweep in one process (the ``sweep`` rule's job; :mod:`labeldp.sweeps`).

Usage::

    python -m labeldp.sweep_runner --sweep '<Sweep.to_dict() JSON>' --data data/prepared/mnist-official-full.npz \
        --marker results/.sweeps/mnist/dpsgd/default/eps1.0/sweep-0123abcd4567.json

Every run whose record already exists is skipped (never redone). The data is loaded once; each
remaining run is trained exactly as :mod:`labeldp.runner` trains it (:func:`labeldp.runner.
run_and_record`) and its record written atomically as soon as it finishes, so a sweep killed at
any point keeps the records of its finished runs and leaves no half-written file.

With ``--vmap-runs R`` (the config's ``sweep_vmap_runs``; ``auto``: 1 on the CPU, where vmapping
runs measured slower, :data:`ACCELERATOR_VMAP_RUNS` on a GPU or TPU) the runs a method can batch
(its ``vmap_key``: DP-SGD and LabelDP-Pro on images differing in learning rate, C and seed) train
up to R at a time as one vmapped program (:mod:`labeldp.dpsgd.vmapped_loop`), each still writing
its own record as soon as its group finishes; a group that fails is retried run by run. A run that
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
from collections.abc import Callable, Mapping, Sequence

import jax

from labeldp import records
from labeldp.atomic_io import write_text_atomic
from labeldp.data.prepare import load_prepared
from labeldp.data.views import held_dataset
from labeldp.methods import registry
from labeldp.methods.base import RunSpec
from labeldp.pretrained_init import attach
from labeldp.pretraining import add_pretrained_argument, parse_pretrained_args
from labeldp.runner import build_record, run_and_record
from labeldp.sweeps import Sweep

#: Runs per vmapped program on an accelerator when ``sweep_vmap_runs`` is ``auto`` (12: one
#: epochs value of 000 Table 8's DP-SGD grid, 4 learning rates x 3 clip norms, for one seed).
ACCELERATOR_VMAP_RUNS = 12


def resolve_vmap_runs(value: str | int | None) -> int:
    """Runs per vmapped program: an int >= 1, or ``auto`` (None): 1 on the CPU,
    :data:`ACCELERATOR_VMAP_RUNS` elsewhere.

    Raises:
      ValueError: neither ``auto`` nor a positive integer.
    """
    if value is None or value == "auto":
        return 1 if jax.default_backend() == "cpu" else ACCELERATOR_VMAP_RUNS
    try:
        runs = int(value)
    except (TypeError, ValueError):
        runs = 0
    if runs < 1:
        raise ValueError(f"sweep_vmap_runs must be 'auto' or an integer >= 1, got {value!r}")
    return runs


def vmap_groups(pending: list, data, *, max_runs: int) -> list[list]:
    """``pending`` cut into the groups that train together, in the order of their first run: runs
    of one method ``vmap_key`` (at most ``max_runs`` each); every other run alone."""
    groups: dict = {}
    for spec, path in pending:
        key = None
        if max_runs > 1:
            try:
                method = registry.get_method(spec.method)
                key = method.vmap_key(data, spec) if hasattr(method, "vmap_key") else None
            except (ValueError, ImportError):  # a bad option or a missing package: the run alone then fails, naming it
                key = None
        groups.setdefault((spec.method, key) if key is not None else ("", path), []).append((spec, path))
    return [g[i : i + max_runs] for g in groups.values() for i in range(0, len(g), max_runs)]


def pending_runs(payload: dict) -> tuple[list, list]:
    """``(pending, done)``: ``(spec, record path)`` pairs without and with a record on disk."""
    pairs = Sweep.specs_from_dict(payload)
    done = [(s, p) for s, p in pairs if os.path.exists(p)]
    return [(s, p) for s, p in pairs if not os.path.exists(p)], done


def _train_vmapped(group: list, data, workflow_config: dict | None, log) -> dict | None:
    """``{record path: record}`` of a group trained as one vmapped program, or None when that
    failed (the caller then trains its runs one by one, so a failure names the run)."""
    specs = [s for s, _ in group]
    git_at_start = records.git_revision()
    t0 = time.perf_counter()
    try:
        results = registry.get_method(specs[0].method).run_many(data, specs)
    except Exception:  # noqa: BLE001 -- reported; the runs are retried one by one
        log(f"vmapped group of {len(group)} runs failed; training them one by one\n{traceback.format_exc()}")
        return None
    seconds = (time.perf_counter() - t0) / len(group)
    return {
        path: build_record(
            spec, data, result, total_seconds=seconds, config=workflow_config or {}, git_at_start=git_at_start
        )
        for (spec, path), result in zip(group, results)
    }


def run_sweep(
    payload: dict,
    *,
    data_path: str | None,
    marker: str,
    workflow_config: dict | None = None,
    log=print,
    vmap_runs: int = 1,
    pretrained: Mapping[str, str] | None = None,
    train_one: Callable[[RunSpec, object], dict] | None = None,
) -> int:
    """Trains the sweep's pending runs, then writes the marker; returns the exit status.

    Args:
      payload: :meth:`labeldp.sweeps.Sweep.to_dict`.
      data_path: the prepared data every run loads (not read when no run is pending).
      marker: the marker path (the job's output).
      workflow_config: the workflow config subset each record stores.
      log: a print-like function.
      vmap_runs: at most this many runs of one method ``vmap_key`` train as one vmapped program
        (1: one run at a time).
      pretrained: ``{name: state path}`` of the pre-trainings the runs' ``init_from`` names
        (:mod:`labeldp.pretraining`), loaded once with the data.
      train_one: ``(spec, data) -> record`` of one run; default :func:`labeldp.runner.run_and_record`
        with ``workflow_config``. The label-canary audit passes its own (:mod:`labeldp.audit.sweep`);
        its runs train one at a time (``vmap_runs`` must be 1).

    Returns:
      0 when every run has its record (the marker is written), 1 when some run failed.
    """
    if train_one is not None and vmap_runs != 1:
        raise ValueError("a sweep with its own train_one trains its runs one at a time: vmap_runs must be 1")
    if train_one is None:

        def train(spec: RunSpec, data) -> dict:
            return run_and_record(spec, data, config=workflow_config or {})
    else:
        train = train_one
    pending, done = pending_runs(payload)
    log(f"sweep {payload['id']}: {len(payload['runs'])} runs, {len(done)} with a record, {len(pending)} to train")
    failed = []
    t_sweep = time.perf_counter()
    if pending:
        t0 = time.perf_counter()
        data = load_prepared(data_path)
        dataset = pending[0][0].dataset
        if held_dataset(data) != dataset:
            raise SystemExit(
                f"error: prepared data {data_path} holds {held_dataset(data)!r}, but the sweep is for "
                f"{dataset!r}; prepare it with: snakemake <data_dir>/prepared/{dataset}-<source>-<size>.npz"
            )
        data = attach(data, pretrained or {})
        log(f"data loaded once in {time.perf_counter() - t0:.1f}s")
        position = 0
        for group in vmap_groups(pending, data, max_runs=vmap_runs):
            group = [(s, p) for s, p in group if not os.path.exists(p)]  # another process finished it meanwhile
            trained = _train_vmapped(group, data, workflow_config, log) if len(group) > 1 else None
            for spec, path in group:
                i, position = position, position + 1
                try:
                    record = trained[path] if trained else train(spec, data)
                except Exception:  # noqa: BLE001 -- reported, the other runs go on; the job then fails
                    failed.append(path)
                    log(f"[{i + 1}/{len(pending)}] FAILED {path}\n{traceback.format_exc()}")
                    continue
                record.setdefault("timings", {})["sweep"] = {
                    "id": payload["id"],
                    "position": i,
                    "pending": len(pending),
                    **({"vmapped_runs": len(group)} if trained else {}),
                }
                records.write_record(path, record)
                acc = record["metrics"].get("test_accuracy_pct", record["metrics"].get("test_auc"))
                log(
                    f"[{i + 1}/{len(pending)}] {record['run_id']}: metric={acc} "
                    f"({record['timings']['total_seconds']:.1f}s)"
                )
    if failed:
        log(
            f"sweep {payload['id']}: {len(failed)} run(s) failed; no marker written. Rerun the same command to retry "
            "them (finished records are kept)."
        )
        return 1
    write_text_atomic(
        marker,
        json.dumps(
            {
                "sweep": payload["id"],
                "records": [row[2] for row in payload["runs"]],
                "trained": len(pending),
                "already_there": len(done),
                "seconds": time.perf_counter() - t_sweep,
            },
            indent=1,
        )
        + "\n",
    )
    return 0


def sweep_arguments(doc: str) -> argparse.ArgumentParser:
    """The command-line arguments every sweep executor takes (this module, :mod:`labeldp.audit.sweep`)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", required=True, help="Sweep.to_dict() as JSON")
    p.add_argument("--data", default=None, help="prepared data (.npz); needed when a run is pending")
    p.add_argument("--marker", required=True, help="the marker to write when every run has its record")
    p.add_argument("--workflow-config", default="{}", help="workflow config subset to store (JSON)")
    add_pretrained_argument(p)
    return p


def load_sweep_arguments(args: argparse.Namespace) -> tuple[dict, dict[str, str], bool]:
    """``(payload, pre-trained states, whether a run is pending)`` of parsed :func:`sweep_arguments`;
    exits naming a missing ``--data`` (a run to train) or a bad ``--pretrained``."""
    payload = json.loads(args.sweep)
    pending, _ = pending_runs(payload)
    if pending and not args.data:
        raise SystemExit(f"error: sweep {payload['id']} has {len(pending)} runs to train but no --data was given")
    try:
        pretrained = parse_pretrained_args(args.pretrained)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    return payload, pretrained, bool(pending)


def main(argv: Sequence[str] | None = None) -> int:
    p = sweep_arguments(__doc__)
    p.add_argument(
        "--vmap-runs",
        default="auto",
        help=f"runs per vmapped program: 'auto' (1 on CPU, {ACCELERATOR_VMAP_RUNS} on an accelerator) or an integer",
    )
    a = p.parse_args(argv)
    payload, pretrained, pending = load_sweep_arguments(a)
    try:
        vmap_runs = resolve_vmap_runs(a.vmap_runs) if pending else 1
    except ValueError as err:
        raise SystemExit(f"error: {err} (config key sweep_vmap_runs)") from None
    return run_sweep(
        payload,
        data_path=a.data,
        marker=a.marker,
        workflow_config=json.loads(a.workflow_config),
        log=lambda m: print(m, flush=True),
        vmap_runs=vmap_runs,
        pretrained=pretrained,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
