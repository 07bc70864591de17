"""No import of a ``labeldp`` or ``baselines`` module inside a function or method (house style,
docs/architecture.md: an import inside a function is for cost, never to dodge a cycle; packages export what
others use, at the top of the module).

Two kinds of exception, each an explicit entry with its reason:

* :data:`CYCLES`: imports left inside a function because hoisting them makes an import cycle that needs a
  larger redesign. None is left.
* :data:`COST_DEFERRALS`: modules whose top level is kept light on purpose. Such a module may import, inside a
  function, a project module that would load a heavy third-party package (:data:`HEAVY`) its own top level does
  not load; this test checks that statically (following every module's top-level imports), so an import there
  that costs nothing must still go to the top.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.helpers import REPO, project_modules

#: Third-party packages whose import costs enough to keep off a light module's top level.
HEAVY = frozenset(
    {
        "numpy",
        "scipy",
        "jax",
        "flax",
        "optax",
        "orbax",
        "torch",
        "opacus",
        "dp_accounting",
        "sklearn",
        "pandas",
        "matplotlib",
        "statsmodels",
        "snakemake",
    }
)

#: What each heavy package itself imports of the others (the closure below follows only the project's imports).
IMPLIES = {
    "jax": {"numpy"},
    "flax": {"jax", "numpy"},
    "optax": {"jax", "numpy"},
    "orbax": {"jax", "numpy"},
    "scipy": {"numpy"},
    "dp_accounting": {"numpy", "scipy"},
    "sklearn": {"numpy", "scipy"},
    "pandas": {"numpy"},
    "matplotlib": {"numpy"},
    "statsmodels": {"numpy", "scipy", "pandas"},
    "opacus": {"torch", "numpy", "scipy"},
}

#: ``(file, imported module): reason`` of imports left inside a function because of an import cycle that
#: needs a larger redesign. None is left: the one hoisting found (``labeldp.data.rawformats`` imports the
#: registry for its stand-in dispatcher, and the registry imported ``rawformats.ipums_extract`` to re-export
#: the Census constants) was broken by importing those constants where they live.
CYCLES: dict[tuple[str, str], str] = {}

_METHOD_MODULE = (
    "a method module: its top level imports only the standard library and labeldp.methods.base (and other "
    "light modules) so that the registry and the Snakefile discover methods cheaply; numpy, JAX, torch and "
    "dp_accounting come in inside run (labeldp/methods/base.py docstring; "
    "tests/baselines/test_label_baselines.py::test_module_top_levels_are_light)"
)

#: Modules kept light on purpose (file: reason). Every ``baselines/<method>.py`` is one (:data:`_METHOD_MODULE`).
COST_DEFERRALS: dict[str, str] = {
    "labeldp/methods/base.py": (
        "the method interface every method module and the planner import: standard library only "
        "(its docstring); dp_accounting (labeldp.accounting) only when a privacy outcome is checked"
    ),
    "labeldp/mechanisms/multi_stage_queries.py": (
        "LP-2ST's and LP-MST's label side, imported at the top of baselines/lp_2st.py and lp_mst.py, whose top "
        "levels stay numpy-free (test_module_top_levels_are_light); numpy and the classification mechanisms "
        "come in inside the oracle's methods"
    ),
    "labeldp/report/search_cost.py": (
        "table and figure jobs import it; dp_accounting (labeldp.accounting) only to compose a search of "
        "several runs (tests/report/test_search_cost.py::test_table_jobs_import_dp_accounting_only_to_compose_a_search)"
    ),
    "labeldp/ads/hybrid_run.py": (
        "keeps JAX and flax off its top level (jax and sklearn themselves are imported inside evaluate_auc); "
        "labeldp.ads.model / train / hybrid and labeldp.methods.private_training bring JAX"
    ),
    "labeldp/simclr/pretrain.py": (
        "the pretrain_simclr CLI keeps JAX, flax, optax and orbax off its top level (imported inside "
        "make_step and pretrain); labeldp.simclr.augment / ntxent / resnet bring JAX"
    ),
    "labeldp/simclr/features.py": (
        "the features CLI keeps JAX and flax off its top level (imported inside load_encoder and "
        "extract_features); labeldp.simclr.resnet brings them"
    ),
}

_NOT_METHODS = {"__init__", "common", "torch_models"}


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _deferral_reason(path: Path) -> str | None:
    rel = _rel(path)
    if rel in COST_DEFERRALS:
        return COST_DEFERRALS[rel]
    if path.parent == REPO / "baselines" and path.stem not in _NOT_METHODS:
        return _METHOD_MODULE
    return None


def _targets(node: ast.Import | ast.ImportFrom, name: str, path: Path, modules) -> list[str]:
    """The module names an import statement names (project modules resolved, relative imports made absolute)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def _is_project(target: str) -> bool:
    return target.split(".")[0] in ("labeldp", "baselines")


def _walk(tree: ast.AST):
    """``(import node, enclosing function or None)`` for every import, ``if TYPE_CHECKING:`` blocks aside."""
    stack = [(tree, None)]
    while stack:
        node, fn = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else fn
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, fn
            stack.append((child, inner))


def _function_level_imports(modules) -> list[tuple[Path, int, str, str]]:
    """``(file, line, function, imported project module)`` of every import inside a function."""
    found = []
    for name, path in sorted(modules.items()):
        for node, fn in _walk(ast.parse(path.read_text())):
            if fn is None:
                continue
            for target in _targets(node, name, path, modules):
                if _is_project(target):
                    found.append((path, node.lineno, getattr(fn, "name", "<lambda>"), target))
    return found


class _TopLevel:
    """What importing a module loads, following top-level imports only (those of its parent packages too)."""

    def __init__(self, modules: dict[str, Path]):
        self.modules = modules

    def _project_module(self, target: str) -> str | None:
        while target and target not in self.modules:
            target = target.rpartition(".")[0]
        return target or None

    @functools.cache
    def direct(self, name: str) -> tuple[frozenset[str], frozenset[str]]:
        """(project modules, third-party top-level packages) that ``name``'s own top level imports."""
        path = self.modules[name]
        project, third = set(), set()
        for node, fn in _walk(ast.parse(path.read_text())):
            if fn is not None:
                continue
            for target in _targets(node, name, path, self.modules):
                if _is_project(target):
                    found = self._project_module(target)
                    if found:
                        project.add(found)
                elif target and not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                    third.add(target.split(".")[0])
        parts = name.split(".")
        project.update(".".join(parts[:i]) for i in range(1, len(parts)))  # its parent packages run first
        project.discard(name)
        return frozenset(project), frozenset(third)

    def heavy(self, name: str) -> frozenset[str]:
        """The heavy third-party packages importing ``name`` loads."""
        seen, todo, out = set(), [name], set()
        for parent in range(1, len(name.split("."))):
            todo.append(".".join(name.split(".")[:parent]))
        while todo:
            mod = todo.pop()
            if mod in seen or mod not in self.modules:
                continue
            seen.add(mod)
            project, third = self.direct(mod)
            out |= third & HEAVY
            todo.extend(project)
        return frozenset(out.union(*(IMPLIES.get(p, ()) for p in out)))


def _violations(modules: dict[str, Path]) -> tuple[list[str], set[str], set[tuple[str, str]]]:
    """Messages naming file:line for every function-level project import not allowed, the deferral modules
    used, and the cycle entries used."""
    top = _TopLevel(modules)
    bad, used_deferrals, used_cycles = [], set(), set()
    for path, line, fn, target in _function_level_imports(modules):
        rel = _rel(path)
        if (rel, target) in CYCLES:
            used_cycles.add((rel, target))
            continue
        name = next(n for n, p in modules.items() if p == path)
        reason = _deferral_reason(path)
        extra = top.heavy(top._project_module(target) or target) - top.heavy(name)
        if reason is not None and extra:
            used_deferrals.add(rel)
            continue
        why = (
            "it loads nothing heavy the module's top level does not load already"
            if reason is not None
            else "the module is not one kept light on purpose (COST_DEFERRALS)"
        )
        bad.append(f"{rel}:{line}: import of {target} inside {fn}(): move it to the top of the module ({why})")
    return bad, used_deferrals, used_cycles


def test_no_project_import_inside_a_function():
    bad, _, _ = _violations(project_modules())
    assert not bad, "imports of project modules inside functions:\n" + "\n".join(bad)


def test_every_exception_is_still_needed():
    _, used_deferrals, used_cycles = _violations(project_modules())
    stale = sorted(set(COST_DEFERRALS) - used_deferrals) + sorted(map(str, set(CYCLES) - used_cycles))
    assert not stale, f"exceptions no function-level import needs any more (remove them): {stale}"


def test_the_heavy_closure_follows_top_level_imports_only():
    top = _TopLevel(project_modules())
    assert top.heavy("labeldp.methods.base") == frozenset()
    assert "dp_accounting" in top.heavy("labeldp.accounting")
    assert "jax" in top.heavy("labeldp.denoisers")
    assert top.heavy("baselines.rr") == frozenset(), "a method module's top level must stay light"


def _fake_modules(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    modules = {}
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        parts = Path(rel).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


@pytest.mark.parametrize(
    "body",
    [
        "def f():\n    from labeldp.b import x\n",
        "class C:\n    def m(self):\n        import labeldp.b\n",
        "def f():\n    def g():\n        from . import b\n",
        "f = lambda: __import__('os')\ndef h():\n    if True:\n        from baselines import c\n",
    ],
)
def test_the_walker_finds_an_import_inside_a_function(tmp_path, body, monkeypatch):
    modules = _fake_modules(
        tmp_path,
        {"labeldp/__init__.py": "", "labeldp/a.py": body, "labeldp/b.py": "x = 1\n", "baselines/c.py": ""},
    )
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    bad, _, _ = _violations(modules)
    assert len(bad) == 1 and bad[0].startswith("labeldp/a.py:"), bad


def test_a_deferral_must_defer_something_heavy(tmp_path, monkeypatch):
    modules = _fake_modules(
        tmp_path,
        {
            "labeldp/__init__.py": "",
            "labeldp/light.py": "import math\n",
            "labeldp/heavy.py": "import numpy\n",
            "baselines/__init__.py": "",
            "baselines/m.py": "def run():\n    from labeldp import heavy\n    from labeldp import light\n",
        },
    )
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    bad, used, _ = _violations(modules)
    assert used == {"baselines/m.py"}
    assert len(bad) == 1 and bad[0].startswith("baselines/m.py:3: import of labeldp.light"), bad


def test_top_level_and_type_checking_imports_are_fine(tmp_path, monkeypatch):
    modules = _fake_modules(
        tmp_path,
        {
            "labeldp/__init__.py": "",
            "labeldp/a.py": (
                "from typing import TYPE_CHECKING\nfrom labeldp import b\nif TYPE_CHECKING:\n    from labeldp.b import x\n"
                "def f():\n    import json\n"
            ),
            "labeldp/b.py": "x = 1\n",
        },
    )
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert _violations(modules)[0] == []
