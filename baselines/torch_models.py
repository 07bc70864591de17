"""PyTorch twins of the Flax models of 000 Table 10 (``labeldp/models.py``), for Opacus.

Same layers, kernel sizes, padding (``SAME`` = symmetric padding 1 for the 3x3 convolutions,
or ``VALID``), pooling and dropout as the Flax models, and the same flatten order: the
convolutional features are permuted to NHWC before flattening, exactly as Flax's
``x.reshape((n, -1))`` on NHWC arrays, so :func:`load_flax_params` copies Flax parameters in
without any permutation of the dense weights and the two models compute the same function.

Inputs are NCHW float tensors in [0, 1] with the standard (row-major) strides: build them with
:func:`nchw_tensor`, never with ``torch.from_numpy(x_nhwc).permute(0, 3, 1, 2)``. For one
channel that permuted view counts as "contiguous" but has channels-last strides, and with
those inputs Opacus 1.6 (PyTorch 2.13, CPU) silently returns all-zero per-sample gradients
for the second convolution (found 2026-11-22; ``tests/baselines/test_dpsgd_opacus.py``).
Only ``Conv2d`` and ``Linear`` carry parameters, so Opacus' ``GradSampleModule`` (hooks mode)
supports both models.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

__all__ = ["MnistCNNTorch", "CifarCNNTorch", "build_torch_model", "load_flax_params", "nchw_tensor", "num_params"]


def nchw_tensor(x_nhwc: np.ndarray) -> torch.Tensor:
    """NHWC float images -> an NCHW tensor in a fresh row-major buffer (standard strides).

    Args:
      x_nhwc: (n, H, W, C) float32 array.

    Returns:
      A (n, C, H, W) tensor whose strides are those of a newly allocated C-order array.
    """
    x = np.asarray(x_nhwc, dtype=np.float32)
    if x.ndim != 4:
        raise ValueError(f"expected NHWC images of rank 4, got shape {x.shape}")
    out = torch.empty((x.shape[0], x.shape[3], x.shape[1], x.shape[2]), dtype=torch.float32)
    out.copy_(torch.from_numpy(x).permute(0, 3, 1, 2))
    return out


def _conv_padding(padding: str) -> int:
    if padding == "SAME":
        return 1  # 3x3 kernel, stride 1: Flax SAME pads (1, 1)
    if padding == "VALID":
        return 0
    raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")


def _conv_out(size: int, padding: str) -> int:
    return size if padding == "SAME" else size - 2


class _NHWCFlatten(nn.Module):
    """Flattens NCHW features in NHWC order (as Flax does)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)


class MnistCNNTorch(nn.Module):
    """000 Table 10(a): Conv(16,3x3)-ReLU-AvgPool(2)-Conv(16,3x3)-ReLU-AvgPool(2)-FC(16)-ReLU-FC(K).

    Args:
      input_shape: (H, W, C) of one example (MNIST: (28, 28, 1)).
      num_classes: K.
      padding: ``SAME`` (default, as the Flax model) or ``VALID``.
    """

    def __init__(
        self, *, input_shape: tuple[int, int, int] = (28, 28, 1), num_classes: int = 10, padding: str = "SAME"
    ):
        super().__init__()
        h, w, c = input_shape
        p = _conv_padding(padding)
        self.conv1 = nn.Conv2d(c, 16, 3, padding=p)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=p)
        self.pool = nn.AvgPool2d(2, stride=2)
        for _ in range(2):
            h, w = _conv_out(h, padding) // 2, _conv_out(w, padding) // 2
        self.flatten = _NHWCFlatten()
        self.fc1 = nn.Linear(16 * h * w, 16)
        self.fc2 = nn.Linear(16, num_classes)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.relu(self.fc1(self.flatten(x)))
        return self.fc2(x)


class CifarCNNTorch(nn.Module):
    """000 Table 10(b): [Conv(c,3x3)-ReLU-MaxPool(2)-Dropout(0.2)] x (32, 64, 128) - FC(80)-ReLU-Dropout-FC(K).

    Args:
      input_shape: (H, W, C) of one example (CIFAR-10: (32, 32, 3)).
      num_classes: K.
      padding: ``SAME`` (default) or ``VALID``.
      dropout: dropout ratio (0.2).
    """

    def __init__(
        self,
        *,
        input_shape: tuple[int, int, int] = (32, 32, 3),
        num_classes: int = 10,
        padding: str = "SAME",
        dropout: float = 0.2,
    ):
        super().__init__()
        h, w, c = input_shape
        p = _conv_padding(padding)
        layers: list[nn.Module] = []
        for out in (32, 64, 128):
            layers += [nn.Conv2d(c, out, 3, padding=p), nn.ReLU(), nn.MaxPool2d(2, stride=2), nn.Dropout(dropout)]
            c = out
            h, w = _conv_out(h, padding) // 2, _conv_out(w, padding) // 2
        self.features = nn.Sequential(*layers)
        self.flatten = _NHWCFlatten()
        self.fc1 = nn.Linear(128 * h * w, 80)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(80, num_classes)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.flatten(self.features(x))
        return self.fc2(self.drop(self.relu(self.fc1(x))))


_TORCH_MODELS = {"mnist_cnn": MnistCNNTorch, "cifar_cnn": CifarCNNTorch}


def build_torch_model(
    name: str, *, input_shape: tuple[int, int, int], num_classes: int = 10, padding: str = "SAME"
) -> nn.Module:
    """PyTorch twin of ``labeldp.models.build_model(name, ...)``.

    Args:
      name: ``mnist_cnn`` or ``cifar_cnn``.
      input_shape: (H, W, C) of one example (NHWC convention, as the Flax model).
      num_classes: K.
      padding: ``SAME`` or ``VALID``.

    Returns:
      The ``nn.Module`` (takes NCHW inputs).
    """
    if name not in _TORCH_MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {sorted(_TORCH_MODELS)}")
    return _TORCH_MODELS[name](input_shape=tuple(input_shape), num_classes=num_classes, padding=padding)


def num_params(model: nn.Module) -> int:
    """Number of trainable scalars."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def load_flax_params(model: nn.Module, params: Mapping[str, Any]) -> nn.Module:
    """Copies Flax parameters (``ModelSpec.init`` output) into the twin, in place.

    Flax names its layers ``Conv_0, Conv_1, ...`` and ``Dense_0, Dense_1`` in call order; they
    map to the twin's ``Conv2d`` and ``Linear`` layers in module order. Conv kernels go from
    HWIO to OIHW, dense kernels from (in, out) to (out, in).

    Returns:
      ``model``.
    """
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    denses = [m for m in model.modules() if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for i, m in enumerate(convs):
            p = params[f"Conv_{i}"]
            m.weight.copy_(torch.from_numpy(np.asarray(p["kernel"]).transpose(3, 2, 0, 1).copy()))
            m.bias.copy_(torch.from_numpy(np.asarray(p["bias"]).copy()))
        for i, m in enumerate(denses):
            p = params[f"Dense_{i}"]
            m.weight.copy_(torch.from_numpy(np.asarray(p["kernel"]).T.copy()))
            m.bias.copy_(torch.from_numpy(np.asarray(p["bias"]).copy()))
    return model
