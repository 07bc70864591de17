"""Regression label randomizer: additive staircase mechanism, output clipped to the label range (biased).

Continuous noise for real labels, discrete noise for integer labels (the dataset says which);
eps-label-DP for labels in the dataset's fixed range (sensitivity upper - lower). Trains 003's
MLP on the randomized labels (:mod:`labeldp.regression.pipeline`).
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec, check_options

NAME = "staircase_clipped"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("tabular",)


def run(data, spec: RunSpec) -> MethodResult:
    """Randomizes the training labels once, trains, evaluates the test MSE."""
    from labeldp.regression.pipeline import run_label_randomizer
    from labeldp.regression.randomizers import additive

    check_options(spec, ("validation_fraction",), NAME)
    return run_label_randomizer(data, spec, additive("staircase", clip=True), name=NAME)
