"""The plan side of supervised pre-training (labeldp.pretraining): entries, ids, paths and the checks."""

from __future__ import annotations

import copy
import shlex

import pytest

from labeldp import pretraining
from labeldp.config import validate_config
from labeldp.plan import ConfigError
from tests.helpers import REPO, repo_config

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def _entry(**kw):
    return {"dataset": "cifar100", "model": "cifar_cnn", "learning_rate": 0.2, "epochs": 2, "batch_size": 256, **kw}


def test_the_id_changes_with_every_field_and_with_the_data_but_not_with_key_order():
    cfg = repo_config()
    cfg["pretraining"] = {"p": _entry(momentum=0.9)}
    base = pretraining.pretraining_id(cfg, pretraining.pretraining_specs(cfg)["p"])
    reordered = copy.deepcopy(cfg)
    reordered["pretraining"]["p"] = dict(reversed(list(_entry(momentum=0.9).items())))
    assert pretraining.pretraining_id(reordered, pretraining.pretraining_specs(reordered)["p"]) == base
    for change in ({"epochs": 3}, {"momentum": 0.5}, {"seed": 1}, {"model": "mnist_cnn"}):
        other = copy.deepcopy(cfg)
        other["pretraining"]["p"].update(change)
        assert pretraining.pretraining_id(other, pretraining.pretraining_specs(other)["p"]) != base, change
    smaller = copy.deepcopy(cfg)
    smaller["datasets"]["cifar100"] = {"subset": 512, "standin": True}
    assert pretraining.pretraining_id(smaller, pretraining.pretraining_specs(smaller)["p"]) != base
    assert pretraining.state_path(cfg, "p") == f"{cfg['results_dir']}/pretrained/p/{base}/state.msgpack"


def test_inputs_are_the_states_the_runs_name_once_each():
    cfg = repo_config()
    cfg["pretraining"] = {"a": _entry(), "b": _entry(epochs=3)}
    got = pretraining.inputs_of_options(cfg, [{"init_from": "b"}, {}, {"init_from": "b", "l2": 1e-4}])
    assert got == {"b": pretraining.state_path(cfg, "b")}
    assert pretraining.inputs_of_options(cfg, [{}, {"l2": 1e-4}]) == {}


@pytest.mark.parametrize(
    "options, dataset, message",
    [
        ({"init_from": "nope"}, "cifar10", "'nope' is not an entry of pretraining"),
        ({"init_from": "p", "model": "resnet18_v2_cifar"}, "cifar10", "trains 'cifar_cnn' but runs"),
        ({"init_from": "p"}, "mnist", "trains 'cifar_cnn' but runs on mnist"),
        ({"init_from": "own"}, "cifar10", r"cifar10's own \(private\) ones"),
        # a split view holds the same labels: MNIST's first two classes are MNIST's labels
        ({"init_from": "mnist_all"}, "mnist_k2", r"mnist_k2's own \(private\) ones \(mnist's\)"),
    ],
)
def test_a_variant_starting_from_a_pretraining_it_cannot_use_is_refused_naming_the_key(options, dataset, message):
    cfg = repo_config()
    cfg["pretraining"] = {"p": _entry(), "own": _entry(dataset="cifar10"), "mnist_all": _entry(dataset="mnist")}
    cfg["pretraining"]["mnist_all"]["model"] = "mnist_cnn"
    with pytest.raises(ConfigError, match=message) as err:
        pretraining.check_init_options(cfg, where="variants.lp_mst.x", options=options, dataset=dataset)
    assert "variants.lp_mst.x.init_from" in str(err.value)
    pretraining.check_init_options(cfg, where="v", options={"init_from": "p"}, dataset="cifar10")  # fits


def test_the_config_refuses_an_incomplete_entry_and_an_unknown_variant_target_before_any_job():
    cfg = repo_config()
    cfg["pretraining"]["cifar100_cifar_cnn"] = {k: v for k, v in _entry().items() if k != "epochs"}
    with pytest.raises(ConfigError, match="epochs"):
        validate_config(cfg, SCHEMA)
    cfg = repo_config()
    cfg["pretraining"]["cifar100_cifar_cnn"]["dataset"] = "cifar1000"
    with pytest.raises(ConfigError, match="cifar1000"):
        validate_config(cfg, SCHEMA)
    cfg = repo_config()
    del cfg["pretraining"]["cifar100_cifar_cnn"]
    with pytest.raises(ConfigError, match=r"variants\.lp_mst\.recipe001_cifar_t1_c100\.init_from"):
        validate_config(cfg, SCHEMA)


def test_the_runners_arguments_round_trip_and_bad_ones_are_refused():
    paths = {"a": "results/pretrained/a/0123/state.msgpack", "b": "x y/state.msgpack"}
    args = pretraining.pretrained_args(paths)
    values = [v for i, v in enumerate(shlex.split(args)) if i % 2 == 1]
    assert pretraining.parse_pretrained_args(values) == paths
    with pytest.raises(ValueError, match="NAME=PATH"):
        pretraining.parse_pretrained_args(["a"])
    with pytest.raises(ValueError, match="twice"):
        pretraining.parse_pretrained_args(["a=1", "a=2"])


def test_the_variants_network_is_the_one_its_runs_build():
    assert pretraining.variant_model({}, "mnist_k2") == "mnist_cnn"  # a split view trains its base's model
    assert pretraining.variant_model({}, "cifar10_simclr") == "linear"  # a features dataset: the linear head
    assert pretraining.variant_model({"model": "resnet18_v2_cifar"}, "cifar10") == "resnet18_v2_cifar"
    assert pretraining.variant_model({}, "cifar10") == "cifar_cnn"


def test_a_stand_in_pretraining_for_a_run_on_real_data_is_refused():
    cfg = repo_config()
    cfg["pretraining"] = {"p": _entry()}
    cfg["datasets"]["cifar10"] = {"subset": None, "standin": False}
    cfg["datasets"]["cifar100"] = {"subset": 512, "standin": True}
    with pytest.raises(ConfigError, match=r"synthetic stand-in of cifar100 while cifar10 is real.*standin: false"):
        pretraining.check_init_options(cfg, where="v", options={"init_from": "p"}, dataset="cifar10")
    cfg["datasets"]["cifar10"]["standin"] = True  # both stand-ins: the outputs say so
    pretraining.check_init_options(cfg, where="v", options={"init_from": "p"}, dataset="cifar10")
