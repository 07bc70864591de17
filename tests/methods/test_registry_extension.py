"""Adding a method is ONE new module (issue 30): a method in a package of the user's own, named in
``LABELDP_METHOD_PACKAGES`` (the documented way, :mod:`labeldp.methods.registry`), is found by the
registry, planned into a table's column, run through the runner that writes records, and appears in
the table built from those records, with nothing in this repository edited; the same module runs on
images and, at the user level, on the ads stand-in, because it calls the run's task (labeldp.tasks)."""

from __future__ import annotations

import math
import textwrap

import pytest

from labeldp import plan, records, runner
from labeldp.methods import registry
from labeldp.report import tables
from tests.helpers import (
    assert_label_event_reaccounts,
    fake_mnist_images,
    prepared_attribution,
    repo_config,
    user_package,
)

TOY_METHOD = textwrap.dedent(
    '''
    """A toy label randomizer: K-ary RR at eps (eps / k per label of a user), then the task's training."""

    from labeldp import tasks
    from labeldp.methods.base import MethodResult, RunSpec, label_dp_outcome

    NAME = "toy_rr"
    HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
    DATASET_KINDS = ("image", "tabular")


    def run(data, spec: RunSpec) -> MethodResult:
        from labeldp.accounting.label_events import per_user_label_event, randomized_response_event
        from labeldp.mechanisms.user_level import user_randomized_response

        task = tasks.task_for(data, spec)
        tasks.check_task_options(task, spec, (), NAME)
        units = task.training_labels()
        eps, k = float(spec.epsilon), units.labels_per_unit
        noisy = user_randomized_response(
            units.labels, units.unit_ids, epsilon=eps, k=k, num_classes=units.num_classes, rng=task.label_rng(99)
        )
        trained = task.train_on_targets(noisy, desc=NAME)
        event = per_user_label_event(randomized_response_event(epsilon=eps / k, num_classes=units.num_classes), labels_per_user=k)
        privacy = label_dp_outcome(epsilon=eps, mechanism="toy RR", privacy_unit=units.privacy_unit, event=event)
        return trained.result(privacy, details={"noisy_labels": int(noisy.size)})
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


def test_the_same_module_runs_on_the_ads_stand_in_at_the_user_level_and_fills_table7(toy_package, tmp_path):
    cfg = repo_config(results_dir=str(tmp_path / "results"))
    cfg["seeds"] = [0]
    cfg["grids"]["full"]["table7"] = {"learning_rate": [0.01], "epochs": [1], "batch_size": [64]}
    cfg["variants"]["toy_rr"] = {"k2": {"examples_per_user": 2}}
    table = cfg["tables"]["table7"]
    table.update(epsilons=[1.0], nonprivate=False, claims=[])
    table["columns"] = [{"id": "toy_rr_k2", "label": "Toy RR k=2", "method": "toy_rr", "variant": "k2", "ref_k": 2}]
    runs = plan.cell_runs(cfg, "table7", plan.columns(table)[0], 1.0)
    assert len(runs) == 1 and runs[0].spec.options == {"examples_per_user": 2}
    data = prepared_attribution(tmp_path / "attribution")
    records.write_record(runs[0].record_path, runner.run_and_record(runs[0].spec, data))
    rec = records.read_record(runs[0].record_path)
    assert rec["privacy"]["privacy_unit"] == "user" and rec["details"]["examples_per_user"] == 2
    assert_label_event_reaccounts(rec["privacy"])  # two binary RR events at eps / 2 compose to eps
    cell = tables.build_table(cfg, "table7").cells[("toy_rr_k2", 1.0)]
    assert 0.0 <= cell.mean <= 1.0 and cell.mean == rec["metrics"]["test_auc"]


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
