"""000 Table 10(a)'s CNN with PyTorch's defaults (labeldp.models_torch_defaults): padding 0, PyTorch's default
initialisation, standardised inputs. Properties, not snapshots."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from labeldp.dpsgd.tape import Tape
from labeldp.models import build_model, num_params
from labeldp.models_torch_defaults import MNIST_MEAN, MNIST_STD, standardise_mnist, torch_default_uniform

NAME = "mnist_cnn_torch_defaults"

# fan-in of each layer on 28x28x1 inputs with padding 0: 28 -> conv 26 -> pool 13 -> conv 11 -> pool 5 (floor)
FAN_IN = {"Conv_0": 1 * 3 * 3, "Conv_1": 16 * 3 * 3, "Dense_0": 5 * 5 * 16, "Dense_1": 16}


@pytest.fixture(scope="module")
def spec():
    return build_model(NAME, input_shape=(28, 28, 1), num_classes=10)


@pytest.fixture(scope="module")
def params(spec):
    return spec.init(jax.random.key(0))


def test_parameter_count_is_the_valid_padding_count(spec, params):
    # Conv_0: 3*3*1*16 + 16 = 160; Conv_1: 3*3*16*16 + 16 = 2,320; Dense_0: (5*5*16)*16 + 16 = 6,416;
    # Dense_1: 16*10 + 10 = 170; total 160 + 2,320 + 6,416 + 170 = 9,066 (SAME padding: 15,210)
    assert num_params(params) == 160 + 2_320 + 6_416 + 170 == 9_066
    assert {k: v["kernel"].shape[:-1] for k, v in params.items()} == {
        "Conv_0": (3, 3, 1),
        "Conv_1": (3, 3, 16),
        "Dense_0": (400,),
        "Dense_1": (16,),
    }
    assert int(np.prod(params["Dense_0"]["kernel"].shape[:-1])) == FAN_IN["Dense_0"]
    assert spec.logits(params, jnp.zeros((3, 28, 28, 1))).shape == (3, 10)
    assert not spec.has_batch_norm and not spec.has_dropout


def test_every_weight_and_bias_is_uniform_within_the_fan_in_bound(params):
    for layer, fan_in in FAN_IN.items():
        bound = 1.0 / math.sqrt(fan_in)
        for part in ("kernel", "bias"):
            w = np.asarray(params[layer][part])
            assert np.all(np.abs(w) <= bound), (layer, part)
        # the weights fill the interval (not a narrower law, e.g. Flax's LeCun normal truncated by chance)
        assert np.max(np.abs(np.asarray(params[layer]["kernel"]))) > 0.8 * bound, layer
    # the largest layer: 6,400 weights, std of U(-b, b) = b / sqrt(3) (sampling error of the std about 0.6%)
    big = np.asarray(params["Dense_0"]["kernel"]).ravel()
    bound = 1.0 / math.sqrt(FAN_IN["Dense_0"])
    assert big.size == 6_400
    assert abs(big.std() / (bound / math.sqrt(3.0)) - 1.0) < 0.05
    assert abs(big.mean()) < 0.05 * bound
    # biases are not zero (PyTorch's default, unlike Flax's)
    assert np.all(np.asarray(params["Conv_1"]["bias"]) != 0.0)


def test_the_initialiser_is_uniform_on_the_fan_in_interval():
    w = np.asarray(torch_default_uniform(fan_in=25)(jax.random.key(1), (20_000,)))
    assert w.min() >= -0.2 and w.max() <= 0.2 and w.min() < -0.19 and w.max() > 0.19
    assert abs(w.std() - 0.2 / math.sqrt(3.0)) < 0.003
    with pytest.raises(ValueError, match="fan_in"):
        torch_default_uniform(fan_in=0)


def test_forward_pass_standardises_its_inputs(spec, params):
    """An image of the mean pixel 0.1307 is all zeros after standardisation: the first convolution then
    outputs its bias alone, so the logits are those of the rest of the network on relu(bias) maps."""
    np.testing.assert_allclose(float(standardise_mnist(jnp.float32(MNIST_MEAN))), 0.0, atol=1e-7)
    np.testing.assert_allclose(float(standardise_mnist(jnp.float32(MNIST_MEAN + MNIST_STD))), 1.0, atol=1e-6)
    x = jnp.full((2, 28, 28, 1), MNIST_MEAN, jnp.float32)
    # by hand: conv_0 of zeros = bias_0 everywhere (26x26), pooled (13x13), conv_1, pool, dense layers
    h = jnp.broadcast_to(jax.nn.relu(params["Conv_0"]["bias"]), (2, 13, 13, 16))
    h = jax.lax.conv_general_dilated(
        h, params["Conv_1"]["kernel"], (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    h = jax.nn.relu(h + params["Conv_1"]["bias"])[:, :10, :10, :].reshape(2, 5, 2, 5, 2, 16).mean(axis=(2, 4))
    h = jax.nn.relu(h.reshape(2, -1) @ params["Dense_0"]["kernel"] + params["Dense_0"]["bias"])
    manual = h @ params["Dense_1"]["kernel"] + params["Dense_1"]["bias"]
    np.testing.assert_allclose(np.asarray(spec.logits(params, x)), np.asarray(manual), rtol=1e-5, atol=1e-6)
    # and the raw zeros image is not the mean image: it is standardised to -0.1307 / 0.3081
    assert not np.allclose(np.asarray(spec.logits(params, jnp.zeros_like(x))), np.asarray(manual))


def test_tapped_forward_gives_the_same_logits(spec, params):
    x = jnp.asarray(np.random.default_rng(0).random((5, 28, 28, 1), dtype=np.float32))
    assert spec.tapped is not None
    np.testing.assert_allclose(
        np.asarray(spec.tapped(params, x, Tape(None))), np.asarray(spec.logits(params, x)), rtol=1e-5, atol=1e-6
    )


def test_build_model_refuses_same_padding():
    with pytest.raises(ValueError, match="mnist_cnn_torch_defaults.*VALID.*'SAME'"):
        build_model(NAME, input_shape=(28, 28, 1), padding="SAME")
    explicit = build_model(NAME, input_shape=(28, 28, 1), padding="VALID")
    assert explicit.module.padding == "VALID"
    # the other models keep their own default (SAME) when no padding is asked for
    assert build_model("mnist_cnn", input_shape=(28, 28, 1)).module.padding == "SAME"


def test_other_input_shapes_are_refused_with_the_fix():
    spec = build_model(NAME, input_shape=(32, 32, 3))
    with pytest.raises(ValueError, match="28x28x1 digits, got inputs of shape \\(32, 32, 3\\).*no `model` option"):
        spec.init(jax.random.PRNGKey(0))
