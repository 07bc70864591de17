"""The body every regression label-randomizer method shares (003 Section 4 protocol).

1. Randomize every training label once with the method's mechanism (the only access to the
   private labels; the mechanism states its guarantee in a :class:`PrivacyOutcome`).
2. Hold out a fixed part of the training split (``validation_fraction``, default 0.1, the same
   rows for every method and seed). Its *randomized* labels score the model for the honest
   protocol (select the grid point with the lowest noisy validation MSE); its true labels are
   never read. For an unbiased randomizer the noisy validation MSE equals the true MSE plus the
   noise variance in expectation, so it ranks grid points correctly; for a biased one it does
   not, which is part of what 003 compares.
3. Train the dataset's 003 MLP on the rest with RMSProp and evaluate the test MSE against the
   true test labels (the paper's protocol then takes the best test MSE over the grid).

Every record stores: eps1 (prior), eps2 (randomizer), mesh size, the noisy-label MSE on the
whole training split, the randomizer's construction time (the LP solve for 003's optimal
unbiased randomizer), the test MSE, the noisy validation MSE, and a coarse joint histogram of
(label, randomized label) for 003 Figure 3.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Mapping

import numpy as np

from labeldp.methods.base import MethodResult, PrivacyOutcome, RunSpec
from labeldp.regression import PRIOR_EPSILON
from labeldp.selection import VALIDATION_SEED, validation_split  # noqa: F401 (re-exported)
from labeldp.regression.model import TabularMLP, model_for
from labeldp.regression.train import RegressionTrainConfig, predict, train_regression

__all__ = [
    "Randomized",
    "run_label_randomizer",
    "validation_split",
    "joint_histogram",
    "VALIDATION_SEED",
    "prior_epsilon",
]

JOINT_BINS = (26, 40)


@dataclasses.dataclass(frozen=True)
class Randomized:
    """What a method's randomizer returns.

    Attributes:
      noisy_labels: one randomized label per training row.
      privacy: the guarantee (label substitution, pure eps-DP for 003's randomizers).
      details: eps1, eps2, mesh size, randomizer construction seconds, ... (stored in the record).
    """

    noisy_labels: np.ndarray
    privacy: PrivacyOutcome
    details: Mapping[str, Any]


def prior_epsilon(data, spec: RunSpec) -> float:
    """eps1 of the private prior for this run, checked against the total eps (eps1 < eps)."""
    eps1 = float(spec.options.get("prior_epsilon", PRIOR_EPSILON.get(data.name, 0.0)))
    if not eps1 > 0:
        raise ValueError(
            f"no prior budget eps1 for dataset {data.name!r}: add it to PRIOR_EPSILON in "
            "labeldp/regression/__init__.py or set the variant option prior_epsilon"
        )
    if eps1 >= spec.epsilon:
        raise ValueError(
            f"the prior budget eps1 = {eps1} is not below the run's eps = {spec.epsilon}: nothing is "
            "left for the randomizer (eps2 = eps - eps1 <= 0); lower prior_epsilon or raise eps"
        )
    return eps1


def joint_histogram(labels: np.ndarray, noisy: np.ndarray, *, lower: float, upper: float) -> dict[str, Any]:
    """Counts of (label, randomized label) on a fixed grid (003 Figure 3's joint density).

    Label bins span ``[lower, upper]``; randomized-label bins span the range of the randomized
    labels cut at ``lower - 2 span`` and ``upper + 2 span`` (rows beyond are counted in the
    edge bins).
    """
    span = upper - lower
    lo = max(float(np.min(noisy)), lower - 2 * span)
    hi = min(float(np.max(noisy)), upper + 2 * span)
    if hi <= lo:
        hi = lo + 1.0
    y_edges = np.linspace(lower, upper, JOINT_BINS[0] + 1)
    n_edges = np.linspace(lo, hi, JOINT_BINS[1] + 1)
    counts, _, _ = np.histogram2d(labels, np.clip(noisy, lo, hi), bins=[y_edges, n_edges])
    return {"label_edges": y_edges.tolist(), "noisy_edges": n_edges.tolist(), "counts": counts.astype(int).tolist()}


def run_label_randomizer(data, spec: RunSpec, randomize: Callable[..., Randomized], *, name: str) -> MethodResult:
    """Randomize, train, evaluate (module docstring); the ``run`` of every regression method.

    Args:
      data: a :class:`labeldp.data.tabular.PreparedTabular`.
      spec: the run; ``hparams`` holds learning_rate, epochs, batch_size.
      randomize: ``randomize(labels, *, data, spec, rng) -> Randomized`` (the method's mechanism).
      name: method name for messages.

    Returns:
      The :class:`MethodResult` with ``test_mse``, ``noisy_label_mse``, ``validation_noisy_mse``.
    """
    if getattr(data, "kind", None) != "tabular":
        raise ValueError(f"{name} runs on tabular regression data; {getattr(data, 'name', data)!r} is not")
    if spec.private and not spec.epsilon > 0:
        raise ValueError(f"{name}: eps must be > 0, got {spec.epsilon}")
    hp = spec.hparams
    config = RegressionTrainConfig(
        learning_rate=float(hp["learning_rate"]),
        epochs=int(hp["epochs"]),
        batch_size=int(hp["batch_size"]),
        l2=float(hp.get("l2", 1e-4)),
    )
    arch = model_for(data.name)
    fraction = float(spec.options.get("validation_fraction", 0.1))
    fit, val = validation_split(data.y_train.shape[0], fraction)
    label_rng, _ = np.random.default_rng(spec.seed).spawn(2)

    t0 = time.perf_counter()
    out = randomize(data.y_train, data=data, spec=spec, rng=label_rng)
    randomize_seconds = time.perf_counter() - t0
    noisy = np.asarray(out.noisy_labels, dtype=float)
    if noisy.shape != data.y_train.shape or not np.all(np.isfinite(noisy)):
        raise RuntimeError(
            f"{name}: the randomizer returned {noisy.shape} labels (finite: "
            f"{bool(np.all(np.isfinite(noisy)))}) for {data.y_train.shape} training labels"
        )

    model = TabularMLP(
        hidden=arch.hidden,
        vocab_sizes=tuple(data.cat_vocab_sizes),
        embedding_dim=arch.embedding_dim,
        output_bias=float(np.mean(noisy[fit])),
    )
    res = train_regression(
        model, x_num=data.x_num_train[fit], x_cat=data.x_cat_train[fit], y=noisy[fit], config=config, seed=spec.seed
    )
    pred_test = predict(model, res.params, data.x_num_test, data.x_cat_test)
    pred_val = predict(model, res.params, data.x_num_train[val], data.x_cat_train[val])
    test_mse = float(np.mean((pred_test - data.y_test) ** 2))
    metrics = {
        "test_mse": test_mse if np.isfinite(test_mse) else math.inf,
        "validation_noisy_mse": float(np.mean((pred_val - noisy[val]) ** 2)),
        "noisy_label_mse": float(np.mean((noisy - data.y_train) ** 2)),
        "noisy_label_bias": float(np.mean(noisy - data.y_train)),
        "diverged": bool(res.diverged or not np.isfinite(test_mse)),
        "final_train_loss": res.final_loss,
        "steps": res.steps,
    }
    details = {
        **dict(out.details),
        "model": arch.to_dict(),
        "validation_fraction": fraction,
        "n_fit": int(fit.size),
        "n_validation": int(val.size),
        "joint_histogram": joint_histogram(data.y_train, noisy, lower=data.label_lower, upper=data.label_upper),
        "dataset_standin": data.is_standin,
        "dataset_note": data.metadata.get("standin_note"),
    }
    timings = {
        "randomizer_seconds": randomize_seconds,
        "train_seconds": res.train_seconds,
        "seconds_per_epoch": res.train_seconds / max(int(hp["epochs"]), 1),
    }
    return MethodResult(metrics=metrics, privacy=out.privacy, timings=timings, details=details)
