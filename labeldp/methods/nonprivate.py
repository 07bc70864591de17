"""Non-private reference: ordinary training on the true labels (000 Table 5 header; for 003's
regression data, the Appendix G MLP with RMSProp on the true labels).

No privacy: the record's epsilon is ``inf``. This is the accuracy the paper states beside
Table 5 and the ``epsilon = inf`` row of Table 7.
"""

from __future__ import annotations

import dataclasses

from labeldp import tasks
from labeldp.methods.base import NON_PRIVATE, RECIPE_OPTIONS, MethodResult, RunSpec

NAME = "nonprivate"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
DATASET_KINDS = ("image", "tabular", "features", "ratings")
OPTIONS = RECIPE_OPTIONS  # 001 Appendix B's recipe (images); the tasks refuse what they do not implement


def run(data, spec: RunSpec) -> MethodResult:
    """Trains the task's model on the true labels and evaluates its test metric.

    Args:
      data: a prepared dataset (images, features, ads data, regression data).
      spec: the run (``epsilon`` must be ``inf``).

    Returns:
      A :class:`MethodResult` with the task's test metric and no privacy.
    """
    if spec.private:
        raise ValueError(f"nonprivate runs take epsilon=inf, got {spec.epsilon}")
    task = tasks.task_for(data, spec)
    tasks.check_task_options(task, spec, OPTIONS, NAME)
    units = task.training_labels()
    trained = task.train_on_targets(units.labels, desc=NAME)
    return trained.result(dataclasses.replace(NON_PRIVATE, privacy_unit=units.privacy_unit))
