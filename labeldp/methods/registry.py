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

import ast
import functools
import importlib
import importlib.util
import os
import pkgutil
from types import ModuleType
from typing import Any

PACKAGES = ("labeldp.methods", "baselines")
#: The environment variable naming extension packages of methods (module docstring).
EXTENSION_ENV = "LABELDP_METHOD_PACKAGES"
_NOT_METHODS = {
    "base",
    "registry",
    "__init__",
    "common",
    "torch_models",
    "pro_denoiser",
    "private_training",
    "vmapped_training",
}


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


_ABSENT = object()


def declared(name: str, attr: str, default: Any = _ABSENT) -> Any:
    """Method ``name``'s module constant ``attr`` (``default`` when the module does not define it),
    read from the module's source where it is a literal, so planning and the table jobs check a
    cell without importing the method's code (JAX, Flax, torch: about 2 s of a 2-core CPU per
    table job). Anything else (a value computed or imported, a star import, a module that is not a
    ``.py`` file) imports the module: the answer is always :func:`get_method`'s attribute.

    Raises:
      KeyError: no module implements ``name``; AttributeError: ``attr`` is missing and no default given.
    """
    origin = _origin(name)
    constants = _literal_constants(origin) if origin else None
    if constants is not None and constants.get("NAME", (None,))[0] == name:
        if attr in constants:
            return constants[attr][0]
        if attr not in constants.get("", ()) and default is not _ABSENT:  # bound nowhere at top level
            return default
    mod = get_method(name)
    return getattr(mod, attr) if default is _ABSENT else getattr(mod, attr, default)


def _origin(name: str) -> str | None:
    """The source file of the module that implements ``name`` (the first package's, as :func:`get_method`)."""
    if not is_implemented(name):
        return None
    for modname in _candidates(name):
        spec = _find_spec(modname)
        if spec is not None:
            return spec.origin if spec.origin and spec.origin.endswith(".py") else None
    return None


@functools.lru_cache(maxsize=None)
def _literal_constants(path: str) -> dict[str, Any] | None:
    """``{name: (value,)}`` of the module's top-level assignments of a literal, plus ``""``: every other
    name bound at top level; None when a star import makes the bound names unknowable."""
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    literals: dict[str, Any] = {}
    bound: set[str] = set()
    for node in tree.body:
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                return None
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            continue
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue
        else:  # if / try / for / with at top level may bind anything
            bound.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
            continue
        for t in targets:
            if isinstance(t, ast.Name) and value is not None:
                try:
                    literals[t.id] = (ast.literal_eval(value),)
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    bound.add(t.id)
            else:
                bound.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    for name in bound:
        literals.pop(name, None)  # bound twice: not a constant we can read
    literals[""] = frozenset(bound)
    return literals


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
