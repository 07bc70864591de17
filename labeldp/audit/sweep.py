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

import json
import sys
from typing import Sequence

from labeldp.audit.runner import add_audit_arguments, audit_settings, audit_summary, run_audit
from labeldp.sweep_runner import load_sweep_arguments, run_sweep, sweep_arguments


def main(argv: Sequence[str] | None = None) -> int:
    p = sweep_arguments(__doc__)
    add_audit_arguments(p)
    a = p.parse_args(argv)
    payload, pretrained, _ = load_sweep_arguments(a)
    workflow_config = json.loads(a.workflow_config)

    def train_one(spec, data) -> dict:
        record = run_audit(spec, data, **audit_settings(a), config=workflow_config)
        print(audit_summary(record), flush=True)
        return record

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
