"""Dataset registry: where every raw file comes from and how it is checked.

One :class:`DatasetSpec` per dataset, keyed by id in :data:`DATASETS`. Adding a dataset
means adding one entry here; :mod:`labeldp.data.fetch` and :mod:`labeldp.data.prepare`
read everything they need from the spec.

Data sources of your own: a module (in a package of yours) that defines ``SPEC`` (a
:class:`DatasetSpec`) and its preparation, named in the environment variable
``LABELDP_DATA_SOURCES`` (``:``-separated module names; Snakemake's jobs inherit it), is a dataset
like those below, with nothing in this repository edited (:func:`extension_sources`). An image
source (``kind="image"``) defines ``read_raw(paths) -> RawSplits`` (its files by name, already
checked against the spec's checksums; :func:`labeldp.data.prepare.prepare_image_dataset` does the
rest); a tabular one defines ``prepare_dataset(*, raw_dir, out_path, subset, source)`` as the
modules of this package do. ``write_standin(raw_dir, *, seed)`` (optional) writes synthetic raw
files in the source's exact format, for tests.

The built-in datasets' specs (with where their checksums come from) are in
:mod:`labeldp.data.builtin_sources`; :class:`DatasetSpec` and :class:`RemoteFile` in
:mod:`labeldp.data.dataset_spec`.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Iterator, Mapping

from .builtin_sources import BUILTIN_DATASETS
from .census1940_extract import (  # re-exported: see __all__
    CENSUS1940_CATEGORICAL_FEATURES,
    CENSUS1940_DEFAULT_FILENAME,
    CENSUS1940_INSTRUCTIONS,
    CENSUS1940_LABEL,
    CENSUS1940_NUMERICAL_FEATURES,
    CENSUS1940_VARIABLES,
)
from .dataset_spec import DatasetSpec, RemoteFile

__all__ = [
    "RemoteFile",
    "DatasetSpec",
    "DATASETS",
    "SOURCES_ENV",
    "dataset_names",
    "extension_sources",
    "get_spec",
    "source_module",
    "CENSUS1940_LABEL",
    "CENSUS1940_CATEGORICAL_FEATURES",
    "CENSUS1940_NUMERICAL_FEATURES",
    "CENSUS1940_VARIABLES",
    "CENSUS1940_DEFAULT_FILENAME",
    "CENSUS1940_INSTRUCTIONS",
]


#: The environment variable naming the data-source modules of your own (module docstring).
SOURCES_ENV = "LABELDP_DATA_SOURCES"


def extension_sources() -> dict[str, ModuleType]:
    """The data-source modules named in ``LABELDP_DATA_SOURCES``, by dataset id.

    Raises:
      ValueError: a name that is not a module path, a module that cannot be imported, a ``SPEC``
        that is not a :class:`DatasetSpec`, or an id that a dataset here already has.
    """
    named = os.environ.get(SOURCES_ENV, "")
    if named in _EXTENSIONS:
        return dict(_EXTENSIONS[named])
    out: dict[str, ModuleType] = {}
    for modname in (m.strip() for m in named.split(":")):
        if not modname:
            continue
        if not all(part.isidentifier() for part in modname.split(".")):
            raise ValueError(f"{SOURCES_ENV} must name importable modules separated by ':', got {modname!r}")
        try:
            module = importlib.import_module(modname)
        except ImportError as exc:
            raise ValueError(
                f"{SOURCES_ENV} names {modname!r}, which cannot be imported ({exc}); fix PYTHONPATH"
            ) from exc
        spec = getattr(module, "SPEC", None)
        if not isinstance(spec, DatasetSpec):
            raise ValueError(f"data source {modname} must define SPEC, a labeldp.data.registry.DatasetSpec")
        if spec.name in BUILTIN_DATASETS or spec.name in out:
            raise ValueError(f"data source {modname} names dataset {spec.name!r}, which already exists; rename it")
        out[spec.name] = module
    _EXTENSIONS[named] = out
    return dict(out)


_EXTENSIONS: dict[str, dict[str, ModuleType]] = {}  # by the variable's value: imported once


class _Datasets(Mapping[str, DatasetSpec]):
    """This package's datasets, then those of :func:`extension_sources` (read at each access)."""

    def _all(self) -> dict[str, DatasetSpec]:
        return {**BUILTIN_DATASETS, **{name: m.SPEC for name, m in extension_sources().items()}}

    def __getitem__(self, name: str) -> DatasetSpec:
        if name in BUILTIN_DATASETS:
            return BUILTIN_DATASETS[name]
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


DATASETS: Mapping[str, DatasetSpec] = _Datasets()


def source_module(name: str) -> ModuleType | None:
    """The module of an extension data source (:func:`extension_sources`), None for this package's."""
    return None if name in BUILTIN_DATASETS else extension_sources().get(name)


def dataset_names() -> tuple[str, ...]:
    return tuple(DATASETS)


def get_spec(name: str) -> DatasetSpec:
    """The spec for dataset id ``name``; a clear error listing the known ids otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None
