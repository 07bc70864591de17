"""Runs one planned configuration and writes its result record (the ``train`` rule's job).

Usage::

    python -m labeldp.runner --spec '<RunSpec JSON>' --data data/prepared/mnist-official-full.npz \
        --out results/mnist/nonprivate/default/epsinf/bs1024-ep2-lr0.5/seed0.json

The record (see :mod:`labeldp.records`) is written atomically; a failed run writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Mapping, Sequence

from labeldp import records, selection, tasks
from labeldp.methods import registry
from labeldp.methods.base import MethodResult, RunSpec
from labeldp.pretrained_init import attach
from labeldp.pretraining import add_pretrained_argument, parse_pretrained_args
from labeldp.plan import run_id as _run_id
from labeldp.data.prepare import load_prepared
from labeldp.data.views import held_dataset


def run_spec(spec: RunSpec, data) -> MethodResult:
    """Runs ``spec`` on prepared ``data`` with the method's module; for a method that releases labels
    and then trains, held-out selection (:func:`labeldp.selection.selected_by_runner`) happens here."""
    method = registry.get_method(spec.method)
    kind = tasks.data_kind(data)
    if kind not in method.DATASET_KINDS:
        raise ValueError(f"method {spec.method} does not run on {kind} datasets")
    if selection.selected_by_runner(method, spec):
        heldout = selection.heldout_data(data, spec)
        return selection.score_heldout(method.run(heldout.fit_data, heldout.fit_spec), heldout)
    return method.run(data, spec)


def build_record(
    spec: RunSpec,
    data,
    result: MethodResult,
    *,
    total_seconds: float,
    config: Mapping[str, Any] | None = None,
    table_keys: Sequence[str] = (),
    git_at_start: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The run's record (fields: :mod:`labeldp.records`).

    ``git_at_start``: :func:`labeldp.records.git_revision` taken before the run started. The
    code that ran is the code of that revision (a long run can outlive a commit), so the
    record's ``environment.git`` is it; if the checkout moved during the run, the revision at
    write time is kept beside it as ``environment.git_at_write``.
    """
    run_id = _run_id(spec)
    metrics = dict(result.metrics)
    metrics.setdefault("diverged", False)
    return {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "table_keys": list(table_keys),
        "dataset": {
            "name": data.name,
            # a split view of data.name (labeldp.data.views): which preparation the run used
            **({"view": data.metadata["view"]} if (getattr(data, "metadata", None) or {}).get("view") else {}),
            "source": getattr(data, "source", "official"),
            "n_train": int(data.x_train.shape[0]),
            "n_test": int(data.x_test.shape[0]),
            "subset": getattr(data, "subset", None),
            # a features dataset's frozen encoder (labeldp.feature_datasets): config, epochs, linear probe
            **({"encoder": data.metadata["encoder"]} if (getattr(data, "metadata", None) or {}).get("encoder") else {}),
        },
        "method": spec.method,
        "variant": spec.variant,
        "seed": spec.seed,
        "hparams": dict(spec.hparams),
        "privacy": result.privacy.to_dict(target_epsilon=spec.epsilon),
        "metrics": metrics,
        "timings": {
            **dict(result.timings),
            "total_seconds": total_seconds,
            "process_peak_rss_mib": records.peak_rss_mib(),
        },
        "details": dict(result.details),
        "environment": records.environment(git_at_start=git_at_start),
        "config": {"profile": spec.profile, "run_spec": spec.to_dict(), "workflow": dict(config or {})},
        "created": records.now_utc(),
    }


def run_and_record(spec: RunSpec, data, *, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Runs ``spec`` on ``data`` and returns its record: the revision is taken before the run
    (see :func:`build_record`), the wall-clock time around it. The one executor body shared by
    the ``train`` rule (:func:`main`) and the audit."""
    return run_with_result(spec, data, config=config)[0]


def run_with_result(
    spec: RunSpec, data, *, config: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], MethodResult]:
    """:func:`run_and_record`, also returning the method's :class:`MethodResult` (the audit
    reads its ``audit_log_probs``, which records do not store)."""
    git_at_start = records.git_revision()
    t0 = time.perf_counter()
    result = run_spec(spec, data)
    total = time.perf_counter() - t0
    return build_record(spec, data, result, total_seconds=total, config=config, git_at_start=git_at_start), result


def run_arguments(doc: str) -> argparse.ArgumentParser:
    """The command-line arguments every run executor takes (this module, the audit runner)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", required=True, help="RunSpec as JSON")
    p.add_argument("--data", required=True, help="prepared .npz")
    p.add_argument("--out", required=True, help="record path (.json)")
    p.add_argument("--workflow-config", default="{}", help="workflow config subset to store (JSON)")
    add_pretrained_argument(p)
    return p


def load_run(args: argparse.Namespace):
    """``(spec, prepared data)`` of parsed :func:`run_arguments`; exits naming a dataset mismatch."""
    spec = RunSpec.from_dict(json.loads(args.spec))
    data = load_prepared(args.data)
    if held_dataset(data) != spec.dataset:
        raise SystemExit(
            f"error: prepared data {args.data} holds {held_dataset(data)!r}, but the run is for "
            f"{spec.dataset!r}; prepare it with: snakemake <data_dir>/prepared/{spec.dataset}-<source>-<size>.npz"
        )
    try:
        paths = parse_pretrained_args(getattr(args, "pretrained", ()))
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    return spec, attach(data, paths)


def main(argv: Sequence[str] | None = None) -> int:
    args = run_arguments(__doc__).parse_args(argv)
    spec, data = load_run(args)
    record = run_and_record(spec, data, config=json.loads(args.workflow_config))
    records.write_record(args.out, record)
    total = record["timings"]["total_seconds"]
    acc = record["metrics"].get("test_accuracy_pct")
    eps = record["privacy"]["epsilon"]
    print(
        f"{record['run_id']}: metric={acc} eps={eps if eps == 'inf' else f'{eps:.4g}'} "
        f"valid={record['privacy']['valid']} ({total:.1f}s)"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
