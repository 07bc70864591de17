"""Hybrid (002 Section 3): DP training with semi-sensitive features.

Phase 1 trains the truncated model (sensitive features zeroed) on randomized labels at eps1
with 002's debiased loss; phase 2 continues on all features with DP-SGD at eps2;
``eps1 = min(0.6 eps, 3)``, ``eps2 = eps - eps1``, composed by basic composition
(:mod:`labeldp.ads.hybrid`, :mod:`labeldp.ads.hybrid_run`).
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec

NAME = "hybrid"
HYPERPARAMETERS = (
    "learning_rate",
    "epochs",
    "batch_size",
    "dp_learning_rate",
    "dp_epochs",
    "dp_batch_size",
    "clip_norm",
)
DATASET_KINDS = ("tabular",)
CALIBRATES_WITH_ACCOUNTANT = True  # phase 2's sigma (spec.calibration_relation)
SAMPLED_BATCH_KEYS = ("dp_batch_size",)  # phase 2's Poisson expected batch: at most the training rows


def run(data, spec: RunSpec) -> MethodResult:
    """Both phases, the 002 split."""
    from labeldp.ads.hybrid_run import run_hybrid

    return run_hybrid(data, spec, rule="hybrid", name=NAME)
