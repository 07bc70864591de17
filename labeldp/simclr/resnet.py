"""ResNet-18 with the CIFAR stem and SimCLR's projection head (000 Appendix D.2; He et al. 2016;
Chen et al. 2020).

The CIFAR stem is a 3x3 convolution with stride 1 and no max-pool (the ImageNet stem's 7x7/2 conv
and max-pool would shrink 32x32 inputs to 8x8 before the first block). Four stages of two
BasicBlocks with ``width * (1, 2, 4, 8)`` channels (``width = 64``: the standard ResNet-18, 512-d
representation), strides (1, 2, 2, 2), BatchNorm, global average pooling. Works for any H x W x C.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["BasicBlock", "ResNet18", "ProjectionHead", "SimCLRNet"]


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with BatchNorm and a (projected when needed) identity shortcut."""

    channels: int
    stride: int = 1

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        norm = lambda: nn.BatchNorm(use_running_average=not train, momentum=0.9)  # noqa: E731
        y = nn.Conv(self.channels, (3, 3), strides=self.stride, padding="SAME", use_bias=False)(x)
        y = nn.relu(norm()(y))
        y = nn.Conv(self.channels, (3, 3), padding="SAME", use_bias=False)(y)
        y = norm()(y)
        if self.stride != 1 or x.shape[-1] != self.channels:
            x = norm()(nn.Conv(self.channels, (1, 1), strides=self.stride, use_bias=False)(x))
        return nn.relu(x + y)


class ResNet18(nn.Module):
    """The encoder: CIFAR stem, 4 x 2 BasicBlocks, global average pool -> (n, 8 * width)."""

    width: int = 64

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        x = nn.Conv(self.width, (3, 3), strides=1, padding="SAME", use_bias=False)(x)  # CIFAR stem
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(x))  # no max-pool
        for stage, mult in enumerate((1, 2, 4, 8)):
            for block in range(2):
                x = BasicBlock(self.width * mult, stride=2 if (stage > 0 and block == 0) else 1)(x, train=train)
        return jnp.mean(x, axis=(1, 2))


class ProjectionHead(nn.Module):
    """SimCLR's g(.): Dense(hidden) - ReLU - Dense(out); its output feeds the loss only."""

    hidden: int
    out: int = 128

    @nn.compact
    def __call__(self, h: jax.Array) -> jax.Array:
        return nn.Dense(self.out)(nn.relu(nn.Dense(self.hidden)(h)))


class SimCLRNet(nn.Module):
    """Encoder + projection head. ``encode`` gives the representation the downstream task uses."""

    width: int = 64
    projection_dim: int = 128

    def setup(self):
        self.encoder = ResNet18(width=self.width)
        self.head = ProjectionHead(hidden=8 * self.width, out=self.projection_dim)

    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        return self.head(self.encoder(x, train=train))

    def encode(self, x: jax.Array) -> jax.Array:
        return self.encoder(x, train=False)
