"""Hybrid: DP training with semi-sensitive features (002 Section 3), and its two baselines.

Setting (002 Section 2): each example is ``(x°, x•, y)``; the non-sensitive features x° are
public, the sensitive features x• and the label y are private. Neighbouring data sets differ in
the private part ``(x•, y)`` of one example (replace-one; dp_accounting REPLACE_ONE, reported as
``label_substitution``; the record also states eps under add-or-remove).

Model (002 Section 3, Appendix A): the ads MLP (:class:`labeldp.ads.model.AdsMLP`) whose sensitive
features' embeddings (and sensitive numerical columns) form the sensitive tower; the TRUNCATED
model feeds zeros in their place, ``f(g(x°) ∘ 0)``, so it never reads x•.

Two phases, ``eps1 + eps2 = eps`` (basic composition, 002 Proposition 2):

1. Label-DP phase (eps1, delta 0): randomized response RR_eps1 on every training label, then
   ``epochs`` epochs of the truncated model on the debiased loss of 002 Section 3,
   ``(L(1 - y^) - p (L(0) + L(1))) / (1 - 2p)`` with ``p = 1 / (1 + e^-eps1)``, an unbiased
   estimate of ``L(y)``; it touches only x° and the randomized labels, so it is eps1-DP.
2. DP-SGD phase (eps2, delta): the whole model, from phase 1's parameters, DP-SGD with
   per-example clipping and Poisson sampling (:mod:`labeldp.dpsgd`), sigma calibrated by the
   accountant (PLD here; 002 used RDP) so that this phase is (eps2, delta)-DP.

Split (002 Section 3): ``eps1 = min(0.6 eps, 3)``, ``eps2 = eps - eps1``. The baselines are the
special cases 002 names: RR on the truncated model (``eps1 = eps``, phase 1 only) and DP-SGD on
all features (``eps2 = eps``, phase 2 only, from the initial parameters).

Optimizers (002 Appendix A): phase 1 RMSProp (Attribution) / Yogi (pCTR); phase 2 Adam
(Attribution) / SGD with momentum 0.9 (pCTR); every learning rate follows a cosine decay over
its phase. The user-level version (002 Table 3): :mod:`labeldp.ads.hybrid_user`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import jax
import numpy as np
import optax

from labeldp.ads.model import AdsMLP, two_class_logits
from labeldp.ads.train import init_params, run_shuffled_epochs
from labeldp.dpsgd import DPSGDConfig, make_dpsgd_step, make_sgd_step
from labeldp.dpsgd.loop import run_dp_loop, split_init_key
from labeldp.dpsgd.training_plan import DPTrainingPlan
from labeldp.mechanisms.classification import randomized_response

__all__ = ["split_budget", "debiased_rr_weights", "HybridConfig", "train_hybrid", "PHASE_OPTIMIZERS"]

#: 002 Appendix A: (phase-1 optimizer, phase-2 optimizer) per dataset.
PHASE_OPTIMIZERS = {"criteo_attribution": ("rmsprop", "adam"), "criteo_pctr": ("yogi", "sgd_momentum")}


def split_budget(epsilon: float, *, rule: str = "hybrid") -> tuple[float, float]:
    """``(eps1, eps2)`` for a total ``epsilon`` (002 Section 3).

    Args:
      epsilon: the total budget, > 0.
      rule: ``"hybrid"`` (``eps1 = min(0.6 eps, 3)``), ``"rr_only"`` (``(eps, 0)``) or
        ``"dpsgd_only"`` (``(0, eps)``).

    Returns:
      ``(eps1, eps2)`` with ``eps1 + eps2 == epsilon``.
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"Hybrid needs a finite epsilon > 0, got {epsilon}")
    if rule == "hybrid":
        eps1 = min(0.6 * epsilon, 3.0)
    elif rule == "rr_only":
        eps1 = epsilon
    elif rule == "dpsgd_only":
        eps1 = 0.0
    else:
        raise ValueError(f"unknown budget split rule {rule!r}; use hybrid, rr_only or dpsgd_only")
    return eps1, epsilon - eps1


def debiased_rr_weights(noisy_labels: np.ndarray, *, eps1: float) -> np.ndarray:
    """Per-class weights ``w`` with ``sum_c w_c L(c)`` = 002's debiased loss for binary RR.

    ``(L(1 - y^) - p (L(0) + L(1))) / (1 - 2p)``, ``p = 1 / (1 + e^-eps1)``: the weight of
    ``L(y^)`` is ``-p / (1 - 2p)`` and of ``L(1 - y^)`` is ``(1 - p) / (1 - 2p)``; its expectation
    over RR's randomness is ``L(y)``.

    Args:
      noisy_labels: (n,) RR labels in {0, 1}.
      eps1: RR's epsilon, > 0.

    Returns:
      (n, 2) float32 weights.
    """
    p = 1.0 / (1.0 + math.exp(-eps1))
    w_same, w_other = -p / (1 - 2 * p), (1 - p) / (1 - 2 * p)
    y = np.asarray(noisy_labels, np.int64)
    out = np.empty((y.size, 2), np.float32)
    out[np.arange(y.size), y] = w_same
    out[np.arange(y.size), 1 - y] = w_other
    return out


@dataclasses.dataclass(frozen=True)
class HybridConfig:
    """Hyper-parameters of the two phases (002 Appendix A).

    Attributes:
      learning_rate, epochs, batch_size: phase 1 (label-DP phase).
      dp_learning_rate, dp_epochs, dp_batch_size, clip_norm: phase 2 (DP-SGD; batch = expected size).
      optimizers: (phase 1, phase 2) names (:data:`PHASE_OPTIMIZERS`).
    """

    learning_rate: float
    epochs: int
    batch_size: int
    dp_learning_rate: float
    dp_epochs: int
    dp_batch_size: int
    clip_norm: float
    optimizers: tuple[str, str] = ("rmsprop", "adam")


def _optimizer(name: str, learning_rate: float, steps: int) -> optax.GradientTransformation:
    schedule = optax.cosine_decay_schedule(learning_rate, decay_steps=max(int(steps), 1))
    if name == "rmsprop":
        return optax.rmsprop(schedule)
    if name == "adam":
        return optax.adam(schedule)
    if name == "yogi":
        return optax.yogi(schedule)
    if name == "sgd_momentum":
        return optax.sgd(schedule, momentum=0.9)
    raise ValueError(f"unknown optimizer {name!r}")


def _phase1(model: AdsMLP, params, x_num, x_cat, weights, cfg: HybridConfig, seed: int):
    per_epoch = -(-weights.shape[0] // min(cfg.batch_size, weights.shape[0]))
    step = make_sgd_step(
        optimizer=_optimizer(cfg.optimizers[0], cfg.learning_rate, per_epoch * cfg.epochs),
        logits_fn=two_class_logits(model, truncated=True),
    )
    run = run_shuffled_epochs(
        step,
        step.init(params),
        x_num=x_num,
        x_cat=x_cat,
        targets=weights,
        batch_size=cfg.batch_size,
        epochs=cfg.epochs,
        rng=np.random.default_rng([seed, 11]),
        key=jax.random.PRNGKey(seed),
        stop_on_divergence=False,
    )
    return run.state.params, run.losses


def _phase2(model: AdsMLP, params, x_num, x_cat, y, cfg: HybridConfig, *, plan: DPTrainingPlan, seed: int):
    dp = DPSGDConfig(
        clip_norm=cfg.clip_norm,
        noise_multiplier=plan.noise_multiplier,
        expected_batch_size=plan.expected_batch_size,
        sampling=plan.sampling,
    )
    logits = two_class_logits(model)
    step = make_dpsgd_step(
        optimizer=_optimizer(cfg.optimizers[1], cfg.dp_learning_rate, plan.steps),
        config=dp,
        logits_fn=logits,
        tapped_fn=logits.tapped,
    )
    loop = run_dp_loop(
        step=step,
        state=step.init(params),
        plan=plan,
        seed=seed,
        key=split_init_key(seed)[0],
        gather=lambda idx: (x_num[idx], x_cat[idx]),
        labels=y,
    )
    return loop, step.describe()


def train_hybrid(
    model: AdsMLP,
    *,
    x_num: np.ndarray,
    x_cat: np.ndarray,
    y: np.ndarray,
    eps1: float,
    plan: DPTrainingPlan | None,
    cfg: HybridConfig,
    seed: int,
    phase1_rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Runs the phases that have budget: phase 1 when ``eps1 > 0``, phase 2 when ``plan`` is given.

    Args:
      model: the two-tower ads MLP (its ``sensitive_*`` flags set).
      x_num, x_cat, y: the training rows and TRUE labels (phase 1 randomizes them itself).
      eps1: phase 1's epsilon PER LABEL (0: no phase 1).
      phase1_rows: ``(x_num, x_cat, y)`` for phase 1 when it trains on other rows than phase 2
        (002's user-level Hybrid: one example per user in phase 1, k in phase 2); default the same rows.
      plan: phase 2's :class:`~labeldp.dpsgd.training_plan.DPTrainingPlan` over the rows of ``y``
        (its sampler, steps and sigma; None: no phase 2). Phase 2 runs on the suite's one DP loop,
        :func:`labeldp.dpsgd.loop.run_dp_loop`.
      cfg: hyper-parameters. seed: the run's seed.

    Returns:
      ``{"params", "truncated" (predict with the truncated model), "label_noise_rate",
      "phase1_loss", "phase2_loss", "phase2_steps", "phase2_clipping" (how the clipped sums were
      computed, :mod:`labeldp.dpsgd.clipping`), "seconds"}``.
    """
    t0 = time.perf_counter()
    params = init_params(model, x_num, x_cat, seed=seed)
    out: dict[str, Any] = {"label_noise_rate": None, "phase1_loss": None, "phase2_loss": None, "phase2_steps": 0}
    if eps1 > 0:
        xn1, xc1, y1 = phase1_rows if phase1_rows is not None else (x_num, x_cat, y)
        noisy = randomized_response(
            np.asarray(y1, np.int64), num_classes=2, epsilon=eps1, rng=np.random.default_rng([seed, 1, 2])
        )
        out["label_noise_rate"] = float(np.mean(noisy != y1))
        params, l1 = _phase1(model, params, xn1, xc1, debiased_rr_weights(noisy, eps1=eps1), cfg, seed)
        out["phase1_loss"] = float(np.mean(l1[-max(1, len(l1) // 10) :]))
    if plan is not None:
        if plan.n != int(y.shape[0]):
            raise ValueError(f"phase 2's plan is for {plan.n} rows, the data has {y.shape[0]}")
        loop, out["phase2_clipping"] = _phase2(
            model, params, x_num, x_cat, np.asarray(y, np.int32), cfg, plan=plan, seed=seed
        )
        params = loop.state.params
        out["phase2_loss"] = loop.final_loss if loop.losses else None
        out["phase2_steps"] = loop.steps
    out["params"] = params
    out["truncated"] = plan is None
    out["seconds"] = time.perf_counter() - t0
    return out
