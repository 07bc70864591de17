"""Features datasets <image dataset>_simclr (labeldp/feature_datasets.py) in the planner."""

import copy

import pytest

from labeldp import feature_datasets as fd
from labeldp import plan
from labeldp.config_semantics import validate_semantics
from labeldp.plan import ConfigError
from tests.helpers import repo_config


def test_every_image_dataset_has_a_features_dataset_and_nothing_else_does():
    for name, kind in plan.DATASET_KINDS.items():
        feats = name + fd.FEATURES_SUFFIX
        assert plan.dataset_kind(feats) == ("features" if kind == "image" else None)
        assert fd.features_base(feats, plan.DATASET_KINDS) == (name if kind == "image" else None)
    assert plan.dataset_kind("cifar10_simclr") == "features"
    assert plan.dataset_kind("nonexistent_simclr") is None
    assert fd.features_base("cifar10", plan.DATASET_KINDS) is None


def test_features_follow_the_base_datasets_options_and_name_the_encoder():
    cfg = repo_config()
    cfg["datasets"]["fashion_mnist"] = {"subset": 2000, "standin": False}
    cfg["datasets"]["cifar10"] = {"subset": 512, "standin": True}
    sid = fd.ssl_id(cfg)
    assert (
        plan.prepared_path(cfg, "fashion_mnist_simclr")
        == f"data/prepared/fashion_mnist_simclr-official-n2000-{sid}.npz"
    )
    assert plan.prepared_path(cfg, "cifar10_simclr") == f"data/prepared/cifar10_simclr-standin-n512-{sid}.npz"
    assert plan.data_source(cfg, "cifar10_simclr") == "standin"
    assert fd.encoder_dir(cfg, "cifar10", "standin-n512") == f"results/ssl/cifar10-standin-n512/{sid}"
    assert plan.dataset_runnable(cfg, "cifar10_simclr") == (True, "")


def test_ssl_id_changes_with_every_field_and_defaults_are_000_d2():
    cfg = repo_config()
    assert fd.ssl_config({}) == fd.DEFAULT_SSL
    assert fd.DEFAULT_SSL["epochs"] == 1000 and fd.DEFAULT_SSL["batch_size"] == 1024
    assert fd.DEFAULT_SSL["learning_rate"] == 1e-3 and fd.DEFAULT_SSL["weight_decay"] == 1e-6
    base = fd.ssl_id(cfg)
    seen = {base}
    for key, value in [("width", 16), ("epochs", 7), ("temperature", 0.2), ("seed", 3), ("weight_decay", 0.0)]:
        other = copy.deepcopy(cfg)
        other.setdefault("ssl", {})[key] = value
        seen.add(fd.ssl_id(other))
    assert len(seen) == 6  # a different encoder never reuses a features file
    assert base.startswith("simclr-w64-ep1000-bs1024-s0-")


def test_features_datasets_cannot_be_configured_apart_from_their_base():
    cfg = repo_config()
    cfg["datasets"]["cifar10_simclr"] = {"subset": 10, "standin": True}
    with pytest.raises(ConfigError, match="follows datasets.cifar10"):
        validate_semantics(cfg)


def test_table6_plans_rr_with_prior_with_table9_and_quotes_pate_fm():
    cfg = repo_config()
    cols = {c.id: c for c in plan.columns(cfg["tables"]["table6"])}
    ok, why = plan.cell_status(cfg, "table6", cols["pate_fm"])
    assert not ok and "quoted from Malek et al. (2021)" in why
    runs = plan.cell_runs(cfg, "table6", cols["rr_with_prior"], 0.18)
    assert runs and all(dict(r.spec.options)["prior_epsilon"][3] == [0.18, 0.05] for r in runs)
    assert {r.spec.hparams["num_clusters"] for r in runs} == {50, 100}
    assert all(r.prepared_path.startswith("data/prepared/cifar10_simclr-official-full-simclr-") for r in runs)
    # every column of Table 6 except the quoted one is runnable on features
    for cid, col in cols.items():
        assert plan.cell_status(cfg, "table6", col)[0] == (cid != "pate_fm"), cid
