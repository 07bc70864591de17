"""RR on the truncated model: 002's label-DP baseline (Hybrid with eps1 = eps, no DP-SGD phase).

The sensitive features are discarded (zeroed in the truncated model) and only the labels are
protected, by randomized response at eps with 002's debiased loss (:mod:`labeldp.ads.hybrid`).
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec

NAME = "hybrid_rr"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("tabular",)


def run(data, spec: RunSpec) -> MethodResult:
    """Phase 1 only, at the whole budget."""
    from labeldp.ads.hybrid_run import run_hybrid

    return run_hybrid(data, spec, rule="rr_only", name=NAME)
