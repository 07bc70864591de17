"""Regression on tabular data (003): the dataset's 003 MLP with RMSProp, test MSE.

Training on targets runs 003's protocol body (:func:`labeldp.regression.pipeline.run_label_randomizer`)
with the given labels as the randomised ones: the fixed validation rows are held out and scored on the
targets, the test MSE is against the true test labels. The privacy unit is the example. DP training is
not a regression method in these papers and is refused.
"""

from __future__ import annotations

import numpy as np

from labeldp.methods.base import NON_PRIVATE, MethodResult, RunSpec, recipe_options_refused
from labeldp.regression.pipeline import Randomized, run_label_randomizer
from labeldp.tasks.base import DenoiserFor, Trained, TrainingLabels

__all__ = ["RegressionTask"]


class RegressionTask:
    """The regression task of one run (:class:`labeldp.tasks.base.Task`)."""

    kind = "tabular"
    options = ("validation_fraction",)
    unsupported_options = recipe_options_refused(
        optimizer="003's MLP trains with RMSProp (labeldp.regression.train)",
        network="the dataset's 003 MLP (labeldp.regression.train)",
    )

    def __init__(self, data, spec: RunSpec):
        self.data = data
        self.spec = spec

    def training_labels(self) -> TrainingLabels:
        y = np.asarray(self.data.y_train, float)
        return TrainingLabels(
            labels=y, unit_ids=np.arange(y.shape[0]), labels_per_unit=1, privacy_unit="example", num_classes=None
        )

    def label_entropy(self, stream: int) -> tuple[int, ...]:
        """The seed entropy of label-noise stream ``stream``: ``(seed, stream)``."""
        return (int(self.spec.seed), int(stream))

    def label_rng(self, stream: int) -> np.random.Generator:
        """``numpy.random.default_rng(label_entropy(stream))``."""
        return np.random.default_rng(list(self.label_entropy(stream)))

    def train_on_targets(self, targets: np.ndarray, *, desc: str, confusion: bool = False) -> Trained:
        """003's MLP on ``targets`` (one real label per training row); test MSE on the true test labels."""
        given = np.asarray(targets, float)

        def as_given(labels, *, data, spec, rng):
            return Randomized(noisy_labels=given, privacy=NON_PRIVATE, details={})

        res = run_label_randomizer(self.data, self.spec, as_given, name=desc)
        return Trained(metrics=res.metrics, timings=res.timings, details=res.details)

    def train_private(self, *, method: str, denoiser_for: DenoiserFor | None, desc: str) -> MethodResult:
        raise ValueError(
            f"{method} on {self.data.name}: DP training is not implemented for regression data (003's methods "
            "are label randomizers: rr_on_bins, optimal_unbiased, laplace, staircase, ...)"
        )

    def vmap_key(self, *, denoiser_for: DenoiserFor | None) -> str | None:
        return None
