"""Split views: a dataset id that prepares another dataset's raw files with another split.

A view may also restrict the data: 000 Table 12 trains on MNIST's first K classes (``mnist_k2``,
``mnist_k5``). Two papers split the same raw data differently: 000 Section 6 draws disjoint random *users* from
Criteo Attribution (200,000 train, 50,000 test), while 002 Section 5 partitions the rows at random
80/20. A *view* names the second preparation as a dataset of its own, so a table picks its paper's
split by its ``dataset`` key and every record, prepared file and log says which split it used:

* the raw files are the base dataset's (``<data_dir>/raw/<base>`` or ``<data_dir>/standin/<base>``;
  one fetch, one stand-in);
* the prepared file is ``<data_dir>/prepared/<view>-<source>-<size>.npz``, written by the base's
  preparation module (``labeldp/data/<base>.py``, ``prepare_dataset``; an image base's is
  :func:`labeldp.data.prepare.prepare_image_dataset`, which its command line calls) with the view's options;
* its arrays describe the base's data: their ``dataset`` is the base id (models, optimizers and the
  paper's reference cells are the base's) and ``metadata["view"]`` is the view id, which the runner
  checks against the run's dataset;
* the view follows ``datasets.<base>`` of the config (subset, stand-in) unless it has its own entry.

Adding a view is one entry in :data:`VIEWS` plus the tables that use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from labeldp.data.registry import source_module


__all__ = ["SplitView", "VIEWS", "view_of", "base_dataset", "prepare_view", "held_dataset"]


@dataclass(frozen=True)
class SplitView:
    """One view of a base dataset.

    Attributes:
      base: the dataset id whose raw files and preparation module are used.
      options: keyword arguments for the base module's ``prepare_dataset`` (e.g. ``split``).
      reference: where the paper states this preparation.
    """

    base: str
    options: Mapping[str, Any] = field(default_factory=dict)
    reference: str = ""


VIEWS: Mapping[str, SplitView] = MappingProxyType(
    {
        "criteo_attribution_random_80_20": SplitView(
            base="criteo_attribution",
            options=MappingProxyType({"split": "random_80_20"}),
            reference="002 Section 5: 'randomly partition the dataset into 80%/20% train/test' (Tables 2 and 3)",
        ),
        # 000 Table 12(a): "the number of classes K", MNIST restricted to its first K classes (PROTOCOL.md)
        "mnist_k2": SplitView(
            base="mnist",
            options=MappingProxyType({"classes": 2}),
            reference="000 Table 12(a): MNIST's first K = 2 classes (digits 0 and 1), both splits",
        ),
        "mnist_k5": SplitView(
            base="mnist",
            options=MappingProxyType({"classes": 5}),
            reference="000 Table 12(a): MNIST's first K = 5 classes (digits 0-4), both splits",
        ),
    }
)


def view_of(dataset: str) -> SplitView | None:
    """The :class:`SplitView` named ``dataset``, or None when ``dataset`` is not a view."""
    return VIEWS.get(dataset)


def base_dataset(dataset: str) -> str:
    """The dataset whose raw files, models and reference cells ``dataset`` uses (itself unless a view)."""
    view = VIEWS.get(dataset)
    return view.base if view else dataset


def held_dataset(data: Any) -> str:
    """The dataset id a prepared file was made for: its view id when it is a view's, else its name."""
    return str((getattr(data, "metadata", None) or {}).get("view") or data.name)


def prepare_view(dataset: str, *, raw_dir: str | Path, out_path: str | Path, subset: int | None, source: str) -> Path:
    """Prepare view ``dataset`` of a tabular base from its base's raw files with the view's options (an image
    base's view is prepared by :func:`labeldp.data.prepare.prepare_image_dataset` with ``view`` and the options).

    Args:
      dataset: a view id (a key of :data:`VIEWS`).
      raw_dir: the BASE dataset's raw directory.
      out_path: the ``.npz`` to write (atomically, by the base module).
      subset: passed to the base module (its meaning is the base's for this split).
      source: ``"official"`` or ``"synthetic_standin"``.

    Returns:
      ``out_path``; its metadata carries ``view = dataset``.

    Raises:
      KeyError: ``dataset`` is not a view.
    """
    view = VIEWS[dataset]
    module = source_module(view.base)
    return module.prepare_dataset(
        raw_dir=raw_dir, out_path=out_path, subset=subset, source=source, view=dataset, **dict(view.options)
    )
