"""Trains one audited run with label canaries and writes its record (the ``audit_run`` rule).

The training set is the first ``train_subset`` examples of the prepared data; ``num_canaries``
of them, drawn with the seed's audit stream, get the label of their secret bit
(:func:`labeldp.audit.one_run.make_label_canaries`), and the method trains on that set as in
any run (its own privacy accounting, for ``n = train_subset``). The trained model's
log-probabilities at the canary inputs (``MethodResult.audit_log_probs``) give the guesses and the
empirical lower bound on eps (:func:`labeldp.audit.one_run.audit`). The record is a normal result
record plus an ``audit`` section; the canaries' secret bits never reach the method.

Usage::

    python -m labeldp.audit.runner --spec '<RunSpec JSON>' --data data/prepared/mnist-official-full.npz \
        --train-subset 10000 --num-canaries 1000 --out results/audit/....json
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any, Sequence

import numpy as np

from labeldp import records
from labeldp.audit.one_run import audit, make_label_canaries
from labeldp.methods.base import RunSpec
from labeldp.runner import load_run, run_arguments, run_with_result

AUDIT_STREAM = 7
"""Stream id of the canary generator, ``numpy.random.default_rng([seed, AUDIT_STREAM])``."""


def canary_data(data, *, train_subset: int, num_canaries: int, seed: int):
    """The audited training data and its canaries.

    Args:
      data: prepared data (:class:`labeldp.data.prepare.PreparedData`).
      train_subset: n, the first n training examples are used (all when larger than the set).
      num_canaries: m <= n.
      seed: the run's seed.

    Returns:
      ``(audited data, canaries)``: the data's labels at the canary indices replaced by the
      canaries' training labels, and ``audit_inputs`` set to the canary images.
    """
    n = min(int(train_subset), int(data.x_train.shape[0]))
    if not 2 <= num_canaries <= n:
        raise ValueError(
            f"num_canaries must be in [2, train_subset = {n}], got {num_canaries}; "
            "lower audit.num_canaries or raise audit.train_subset"
        )
    canaries = make_label_canaries(
        num_canaries=int(num_canaries),
        num_classes=int(data.num_classes),
        num_train=n,
        rng=np.random.default_rng([int(seed), AUDIT_STREAM]),
    )
    x = np.asarray(data.x_train[:n])
    y = np.array(data.y_train[:n], copy=True)
    y[canaries.indices] = canaries.training_labels
    audited = dataclasses.replace(
        data,
        x_train=x,
        y_train=y,
        audit_inputs=x[canaries.indices],
        metadata={**dict(data.metadata), "audit_train_subset": n, "audit_num_canaries": int(num_canaries)},
    )
    return audited, canaries


def run_audit(
    spec: RunSpec, data, *, train_subset: int, num_canaries: int, confidence: float, config: dict | None = None
) -> dict[str, Any]:
    """Trains ``spec`` on the canary data and returns its record with an ``audit`` section."""
    audited, canaries = canary_data(data, train_subset=train_subset, num_canaries=num_canaries, seed=spec.seed)
    t0 = time.perf_counter()
    record, result = run_with_result(spec, audited, config=config)
    log_probs = result.audit_log_probs
    if log_probs is None:
        raise RuntimeError(
            f"method {spec.method} returned no audit_log_probs: it must report its model's "
            "log-probabilities at data.audit_inputs (labeldp.methods.base.MethodResult)"
        )
    delta = float(record["privacy"]["delta"])
    res = audit(log_probs=np.asarray(log_probs), canaries=canaries, delta=delta, confidence=confidence)
    record["audit"] = {
        **res.to_dict(),
        "game": "label canaries: two candidate labels per canary, a secret fair bit picks the trained one "
        "(changing a bit is a label substitution)",
        "train_subset": int(audited.x_train.shape[0]),
        "canary_stream": [int(spec.seed), AUDIT_STREAM],
        "claimed_epsilon_by_relation": record["privacy"].get("epsilon_by_relation"),
        "seconds": time.perf_counter() - t0,
    }
    return record


def add_audit_arguments(parser) -> None:
    """The audit's settings on a runner's command line (this module and :mod:`labeldp.audit.sweep`)."""
    parser.add_argument("--train-subset", type=int, required=True)
    parser.add_argument("--num-canaries", type=int, required=True)
    parser.add_argument("--confidence", type=float, default=0.95)


def audit_settings(args) -> dict[str, Any]:
    """``train_subset``, ``num_canaries`` and ``confidence`` of parsed :func:`add_audit_arguments`, for
    :func:`run_audit`."""
    return {"train_subset": args.train_subset, "num_canaries": args.num_canaries, "confidence": args.confidence}


def audit_summary(record: dict[str, Any]) -> str:
    """One log line of an audit record: the audited lower bound next to the claimed eps."""
    au = record["audit"]
    return (
        f"{record['run_id']}: audited eps lower bound {au['epsilon_lower_bound']:.3f} "
        f"(claimed {record['privacy'].get('epsilon_by_relation')}, {au['best_num_correct']}/"
        f"{au['best_num_guesses']} correct)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = run_arguments(__doc__)
    add_audit_arguments(p)
    a = p.parse_args(argv)
    spec, data = load_run(a)
    record = run_audit(spec, data, **audit_settings(a), config=json.loads(a.workflow_config))
    records.write_record(a.out, record)
    print(audit_summary(record))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
