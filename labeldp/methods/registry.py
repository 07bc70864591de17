"""Finds a method module by its id, without a central list to edit.

A method id ``m`` resolves to the first of ``labeldp.methods.m``, ``baselines.m`` and
``<pkg>.m`` for each extension package ``pkg`` that exists and defines ``NAME == m`` (see
:mod:`labeldp.methods.base` for the contract).

Extension packages: a project of your own adds methods without editing this repository by naming
importable packages in the environment variable ``LABELDP_METHOD_PACKAGES`` (separated by ``:``;
e.g. ``LABELDP_METHOD_PACKAGES=mylab.methods``). Snakemake's jobs inherit the variable, so the
planner, the sweep jobs and the tables all see the same methods; every module of such a package is
a method (one module per method, as here).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from types import ModuleType

PACKAGES = ("labeldp.methods", "baselines")
#: The environment variable naming extension packages of methods (module docstring).
EXTENSION_ENV = "LABELDP_METHOD_PACKAGES"
_NOT_METHODS = {"base", "registry", "__init__", "common", "torch_models", "pro_denoiser", "private_training"}


def packages() -> tuple[str, ...]:
    """The packages searched, in order: this repository's, then the extension packages."""
    extra = tuple(p.strip() for p in os.environ.get(EXTENSION_ENV, "").split(":") if p.strip())
    bad = [p for p in extra if not all(part.isidentifier() for part in p.split("."))]
    if bad:
        raise ValueError(f"{EXTENSION_ENV} must name importable packages separated by ':', got {bad}")
    return PACKAGES + tuple(p for p in extra if p not in PACKAGES)


def _candidates(name: str) -> list[str]:
    return [f"{pkg}.{name}" for pkg in packages()]


def is_implemented(name: str) -> bool:
    """True if a module for method ``name`` exists (found without importing it)."""
    if not name.isidentifier() or name in _NOT_METHODS:
        return False
    return any(_find_spec(mod) is not None for mod in _candidates(name))


def _find_spec(modname: str):
    """``importlib.util.find_spec`` that answers None for a module of a package that is not installed."""
    try:
        return importlib.util.find_spec(modname)
    except ModuleNotFoundError:
        return None


def get_method(name: str) -> ModuleType:
    """Imports and checks the module of method ``name``.

    Raises:
      KeyError: no module implements ``name`` (the message lists the implemented ones).
    """
    if is_implemented(name):
        for modname in _candidates(name):
            if _find_spec(modname) is None:
                continue
            mod = importlib.import_module(modname)
            for attr in ("NAME", "HYPERPARAMETERS", "DATASET_KINDS", "run"):
                if not hasattr(mod, attr):
                    raise TypeError(f"method module {modname} does not define {attr}; see labeldp/methods/base.py")
            if mod.NAME != name:
                raise TypeError(f"method module {modname} has NAME={mod.NAME!r}, expected {name!r}")
            return mod
    raise KeyError(f"method {name!r} is not implemented; implemented methods: {implemented_methods()}")


def implemented_methods() -> list[str]:
    """Ids of every method module in the method packages."""
    names = set()
    for pkg in packages():
        spec = _find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            continue
        for info in pkgutil.iter_modules(spec.submodule_search_locations):
            if info.name not in _NOT_METHODS and not info.name.startswith("_"):
                names.add(info.name)
    return sorted(names)
