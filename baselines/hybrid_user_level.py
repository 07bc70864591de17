"""User-level Hybrid and its baselines (002 Table 3): the variant's ``phase_split`` (rr | dpsgd |
hybrid) and ``examples_per_user`` k; user-level DP by 002 Proposition 6 (group privacy over the
k capped examples), see :mod:`labeldp.ads.hybrid_user`.
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec

NAME = "hybrid_user_level"
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
    """The variant's phases at the user level."""
    from labeldp.ads.hybrid_user import run_hybrid_user_level

    return run_hybrid_user_level(data, spec, name=NAME)
