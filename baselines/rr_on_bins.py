"""Regression label randomizer: RR-on-Bins (Ghazi et al. 2023), 003's strongest baseline.

A private prior (003 Algorithm 4, eps1) picks the optimal bins and their outputs for the squared
loss; randomized response over the bins spends eps2 = eps - eps1. Biased by design. Trains 003's
MLP on the randomized labels (:mod:`labeldp.regression.pipeline`).
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec, check_options

NAME = "rr_on_bins"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("tabular",)
# spends eps1 of the run's eps on a private prior (the planner refuses eps <= eps1 before any job)
USES_PRIVATE_PRIOR = True


def run(data, spec: RunSpec) -> MethodResult:
    """Randomizes the training labels once, trains, evaluates the test MSE."""
    from labeldp.regression.pipeline import run_label_randomizer
    from labeldp.regression.randomizers import rr_on_bins_randomizer

    check_options(spec, ("validation_fraction", "prior_epsilon"), NAME)
    return run_label_randomizer(data, spec, rr_on_bins_randomizer, name=NAME)
