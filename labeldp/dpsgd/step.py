"""The private step: DP-SGD with a denoiser hook, the training step of LabelDP-Pro (000 Algorithm 1).

:class:`DPSGDStep` (per-unit gradients, L2 clipping, Gaussian noise on the sum divided by the
expected batch size n1, the denoiser, the optimizer update; chunked sums for batches longer than
``pad_to``); built by :func:`labeldp.dpsgd.make_step.make_dpsgd_step`. Re-exported by
:mod:`labeldp.dpsgd`, whose docstring describes sampling, units and losses.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

from labeldp.denoisers import Denoiser, NoOp
from labeldp.dpsgd.clipping import (
    TappedFn,
    bookkeeping_clipped_sum,
    default_chunk_size,
    describe,
    resolve_formulation,
    vmap_clipped_sum,
)
from labeldp.dpsgd.step_types import (
    Batch,
    DPSGDConfig,
    LossFn,
    PyTree,
    StepHyper,
    StepInfo,
    TrainLogitsFn,
    TrainState,
    as_float_mask,
    leading_shape,
    tree_sqnorm,
)
from labeldp.dpsgd.tapped_logits import TappedLogits

__all__ = ["DPSGDStep"]

_tree_map = jax.tree_util.tree_map


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
      formulation: how the clipped sum is computed (:mod:`labeldp.dpsgd.clipping`):
        ``"vmap_grad"`` or ``"bookkeeping"``.
      chunk_size: units per chunk of the book-keeping formulation (``None``: whole batch).
      require_hyper: every call must pass ``hyper`` (a step shared by runs with different C and
        sigma, :mod:`labeldp.dpsgd.shared_steps`: its config's C and sigma are one run's).
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
        tapped_fn: TappedFn | None = None,
        formulation: str = "auto",
        chunk_size: int | None = None,
        tapped_projection: bool = False,
        require_hyper: bool = False,
    ):
        self.config = config
        self.require_hyper = bool(require_hyper)
        self.formulation = resolve_formulation(formulation, tapped_available=tapped_fn is not None)
        self.chunk_size = chunk_size if chunk_size is not None else default_chunk_size()
        self._tapped_fn = tapped_fn
        self.denoiser = denoiser
        self.optimizer = optimizer
        self.pad_to = config.padded_batch_size
        self._logits_fn = logits_fn
        self._loss_fn = loss_fn
        if self.formulation == "bookkeeping" and projection_logits_fn is not None and tapped_projection:
            # the projection's per-class gradient rows through the tape too (same rows, faster on CPU)
            projection_logits_fn = TappedLogits(projection_logits_fn, tapped_fn)
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

    @property
    def projection_logits_fn(self):
        """The logits function the denoiser projects with (a :class:`~labeldp.dpsgd.tapped_logits.
        TappedLogits` when the projection's per-class rows go through the tape)."""
        return self._proj_fn

    def describe(self) -> dict:
        """What a record stores about how this step computed its clipped sums."""
        return describe(self.formulation, self.chunk_size)

    def init(self, params: PyTree) -> TrainState:
        """Initial :class:`TrainState` for ``params``."""
        return TrainState(params=params, opt_state=self.optimizer.init(params), step=jnp.zeros((), jnp.int32))

    def __call__(
        self, state: TrainState, batch: Batch, rng: jax.Array, hyper: StepHyper | None = None
    ) -> tuple[TrainState, StepInfo]:
        """One step of 000 Algorithm 1.

        Args:
          state: current :class:`TrainState`.
          batch: a :class:`Batch`; its length B is at most ``pad_to`` (one chunk) or longer
            (summed in chunks of ``pad_to``; the last chunk is padded).
          rng: a JAX PRNG key (noise, dropout; split internally).
          hyper: C and sigma as traced values (:class:`StepHyper`, built by ``StepHyper.of``) so
            that runs of a sweep which differ in them call one compiled program; None: the
            config's constants. Either way the step computes the same numbers on CPU.

        Returns:
          ``(new_state, info)``.
        """
        self._check_hyper(hyper)
        batch = self._normalize(batch)
        b = batch.mask.shape[0]
        host = self.denoiser.host_loop(state.params)
        if b <= self.pad_to and not host:
            return self._fused_jit(state, batch, rng, hyper)
        noisy, stats = self.noisy_gradient(state.params, batch, rng, hyper)
        denoised, dinfo = self._run_denoiser(noisy, state.params, batch, host)
        new_state, gnorm = self._update_jit(state, denoised)
        return new_state, self._info(stats, gnorm, dinfo)

    def pure_step(
        self, state: TrainState, batch: Batch, rng: jax.Array, hyper: StepHyper | None = None
    ) -> tuple[TrainState, StepInfo]:
        """The un-jitted step for one batch of length ``pad_to`` whose denoiser runs in-jit: the
        function ``__call__`` compiles, for callers that transform it (``jax.vmap`` over runs).

        Args:
          state, batch, rng: as ``__call__``.
          hyper: C and sigma as traced values (:class:`StepHyper`) instead of the config's; None:
            the config's (then the step computes exactly what ``__call__`` computes).

        Raises:
          ValueError: the denoiser drives its loop from Python (``host_loop``).
        """
        if self.denoiser.host_loop(state.params):
            raise ValueError(
                f"the {self.denoiser.name} denoiser runs a Python-driven loop; pure_step needs an "
                "in-jit denoiser (loop='fori')"
            )
        self._check_hyper(hyper)
        return self._fused(state, self._normalize(batch), rng, hyper)

    def noisy_gradient(
        self, params: PyTree, batch: Batch, rng: jax.Array, hyper: StepHyper | None = None
    ) -> tuple[PyTree, dict]:
        """The privatized gradient g~ of 000 Algorithm 1 line 5 (before the denoiser).

        Args:
          params: model parameters.
          batch: a :class:`Batch` (any length; chunked by ``pad_to``).
          rng: the step's PRNG key (the same key as passed to ``__call__`` gives the same noise).
          hyper: traced C and sigma (see ``__call__``); None: the config's.

        Returns:
          ``(g~, stats)`` with ``g~ = (sum_i clip(g_i) + N(0, sigma^2 C^2)) / n1``.
        """
        self._check_hyper(hyper)
        batch = self._normalize(batch)
        b = batch.mask.shape[0]
        if b <= self.pad_to:
            return self._noisy_jit(params, batch.x, batch.y, batch.mask, rng, hyper)
        noise_key, drop_key, _ = jax.random.split(rng, 3)
        clip = None if hyper is None else hyper.clip_norm
        total, stats = None, None
        for c, (xc, yc, mc) in enumerate(self._chunks(batch)):
            s, st = self._clipped_sum_jit(params, xc, yc, mc, jax.random.fold_in(drop_key, c), clip)
            total = s if total is None else self._add_jit(total, s)
            stats = st if stats is None else self._add_jit(stats, st)
        return self._privatize_jit(total, noise_key, hyper), stats

    def clipped_sum(self, params: PyTree, batch: Batch, rng: jax.Array) -> tuple[PyTree, dict]:
        """``sum_i clip_C(g_i)`` over the real units of a batch of length <= ``pad_to`` (no noise).

        Returns:
          ``(sum, stats)``; stats holds sums (loss_sum, num_examples, num_units, num_clipped,
          norm_sum) over real units.
        """
        self._check_hyper(None)
        batch = self._normalize(batch)
        _, drop_key, _ = jax.random.split(rng, 3)
        return self._clipped_sum_jit(params, batch.x, batch.y, batch.mask, jax.random.fold_in(drop_key, 0))

    # ---- internals ---------------------------------------------------------------------------

    def _check_hyper(self, hyper: StepHyper | None) -> None:
        if hyper is None and self.require_hyper:
            raise ValueError(
                "this step is shared by runs with different C and sigma (labeldp.dpsgd.shared_steps): "
                "pass the run's hyper=StepHyper.of(config)"
            )

    def _normalize(self, batch: Batch) -> Batch:
        mask = as_float_mask(batch.mask)
        x, y = batch.x, batch.y
        if self.config.unit == "user":
            if mask.ndim == 1:
                mask = jnp.broadcast_to(mask[:, None], leading_shape(x, 2))
        else:
            if mask.ndim != 1:
                raise ValueError(f"per-example batches need a (B,) mask, got shape {mask.shape}")
        alt_mask = None if batch.alt_mask is None else as_float_mask(batch.alt_mask)
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
            yield _tree_map(lambda a: a[c * p : (c + 1) * p], x), y[c * p : (c + 1) * p], m[c * p : (c + 1) * p]

    def _clipped_sum(self, params, x, y, mask, key, clip_norm=None):
        clip = self.config.clip_norm if clip_norm is None else clip_norm
        if self.formulation == "bookkeeping":
            return bookkeeping_clipped_sum(
                tapped_fn=self._tapped_fn,
                loss_fn=self._loss_fn,
                unit=self.config.unit,
                clip_norm=clip,
                chunk_size=self.chunk_size,
                params=params,
                x=x,
                y=y,
                mask=mask,
                key=key,
            )
        return vmap_clipped_sum(
            logits_fn=self._logits_fn,
            loss_fn=self._loss_fn,
            unit=self.config.unit,
            clip_norm=clip,
            params=params,
            x=x,
            y=y,
            mask=mask,
            key=key,
        )

    def _privatize(self, total, key, hyper: StepHyper | None = None):
        cfg = self.config
        leaves, treedef = jax.tree_util.tree_flatten(total)
        keys = jax.random.split(key, len(leaves))
        std = cfg.noise_multiplier * cfg.clip_norm if hyper is None else hyper.sum_noise_std()
        noisy = [
            (leaf + std * jax.random.normal(k, leaf.shape, leaf.dtype)) / cfg.expected_batch_size
            for leaf, k in zip(leaves, keys)
        ]
        return jax.tree_util.tree_unflatten(treedef, noisy)

    def _noisy_gradient(self, params, x, y, mask, rng, hyper: StepHyper | None = None):
        noise_key, drop_key, _ = jax.random.split(rng, 3)
        total, stats = self._clipped_sum(
            params, x, y, mask, jax.random.fold_in(drop_key, 0), None if hyper is None else hyper.clip_norm
        )
        return self._privatize(total, noise_key, hyper), stats

    def _denoise_inputs(self, batch: Batch):
        x, mask = batch.x, batch.mask
        if self.config.unit == "user":  # the batch's examples, flattened
            x = _tree_map(lambda a: a.reshape((-1, *a.shape[2:])), x)
            mask = mask.reshape(-1)
        return x, mask

    def _denoise(self, noisy, params, x, mask, x_alt, alt_mask):
        return self.denoiser(
            noisy, logits_fn=self._proj_fn, params=params, x=x, mask=mask, x_alt=x_alt, alt_mask=alt_mask
        )

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
        return TrainState(params=params, opt_state=opt_state, step=state.step + 1), jnp.sqrt(tree_sqnorm(grads))

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

    def _fused(self, state: TrainState, batch: Batch, rng, hyper: StepHyper | None = None):
        noisy, stats = self._noisy_gradient(state.params, batch.x, batch.y, batch.mask, rng, hyper)
        if isinstance(self.denoiser, NoOp):
            denoised, dinfo = noisy, {}
        else:
            x, mask = self._denoise_inputs(batch)
            denoised, dinfo = self._denoise(noisy, state.params, x, mask, batch.x_alt, batch.alt_mask)
        new_state, gnorm = self._update(state, denoised)
        return new_state, self._info(stats, gnorm, dinfo)
