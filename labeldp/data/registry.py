"""Dataset registry: every data source, by dataset id (:data:`DATASETS`).

A data source is ONE module implementing one protocol (issue 30):

* ``SPEC``: its :class:`DatasetSpec` (where every raw file comes from and how it is checked; kind,
  task and model, once);
* an image source (``kind="image"``): ``read_raw(paths) -> RawSplits`` (its files by name, already
  checked against the spec's checksums; :func:`labeldp.data.prepare.prepare_image_dataset` does the
  rest); a tabular one: ``prepare_dataset(*, raw_dir, out_path, subset, source)``;
* ``write_standin(directory, *, seed, n_train, n_test)`` (optional): SYNTHETIC raw files in the
  source's exact format for tests and the smoke profile (after the ``STANDIN_SYNTHETIC`` marker).

The sources this suite ships are the modules of :mod:`labeldp.data.sources`, discovered here
(:func:`builtin_sources`); raw formats live in :mod:`labeldp.data.rawformats`, fetching in
:mod:`labeldp.data.fetch`. A source of your own, in a package of yours, is named in the environment
variable ``LABELDP_DATA_SOURCES`` (``:``-separated module names; Snakemake's jobs inherit it) and is a
dataset like the shipped ones, with nothing in this repository edited (:func:`extension_sources`).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from types import MappingProxyType, ModuleType
from typing import Callable, Iterator, Mapping, TypeVar

from labeldp.data import sources
from labeldp.data.dataset_spec import DatasetSpec, RemoteFile

V = TypeVar("V")

__all__ = [
    "RemoteFile",
    "SourcesMapping",
    "DatasetSpec",
    "DATASETS",
    "SOURCES_ENV",
    "builtin_sources",
    "dataset_names",
    "extension_sources",
    "get_spec",
    "source_module",
]


#: The environment variable naming the data-source modules of your own (module docstring).
SOURCES_ENV = "LABELDP_DATA_SOURCES"


def _check_source(module: ModuleType) -> DatasetSpec:
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, DatasetSpec):
        raise ValueError(f"data source {module.__name__} must define SPEC, a labeldp.data.registry.DatasetSpec")
    return spec


@functools.cache
def builtin_sources() -> Mapping[str, ModuleType]:
    """The modules of :mod:`labeldp.data.sources` (every one a data source), by dataset id.

    Raises:
      ValueError: a module without ``SPEC``, or two modules naming one dataset.
    """
    out: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(sources.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{sources.__name__}.{info.name}")
        spec = _check_source(module)
        if spec.name in out:
            raise ValueError(f"data sources {out[spec.name].__name__} and {module.__name__} both name {spec.name!r}")
        out[spec.name] = module
    return MappingProxyType(out)


def _builtin_specs() -> dict[str, DatasetSpec]:
    return {name: m.SPEC for name, m in builtin_sources().items()}


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
        spec = _check_source(module)
        if spec.name in builtin_sources() or spec.name in out:
            raise ValueError(f"data source {modname} names dataset {spec.name!r}, which already exists; rename it")
        out[spec.name] = module
    _EXTENSIONS[named] = out
    return dict(out)


_EXTENSIONS: dict[str, dict[str, ModuleType]] = {}  # by the variable's value: imported once


class SourcesMapping(Mapping[str, V]):
    """A mapping computed from the data sources, once per value of ``LABELDP_DATA_SOURCES`` (so a source of
    the user's own appears as soon as the variable names it). ``compute()`` returns the whole mapping."""

    def __init__(self, compute: Callable[[], dict[str, V]]):
        self._compute = compute
        self._cache: dict[str, dict[str, V]] = {}

    def _all(self) -> dict[str, V]:
        key = os.environ.get(SOURCES_ENV, "")
        if key not in self._cache:
            self._cache[key] = self._compute()
        return self._cache[key]

    def __getitem__(self, name: str) -> V:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class _Datasets(SourcesMapping[DatasetSpec]):
    """A shipped dataset's spec is looked up without importing the user's sources (one of which may itself
    look a shipped spec up while it is being imported)."""

    def __getitem__(self, name: str) -> DatasetSpec:
        module = builtin_sources().get(name)
        return module.SPEC if module is not None else super().__getitem__(name)


#: Every dataset's spec by id: this package's sources, then those of :func:`extension_sources`.
DATASETS: Mapping[str, DatasetSpec] = _Datasets(
    lambda: {**_builtin_specs(), **{name: m.SPEC for name, m in extension_sources().items()}}
)


def source_module(name: str) -> ModuleType:
    """The data-source module of dataset ``name``: a shipped one (:func:`builtin_sources`) or one of
    :func:`extension_sources`.

    Raises:
      KeyError: an unknown dataset, listing the known ids.
    """
    module = builtin_sources().get(name) or extension_sources().get(name)
    if module is None:
        raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    return module


def dataset_names() -> tuple[str, ...]:
    return tuple(DATASETS)


def get_spec(name: str) -> DatasetSpec:
    """The spec for dataset id ``name``; a clear error listing the known ids otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None
