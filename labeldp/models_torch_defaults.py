"""000 Table 10(a)'s MNIST CNN with PyTorch's defaults: the network a PyTorch port of it would train.

000's ALIBI baseline ran the official ALIBI PyTorch code (000 Appendix D.4), so its MNIST CNN was presumably a
PyTorch port of Table 10(a). :class:`MnistCNNTorchDefaults` (registered as ``mnist_cnn_torch_defaults``) has the
same layer stack as :class:`labeldp.models.MnistCNN`::

    Conv(16, 3x3, ReLU) -> AvgPool(2, stride 2) -> Conv(16, 3x3, ReLU) -> AvgPool(2, stride 2)
    -> Dense(16, ReLU) -> Dense(10)

and differs from it in exactly three ways, each a PyTorch default:

(a) Convolution padding 0 (``VALID``; ``nn.Conv2d``'s default ``padding=0``) instead of Flax's ``SAME``:
    28 -> 26 -> 13 -> 11 -> 5 (pooling floors), 9,066 parameters instead of 15,210.
(b) PyTorch's default initialisation of ``nn.Conv2d`` and ``nn.Linear`` (``reset_parameters``) instead of
    Flax's (LeCun-normal kernels, zero biases): every weight and every bias i.i.d. uniform on
    ``(-1/sqrt(fan_in), 1/sqrt(fan_in))``, ``fan_in = in_channels * kh * kw`` for a convolution and
    ``in_features`` for a dense layer. For the weights PyTorch calls ``kaiming_uniform_(w, a=sqrt(5))``, whose
    bound is ``gain * sqrt(3 / fan_in)`` with ``gain = sqrt(2 / (1 + a^2)) = sqrt(2 / 6) = sqrt(1/3)``, so
    ``sqrt(1/3) * sqrt(3 / fan_in) = 1 / sqrt(fan_in)``; for the biases it draws on ``(-1/sqrt(fan_in),
    1/sqrt(fan_in))`` directly. A uniform on ``(-b, b)`` has standard deviation ``b / sqrt(3)``.
(c) Inputs standardised as ``(x - 0.1307) / 0.3081`` (torchvision's usual MNIST ``Normalize``, the training
    set's mean and standard deviation) before the first convolution; the module still takes [0, 1] inputs,
    like every registered model, and standardises inside.

Flax's ``bias_init`` sees only the shape, so each layer's initialisers are closures over the fan-in computed
from the layer's actual input (:func:`torch_default_uniform`). No BatchNorm, no dropout. Its tapped forward
(:func:`mnist_cnn_torch_defaults_tapped`, for the CPU's fast steps) is :class:`labeldp.models.MnistCNN`'s with
the standardisation first and ``VALID`` padding.
"""

from __future__ import annotations

import math
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from labeldp.dpsgd.tape import Tape, avg_pool_2x2

__all__ = [
    "MNIST_MEAN",
    "MNIST_STD",
    "MnistCNNTorchDefaults",
    "mnist_cnn_torch_defaults_tapped",
    "standardise_mnist",
    "torch_default_uniform",
]

#: torchvision's usual MNIST ``Normalize((0.1307,), (0.3081,))``: the training set's pixel mean and std in [0, 1].
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081


def torch_default_uniform(*, fan_in: int) -> Callable[..., jax.Array]:
    """PyTorch's default initialiser of a ``nn.Conv2d`` / ``nn.Linear`` weight or bias (module docstring, (b)).

    Args:
      fan_in: the layer's fan-in (``in_channels * kh * kw``, or ``in_features``).

    Returns:
      A Flax initialiser ``(key, shape, dtype) -> array``, i.i.d. uniform on ``(-1/sqrt(fan_in), 1/sqrt(fan_in))``.
    """
    if fan_in <= 0:
        raise ValueError(f"fan_in must be positive, got {fan_in}")
    bound = 1.0 / math.sqrt(fan_in)

    def init(key: jax.Array, shape, dtype=jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, minval=-bound, maxval=bound)

    return init


def standardise_mnist(x: jax.Array) -> jax.Array:
    """MNIST's standardisation (module docstring, (c)).

    Args:
      x: inputs in [0, 1].

    Returns:
      ``(x - 0.1307) / 0.3081``, MNIST's training-set constants whatever the dataset (FashionMNIST and KMNIST
      get the same constants: a port's ``Normalize`` written for MNIST).
    """
    return (x - MNIST_MEAN) / MNIST_STD


def _conv(x: jax.Array) -> jax.Array:
    fan_in = x.shape[-1] * 3 * 3
    init = torch_default_uniform(fan_in=fan_in)
    return nn.Conv(16, (3, 3), padding="VALID", kernel_init=init, bias_init=init)(x)


def _dense(x: jax.Array, features: int) -> jax.Array:
    init = torch_default_uniform(fan_in=x.shape[-1])
    return nn.Dense(features, kernel_init=init, bias_init=init)(x)


class MnistCNNTorchDefaults(nn.Module):
    """000 Table 10(a)'s CNN with PyTorch's padding, initialisation and input standardisation (module
    docstring). ``padding`` is the registry's common option; only ``VALID`` (padding 0) is this model."""

    num_classes: int = 10
    padding: str = "VALID"

    def __post_init__(self) -> None:
        if self.padding != "VALID":
            raise ValueError(
                f"model 'mnist_cnn_torch_defaults' has PyTorch's padding 0 (VALID) by definition, got padding "
                f"{self.padding!r}; use model 'mnist_cnn' for SAME padding"
            )
        super().__post_init__()

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        del train  # no dropout, no BatchNorm
        if tuple(x.shape[1:]) != (28, 28, 1):
            raise ValueError(
                f"model 'mnist_cnn_torch_defaults' is 000 Table 10(a)'s CNN for 28x28x1 digits, got inputs of shape "
                f"{tuple(x.shape[1:])}; use the dataset's own model (no `model` option) for other inputs"
            )
        x = standardise_mnist(x)
        x = nn.avg_pool(nn.relu(_conv(x)), (2, 2), strides=(2, 2))
        x = nn.avg_pool(nn.relu(_conv(x)), (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(_dense(x, 16))
        return _dense(x, self.num_classes)


def mnist_cnn_torch_defaults_tapped(module: MnistCNNTorchDefaults, params, x: jax.Array, tape: Tape) -> jax.Array:
    """:class:`MnistCNNTorchDefaults`'s forward pass through a :class:`~labeldp.dpsgd.tape.Tape` (convolutions as
    im2col matmuls): the same logits as ``module.apply`` up to float32 rounding.

    Args:
      module: the module (its parameter names: ``Conv_0``, ``Conv_1``, ``Dense_0``, ``Dense_1``).
      params: its parameters.
      x: (n, 28, 28, 1) inputs in [0, 1].
      tape: the tape that records the layers' inputs.

    Returns:
      (n, K) logits.
    """
    del module  # padding is VALID by construction
    h = standardise_mnist(x)
    h = avg_pool_2x2(jax.nn.relu(tape.conv(("Conv_0",), h, params["Conv_0"], padding="VALID")))
    h = avg_pool_2x2(jax.nn.relu(tape.conv(("Conv_1",), h, params["Conv_1"], padding="VALID")))
    h = jax.nn.relu(tape.dense(("Dense_0",), h.reshape((h.shape[0], -1)), params["Dense_0"]))
    return tape.dense(("Dense_1",), h, params["Dense_1"])
