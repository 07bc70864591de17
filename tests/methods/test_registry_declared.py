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


def test_a_computed_or_rebound_constant_is_read_by_importing(tmp_path, monkeypatch):
    pkg = tmp_path / "mylab_methods"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "toy.py").write_text(
        "NAME = 'toy'\n"
        "HYPERPARAMETERS = tuple(['learning_rate'])\n"  # computed
        "DATASET_KINDS = ('image',)\n"
        "if True:\n    DATASET_KINDS = ('tabular',)\n"  # rebound: the literal is not the value
        "def run(data, spec):\n    raise NotImplementedError\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.EXTENSION_ENV, "mylab_methods")
    assert registry.declared("toy", "HYPERPARAMETERS") == ("learning_rate",)
    assert registry.declared("toy", "DATASET_KINDS") == ("tabular",)
    assert registry.declared("toy", "SAMPLED_BATCH_KEYS", ()) == ()
    with pytest.raises(AttributeError):
        registry.declared("toy", "SAMPLED_BATCH_KEYS")
    with pytest.raises(KeyError, match="not implemented"):
        registry.declared("no_such_method", "NAME")


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
