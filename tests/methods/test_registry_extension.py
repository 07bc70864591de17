"""Adding a method is ONE new module (issue 30): a method in a package of the user's own, named in
``LABELDP_METHOD_PACKAGES`` (the documented way, :mod:`labeldp.methods.registry`), is found by the
registry, planned into a table's column, run through the runner that writes records, and appears in
the table built from those records, with nothing in this repository edited."""

from __future__ import annotations

import math
import textwrap

import pytest

from labeldp import plan, records, runner
from labeldp.methods import registry
from labeldp.report import tables
from tests.helpers import assert_label_event_reaccounts, fake_mnist_images, repo_config, user_package

TOY_METHOD = textwrap.dedent(
    '''
    """A toy label randomizer: K-ary RR at eps, then plain training (a method of the user's own)."""

    from labeldp.methods.base import MethodResult, RunSpec

    NAME = "toy_rr"
    HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
    DATASET_KINDS = ("image",)


    def run(data, spec: RunSpec) -> MethodResult:
        import numpy as np

        from baselines.common import pure_label_dp
        from labeldp.accounting.label_events import randomized_response_event
        from labeldp.mechanisms.classification import randomized_response
        from labeldp.methods.common import build_model_for, train_and_evaluate
        from labeldp.training import one_hot

        eps = float(spec.epsilon)
        noisy = randomized_response(
            data.y_train, num_classes=data.num_classes, epsilon=eps, rng=np.random.default_rng([spec.seed, 99])
        )
        metrics, timings, _ = train_and_evaluate(
            build_model_for(data), data, one_hot(noisy, data.num_classes), spec, desc=NAME
        )
        event = randomized_response_event(epsilon=eps, num_classes=data.num_classes)
        return MethodResult(
            metrics=metrics,
            privacy=pure_label_dp(eps, "toy RR", event=event),
            timings=timings,
            details={"noisy_labels": int(noisy.size)},
        )
    '''
)


def _fake_images():
    return fake_mnist_images(source="synthetic_standin")


@pytest.fixture
def toy_package(tmp_path, monkeypatch):
    pkg = user_package(tmp_path, monkeypatch, "toylab_methods", {"toy_rr": TOY_METHOD})
    monkeypatch.setenv(registry.EXTENSION_ENV, "toylab_methods")
    return pkg


def test_a_method_is_one_module_of_an_extension_package(toy_package, tmp_path):
    assert registry.is_implemented("toy_rr") and "toy_rr" in registry.implemented_methods()
    assert registry.get_method("toy_rr").NAME == "toy_rr"
    cfg = repo_config(results_dir=str(tmp_path / "results"))
    cfg["seeds"] = [0]
    cfg["grids"]["full"]["table5a"] = {"learning_rate": [0.1], "epochs": [1], "batch_size": [64]}
    cfg["tables"]["table5_mnist"]["epsilons"] = [1.0]
    cfg["tables"]["table5_mnist"]["columns"] = [{"id": "toy_rr", "label": "Toy RR", "method": "toy_rr"}]
    col = plan.columns(cfg["tables"]["table5_mnist"])[0]
    runs = plan.cell_runs(cfg, "table5_mnist", col, 1.0)
    assert len(runs) == 1 and runs[0].spec.method == "toy_rr"
    data = _fake_images()
    for run in runs:
        records.write_record(run.record_path, runner.run_and_record(run.spec, data))
    rec = records.read_record(runs[0].record_path)
    assert_label_event_reaccounts(rec["privacy"])
    cell = tables.build_table(cfg, "table5_mnist").cells[("toy_rr", 1.0)]
    assert math.isfinite(cell.mean) and cell.mean == rec["metrics"]["test_accuracy_pct"]


def test_without_the_variable_the_method_is_unknown(toy_package, monkeypatch):
    monkeypatch.delenv(registry.EXTENSION_ENV)
    assert not registry.is_implemented("toy_rr")
    with pytest.raises(KeyError, match="not implemented"):
        registry.get_method("toy_rr")


def test_a_bad_package_name_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setenv(registry.EXTENSION_ENV, "good.pkg:not a package")
    with pytest.raises(ValueError, match="LABELDP_METHOD_PACKAGES must name importable packages"):
        registry.packages()
    monkeypatch.setenv(registry.EXTENSION_ENV, "not_installed_pkg")
    assert not registry.is_implemented("anything")  # an absent package is skipped, not an error
