"""A tape for models written as explicit linear layers: what per-example clipping needs.

Per-example gradient norms of a network can be computed without per-example backward passes
when every parameter sits in a linear map ``z = a W + b`` (dense layers, convolutions written as
im2col patches times a matrix, embedding look-ups): the gradient of one example's loss with
respect to ``W`` is ``a^T (dL/dz)``, so the layer's input rows ``a`` (recorded in the forward
pass) and the output gradient ``dL/dz`` (the gradient of the summed loss with respect to a zero
"probe" added to ``z``; each example's probe touches only its own loss) give every example's
gradient and its norm ("book-keeping", Bu, Wang, Zha and Karypis, ICML 2023; ghost norms, Li,
Tramer, Liang and Hashimoto, ICLR 2022). :mod:`labeldp.dpsgd.clipping` does that arithmetic;
this module records the layers.

A model opts in by a ``tapped`` method ``(params, x, tape) -> logits`` that reads the same Flax
parameter pytree as its ``__call__`` and routes every parameter through :meth:`Tape.dense`,
:meth:`Tape.conv` or :meth:`Tape.embed`; elementwise and pooling code in between is free.
:func:`check_coverage` refuses a model whose tapped forward leaves a parameter out.

Example (000 Table 10(a) first block)::

    h = tape.conv(("Conv_0",), x, params["Conv_0"], window=(3, 3), padding="SAME")
    h = avg_pool_2x2(jax.nn.relu(h))
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import jax
import jax.numpy as jnp

__all__ = [
    "Tape",
    "LayerRecord",
    "im2col",
    "avg_pool_2x2",
    "max_pool_2x2",
    "check_coverage",
    "param_paths",
    "row_keys",
    "leaf_path",
]

PyTree = Any
Path = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class LayerRecord:
    """One parameterised layer seen by the tape.

    Attributes:
      kind: ``"linear"`` (dense or im2col convolution) or ``"embed"``.
      path: the layer's path in the parameter pytree (``("Conv_0",)``).
      inputs: linear: input rows ``(B, T, K)`` (T = positions per example, 1 for dense);
        embed: integer indices ``(B, T)``.
      has_bias: whether the layer has a ``bias`` leaf (linear only).
      param_shape: the shape of ``kernel`` / ``embedding`` (the gradient is reshaped to it).
    """

    kind: Literal["linear", "embed"]
    path: Path
    inputs: jax.Array
    has_bias: bool
    param_shape: tuple[int, ...]


class Tape:
    """Records every parameterised layer of one forward pass and adds its probe to the output.

    Args:
      probes: ``{path: zeros (B, T, C)}`` added to each layer's output (their gradient is the
        output gradient), or ``None`` for a plain forward pass (shapes are then recorded in
        :attr:`output_shapes`, so ``jax.eval_shape`` of a probe-less pass sizes the probes).
      dropout_keys: one PRNG key per row of the batch (training mode: :meth:`dropout` draws each
        row's mask from its own key, so a row's mask does not depend on the batch around it), or
        ``None`` (evaluation mode: no dropout).
    """

    def __init__(self, probes: dict[Path, jax.Array] | None = None, *, dropout_keys: jax.Array | None = None):
        self.probes = probes
        self.dropout_keys = dropout_keys
        self.layers: dict[Path, LayerRecord] = {}
        self.output_shapes: dict[Path, tuple[int, ...]] = {}

    def _record(self, record: LayerRecord, out: jax.Array) -> jax.Array:
        if record.path in self.layers:
            raise ValueError(
                f"layer {record.path} used twice in one forward pass; the tape needs one use "
                "per parameter (share weights through one call)"
            )
        self.layers[record.path] = record
        self.output_shapes[record.path] = tuple(out.shape)
        if self.probes is not None:
            out = out + self.probes[record.path]
        return out

    def dense(self, path: Path, a: jax.Array, params: PyTree) -> jax.Array:
        """``a @ kernel + bias`` on the last axis of ``a`` ((B, K) or (B, T, K))."""
        kernel = params["kernel"]
        rows = a if a.ndim == 3 else a[:, None, :]
        out = rows @ kernel.reshape(-1, kernel.shape[-1])
        if "bias" in params:
            out = out + params["bias"]
        out = self._record(LayerRecord("linear", tuple(path), rows, "bias" in params, tuple(kernel.shape)), out)
        return out if a.ndim == 3 else out[:, 0, :]

    def conv(self, path: Path, x: jax.Array, params: PyTree, *, padding: str) -> jax.Array:
        """A stride-1 convolution of NHWC ``x`` with a Flax ``(kh, kw, cin, cout)`` kernel, as
        im2col patches times the reshaped kernel (same numbers as ``nn.Conv`` up to float32
        rounding); returns ``(B, H', W', cout)``."""
        kernel = params["kernel"]
        kh, kw, cin, cout = kernel.shape
        patches = im2col(x, window=(kh, kw), padding=padding)
        b, h, w, k = patches.shape
        rows = patches.reshape(b, h * w, k)
        out = rows @ kernel.reshape(k, cout)
        if "bias" in params:
            out = out + params["bias"]
        out = self._record(LayerRecord("linear", tuple(path), rows, "bias" in params, tuple(kernel.shape)), out)
        return out.reshape(b, h, w, cout)

    def dropout(self, x: jax.Array, *, rate: float, index: int) -> jax.Array:
        """Inverted dropout of rows ``x`` (B, ...) in training mode: row b keeps each unit with
        probability ``1 - rate``, drawn from ``fold_in(dropout_keys[b], index)``; the identity in
        evaluation mode. ``index`` numbers the model's dropout layers."""
        if self.dropout_keys is None or rate == 0.0:
            return x
        keep = 1.0 - rate
        masks = jax.vmap(lambda k: jax.random.bernoulli(jax.random.fold_in(k, index), keep, x.shape[1:]))(
            self.dropout_keys
        )
        return jnp.where(masks, x / keep, jnp.zeros_like(x))

    def embed(self, path: Path, idx: jax.Array, params: PyTree) -> jax.Array:
        """``embedding[idx]`` for integer ``idx`` of shape (B,) or (B, T)."""
        table = params["embedding"]
        rows = idx if idx.ndim == 2 else idx[:, None]
        out = jnp.take(table, rows, axis=0)
        out = self._record(LayerRecord("embed", tuple(path), rows, False, tuple(table.shape)), out)
        return out if idx.ndim == 2 else out[:, 0, :]


def row_keys(rng: jax.Array, rows: int) -> jax.Array:
    """The per-row dropout keys of a batch of ``rows`` rows drawn with one key: ``split(rng, rows)``
    (a model's training-mode logits on a batch use these, whatever the caller)."""
    return jax.random.split(rng, rows)


def im2col(x: jax.Array, *, window: tuple[int, int], padding: str) -> jax.Array:
    """Stride-1 patches of NHWC ``x``: ``(B, H', W', kh * kw * C)`` in the ``(kh, kw, C)`` order of
    a Flax kernel's leading axes. ``padding``: ``"SAME"`` (Flax's split: the extra row/column at
    the end) or ``"VALID"``."""
    kh, kw = window
    if padding == "SAME":
        top, left = (kh - 1) // 2, (kw - 1) // 2
        x = jnp.pad(x, ((0, 0), (top, kh - 1 - top), (left, kw - 1 - left), (0, 0)))
    elif padding != "VALID":
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    h, w = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    cols = [x[:, i : i + h, j : j + w, :] for i in range(kh) for j in range(kw)]
    return jnp.concatenate(cols, axis=-1)


def _pool_blocks(x: jax.Array) -> jax.Array:
    b, h, w, c = x.shape
    x = x[:, : h - h % 2, : w - w % 2, :]  # VALID pooling drops an odd last row / column
    return x.reshape(b, h // 2, 2, w // 2, 2, c)


def avg_pool_2x2(x: jax.Array) -> jax.Array:
    """``nn.avg_pool(x, (2, 2), strides=(2, 2))`` (VALID) of NHWC ``x``."""
    return _pool_blocks(x).mean(axis=(2, 4))


def max_pool_2x2(x: jax.Array) -> jax.Array:
    """``nn.max_pool(x, (2, 2), strides=(2, 2))`` (VALID) of NHWC ``x``."""
    return _pool_blocks(x).max(axis=(2, 4))


def leaf_path(keypath) -> Path:
    """A ``jax.tree_util`` key path (dict keys, attribute names) as a tuple of strings: the form
    the tape names parameters in (``("Conv_0", "kernel")``)."""
    return tuple(str(getattr(k, "key", getattr(k, "name", k))) for k in keypath)


def param_paths(params: PyTree) -> set[Path]:
    """The paths of a parameter pytree's leaves, as tuples of keys."""
    return {leaf_path(kp) for kp, _ in jax.tree_util.tree_leaves_with_path(params)}


def check_coverage(params: PyTree, layers: dict[Path, LayerRecord]) -> None:
    """Raises if the tape's layers do not cover exactly the parameter leaves.

    Raises:
      ValueError: naming the leaves no layer used (or layers with no such leaf); the model's
        ``tapped`` forward must route every parameter through the tape.
    """
    seen = set()
    for path, rec in layers.items():
        if rec.kind == "embed":
            seen.add((*path, "embedding"))
        else:
            seen.add((*path, "kernel"))
            if rec.has_bias:
                seen.add((*path, "bias"))
    have = param_paths(params)
    if seen != have:
        raise ValueError(
            f"the tapped forward does not match the parameters: unused leaves {sorted(have - seen)}, "
            f"unknown leaves {sorted(seen - have)}; route every parameter through the Tape"
        )
