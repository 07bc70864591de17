"""labeldp.methods.registry.declared: a method's constants read without importing it, always equal to
the imported module's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from labeldp.methods import registry
from tests.helpers import REPO

ATTRS = (
    "NAME",
    "HYPERPARAMETERS",
    "OPTIONAL_HYPERPARAMETERS",
    "DATASET_KINDS",
    "CALIBRATES_WITH_ACCOUNTANT",
    "SAMPLED_BATCH_KEYS",
    "USES_PRIVATE_PRIOR",
)
MISSING = object()


@pytest.mark.parametrize("method", registry.implemented_methods())
def test_declared_equals_the_imported_modules_attribute(method):
    mod = registry.get_method(method)
    for attr in ATTRS:
        assert registry.declared(method, attr, MISSING) == getattr(mod, attr, MISSING), (method, attr)


_BASE = "NAME = {name!r}\nHYPERPARAMETERS = ('learning_rate',)\ndef run(data, spec):\n    raise NotImplementedError\n"
#: Module bodies that give DATASET_KINDS (and KEYS) another value than their literal, or none, at import.
_TRICKY = {
    "computed": "DATASET_KINDS = tuple(['image'])\n",
    "rebound_in_if": "DATASET_KINDS = ('image',)\nif True:\n    DATASET_KINDS = ('tabular',)\n",
    "imported_in_try": "DATASET_KINDS = ('image',)\ntry:\n    from string import ascii_letters as DATASET_KINDS\n"
    "except ImportError:\n    pass\n",
    "global_in_function": "DATASET_KINDS = ('image',)\ndef _f():\n    global DATASET_KINDS\n"
    "    DATASET_KINDS = ('tabular',)\n_f()\n",
    "globals_call": "DATASET_KINDS = ('image',)\nglobals()['DATASET_KINDS'] = ('tabular',)\nglobals()['KEYS'] = 1\n",
    "module_getattr": "DATASET_KINDS = ('image',)\ndef __getattr__(name):\n    return ('tabular',)\n",
    "deleted": "DATASET_KINDS = ('image',)\nKEYS = ('a',)\ndel KEYS\n",
    "changed_in_place": "DATASET_KINDS = ['image']\nDATASET_KINDS.append('tabular')\nKEYS = {}\nKEYS['a'] = 1\n",
    "augmented": "DATASET_KINDS = ('image',)\nDATASET_KINDS += ('tabular',)\n",
    "literal": "DATASET_KINDS = ('image', 'features')\n",
}


@pytest.mark.parametrize("case", sorted(_TRICKY))
def test_declared_is_the_imported_value_whatever_the_module_does(case, tmp_path, monkeypatch):
    """A constant the source could mislead about (rebound, imported, changed in place, deleted, set through
    globals() or a module __getattr__) is read by importing the module; the answer always equals it."""
    pkg = tmp_path / f"mylab_{case}"  # a package per case: Python caches a package's path once imported
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    name = f"toy_{case}"
    (pkg / f"{name}.py").write_text(_BASE.format(name=name) + _TRICKY[case])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.EXTENSION_ENV, pkg.name)
    mod = registry.get_method(name)
    for attr in ("DATASET_KINDS", "KEYS", "HYPERPARAMETERS", "SAMPLED_BATCH_KEYS"):
        assert registry.declared(name, attr, MISSING) == getattr(mod, attr, MISSING), attr
    if not hasattr(mod, "KEYS"):
        with pytest.raises(AttributeError):
            registry.declared(name, "KEYS")
    with pytest.raises(KeyError, match="not implemented"):
        registry.declared("no_such_method", "NAME")


def test_a_read_constant_is_a_copy_and_an_edited_file_is_read_again(tmp_path, monkeypatch):
    pkg = tmp_path / "mylab_methods2"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    path = pkg / "toy_edit.py"
    path.write_text(_BASE.format(name="toy_edit") + "DATASET_KINDS = ['image']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.EXTENSION_ENV, "mylab_methods2")
    registry.declared("toy_edit", "DATASET_KINDS").append("changed by a caller")
    assert registry.declared("toy_edit", "DATASET_KINDS") == ["image"]
    path.write_text(_BASE.format(name="toy_edit") + "DATASET_KINDS = ['image', 'tabular', 'features']\n")
    assert registry.declared("toy_edit", "DATASET_KINDS") == ["image", "tabular", "features"]


def test_a_table_job_plans_and_renders_without_importing_jax():
    """The table jobs (labeldp.report.build) check cells and plan their runs from the methods' declared
    constants: no JAX, Flax or torch import (about 2 s of each of the smoke's 54 table and figure jobs)."""
    code = (
        "import sys\n"
        "from labeldp import plan\n"
        "from tests.helpers import repo_config\n"
        "import labeldp.report.build\n"
        "cfg = repo_config('smoke.yaml')\n"
        "runs = plan.runs_by_table(cfg)\n"
        "assert sum(map(len, runs.values())) > 100\n"
        "heavy = sorted(m for m in ('jax', 'flax', 'torch') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
