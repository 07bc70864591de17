"""Adding a dataset is ONE new module (issue 30): a data source of the user's own, named in
``LABELDP_DATA_SOURCES`` (the documented way, :mod:`labeldp.data.registry`), is a dataset for the
registry and the planner; ``prepare`` parses its raw files (written here by its stand-in writer, in its
own format) with the same checks as this package's image datasets; an existing method (RR) trains on it
and its cell appears in a table, with nothing in this repository edited."""

from __future__ import annotations

import math
import textwrap

import pytest

from labeldp import plan, records, runner
from labeldp.data import prepare
from labeldp.data import registry
from labeldp.report import tables
from tests.helpers import repo_config, user_package

TOY_SOURCE = textwrap.dedent(
    '''
    """Toy blobs: 28x28 grey images whose class is where a bright square sits (a source of the user's own)."""

    from pathlib import Path

    import numpy as np

    from labeldp.data.rawformats import write_standin_marker
    from labeldp.data.registry import DatasetSpec, RemoteFile

    SPEC = DatasetSpec(
        name="toy_blobs",
        title="Toy blobs",
        files=(RemoteFile(filename="blobs.npz", url="https://example.org/toy_blobs/blobs.npz"),),
        kind="image",
        model="mnist_cnn",
        num_classes=3,
        input_shape=(28, 28, 1),
        homepage="https://example.org/toy_blobs",
        raw_format="toy_blobs_npz",
        standin_allowed=True,
    )


    def read_raw(paths):
        with np.load(paths["blobs.npz"]) as z:
            return z["x_train"], z["y_train"], z["x_test"], z["y_test"]


    def _images(labels, rng):
        x = rng.integers(0, 40, (labels.size, 28, 28, 1)).astype(np.uint8)
        for i, c in enumerate(labels):
            x[i, 2 + 8 * c : 8 + 8 * c, 10:16, 0] = 250
        return x


    def write_standin(raw_dir, *, seed=0, n_train=240, n_test=90):
        raw_dir = Path(raw_dir)
        write_standin_marker(raw_dir, dataset="toy_blobs", seed=seed, n_train=n_train, n_test=n_test)
        rng = np.random.default_rng(seed)
        y_tr, y_te = rng.integers(0, 3, n_train), rng.integers(0, 3, n_test)
        np.savez(raw_dir / "blobs.npz", x_train=_images(y_tr, rng), y_train=y_tr, x_test=_images(y_te, rng), y_test=y_te)
    '''
)


@pytest.fixture
def toy_source(tmp_path, monkeypatch):
    user_package(tmp_path, monkeypatch, "toylab_data", {"toy_blobs": TOY_SOURCE})
    monkeypatch.setenv(registry.SOURCES_ENV, "toylab_data.toy_blobs")
    return registry.source_module("toy_blobs")


def test_a_dataset_is_one_module_of_the_users_own(toy_source, tmp_path):
    from labeldp.data_layout import DATASET_KINDS

    assert registry.get_spec("toy_blobs").num_classes == 3 and "toy_blobs" in registry.dataset_names()
    assert DATASET_KINDS["toy_blobs"] == "image"
    cfg = repo_config(results_dir=str(tmp_path / "results"), data_dir=str(tmp_path / "data"))
    cfg["datasets"]["toy_blobs"] = {"subset": None, "standin": True}
    cfg["seeds"] = [0]
    cfg["grids"]["full"]["table5a"] = {"learning_rate": [0.1], "epochs": [2], "batch_size": [32]}
    table = cfg["tables"]["table5_mnist"]
    table.update(dataset="toy_blobs", epsilons=[4.0], columns=[{"id": "rr", "label": "RR", "method": "rr"}])
    col = plan.columns(table)[0]
    runs = plan.cell_runs(cfg, "table5_mnist", col, 4.0)
    assert len(runs) == 1 and runs[0].spec.dataset == "toy_blobs"
    raw = tmp_path / "data" / "standin" / "toy_blobs"
    toy_source.write_standin(raw)
    assert prepare.main(["toy_blobs", "--raw-dir", str(raw), "--out", runs[0].prepared_path]) == 0
    data = prepare.load_prepared(runs[0].prepared_path)
    assert (data.name, data.num_classes, data.is_synthetic, data.x_train.shape) == (
        "toy_blobs",
        3,
        True,
        (240, 28, 28, 1),
    )
    records.write_record(runs[0].record_path, runner.run_and_record(runs[0].spec, data))
    rec = records.read_record(runs[0].record_path)
    assert rec["dataset"]["name"] == "toy_blobs" and rec["privacy"]["event"]["num_buckets"] == 3
    cell = tables.build_table(cfg, "table5_mnist").cells[("rr", 4.0)]
    assert math.isfinite(cell.mean) and cell.mean == rec["metrics"]["test_accuracy_pct"]


def test_a_source_that_breaks_the_contract_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "nospec.py").write_text("X = 1\n")
    (tmp_path / "clash.py").write_text(
        "from labeldp.data.registry import get_spec\nimport dataclasses\nSPEC = dataclasses.replace(get_spec('mnist'))\n"
    )
    for value, match in (
        ("nospec", "must define SPEC"),
        ("clash", "already exists"),
        ("not_a_module_anywhere", "cannot be imported"),
        ("bad name", "importable modules"),
    ):
        monkeypatch.setenv(registry.SOURCES_ENV, value)
        with pytest.raises(ValueError, match=match):
            registry.extension_sources()
    monkeypatch.delenv(registry.SOURCES_ENV)
    assert (
        registry.source_module("mnist").__name__ == "labeldp.data.sources.mnist"
        and "toy_blobs" not in registry.DATASETS
    )


def test_the_shipped_datasets_are_the_modules_of_the_sources_package():
    """Every shipped dataset is one module of labeldp.data.sources implementing the source protocol."""
    import pkgutil

    from labeldp.data import sources

    modules = {info.name for info in pkgutil.iter_modules(sources.__path__)}
    found = registry.builtin_sources()
    assert {m.__name__.rsplit(".", 1)[1] for m in found.values()} == modules
    for name, module in found.items():
        spec = module.SPEC
        assert spec.name == name and registry.DATASETS[name] is spec
        reader = "read_raw" if spec.kind == "image" else "prepare_dataset"
        assert callable(getattr(module, reader)), (name, reader)
        assert callable(getattr(module, "write_standin", None)) or not spec.standin_allowed, name
