"""Where each dataset's files live and what kind of data it is (the planner's data layout).

One layout for every rule: raw files under ``<data_dir>/raw/<dataset>`` (fetch) or
``<data_dir>/standin/<dataset>`` (synthetic stand-ins), prepared arrays under
``<data_dir>/prepared/<dataset>-<source>-<size>.npz``, and the features datasets
``<image dataset>_simclr`` of :mod:`labeldp.feature_datasets`. Split from :mod:`labeldp.plan`, which
re-exports every name here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from labeldp import feature_datasets
from labeldp.data import views
from labeldp.data.registry import DATASETS, SourcesMapping

# Dataset kinds whose prepare step is implemented; every other dataset's cells are "not run".
PREPARABLE_KINDS = ("image", "tabular", "features", "ratings")
# Datasets without a preparation module yet (name -> why), whose cells say "not run".
_NOT_PREPARABLE: dict[str, str] = {}


def _dataset_kinds() -> dict[str, str]:
    """Each dataset's kind, from its spec (:data:`labeldp.data.registry.DATASETS`, extension sources
    included), and each split view's (:mod:`labeldp.data.views`: another dataset's raw files, prepared
    with another split) from its base."""
    kinds = {name: spec.kind for name, spec in DATASETS.items()}
    return {**kinds, **{name: kinds[view.base] for name, view in views.VIEWS.items()}}


DATASET_KINDS: Mapping[str, str] = SourcesMapping(_dataset_kinds)
# Every image dataset <base> also has a features dataset <base>_simclr (kind "features"): its
# SimCLR representations (labeldp.feature_datasets); dataset_kind() knows them.


def data_mirror(config: Mapping[str, Any]) -> str | None:
    """The mirror directory: config key ``data_mirror``, else env ``LABELDP_DATA_MIRROR``."""
    m = config.get("data_mirror") or os.environ.get("LABELDP_DATA_MIRROR") or None
    return str(m) if m else None


def dataset_kind(dataset: str) -> str | None:
    """``image`` / ``tabular`` (:data:`DATASET_KINDS`), ``features`` for ``<image dataset>_simclr``,
    None for an unknown dataset."""
    if dataset in DATASET_KINDS:
        return DATASET_KINDS[dataset]
    return feature_datasets.FEATURES_KIND if feature_datasets.features_base(dataset, DATASET_KINDS) else None


def dataset_cfg(config: Mapping[str, Any], dataset: str) -> Mapping[str, Any]:
    """``datasets.<dataset>`` of the config; a features dataset follows its base image dataset's, a
    split view (:mod:`labeldp.data.views`) its base dataset's unless it has an entry of its own."""
    datasets = config.get("datasets") or {}
    if views.view_of(dataset) is not None and dataset not in datasets:
        return datasets.get(views.base_dataset(dataset)) or {}
    base = feature_datasets.features_base(dataset, DATASET_KINDS)
    return datasets.get(base or dataset) or {}


RAW_SUBDIRS = {"official": "raw", "standin": "standin"}


def raw_root(data_dir: str | Path, source: str) -> str:
    """The directory holding one subdirectory of raw files per dataset for ``source``
    (``<data_dir>/raw`` or ``<data_dir>/standin``); ``raw_dir`` is ``raw_root / dataset``.

    Args:
      data_dir: the config's ``data_dir``.
      source: ``official`` or ``standin``.
    """
    if source not in RAW_SUBDIRS:
        raise ValueError(f"source must be one of {sorted(RAW_SUBDIRS)}, got {source!r}")
    return str(Path(data_dir) / RAW_SUBDIRS[source])


def raw_dir(data_dir: str | Path, dataset: str, source: str) -> str:
    """Where the raw files of ``dataset`` live: ``<data_dir>/raw/<dataset>`` for the official
    files (fetch rule), ``<data_dir>/standin/<dataset>`` for the synthetic stand-ins
    (make_standin rule). The one layout every rule uses. A split view (:mod:`labeldp.data.views`)
    reads its base dataset's directory.

    Args:
      data_dir: the config's ``data_dir``.
      dataset: dataset id.
      source: ``official`` or ``standin``.
    """
    return str(Path(raw_root(data_dir, source)) / views.base_dataset(dataset))


def data_source(config: Mapping[str, Any], dataset: str) -> str:
    """``standin`` when the config asks for synthetic stand-in files for ``dataset``, else ``official``."""
    return "standin" if dataset_cfg(config, dataset).get("standin") else "official"


def data_tag(config: Mapping[str, Any], dataset: str) -> str:
    """``<source>-<size>`` of a dataset's prepared file (``official-full``, ``standin-n512``)."""
    sub = dataset_cfg(config, dataset).get("subset")
    return data_source(config, dataset) + (f"-n{sub}" if sub else "-full")


def prepared_path(config: Mapping[str, Any], dataset: str) -> str:
    """The file a run on ``dataset`` loads: the prepared arrays, or for a features dataset the
    features file of the configured SimCLR encoder (:mod:`labeldp.feature_datasets`)."""
    if feature_datasets.features_base(dataset, DATASET_KINDS):
        return feature_datasets.features_path(config, dataset, data_tag(config, dataset))
    return str(Path(config["data_dir"]) / "prepared" / f"{dataset}-{data_tag(config, dataset)}.npz")


def dataset_runnable(config: Mapping[str, Any], dataset: str) -> tuple[bool, str]:
    kind = dataset_kind(dataset)
    if kind is None:
        return False, f"unknown dataset {dataset!r}"
    if kind not in PREPARABLE_KINDS or dataset in _NOT_PREPARABLE:
        return False, _NOT_PREPARABLE.get(dataset, f"preparation of {dataset} is not implemented yet")
    return True, ""


def simclr_bases(config: Mapping[str, Any]) -> list[str]:
    """The image datasets some table of ``config`` pre-trains SimCLR on (its dataset is
    ``<base>_simclr``), sorted: each gets 000 Figure 3's pre-training loss figure."""
    bases = {
        feature_datasets.features_base(str(t.get("dataset") or ""), DATASET_KINDS) for t in config["tables"].values()
    }
    return sorted(b for b in bases if b)
