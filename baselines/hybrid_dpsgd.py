"""DP-SGD on all features: 002's baseline that treats every feature as sensitive (Hybrid with
eps2 = eps, no label-DP phase), with 002's phase-2 optimizer (:mod:`labeldp.ads.hybrid`)."""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec

NAME = "hybrid_dpsgd"
HYPERPARAMETERS = ("dp_learning_rate", "dp_epochs", "dp_batch_size", "clip_norm")
DATASET_KINDS = ("tabular",)
CALIBRATES_WITH_ACCOUNTANT = True
SAMPLED_BATCH_KEYS = ("dp_batch_size",)  # phase 2's Poisson expected batch: at most the training rows


def run(data, spec: RunSpec) -> MethodResult:
    """Phase 2 only, at the whole budget, from the initial parameters."""
    from labeldp.ads.hybrid_run import run_hybrid

    return run_hybrid(data, spec, rule="dpsgd_only", name=NAME)
