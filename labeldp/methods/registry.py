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
import copy
import functools
import importlib
import importlib.util
import os
import pkgutil
from pathlib import Path
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
#: Calls that can bind module names the source does not spell out: a module using one is imported.
_DYNAMIC_CALLS = frozenset({"globals", "vars", "setattr", "delattr", "exec", "eval", "__import__"})
#: Methods that change a list, dict or set in place: a constant they are called on is not its literal.
_MUTATORS = frozenset(
    {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "remove", "add", "discard"}
    | {"sort", "reverse", "__setitem__", "__delitem__", "__iadd__", "__ior__"}
)


def declared(name: str, attr: str, default: Any = _ABSENT) -> Any:
    """Method ``name``'s module constant ``attr`` (``default`` when the module does not define it),
    read from the module's source where that is certain, so planning and the table jobs check a
    cell without importing the method's code (JAX, Flax, torch: about 2 s of a 2-core CPU per
    table job). Certain means: ``attr`` is bound exactly once, by a top-level assignment of a
    literal, and nowhere else (no other assignment, import, ``del``, ``global``, parameter or
    in-place change of it), and the module binds no names dynamically (star import, module
    ``__getattr__``, ``globals()``, ``setattr``, ``exec``, ``sys.modules``); or ``attr`` appears
    nowhere in such a module (the default). Anything else imports the module: the answer is
    :func:`get_method`'s attribute. Unlike :func:`get_method` this does not import the module, so a
    method whose imports fail is found out by its job, not by the planner.

    Raises:
      KeyError: no module implements ``name``; AttributeError: ``attr`` is missing and no default given.
    """
    origin = _origin(name)
    constants = None
    if origin:
        st = os.stat(origin)
        constants = _literal_constants(origin, st.st_mtime_ns, st.st_size)
    if constants is not None and constants["literals"].get("NAME", (None,))[0] == name:
        if attr in constants["literals"]:
            return copy.deepcopy(constants["literals"][attr][0])
        if attr not in constants["seen"] and default is not _ABSENT:
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
def _literal_constants(path: str, mtime_ns: int, size: int) -> dict[str, Any] | None:
    """``{"literals": {name: (value,)}, "seen": every identifier}`` of the module at ``path`` (the file's
    mtime and size key the cache), with only the names :func:`declared` may read; None when the module
    can bind names dynamically."""
    tree = ast.parse(Path(path).read_bytes(), filename=path)
    assigned: dict[str, list] = {}  # top-level `NAME = <literal>`: name -> [(target node id, value)]
    for node in tree.body:
        targets, value = (node.targets, node.value) if isinstance(node, ast.Assign) else ([], None)
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            try:
                assigned.setdefault(targets[0].id, []).append((id(targets[0]), ast.literal_eval(value)))
            except (ValueError, TypeError, SyntaxError, RecursionError):
                pass
    literal_targets = {target for pairs in assigned.values() for target, _ in pairs}
    seen: set[str] = set()
    touched: set[str] = set()  # bound, deleted or changed other than by one literal assignment
    for node in ast.walk(tree):
        if isinstance(node, ast.alias):
            if node.name == "*":
                return None
            bound = (node.asname or node.name).split(".")[0]
            seen.add(bound)
            touched.add(bound)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__" and node in tree.body:
                return None
            seen.add(node.name)
            touched.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            touched.update(node.names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC_CALLS:
            return None
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "sys" and node.attr == "modules":
                return None
            if node.attr in _MUTATORS:
                touched.add(node.value.id)
        elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            if isinstance(node.value, ast.Name):
                touched.add(node.value.id)  # X[k] = v / del X[k]
        elif isinstance(node, ast.Name):
            seen.add(node.id)
            if not isinstance(node.ctx, ast.Load) and id(node) not in literal_targets:
                touched.add(node.id)
        elif isinstance(node, ast.arg):
            touched.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            touched.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            touched.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            touched.add(node.rest)
    literals = {k: (pairs[0][1],) for k, pairs in assigned.items() if len(pairs) == 1 and k not in touched}
    return {"literals": literals, "seen": frozenset(seen)}


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
