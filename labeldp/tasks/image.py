"""Image classification (000's images, and SimCLR features with a linear head, 000 Table 6); also
MovieLens' ratings as classes (001 Table 3: (user, movie) id pairs into the NCF network, the same
one-label-per-example training).

The privacy unit is the example: one label per training image. Training on targets is
:func:`labeldp.methods.common.train_and_evaluate` (000 Table 8's SGD, or a variant's recipe), DP
training is :func:`labeldp.methods.private_training.train_private`.
"""

from __future__ import annotations

import numpy as np

from labeldp.denoisers import noop
from labeldp.methods import private_training
from labeldp.methods.base import MethodResult, RunSpec
from labeldp.methods.common import build_model_for, train_and_evaluate
from labeldp.methods.vmapped_training import vmap_group_key
from labeldp.tasks.base import DenoiserFor, Trained, TrainingLabels
from labeldp.training import one_hot

__all__ = ["ImageTask"]


class ImageTask:
    """The image-classification task of one run (:class:`labeldp.tasks.base.Task`)."""

    options: tuple[str, ...] = ()
    unsupported_options: dict[str, str] = {}

    def __init__(self, data, spec: RunSpec):
        self.data = data
        self.spec = spec
        self.kind = str(getattr(data, "kind", "image"))

    def training_labels(self) -> TrainingLabels:
        y = np.asarray(self.data.y_train)
        return TrainingLabels(
            labels=y,
            unit_ids=np.arange(y.shape[0]),
            labels_per_unit=1,
            privacy_unit="example",
            num_classes=int(self.data.num_classes),
        )

    def label_entropy(self, stream: int) -> tuple[int, ...]:
        """The seed entropy of label-noise stream ``stream``: ``(seed, stream)``."""
        return (int(self.spec.seed), int(stream))

    def label_rng(self, stream: int) -> np.random.Generator:
        """``numpy.random.default_rng(label_entropy(stream))``."""
        return np.random.default_rng(list(self.label_entropy(stream)))

    def train_on_targets(self, targets: np.ndarray, *, desc: str, confusion: bool = False) -> Trained:
        """Trains the run's model (the variant's ``model`` option, else the dataset's 000 Table 10 model,
        or the linear head on features) on ``targets``:
        ``(n,)`` labels (one-hot) or ``(n, K)`` target weights. With ``confusion``, ``details`` has the
        test-set confusion matrices trained and at initialisation (000 Figure 4)."""
        targets = np.asarray(targets)
        weights = one_hot(targets, self.data.num_classes) if targets.ndim == 1 else targets
        matrices: dict | None = {} if confusion else None
        details: dict = {}
        metrics, timings, audit = train_and_evaluate(
            build_model_for(self.data, options=self.spec.options),
            self.data,
            weights,
            self.spec,
            desc=desc,
            confusion=matrices,
            provenance=details,  # init_from: the pre-trained network the model started from
        )
        if confusion:
            details.update(confusion_matrix=matrices["test"], confusion_matrix_init=matrices["init"])
        return Trained(metrics=metrics, timings=timings, details=details, audit_log_probs=audit)

    def train_private(self, *, method: str, denoiser_for: DenoiserFor | None, desc: str) -> MethodResult:
        """Example-level DP-SGD with the denoiser (NoOp when ``denoiser_for`` is None)."""
        return private_training.train_private(self.data, self.spec, denoiser=self._denoiser(denoiser_for), desc=desc)

    def vmap_key(self, *, denoiser_for: DenoiserFor | None) -> str | None:
        """The vmap group of the run; None where the denoiser's projection runs a host loop (the CPU)."""
        den = self._denoiser(denoiser_for)
        return None if den.host_loop() else vmap_group_key(self.spec, denoiser=den)

    def _denoiser(self, denoiser_for: DenoiserFor | None):
        return noop() if denoiser_for is None else denoiser_for(self.spec)
