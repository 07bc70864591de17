"""Starting a run from a pre-trained network (labeldp.pretrained_init, labeldp.pretrain_supervised): every
parameter but the classifier's transfers, the classifier is the run's own fresh initialisation (001 Appendix B)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from flax import traverse_util

from baselines import common, lp_mst
from labeldp import pretrain_supervised
from labeldp.data.prepare import PreparedData
from labeldp.methods.base import RunSpec
from labeldp.methods.common import train_and_evaluate
from labeldp.models import build_model
from labeldp.pretrained_init import attach, classifier_keys, initial_state, load_pretrained, transfer_state
from labeldp.pretraining import PretrainingSpec
from labeldp.training import initial_params


def _images(n, k, seed, name):
    rng = np.random.default_rng(seed)
    return PreparedData(
        x_train=rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
        y_train=rng.integers(0, k, n),
        x_test=rng.integers(0, 256, (32, 32, 32, 3), dtype=np.uint8),
        y_test=rng.integers(0, k, 32),
        num_classes=k,
        name=name,
        source="synthetic_standin",
        subset=n,
    )


def _flat(tree):
    return {k: np.asarray(v) for k, v in traverse_util.flatten_dict(tree).items()}


def test_the_classifier_is_exactly_the_leaves_whose_shape_depends_on_the_number_of_classes():
    for name, shape in (("cifar_cnn", (32, 32, 3)), ("mnist_cnn", (28, 28, 1))):
        model = build_model(name, input_shape=shape, num_classes=10)
        head = classifier_keys(model)
        tree = jax.eval_shape(model.init, jax.random.key(0))
        shapes = {k: v.shape for k, v in traverse_util.flatten_dict(tree).items()}
        assert len(head) == 2 and all(shapes[k][-1] == 10 for k in head), (name, head)
        assert {k[-1] for k in head} == {"kernel", "bias"} and len({k[:-1] for k in head}) == 1


def test_batch_norm_networks_transfer_their_running_statistics_and_reinitialise_only_the_classifier():
    for name in ("resnet18_v2_cifar", "inception_001"):
        head = classifier_keys(build_model(name, input_shape=(8, 8, 3), num_classes=10))
        assert len(head) == 2 and all(k[0] == "params" for k in head), (name, head)
    model = build_model("inception_001", input_shape=(8, 8, 1), num_classes=10)
    source = build_model("inception_001", input_shape=(8, 8, 1), num_classes=100)
    init = jax.jit(lambda spec, seed: spec.init(jax.random.key(seed)), static_argnums=0)  # one program each
    pre, fresh = init(source, 1), init(model, 2)
    assert set(pre) == {"params", "batch_stats"}
    pre = jax.tree_util.tree_map(lambda a: a + 1.0, pre)  # running statistics unlike a fresh network's
    got = _flat(transfer_state(model, pre, fresh))
    head = classifier_keys(model)
    assert any(k[0] == "batch_stats" for k in got)
    for key, leaf in got.items():
        np.testing.assert_array_equal(leaf, _flat(fresh)[key] if key in head else _flat(pre)[key])


def test_transfer_keeps_every_pretrained_leaf_but_the_classifier_and_refuses_another_network():
    model = build_model("cifar_cnn", input_shape=(32, 32, 3), num_classes=10)
    source = build_model("cifar_cnn", input_shape=(32, 32, 3), num_classes=100)
    pre, fresh = _flat(initial_params(source, 1)), _flat(initial_params(model, 2))
    got = _flat(transfer_state(model, initial_params(source, 1), initial_params(model, 2)))
    head = classifier_keys(model)
    assert set(got) == set(fresh)
    for key, leaf in got.items():
        np.testing.assert_array_equal(leaf, fresh[key] if key in head else pre[key])
    other = build_model("mnist_cnn", input_shape=(28, 28, 1), num_classes=100)
    with pytest.raises(ValueError, match="not a 'cifar_cnn' network|has shape"):
        transfer_state(model, initial_params(other, 1), initial_params(model, 2))


def test_pretraining_then_lp_1st_starts_from_the_pretrained_network_with_a_fresh_classifier(tmp_path):
    """End to end: pre-train on a 100-class stand-in, write, load, attach; LP-1ST with init_from at a step
    size of 1e-9 ends where it started: the pre-trained features, its own seeded classifier."""
    spec = PretrainingSpec(name="p", dataset="cifar100", model="cifar_cnn", learning_rate=0.1, epochs=1, batch_size=64)
    state, record = pretrain_supervised.pretrain(spec, _images(128, 100, 0, "cifar100"))
    pretrain_supervised.write(tmp_path, state, record)
    assert record["dataset"]["synthetic_standin"] and record["metrics"]["steps"] == 2
    loaded = load_pretrained("p", tmp_path / "state.msgpack")
    for key, leaf in _flat(state).items():
        np.testing.assert_array_equal(_flat(loaded.state)[key], leaf)

    data = attach(_images(96, 10, 1, "cifar10"), {"p": str(tmp_path / "state.msgpack")})
    run = RunSpec(
        dataset="cifar10",
        method="lp_mst",
        variant="c100",
        epsilon=2.0,
        delta=0.0,
        seed=3,
        hparams={"learning_rate": 1e-9, "epochs": 1, "batch_size": 32},
        options={"stages": 1, "init_from": "p"},
    )
    staged = lp_mst.train_multi_stage(data, run, name="lp_mst", default_stages=1, options=("stages", "init_from"))
    model = build_model("cifar_cnn", input_shape=(32, 32, 3), num_classes=10)
    head = classifier_keys(model)
    own = _flat(initial_params(model, common.training_seed(3, common.STREAM_LP_2ST, 1)))
    for key, leaf in _flat(staged.results[0].params).items():
        np.testing.assert_allclose(leaf, own[key] if key in head else _flat(state)[key], atol=1e-6)
    assert staged.init_from["state_sha256"] == loaded.sha256 and staged.init_from["dataset"]["name"] == "cifar100"

    # without the option: a fresh network, nothing said; with it but nothing attached: refused, naming the fix
    assert initial_state(model, data, dataclasses.replace(run, options={"stages": 1}), seed=0) == (None, None)
    with pytest.raises(ValueError, match="--pretrained p="):
        initial_state(model, _images(8, 10, 1, "cifar10"), run, seed=0)
    own = attach(_images(8, 10, 1, "cifar100"), {"p": str(tmp_path / "state.msgpack")})
    with pytest.raises(ValueError, match="private labels of this run on cifar100"):
        initial_state(build_model("cifar_cnn", input_shape=(32, 32, 3), num_classes=100), own, run, seed=0)
    with pytest.raises(ValueError, match="would not say so"):  # a record must say where its model started
        train_and_evaluate(model, data, np.zeros((96, 10), np.float32), run, desc="t")
    with pytest.raises(FileNotFoundError, match="snakemake"):
        load_pretrained("q", tmp_path / "missing" / "state.msgpack")
    assert jax.tree_util.tree_structure(loaded.state) == jax.tree_util.tree_structure(jax.device_get(state))
