"""Configuration, batch and state types of the DP-SGD engine (000 Algorithm 1).

:class:`DPSGDConfig` (C, sigma, n1, sampling, unit, pad_to), :func:`default_pad_to`, the
:class:`Batch` / :class:`TrainState` / :class:`StepInfo` pytrees shared by the private step
(:mod:`labeldp.dpsgd.step`) and the non-private one (:mod:`labeldp.dpsgd.sgd_step`), the default
per-example loss :func:`cross_entropy`, and the small helpers both steps use. Re-exported by
:mod:`labeldp.dpsgd`, whose docstring describes the whole engine.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = [
    "DPSGDConfig",
    "Batch",
    "TrainState",
    "StepInfo",
    "StepHyper",
    "cross_entropy",
    "default_pad_to",
    "model_forwards",
]

PyTree = Any
TrainLogitsFn = Callable[[PyTree, jax.Array, jax.Array | None], jax.Array]
LossFn = Callable[[jax.Array, jax.Array], jax.Array]


def model_forwards(model: Any | None, *, logits_fn: Any | None, tapped_fn: Any | None) -> tuple[Any, Any, bool]:
    """The training forward and tapped forward a step builder uses: the ones given, else the model's.

    Args:
      model: a :class:`labeldp.models.ModelSpec`, or None.
      logits_fn: a training-mode logits function, or None (then ``model.train_logits``).
      tapped_fn: a tapped forward, or None (then ``model.tapped`` when ``logits_fn`` is None too).

    Returns:
      ``(logits_fn, tapped_fn, from_model)``; ``from_model``: the tapped forward is the model's own.

    Raises:
      ValueError: neither ``model`` nor ``logits_fn``.
    """
    from_model = False
    if model is not None:
        if tapped_fn is None and logits_fn is None:
            tapped_fn, from_model = model.tapped, True
        logits_fn = logits_fn or model.train_logits
    if logits_fn is None:
        raise ValueError("give model= or logits_fn=")
    return logits_fn, tapped_fn, from_model


# --------------------------------------------------------------------------------------------
# Configuration, batch and state types
# --------------------------------------------------------------------------------------------


def default_pad_to(expected_batch_size: int) -> int:
    """Padded batch length for Poisson batches: ``ceil(n1 + 6 sqrt(n1))``.

    A Poisson(n, q) batch exceeds it with probability about 1e-9 (6 standard deviations);
    larger batches are handled in several chunks, never truncated.
    """
    n1 = int(expected_batch_size)
    return int(math.ceil(n1 + 6.0 * math.sqrt(n1)))


@dataclasses.dataclass(frozen=True)
class DPSGDConfig:
    """Hyper-parameters of a DP-SGD / LabelDP-Pro step (000 Algorithm 1).

    Attributes:
      clip_norm: C, the L2 bound on each unit's gradient.
      noise_multiplier: sigma; the noise added to the clipped sum is N(0, sigma^2 C^2 I).
      expected_batch_size: n1; the noisy sum is divided by n1 (Poisson: the expected size).
      sampling: ``"poisson"`` (rate n1/n, default) or ``"shuffle"`` (fixed-size batches).
      unit: ``"example"`` or ``"user"`` (inputs (n_users, k, ...); sum-then-clip per user).
      pad_to: fixed padded batch length; ``None`` = :func:`default_pad_to` for Poisson and n1
        for shuffle.
    """

    clip_norm: float
    noise_multiplier: float
    expected_batch_size: int
    sampling: Literal["poisson", "shuffle"] = "poisson"
    unit: Literal["example", "user"] = "example"
    pad_to: int | None = None

    def __post_init__(self):
        if not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0, got {self.clip_norm}")
        if not self.noise_multiplier >= 0:
            raise ValueError(f"noise_multiplier must be >= 0, got {self.noise_multiplier}")
        if int(self.expected_batch_size) < 1:
            raise ValueError(f"expected_batch_size must be >= 1, got {self.expected_batch_size}")
        if self.sampling not in ("poisson", "shuffle"):
            raise ValueError(f"sampling must be 'poisson' or 'shuffle', got {self.sampling!r}")
        if self.unit not in ("example", "user"):
            raise ValueError(f"unit must be 'example' or 'user', got {self.unit!r}")
        if self.pad_to is not None and int(self.pad_to) < 1:
            raise ValueError(f"pad_to must be >= 1, got {self.pad_to}")

    @property
    def padded_batch_size(self) -> int:
        """The compiled batch length (see ``pad_to``)."""
        if self.pad_to is not None:
            return int(self.pad_to)
        if self.sampling == "shuffle":
            return int(self.expected_batch_size)
        return default_pad_to(self.expected_batch_size)

    @property
    def noise_std(self) -> float:
        """Standard deviation of each coordinate of the noise in the averaged gradient: sigma C / n1."""
        return self.noise_multiplier * self.clip_norm / self.expected_batch_size


class Batch(NamedTuple):
    """A (padded) batch.

    Attributes:
      x: features, (B, ...) per example or (B, k, ...) per user; an array or a pytree of arrays
        with those leading dimensions (tabular data: ``(x_num, x_cat)``).
      y: targets, (B,) int labels or (B, K) weights/soft labels; per user (B, k) or (B, k, K).
      mask: 0/1 (bool or float) of shape (B,) (per user also (B, k)); 0 marks padding.
      x_alt: features of the alternative batch I^P (AltConv only), (n2, ...).
      alt_mask: optional (n2,) 0/1 mask of ``x_alt``.
    """

    x: jax.Array
    y: jax.Array
    mask: jax.Array
    x_alt: jax.Array | None = None
    alt_mask: jax.Array | None = None


class TrainState(NamedTuple):
    """Parameters, optimizer state and step counter (a pytree)."""

    params: PyTree
    opt_state: optax.OptState
    step: jax.Array


class StepInfo(NamedTuple):
    """Diagnostics of one step (NOT privatized: for logging only, never for release).

    Attributes:
      loss: mean training loss over the real examples of the batch.
      num_units: number of real units (examples or users) in the batch.
      clipped_fraction: fraction of real units whose gradient norm exceeded C.
      mean_grad_norm: mean pre-clipping gradient norm over real units.
      grad_norm: norm of the gradient after noise and denoising (what the optimizer gets).
      denoise: the denoiser's diagnostics (dict of scalars).
    """

    loss: jax.Array
    num_units: jax.Array
    clipped_fraction: jax.Array
    mean_grad_norm: jax.Array
    grad_norm: jax.Array
    denoise: dict


class StepHyper(NamedTuple):
    """Per-run values a step takes as traced arguments instead of its config's constants, so that
    runs differing only in them share one compiled program: one vmapped program
    (:mod:`labeldp.dpsgd.vmapped_loop`), or one program that the runs of a sequential sweep call in
    turn (:mod:`labeldp.methods.private_training`). The learning rate travels in the optimizer state
    (``optax.inject_hyperparams``). Build it with :meth:`of`.

    Attributes:
      clip_norm: C of this run (a float32 scalar).
      noise_multiplier: sigma of this run (a float32 scalar).
      noise_scale: sigma * C, the standard deviation of the noise added to the clipped sum,
        multiplied in float64 and then rounded to float32 (what a step with the constants in its
        program multiplies by, so the traced step's noise is bit for bit the same); None: the
        float32 product ``noise_multiplier * clip_norm``.
    """

    clip_norm: jax.Array
    noise_multiplier: jax.Array
    noise_scale: jax.Array | None = None

    @classmethod
    def of(cls, config: DPSGDConfig) -> StepHyper:
        """The traced values of ``config``'s C and sigma.

        Args:
          config: the run's :class:`DPSGDConfig`.

        Returns:
          A :class:`StepHyper` of float32 scalars.
        """
        return cls(
            clip_norm=jnp.asarray(float(config.clip_norm), jnp.float32),
            noise_multiplier=jnp.asarray(float(config.noise_multiplier), jnp.float32),
            noise_scale=jnp.asarray(float(config.noise_multiplier) * float(config.clip_norm), jnp.float32),
        )

    def sum_noise_std(self) -> jax.Array:
        """Standard deviation of the noise added to the clipped sum (sigma C)."""
        return self.noise_multiplier * self.clip_norm if self.noise_scale is None else self.noise_scale


def cross_entropy(logits: jax.Array, target: jax.Array) -> jax.Array:
    """Per-example cross-entropy ``-sum_k w_k log softmax(logits)_k``.

    Args:
      logits: (K,) logits of one example.
      target: an integer label (scalar), or a (K,) weight / soft-label vector ``w`` (one-hot,
        soft label, or the RR-debiasing weights of 000 Appendix D.1).

    Returns:
      Scalar loss.
    """
    logp = jax.nn.log_softmax(logits, axis=-1)
    target = jnp.asarray(target)
    if target.ndim == 0:
        if not jnp.issubdtype(target.dtype, jnp.integer):
            raise TypeError(f"a scalar target must be an integer label, got dtype {target.dtype}")
        return -logp[target]
    return -jnp.sum(target.astype(logp.dtype) * logp, axis=-1)


def tree_sqnorm(t: PyTree) -> jax.Array:
    return sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree_util.tree_leaves(t))


def as_float_mask(mask: jax.Array) -> jax.Array:
    return jnp.asarray(mask).astype(jnp.float32)


def leading_shape(x: PyTree, n: int) -> tuple[int, ...]:
    """The first ``n`` dimensions of the features: an array, or a pytree of arrays sharing them
    (tabular data: ``(x_num, x_cat)``)."""
    return tuple(jax.tree_util.tree_leaves(x)[0].shape[:n])
