"""The networks of 001 (Ghazi et al., "Deep learning with label differential privacy"), Appendix B
"Architectures", with BatchNorm.

MNIST / FashionMNIST / KMNIST, a simplified Inception (001 Appendix B, after Zhang et al. 2017)::

    Conv(3x3, 96) -> S1 -> S2 -> S3 -> GlobalMaxPool -> Linear
    S1 = Block(32, 32) -> Block(32, 48) -> Conv(3x3, 160, stride 2)
    S2 = Block(112, 48) -> Block(96, 64) -> Block(80, 80) -> Block(48, 96) -> Conv(3x3, 240, stride 2)
    S3 = Block(176, 160) -> Block(176, 160)
    Block(C1, C2) = Concat(Conv(1x1, C1), Conv(3x3, C2))
    Conv = Convolution -> BatchNorm -> ReLU

CIFAR-10 / CIFAR-100, ResNet-18 V2 (pre-activation, He et al. 2016) with the CIFAR stem: "we replace
the initial block with 7x7 convolution and 3x3 max pooling with a single 3x3 convolution (with
stride 1) layer. The upper layers are kept the same as the standard ImageNet ResNet18": four stages
of two basic pre-activation blocks with 64, 128, 256, 512 channels (strides 1, 2, 2, 2), a final
BatchNorm -> ReLU, global average pooling and a linear classifier.

Choices the paper leaves open, fixed here: ``SAME`` padding everywhere (so 28x28 -> 14 -> 7 in the
Inception); convolutions without bias (a BatchNorm follows each, or precedes it in ResNet V2);
BatchNorm momentum 0.9 and epsilon 1e-5; a projection shortcut (1x1 convolution of the
pre-activated input, as in He et al.'s V2) where a block changes shape.

Both take NHWC float inputs in [0, 1] and return logits (n, K); ``train=True`` normalises with the
batch's statistics and updates the running ones (collection ``batch_stats``), ``train=False`` uses
the running ones.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["INCEPTION_001_STAGES", "Inception001", "ResNet18V2Cifar"]

#: The simplified Inception's stages after the stem: ``("block", C1, C2)`` or ``("conv", C, stride)``.
INCEPTION_001_STAGES = (
    ("block", 32, 32),
    ("block", 32, 48),
    ("conv", 160, 2),
    ("block", 112, 48),
    ("block", 96, 64),
    ("block", 80, 80),
    ("block", 48, 96),
    ("conv", 240, 2),
    ("block", 176, 160),
    ("block", 176, 160),
)

_BN = functools.partial(nn.BatchNorm, momentum=0.9, epsilon=1e-5)


class ConvBNReLU(nn.Module):
    """001's ``Conv``: Convolution -> BatchNorm -> ReLU."""

    features: int
    kernel: int
    stride: int = 1

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        k, s = self.kernel, self.stride
        x = nn.Conv(self.features, (k, k), strides=(s, s), padding="SAME", use_bias=False)(x)
        return nn.relu(_BN(use_running_average=not train)(x))


class InceptionBlock(nn.Module):
    """001's ``Block(C1, C2) = Concat(Conv(1x1, C1), Conv(3x3, C2))`` (channels last)."""

    c1: int
    c2: int

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        a = ConvBNReLU(self.c1, 1)(x, train=train)
        b = ConvBNReLU(self.c2, 3)(x, train=train)
        return jnp.concatenate([a, b], axis=-1)


class Inception001(nn.Module):
    """001 Appendix B's simplified Inception for MNIST, FashionMNIST and KMNIST (module docstring).
    ``padding`` is accepted for the registry's uniform builder; only ``SAME`` is implemented."""

    num_classes: int = 10
    padding: str = "SAME"

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        if self.padding != "SAME":
            raise ValueError("inception_001 is built with SAME padding only")
        x = ConvBNReLU(96, 3)(x, train=train)
        for kind, a, b in INCEPTION_001_STAGES:
            x = InceptionBlock(a, b)(x, train=train) if kind == "block" else ConvBNReLU(a, 3, b)(x, train=train)
        x = jnp.max(x, axis=(1, 2))  # global max pooling
        return nn.Dense(self.num_classes)(x)


class PreActBlock(nn.Module):
    """ResNet V2's basic block: ``x + conv(relu(bn(conv(relu(bn(x))))))``; where the shape changes,
    the shortcut is a 1x1 convolution (stride ``stride``) of the pre-activated input."""

    features: int
    stride: int = 1

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        s = self.stride
        pre = nn.relu(_BN(use_running_average=not train)(x))
        shortcut = x
        if s != 1 or x.shape[-1] != self.features:
            shortcut = nn.Conv(self.features, (1, 1), strides=(s, s), use_bias=False)(pre)
        h = nn.Conv(self.features, (3, 3), strides=(s, s), padding="SAME", use_bias=False)(pre)
        h = nn.relu(_BN(use_running_average=not train)(h))
        h = nn.Conv(self.features, (3, 3), padding="SAME", use_bias=False)(h)
        return shortcut + h


class ResNet18V2Cifar(nn.Module):
    """001 Appendix B's ResNet-18 V2 for CIFAR (module docstring). ``padding``: as :class:`Inception001`."""

    num_classes: int = 10
    padding: str = "SAME"
    stage_features: tuple[int, ...] = (64, 128, 256, 512)

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        if self.padding != "SAME":
            raise ValueError("resnet18_v2_cifar is built with SAME padding only")
        x = nn.Conv(self.stage_features[0], (3, 3), padding="SAME", use_bias=False)(x)  # the CIFAR stem
        for i, features in enumerate(self.stage_features):
            x = PreActBlock(features, 1 if i == 0 else 2)(x, train=train)
            x = PreActBlock(features, 1)(x, train=train)
        x = nn.relu(_BN(use_running_average=not train)(x))
        x = jnp.mean(x, axis=(1, 2))  # global average pooling
        return nn.Dense(self.num_classes)(x)
