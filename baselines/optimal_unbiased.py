"""Regression label randomizer: 003's optimal unbiased randomizer (Algorithms 1-4).

A private prior (Algorithm 4, eps1), the output mesh of Algorithm 2 (``mesh_size`` outputs),
and the LP of Algorithm 1 (HiGHS) for the unbiased eps2-DP randomizer with the least noisy-label
squared loss under that prior; eps = eps1 + eps2. Real labels are rounded onto the integer
support without bias first (Section 3.1). Trains 003's MLP on the randomized labels.
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec, check_options

NAME = "optimal_unbiased"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
# mesh_size: the Algorithm 2 grid size (003 Table G.3 sweeps 52 / 416 / 1664); default: one
# output per label.
OPTIONAL_HYPERPARAMETERS = {"mesh_size": None}
DATASET_KINDS = ("tabular",)
# spends eps1 of the run's eps on a private prior (the planner refuses eps <= eps1 before any job)
USES_PRIVATE_PRIOR = True


def run(data, spec: RunSpec) -> MethodResult:
    """Randomizes the training labels once, trains, evaluates the test MSE."""
    from labeldp.regression.pipeline import run_label_randomizer
    from labeldp.regression.randomizers import optimal_unbiased_randomizer_fn

    check_options(spec, ("validation_fraction", "prior_epsilon"), NAME)
    return run_label_randomizer(data, spec, optimal_unbiased_randomizer_fn, name=NAME)
