"""Task adapters (issue 30): a method supplies its mechanism and calls the run's task; no method branches
on the kind of data. :func:`task_for` chooses the task from the prepared dataset (its kind and task, as
its :class:`labeldp.data.dataset_spec.DatasetSpec` states them).

Adding a kind of data is one module here with a class implementing :class:`Task`, and one entry in
:data:`TASKS`.
"""

from __future__ import annotations

from labeldp.methods.base import RunSpec
from labeldp.tasks.ads import AdsTask
from labeldp.tasks.base import DenoiserFor, Task, Trained, TrainingLabels, check_task_options
from labeldp.tasks.image import ImageTask
from labeldp.tasks.regression import RegressionTask

__all__ = [
    "TASKS",
    "Task",
    "Trained",
    "TrainingLabels",
    "DenoiserFor",
    "check_task_options",
    "data_kind",
    "task_for",
]

#: (dataset kind, dataset task) -> the task adapter's class
TASKS: dict[tuple[str, str], type] = {
    ("image", "classification"): ImageTask,
    ("features", "classification"): ImageTask,
    ("ratings", "classification"): ImageTask,  # 001 Table 3: (user, movie) ids, one class per rating
    ("tabular", "binary_classification"): AdsTask,
    ("tabular", "regression"): RegressionTask,
}


def data_kind(data) -> str:
    """The prepared dataset's kind (``image``, ``features``, ``tabular``): what methods' DATASET_KINDS list."""
    return str(getattr(data, "kind", "image"))


def task_for(data, spec: RunSpec) -> Task:
    """The task adapter of one run on a prepared dataset.

    Raises:
      ValueError: no adapter for the dataset's kind and task, naming :data:`TASKS`.
    """
    key = (data_kind(data), str(getattr(data, "task", "classification")))
    if key not in TASKS:
        raise ValueError(
            f"no task adapter for {getattr(data, 'name', 'the data')} (kind {key[0]!r}, task {key[1]!r}); "
            f"known: {sorted(TASKS)} (add one in labeldp/tasks/)"
        )
    return TASKS[key](data, spec)
