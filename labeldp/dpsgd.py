"""DP-SGD with a denoiser hook: the training step of LabelDP-Pro (000 Algorithm 1).

One step, for a batch ``I^G`` of examples (or users)::

    g_i   = grad_theta l(theta, (x_i, y_i))                  per unit (vmap of grad)
    g_i  <- g_i / max(1, ||g_i||_2 / C)                       L2 clip over the whole pytree
    g~    = (sum_i g_i + N(0, sigma^2 C^2 I)) / n1            n1 = EXPECTED batch size
    g^    = Denoiser(g~, theta, {x_i})                        labeldp.denoisers (NoOp = DP-SGD)
    theta <- optax update with g^

Sampling. ``sampling="poisson"`` (the default, and what the privacy analysis of 000 Section
3.4 assumes) includes each of the n units independently with probability ``q = n1 / n``; the
batch size varies, and the sum is still divided by the *expected* size n1. Variable batches are
padded to a fixed length ``pad_to`` (default ``ceil(n1 + 6 sqrt(n1))``) with a 0/1 mask, so one
compiled step serves every batch; padded rows contribute exactly zero. A Poisson batch larger
than ``pad_to`` (probability ~1e-9 at the default) is never truncated or resampled, which
would change the sampling distribution the accountant assumes: :func:`poisson_batches` pads it
to the next multiple of ``pad_to`` and the step sums the clipped gradients chunk by chunk
(still one noise draw, one update). ``sampling="shuffle"`` gives fixed-size batches of a
random permutation (the practice the Poisson analysis approximates); there ``pad_to = n1``.
Steps per epoch are ``n / n1`` (:func:`num_steps`).

Units. ``unit="example"`` clips per example. ``unit="user"`` (000 Section 6, Table 7) takes
inputs shaped ``(n_users, k, ...)``; a user's gradient is the SUM of its k per-example
gradients, clipped afterwards, so each user's contribution is bounded by C.

Losses. The per-example loss is ``loss_fn(logits (K,), target)``; the default
:func:`cross_entropy` accepts an integer label or a (K,) weight / soft-label vector, so the
RR-debiased and soft-label methods reuse the same machinery (:func:`make_sgd_step` is the
non-private step with the same model and loss).

The noise multiplier sigma is an input here; its calibration to (epsilon, delta) lives in
``labeldp.accounting``. With a denoiser whose ``breaks_amplification`` is True (SelfSpan,
SelfConv) the accountant must not use amplification by subsampling (000 Section 3.4).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterator, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from labeldp.denoisers import Denoiser, NoOp

__all__ = [
    "DPSGDConfig",
    "Batch",
    "TrainState",
    "StepInfo",
    "cross_entropy",
    "DPSGDStep",
    "SGDStep",
    "make_dpsgd_step",
    "make_sgd_step",
    "default_pad_to",
    "num_steps",
    "poisson_batches",
    "shuffled_batches",
    "sample_alt_batch",
]

PyTree = Any
TrainLogitsFn = Callable[[PyTree, jax.Array, jax.Array | None], jax.Array]
LossFn = Callable[[jax.Array, jax.Array], jax.Array]

_tree_map = jax.tree_util.tree_map


def _leading_shape(x: PyTree, n: int) -> tuple[int, ...]:
    """The first ``n`` dimensions of the features: an array, or a pytree of arrays sharing them
    (tabular data: ``(x_num, x_cat)``)."""
    return tuple(jax.tree_util.tree_leaves(x)[0].shape[:n])


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


def _tree_sqnorm(t: PyTree) -> jax.Array:
    return sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree_util.tree_leaves(t))


def _as_float_mask(mask: jax.Array) -> jax.Array:
    return jnp.asarray(mask).astype(jnp.float32)


# --------------------------------------------------------------------------------------------
# DP-SGD step
# --------------------------------------------------------------------------------------------


class DPSGDStep:
    """A compiled DP-SGD / LabelDP-Pro step (000 Algorithm 1); build with :func:`make_dpsgd_step`.

    Call ``step(state, batch, rng) -> (state, info)``. The per-unit gradients, clipping, noise,
    an in-jit denoiser (NoOp, or a projection with ``loop="fori"``) and the optimizer update
    form one jitted function for batches of length <= ``pad_to``. A denoiser with a
    Python-driven loop (``loop="python"``, the CPU default) runs between a jitted
    noisy-gradient function and a jitted update. Longer batches (multiples of ``pad_to``) are
    summed chunk by chunk.

    Attributes:
      config: the :class:`DPSGDConfig`.
      denoiser: the :class:`~labeldp.denoisers.Denoiser`.
      pad_to: the compiled batch length.
    """

    def __init__(
        self,
        *,
        logits_fn: TrainLogitsFn,
        projection_logits_fn: Callable[[PyTree, jax.Array], jax.Array] | None,
        optimizer: optax.GradientTransformation,
        config: DPSGDConfig,
        loss_fn: LossFn,
        denoiser: Denoiser,
    ):
        self.config = config
        self.denoiser = denoiser
        self.optimizer = optimizer
        self.pad_to = config.padded_batch_size
        self._logits_fn = logits_fn
        self._loss_fn = loss_fn
        self._proj_fn = projection_logits_fn
        if not isinstance(denoiser, NoOp) and projection_logits_fn is None:
            raise ValueError("a projecting denoiser needs projection_logits_fn (deterministic f(params, x))")
        self._clipped_sum_jit = jax.jit(self._clipped_sum)
        self._noisy_jit = jax.jit(self._noisy_gradient)
        self._privatize_jit = jax.jit(self._privatize)
        self._update_jit = jax.jit(self._update)
        self._denoise_jit = jax.jit(self._denoise)
        self._fused_jit = jax.jit(self._fused)
        self._add_jit = jax.jit(lambda a, b: _tree_map(jnp.add, a, b))

    # ---- public API ------------------------------------------------------------------------

    def init(self, params: PyTree) -> TrainState:
        """Initial :class:`TrainState` for ``params``."""
        return TrainState(params=params, opt_state=self.optimizer.init(params), step=jnp.zeros((), jnp.int32))

    def __call__(self, state: TrainState, batch: Batch, rng: jax.Array) -> tuple[TrainState, StepInfo]:
        """One step of 000 Algorithm 1.

        Args:
          state: current :class:`TrainState`.
          batch: a :class:`Batch`; its length B is at most ``pad_to`` (one chunk) or longer
            (summed in chunks of ``pad_to``; the last chunk is padded).
          rng: a JAX PRNG key (noise, dropout; split internally).

        Returns:
          ``(new_state, info)``.
        """
        batch = self._normalize(batch)
        b = batch.mask.shape[0]
        host = self.denoiser.host_loop(state.params)
        if b <= self.pad_to and not host:
            return self._fused_jit(state, batch, rng)
        noisy, stats = self.noisy_gradient(state.params, batch, rng)
        denoised, dinfo = self._run_denoiser(noisy, state.params, batch, host)
        new_state, gnorm = self._update_jit(state, denoised)
        return new_state, self._info(stats, gnorm, dinfo)

    def noisy_gradient(self, params: PyTree, batch: Batch, rng: jax.Array) -> tuple[PyTree, dict]:
        """The privatized gradient g~ of 000 Algorithm 1 line 5 (before the denoiser).

        Args:
          params: model parameters.
          batch: a :class:`Batch` (any length; chunked by ``pad_to``).
          rng: the step's PRNG key (the same key as passed to ``__call__`` gives the same noise).

        Returns:
          ``(g~, stats)`` with ``g~ = (sum_i clip(g_i) + N(0, sigma^2 C^2)) / n1``.
        """
        batch = self._normalize(batch)
        b = batch.mask.shape[0]
        if b <= self.pad_to:
            return self._noisy_jit(params, batch.x, batch.y, batch.mask, rng)
        noise_key, drop_key, _ = jax.random.split(rng, 3)
        total, stats = None, None
        for c, (xc, yc, mc) in enumerate(self._chunks(batch)):
            s, st = self._clipped_sum_jit(params, xc, yc, mc, jax.random.fold_in(drop_key, c))
            total = s if total is None else self._add_jit(total, s)
            stats = st if stats is None else self._add_jit(stats, st)
        return self._privatize_jit(total, noise_key), stats

    def clipped_sum(self, params: PyTree, batch: Batch, rng: jax.Array) -> tuple[PyTree, dict]:
        """``sum_i clip_C(g_i)`` over the real units of a batch of length <= ``pad_to`` (no noise).

        Returns:
          ``(sum, stats)``; stats holds sums (loss_sum, num_examples, num_units, num_clipped,
          norm_sum) over real units.
        """
        batch = self._normalize(batch)
        _, drop_key, _ = jax.random.split(rng, 3)
        return self._clipped_sum_jit(params, batch.x, batch.y, batch.mask, jax.random.fold_in(drop_key, 0))

    # ---- internals ---------------------------------------------------------------------------

    def _normalize(self, batch: Batch) -> Batch:
        mask = _as_float_mask(batch.mask)
        x, y = batch.x, batch.y
        if self.config.unit == "user":
            if mask.ndim == 1:
                mask = jnp.broadcast_to(mask[:, None], _leading_shape(x, 2))
        else:
            if mask.ndim != 1:
                raise ValueError(f"per-example batches need a (B,) mask, got shape {mask.shape}")
        alt_mask = None if batch.alt_mask is None else _as_float_mask(batch.alt_mask)
        return Batch(x=x, y=y, mask=mask, x_alt=batch.x_alt, alt_mask=alt_mask)

    def _chunks(self, batch: Batch):
        p = self.pad_to
        b = batch.mask.shape[0]
        n_chunks = -(-b // p)
        pad = n_chunks * p - b

        def padded(a):
            a = jnp.asarray(a)
            if pad == 0:
                return a
            return jnp.concatenate([a, jnp.zeros((pad, *a.shape[1:]), a.dtype)])

        x, y, m = _tree_map(padded, batch.x), padded(batch.y), padded(batch.mask)
        for c in range(n_chunks):
            yield _tree_map(lambda a: a[c * p:(c + 1) * p], x), y[c * p:(c + 1) * p], m[c * p:(c + 1) * p]

    def _per_unit(self, params, x, y, mask, key):
        """Per-unit loss and gradient; a unit is (1 example) or (k examples of one user)."""
        if self.config.unit == "example":
            x = _tree_map(lambda a: a[:, None], x)
            y = y[:, None]
            mask = mask[:, None]

        def unit_loss(p, xu, yu, mu, ku):
            logits = self._logits_fn(p, xu, ku)
            losses = jax.vmap(self._loss_fn)(logits, yu)
            return jnp.sum(losses * mu.astype(losses.dtype))

        keys = jax.random.split(key, _leading_shape(x, 1)[0])
        return jax.vmap(jax.value_and_grad(unit_loss), in_axes=(None, 0, 0, 0, 0))(params, x, y, mask, keys), mask

    def _clipped_sum(self, params, x, y, mask, key):
        (losses, grads), mask2 = self._per_unit(params, x, y, mask, key)
        unit_mask = (jnp.sum(mask2, axis=1) > 0).astype(jnp.float32)
        sq = sum(jnp.sum(jnp.square(g.reshape(g.shape[0], -1)), axis=1) for g in jax.tree_util.tree_leaves(grads))
        norms = jnp.sqrt(sq)
        c = jnp.asarray(self.config.clip_norm, norms.dtype)
        scale = unit_mask * jnp.minimum(1.0, c / jnp.maximum(norms, 1e-30))
        total = _tree_map(lambda g: jnp.tensordot(scale.astype(g.dtype), g, axes=1), grads)
        stats = {
            "loss_sum": jnp.sum(losses * unit_mask),
            "num_examples": jnp.sum(mask2 * unit_mask[:, None]),
            "num_units": jnp.sum(unit_mask),
            "num_clipped": jnp.sum(unit_mask * (norms > c)),
            "norm_sum": jnp.sum(unit_mask * norms),
        }
        return total, stats

    def _privatize(self, total, key):
        cfg = self.config
        leaves, treedef = jax.tree_util.tree_flatten(total)
        keys = jax.random.split(key, len(leaves))
        std = cfg.noise_multiplier * cfg.clip_norm
        noisy = [
            (leaf + std * jax.random.normal(k, leaf.shape, leaf.dtype)) / cfg.expected_batch_size
            for leaf, k in zip(leaves, keys)
        ]
        return jax.tree_util.tree_unflatten(treedef, noisy)

    def _noisy_gradient(self, params, x, y, mask, rng):
        noise_key, drop_key, _ = jax.random.split(rng, 3)
        total, stats = self._clipped_sum(params, x, y, mask, jax.random.fold_in(drop_key, 0))
        return self._privatize(total, noise_key), stats

    def _denoise_inputs(self, batch: Batch):
        x, mask = batch.x, batch.mask
        if self.config.unit == "user":  # the batch's examples, flattened
            x = _tree_map(lambda a: a.reshape((-1, *a.shape[2:])), x)
            mask = mask.reshape(-1)
        return x, mask

    def _denoise(self, noisy, params, x, mask, x_alt, alt_mask):
        return self.denoiser(noisy, logits_fn=self._proj_fn, params=params, x=x, mask=mask,
                             x_alt=x_alt, alt_mask=alt_mask)

    def _run_denoiser(self, noisy, params, batch: Batch, host: bool):
        if isinstance(self.denoiser, NoOp):
            return noisy, {}
        x, mask = self._denoise_inputs(batch)
        if host:
            return self._denoise(noisy, params, x, mask, batch.x_alt, batch.alt_mask)
        return self._denoise_jit(noisy, params, x, mask, batch.x_alt, batch.alt_mask)

    def _update(self, state: TrainState, grads):
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return TrainState(params=params, opt_state=opt_state, step=state.step + 1), jnp.sqrt(_tree_sqnorm(grads))

    @staticmethod
    def _info(stats, gnorm, dinfo) -> StepInfo:
        nu = jnp.maximum(stats["num_units"], 1.0)
        return StepInfo(
            loss=stats["loss_sum"] / jnp.maximum(stats["num_examples"], 1.0),
            num_units=stats["num_units"],
            clipped_fraction=stats["num_clipped"] / nu,
            mean_grad_norm=stats["norm_sum"] / nu,
            grad_norm=gnorm,
            denoise=dict(dinfo),
        )

    def _fused(self, state: TrainState, batch: Batch, rng):
        noisy, stats = self._noisy_gradient(state.params, batch.x, batch.y, batch.mask, rng)
        if isinstance(self.denoiser, NoOp):
            denoised, dinfo = noisy, {}
        else:
            x, mask = self._denoise_inputs(batch)
            denoised, dinfo = self._denoise(noisy, state.params, x, mask, batch.x_alt, batch.alt_mask)
        new_state, gnorm = self._update(state, denoised)
        return new_state, self._info(stats, gnorm, dinfo)


def make_dpsgd_step(
    *,
    optimizer: optax.GradientTransformation,
    config: DPSGDConfig,
    model: Any | None = None,
    logits_fn: TrainLogitsFn | None = None,
    projection_logits_fn: Callable[[PyTree, jax.Array], jax.Array] | None = None,
    loss_fn: LossFn = cross_entropy,
    denoiser: Denoiser | None = None,
) -> DPSGDStep:
    """Builds the DP-SGD / LabelDP-Pro step of 000 Algorithm 1.

    Args:
      optimizer: an optax transformation (000 uses SGD; RMSprop for Table 7).
      config: a :class:`DPSGDConfig` (C, sigma, n1, sampling, unit, pad_to).
      model: a :class:`labeldp.models.ModelSpec`; sets ``logits_fn = model.train_logits`` and
        ``projection_logits_fn = model.logits`` unless those are given.
      logits_fn: training-mode logits ``f(params, x, rng) -> (n, K)`` (rng for dropout).
      projection_logits_fn: deterministic ``f(params, x) -> (n, K)`` used by the denoiser's
        projection (hashable).
      loss_fn: per-example loss ``(logits (K,), target) -> scalar``; default
        :func:`cross_entropy` (int label or (K,) weights).
      denoiser: a :class:`~labeldp.denoisers.Denoiser`; default NoOp (plain DP-SGD).

    Returns:
      A :class:`DPSGDStep`.
    """
    if model is not None:
        logits_fn = logits_fn or model.train_logits
        projection_logits_fn = projection_logits_fn or model.logits
    if logits_fn is None:
        raise ValueError("give model= or logits_fn=")
    return DPSGDStep(
        logits_fn=logits_fn,
        projection_logits_fn=projection_logits_fn,
        optimizer=optimizer,
        config=config,
        loss_fn=loss_fn,
        denoiser=denoiser if denoiser is not None else NoOp(),
    )


# --------------------------------------------------------------------------------------------
# Non-private step
# --------------------------------------------------------------------------------------------


class SGDStep:
    """A jitted non-private step: the optimizer on the mean loss over the batch's real examples.

    Same model, loss and :class:`Batch`/:class:`TrainState` types as :class:`DPSGDStep` (per
    example only). Build with :func:`make_sgd_step`.
    """

    def __init__(self, *, logits_fn: TrainLogitsFn, optimizer: optax.GradientTransformation, loss_fn: LossFn):
        self.optimizer = optimizer
        self._logits_fn = logits_fn
        self._loss_fn = loss_fn
        self._step_jit = jax.jit(self._step)

    def init(self, params: PyTree) -> TrainState:
        """Initial :class:`TrainState` for ``params``."""
        return TrainState(params=params, opt_state=self.optimizer.init(params), step=jnp.zeros((), jnp.int32))

    def _loss(self, params, batch: Batch, rng):
        logits = self._logits_fn(params, batch.x, rng)
        losses = jax.vmap(self._loss_fn)(logits, batch.y)
        mask = _as_float_mask(batch.mask)
        return jnp.sum(losses * mask) / jnp.maximum(jnp.sum(mask), 1.0)

    def _step(self, state: TrainState, batch: Batch, rng):
        loss, grads = jax.value_and_grad(self._loss)(state.params, batch, rng)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        n = jnp.sum(_as_float_mask(batch.mask))
        gnorm = jnp.sqrt(_tree_sqnorm(grads))
        info = StepInfo(loss=loss, num_units=n, clipped_fraction=jnp.zeros(()), mean_grad_norm=jnp.zeros(()),
                        grad_norm=gnorm, denoise={})
        return TrainState(params=params, opt_state=opt_state, step=state.step + 1), info

    def __call__(self, state: TrainState, batch: Batch, rng: jax.Array) -> tuple[TrainState, StepInfo]:
        """One optimizer step on ``mean_{real i} loss_fn(logits_i, y_i)``.

        Args:
          state: current state. batch: a :class:`Batch` (x, y, mask). rng: PRNG key (dropout).

        Returns:
          ``(new_state, info)`` (``info.grad_norm`` is the mean gradient's norm).
        """
        return self._step_jit(state, batch, rng)


def make_sgd_step(
    *,
    optimizer: optax.GradientTransformation,
    model: Any | None = None,
    logits_fn: TrainLogitsFn | None = None,
    loss_fn: LossFn = cross_entropy,
) -> SGDStep:
    """Builds the non-private step (the non-private baseline; RR-style methods via ``loss_fn``).

    Args:
      optimizer: an optax transformation.
      model: a :class:`labeldp.models.ModelSpec` (uses ``model.train_logits``), or
      logits_fn: training-mode logits ``f(params, x, rng) -> (n, K)``.
      loss_fn: per-example loss ``(logits (K,), target) -> scalar``.

    Returns:
      An :class:`SGDStep`.
    """
    if model is not None:
        logits_fn = logits_fn or model.train_logits
    if logits_fn is None:
        raise ValueError("give model= or logits_fn=")
    return SGDStep(logits_fn=logits_fn, optimizer=optimizer, loss_fn=loss_fn)


# --------------------------------------------------------------------------------------------
# Batch samplers (host side, numpy)
# --------------------------------------------------------------------------------------------


def _generator(rng: np.random.Generator | int) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def num_steps(*, n: int, expected_batch_size: int, epochs: float) -> int:
    """Number of steps for ``epochs`` passes: ``floor(epochs * n / n1)`` (steps per epoch = n/n1).

    E.g. MNIST, n = 60000, n1 = 1024, 10 epochs: 585 steps.
    """
    return int(math.floor(epochs * n / expected_batch_size))


def poisson_batches(
    n: int,
    *,
    sampling_rate: float,
    rng: np.random.Generator | int,
    pad_to: int,
    num_batches: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Poisson-subsampled batches, padded to a multiple of ``pad_to``.

    Each of the n units is included independently with probability ``sampling_rate`` (q = n1/n),
    the sampling that the privacy analysis assumes (000 Section 3.4). The batch is padded with
    index 0 and mask False to length ``m * pad_to``, ``m = max(1, ceil(size / pad_to))``: a
    batch larger than ``pad_to`` is kept whole (processed in chunks by :class:`DPSGDStep`),
    never truncated or resampled.

    Args:
      n: dataset size (number of users for user-level DP).
      sampling_rate: q in (0, 1].
      rng: numpy Generator or seed.
      pad_to: padded length (e.g. ``DPSGDConfig.padded_batch_size``).
      num_batches: number of batches to yield (e.g. :func:`num_steps`).

    Yields:
      ``(indices, mask)``: int64 indices (padded with 0) and a bool mask, same length.
    """
    if not 0.0 < sampling_rate <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate}")
    gen = _generator(rng)
    pad_to = int(pad_to)
    for _ in range(int(num_batches)):
        idx = np.flatnonzero(gen.random(n) < sampling_rate)
        m = max(1, -(-idx.size // pad_to))
        out = np.zeros(m * pad_to, np.int64)
        out[: idx.size] = idx
        mask = np.zeros(m * pad_to, bool)
        mask[: idx.size] = True
        yield out, mask


def shuffled_batches(
    n: int,
    *,
    batch_size: int,
    rng: np.random.Generator | int,
    num_batches: int | None = None,
    drop_remainder: bool = True,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Fixed-size batches from random permutations (epoch after epoch).

    Args:
      n: dataset size.
      batch_size: n1.
      rng: numpy Generator or seed.
      num_batches: total batches to yield (crossing epochs); ``None`` = one epoch.
      drop_remainder: drop each epoch's last partial batch (default), or pad it (mask False).

    Yields:
      ``(indices, mask)`` of length ``batch_size``.
    """
    gen = _generator(rng)
    bs = int(batch_size)
    per_epoch = n // bs if drop_remainder else -(-n // bs)
    if per_epoch < 1:
        raise ValueError(f"batch_size {bs} > n {n} with drop_remainder=True")
    total = per_epoch if num_batches is None else int(num_batches)
    produced = 0
    while produced < total:
        perm = gen.permutation(n)
        for b in range(per_epoch):
            if produced >= total:
                return
            idx = perm[b * bs:(b + 1) * bs]
            mask = np.ones(bs, bool)
            if idx.size < bs:
                mask[idx.size:] = False
                idx = np.concatenate([idx, np.zeros(bs - idx.size, idx.dtype)])
            produced += 1
            yield idx.astype(np.int64), mask


def sample_alt_batch(n: int, *, size: int, rng: np.random.Generator | int) -> np.ndarray:
    """Indices of an alternative batch I^P for AltConv: ``size`` distinct units, uniformly,
    drawn independently of I^G (000 Table 1). Only their features may be used."""
    return _generator(rng).choice(n, size=int(size), replace=False).astype(np.int64)
