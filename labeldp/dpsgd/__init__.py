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

Layout (one module per seam; this module re-exports all of them and stays the import surface):
:mod:`labeldp.dpsgd.step_types` (config, batch/state types, :func:`cross_entropy`),
:mod:`labeldp.dpsgd.step` (the private step), :mod:`labeldp.dpsgd.make_step` (its builder),
:mod:`labeldp.dpsgd.shared_steps` (one compiled step for a sweep's runs that differ in learning rate,
C, sigma and seed), :mod:`labeldp.dpsgd.sgd_step` (the non-private step),
:mod:`labeldp.dpsgd.sampling` (host-side batch samplers), :mod:`labeldp.dpsgd.training_plan` (one
run's plan: sampler, steps, sigma, accounting) and :mod:`labeldp.dpsgd.loop` (the one DP training loop).
"""

from __future__ import annotations

from labeldp.dpsgd.sampling import (  # noqa: F401
    num_steps,
    poisson_batches,
    sample_alt_batch,
    shuffled_batches,
)
from labeldp.dpsgd.make_step import make_dpsgd_step  # noqa: F401
from labeldp.dpsgd.step import DPSGDStep  # noqa: F401
from labeldp.dpsgd.step_types import (  # noqa: F401
    Batch,
    DPSGDConfig,
    LossFn,
    PyTree,
    StepHyper,
    StepInfo,
    TrainLogitsFn,
    TrainState,
    as_float_mask,
    tree_sqnorm,
    cross_entropy,
    default_pad_to,
)
from labeldp.dpsgd.sgd_step import SGDStep, make_sgd_step  # noqa: F401

__all__ = [
    "DPSGDConfig",
    "Batch",
    "TrainState",
    "StepHyper",
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
