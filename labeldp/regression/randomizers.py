"""The label randomizers of 003's comparison, as ``randomize`` functions for
:func:`labeldp.regression.pipeline.run_label_randomizer` (one method module binds each).

Every one is pure eps-label-DP under label substitution (one training label changes) for labels
in the dataset's fixed range ``[label_lower, label_upper]``, and the pipeline reads labels only
through it:

* additive Laplace / staircase (003 Appendix F; continuous for real labels, discrete for integer
  labels; "clipped": the output clipped to the range, post-processing, biased): eps-DP with
  sensitivity ``upper - lower``;
* RR-on-Bins ([GKK+23]) and 003's optimal unbiased randomizer (Algorithms 1-4): a private prior
  (Laplace histogram, eps1) then the randomizer built for it (eps2 = eps - eps1); basic
  composition gives eps1 + eps2 = eps. Real labels are first rounded onto the integer support
  without bias (003 Section 3.1; a data-independent per-label map, so the guarantee is kept).
"""

from __future__ import annotations

import time

import numpy as np

from labeldp.accounting import label_events
from labeldp.methods.base import PrivacyOutcome, RunSpec, label_dp_outcome
from labeldp.mechanisms.regression import (
    estimate_prior,
    laplace_mechanism,
    optimal_unbiased_randomizer,
    rr_on_bins,
    staircase_mechanism,
    unbiased_randomized_rounding,
)
from labeldp.regression.pipeline import Randomized, prior_epsilon

__all__ = ["additive", "rr_on_bins_randomizer", "optimal_unbiased_randomizer_fn", "pure_dp"]


def pure_dp(epsilon: float, mechanism: str, *, budget_split: tuple[float, ...] | None = None) -> PrivacyOutcome:
    """The record of a randomizer applied once per label: (eps, 0)-label-DP, no accountant.

    Args:
      epsilon: the stated per-label epsilon.
      mechanism: a short description.
      budget_split: the epsilons of the parts composed on each label (a private prior, then the
        randomizer); None: one eps-DP randomizer. The record's event composes one eps-DP event
        per part (:mod:`labeldp.accounting.label_events`).
    """
    parts = [p for p in (budget_split or (float(epsilon),)) if p > 0]
    event = label_events.composed_label_event([label_events.pure_epsilon_event(epsilon=p) for p in parts])
    return label_dp_outcome(epsilon=epsilon, mechanism=mechanism, event=event)


def additive(kind: str, *, clip: bool):
    """A ``randomize`` for the Laplace (``kind="laplace"``) or staircase mechanism."""
    mech = {"laplace": laplace_mechanism, "staircase": staircase_mechanism}[kind]

    def randomize(labels, *, data, spec: RunSpec, rng) -> Randomized:
        discrete = data.label_integer
        noisy = mech(
            labels,
            epsilon=float(spec.epsilon),
            lower=data.label_lower,
            upper=data.label_upper,
            discrete=discrete,
            clip=clip,
            rng=rng,
        )
        name = f"{kind}{'_discrete' if discrete else '_continuous'}{'_clipped' if clip else ''}"
        details = {
            "epsilon1": 0.0,
            "epsilon2": float(spec.epsilon),
            "mesh_size": None,
            "noise": "discrete" if discrete else "continuous",
            "clipped": clip,
            "sensitivity": data.label_upper - data.label_lower,
            "unbiased": not clip,
        }
        return Randomized(noisy_labels=noisy, privacy=pure_dp(spec.epsilon, name), details=details)

    return randomize


def _discrete_labels(labels, data, rng):
    """Integer labels as they are; real labels rounded onto the integer support without bias."""
    support = data.label_support
    if data.label_integer:
        return np.asarray(labels, dtype=float), support, False
    return unbiased_randomized_rounding(labels, support=support, rng=rng), support, True


def _prior_and_randomizer(labels, *, data, spec: RunSpec, rng, build, name: str, mesh_size=None) -> Randomized:
    eps1 = prior_epsilon(data, spec)
    eps2 = float(spec.epsilon) - eps1
    y, support, rounded = _discrete_labels(labels, data, rng)
    prior = estimate_prior(y, support=support, epsilon=eps1, rng=rng)
    t0 = time.perf_counter()
    mech = build(support, prior, eps2)
    build_seconds = time.perf_counter() - t0
    noisy = mech.sample(y, rng)
    ratio = mech.epsilon_dp_ratio()
    if not ratio <= np.exp(eps2) * (1 + 1e-9):
        raise RuntimeError(f"{name}: the built randomizer's DP ratio {ratio} exceeds e^eps2 = {np.exp(eps2)}")
    details = {
        "epsilon1": eps1,
        "epsilon2": eps2,
        "mesh_size": mesh_size,
        "num_labels": int(support.size),
        "num_outputs": int(mech.outputs.size),
        "randomizer_build_seconds": build_seconds,
        "lp_solve_seconds": build_seconds if mesh_size is not None else None,
        "expected_noisy_label_mse_under_prior": float(mech.noisy_label_loss()),
        "dp_ratio_log": float(np.log(ratio)) if ratio > 0 else None,
        "unbiased": bool(mech.is_unbiased(1e-6)),
        "labels_rounded_to_support": rounded,
    }
    privacy = pure_dp(
        spec.epsilon, f"laplace_histogram_prior(eps1={eps1:g}) + {name}(eps2={eps2:g})", budget_split=(eps1, eps2)
    )
    return Randomized(noisy_labels=noisy, privacy=privacy, details=details)


def rr_on_bins_randomizer(labels, *, data, spec: RunSpec, rng) -> Randomized:
    """RR-on-Bins with the optimal bins for the private prior ([GKK+23]; 003's baseline)."""
    return _prior_and_randomizer(
        labels,
        data=data,
        spec=spec,
        rng=rng,
        name="rr_on_bins",
        build=lambda sup, prior, eps2: rr_on_bins(sup, prior, epsilon=eps2),
    )


def optimal_unbiased_randomizer_fn(labels, *, data, spec: RunSpec, rng) -> Randomized:
    """003's optimal unbiased randomizer (Algorithms 1-4) on the Algorithm 2 mesh of
    ``hparams["mesh_size"]`` outputs (default: the number of labels)."""
    mesh = spec.hparams.get("mesh_size")
    mesh = int(data.label_support.size if mesh in (None, "labels") else mesh)
    if mesh < 2:
        raise ValueError(f"mesh_size must be >= 2 (003 Algorithm 2 needs both ends of the output grid), got {mesh}")
    return _prior_and_randomizer(
        labels,
        data=data,
        spec=spec,
        rng=rng,
        name="optimal_unbiased",
        mesh_size=mesh,
        build=lambda sup, prior, eps2: optimal_unbiased_randomizer(sup, prior, epsilon=eps2, num_outputs=mesh),
    )
