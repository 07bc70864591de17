"""001 Appendix B's networks (labeldp.models_001): the simplified Inception's parameter count from
its spec, ResNet-18 V2's from He et al.'s pre-activation blocks, output shapes, and BatchNorm state
(training mode updates the running statistics, evaluation uses them)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from labeldp.models import build_model, num_params


def _conv(k, cin, cout):
    """A bias-free k x k convolution followed by BatchNorm (scale and offset per channel)."""
    return k * k * cin * cout + 2 * cout


def test_inception_001_has_the_parameter_count_of_its_spec():
    # Conv(3x3, 96) -> S1 -> S2 -> S3 -> GlobalMaxPool -> Linear(10), on one input channel (001 Appendix B)
    blocks = [(96, 32, 32), (64, 32, 48)]  # (input channels, C1, C2) of S1's blocks
    s2 = [(160, 112, 48), (160, 96, 64), (160, 80, 80), (160, 48, 96)]
    s3 = [(240, 176, 160), (336, 176, 160)]

    def block(cin, c1, c2):
        return _conv(1, cin, c1) + _conv(3, cin, c2)

    expected = (
        _conv(3, 1, 96)
        + sum(block(*b) for b in blocks)
        + _conv(3, 80, 160)
        + sum(block(*b) for b in s2)
        + _conv(3, 144, 240)
        + sum(block(*b) for b in s3)
        + 336 * 10
        + 10
    )
    assert expected == 1_894_058  # the same sum, done by hand
    spec = build_model("inception_001", input_shape=(8, 8, 1), num_classes=10)
    state = jax.eval_shape(spec.init, jax.random.key(0))
    assert set(state) == {"params", "batch_stats"} and spec.has_batch_norm
    assert num_params(state["params"]) == expected
    # running mean and variance of every BatchNorm: one per Conv's output channel
    conv_channels = 96 + 64 + 80 + 160 + 3 * 160 + 144 + 240 + 2 * 336
    assert num_params(state["batch_stats"]) == 2 * conv_channels


def test_resnet18_v2_cifar_has_the_parameter_count_of_a_pre_activation_resnet18_with_the_cifar_stem():
    def block(cin, cout, stride):
        shortcut = cin * cout if (stride != 1 or cin != cout) else 0
        return 2 * cin + 9 * cin * cout + 2 * cout + 9 * cout * cout + shortcut  # BN, conv, BN, conv

    expected = 27 * 64  # one 3x3 stride-1 convolution on RGB, no 7x7 / max pool
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        expected += block(cin, cout, stride) + block(cout, cout, 1)
        cin = cout
    expected += 2 * 512 + 512 * 10 + 10  # final BN, linear classifier
    assert expected == 11_172_170
    spec = build_model("resnet18_v2_cifar", input_shape=(32, 32, 3), num_classes=10)
    state = jax.eval_shape(spec.init, jax.random.key(0))
    assert num_params(state["params"]) == expected
    out = jax.eval_shape(spec.logits, state, jnp.zeros((2, 32, 32, 3)))
    assert out.shape == (2, 10)


def test_inception_001_output_shape_and_stride_two_stages():
    spec = build_model("inception_001", input_shape=(8, 8, 1), num_classes=7)
    state = jax.jit(spec.init)(jax.random.key(0))
    x = jax.random.uniform(jax.random.key(1), (3, 8, 8, 1))
    assert jax.jit(spec.logits)(state, x).shape == (3, 7)
    with pytest.raises(ValueError, match="SAME padding only"):
        build_model("inception_001", input_shape=(8, 8, 1), padding="VALID").init(jax.random.key(0))


def test_batch_norm_training_mode_updates_running_statistics_and_evaluation_uses_them():
    spec = build_model("inception_001", input_shape=(8, 8, 1), num_classes=10)
    state = jax.jit(spec.init)(jax.random.key(0))
    x = jax.random.uniform(jax.random.key(1), (6, 8, 8, 1)) * 3.0 + 1.0
    train = jax.jit(spec.batch_norm_train_logits)
    logits, stats = train(state["params"], state["batch_stats"], x)
    changed = jax.tree_util.tree_map(lambda a, b: bool(jnp.any(a != b)), state["batch_stats"], stats)
    assert all(jax.tree_util.tree_leaves(changed))  # every running mean / variance moved
    updated = {"params": state["params"], "batch_stats": stats}
    assert not np.allclose(spec.logits(state, x), spec.logits(updated, x))  # evaluation reads the statistics
    # evaluation normalises with the running statistics: a row's logits do not depend on its batch
    one = spec.logits(updated, x[:1])
    assert np.allclose(one, spec.logits(updated, x)[:1], atol=1e-5)
    # training mode normalises with the batch's: the same row's logits change with its batch
    train_one, _ = train(state["params"], stats, jnp.concatenate([x[:1], x[:1] * 0.1]))
    assert not np.allclose(train_one[:1], logits[:1], atol=1e-3)
