"""Trains the audited runs of one prepared data file in one process (the ``audit_sweep`` rule's job).

Usage::

    python -m labeldp.audit.sweep --sweep '<Sweep.to_dict() JSON>' --data data/prepared/mnist-official-full.npz \\
        --marker results/audit/.sweeps/mnist/audit-0123abcd4567.json \\
        --train-subset 10000 --num-canaries 1000 --confidence 0.95

The jobs are :func:`labeldp.audit.plan.audit_sweeps`. Each run is trained and audited exactly as
the ``audit_run`` rule trains one (:func:`labeldp.audit.runner.run_audit`), and its record is written
atomically as soon as it finishes; runs with a record are skipped, a run that raises is reported
and the others go on, and the marker is written last, only when every run has its record
(:func:`labeldp.sweep_runner.run_sweep`). One process per data file instead of one per run: the
smoke profile's seven audited MNIST runs imported JAX and the methods and compiled the shared
programs seven times.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from labeldp.audit.runner import run_audit
from labeldp.pretraining import parse_pretrained_args
from labeldp.sweep_runner import pending_runs, run_sweep


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", required=True, help="Sweep.to_dict() as JSON (labeldp.audit.plan.audit_sweeps)")
    p.add_argument("--data", default=None, help="prepared data (.npz); needed when a run is pending")
    p.add_argument("--marker", required=True, help="the marker to write when every run has its record")
    p.add_argument("--train-subset", type=int, required=True)
    p.add_argument("--num-canaries", type=int, required=True)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--workflow-config", default="{}", help="workflow config subset to store (JSON)")
    p.add_argument(
        "--pretrained",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a pre-trained state the runs' init_from names (labeldp.pretraining); repeatable",
    )
    a = p.parse_args(argv)
    payload = json.loads(a.sweep)
    pending, _ = pending_runs(payload)
    if pending and not a.data:
        raise SystemExit(f"error: audit sweep {payload['id']} has {len(pending)} runs to train but no --data was given")
    try:
        pretrained = parse_pretrained_args(a.pretrained)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    workflow_config = json.loads(a.workflow_config)

    def train_one(spec, data) -> dict:
        return run_audit(
            spec,
            data,
            train_subset=a.train_subset,
            num_canaries=a.num_canaries,
            confidence=a.confidence,
            config=workflow_config,
        )

    return run_sweep(
        payload,
        data_path=a.data,
        marker=a.marker,
        workflow_config=workflow_config,
        log=lambda m: print(m, flush=True),
        pretrained=pretrained,
        train_one=train_one,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
