"""What every task adapter offers a method (issue 30): the labels a run may randomise, how they group
into privacy units, training on given targets, and DP training with a denoiser.

A *task* is one run's view of a prepared dataset: image classification (000's images and SimCLR
features), binary ads classification with users (000 Table 7, 002) and regression (003). A method
module supplies its mechanism (a label randomizer, a denoiser) and calls the task; it never branches on
the kind of data. The task is chosen from the dataset (:func:`labeldp.tasks.task_for`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from labeldp.methods.base import MethodResult, RunSpec, check_options

__all__ = ["TrainingLabels", "Trained", "Task", "DenoiserFor", "check_task_options"]

#: ``denoiser_for(spec) -> Denoiser``: a method's denoiser for a spec (LabelDP-Pro's
#: :func:`labeldp.methods.pro_denoiser.make_denoiser_for`); None is DP-SGD's NoOp.
DenoiserFor = Callable[[RunSpec], Any]


@dataclasses.dataclass(frozen=True)
class TrainingLabels:
    """The private labels of a run and their privacy units.

    Attributes:
      labels: ``(n,)`` the training labels a label randomizer may query (integers for classification).
      unit_ids: ``(n,)`` integer id of each label's privacy unit (the example, or its user).
      labels_per_unit: k, the most labels one unit holds (1 at the example level).
      privacy_unit: ``"example"`` or ``"user"`` (all of one user's labels together, 000 Section 6).
      num_classes: K for classification, None for regression.
    """

    labels: np.ndarray
    unit_ids: np.ndarray
    labels_per_unit: int
    privacy_unit: str
    num_classes: int | None


@dataclasses.dataclass(frozen=True)
class Trained:
    """A model trained on given targets and evaluated on the test split.

    Attributes:
      metrics: the task's test metric (``test_accuracy_pct``, ``test_auc``, ``test_mse``), ``diverged``,
        ``final_train_loss``, ``steps``.
      timings: ``train_seconds`` and the task's per-epoch or per-step cost.
      details: what the task adds to the record (model, users, confusion matrices, ...).
      audit_log_probs: the label-canary audit's log-probabilities (image tasks; None elsewhere).
    """

    metrics: Mapping[str, Any]
    timings: Mapping[str, float]
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    audit_log_probs: Any = None

    def result(self, privacy, *, details: Mapping[str, Any] = ()) -> MethodResult:
        """The run's :class:`MethodResult` with ``privacy`` and the method's ``details`` first."""
        return MethodResult(
            metrics=dict(self.metrics),
            privacy=privacy,
            timings=dict(self.timings),
            details={**dict(details), **dict(self.details)},
            audit_log_probs=self.audit_log_probs,
        )


class Task(Protocol):
    """One run's view of its dataset (module docstring). Built by :func:`labeldp.tasks.task_for`."""

    #: the dataset's kind (``image``, ``features``, ``tabular``): what a method's DATASET_KINDS lists
    kind: str
    #: variant options the task itself reads (ads: ``examples_per_user``)
    options: tuple[str, ...]
    #: method options the task does not implement (refused with the reason by :func:`check_task_options`)
    unsupported_options: Mapping[str, str]

    def training_labels(self) -> TrainingLabels:
        """The labels a label randomizer queries, with their privacy units."""

    def label_entropy(self, stream: int) -> tuple[int, ...]:
        """The seed entropy of label-noise stream ``stream`` (stored in records as ``label_rng``)."""

    def label_rng(self, stream: int) -> np.random.Generator:
        """The label-noise generator of stream ``stream`` (the baselines' stream constants)."""

    def train_on_targets(self, targets: np.ndarray, *, desc: str, confusion: bool = False) -> Trained:
        """Trains the dataset's model on ``targets`` (one per training label, or ``(n, K)`` weights)."""

    def train_private(self, *, method: str, denoiser_for: DenoiserFor | None, desc: str) -> MethodResult:
        """DP-SGD with the method's denoiser over the task's privacy units; the accountant's eps."""

    def vmap_key(self, *, denoiser_for: DenoiserFor | None) -> str | None:
        """The key of runs that can train as one vmapped program; None where the task cannot vmap."""


def check_task_options(task: Task, spec: RunSpec, method_options: tuple[str, ...], method: str) -> None:
    """Refuses an option the task does not implement (naming why), then any the method and task do not know.

    Raises:
      ValueError: naming the option and what to do.
    """
    for option, why in task.unsupported_options.items():
        if option in spec.options:
            raise ValueError(
                f"{method} on {task.kind} data: option {option!r} of variant {spec.variant!r} is not implemented "
                f"here ({why}); remove it from the variant"
            )
    check_options(spec, tuple(method_options) + tuple(task.options), method)
