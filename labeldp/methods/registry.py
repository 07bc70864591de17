"""Finds a method module by its id, without a central list to edit.

A method id ``m`` resolves to the first of ``labeldp.methods.m`` and ``baselines.m`` that
exists and defines ``NAME == m`` (see :mod:`labeldp.methods.base` for the contract).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from types import ModuleType

PACKAGES = ("labeldp.methods", "baselines")
_NOT_METHODS = {"base", "registry", "__init__", "common", "torch_models"}


def _candidates(name: str) -> list[str]:
    return [f"{pkg}.{name}" for pkg in PACKAGES]


def is_implemented(name: str) -> bool:
    """True if a module for method ``name`` exists (found without importing it)."""
    if not name.isidentifier() or name in _NOT_METHODS:
        return False
    return any(importlib.util.find_spec(mod) is not None for mod in _candidates(name))


def get_method(name: str) -> ModuleType:
    """Imports and checks the module of method ``name``.

    Raises:
      KeyError: no module implements ``name`` (the message lists the implemented ones).
    """
    if is_implemented(name):
        for modname in _candidates(name):
            if importlib.util.find_spec(modname) is None:
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
    for pkg in PACKAGES:
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            continue
        for info in pkgutil.iter_modules(spec.submodule_search_locations):
            if info.name not in _NOT_METHODS and not info.name.startswith("_"):
                names.add(info.name)
    return sorted(names)
