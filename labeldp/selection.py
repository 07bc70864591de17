"""Honest model selection: choose the configuration on held-out training rows whose labels are
released by a label-DP mechanism, never on the test set (issue 29; 003's regression figures).

000 D.2 reports the configuration with the best mean TEST accuracy, which is optimistic twice:
the test set picks the winner (a statistical bias), and the search looks at every run (a privacy
cost; :mod:`labeldp.report.search_cost`). The held-out protocol removes the first:

1. A fixed part of the training split (``validation_fraction``) is held out by a permutation
   seeded with the public :data:`VALIDATION_SEED`: the same rows for every method, eps, grid
   point and seed. The model trains on the rest.
2. The held-out labels are released ONCE per cell by K-ary randomized response at
   ``validation_epsilon`` (:func:`release_validation_labels`; its stream does not depend on the
   run's seed or grid point, so every run of a cell scores against the same release).
3. Each run records its accuracy against those noisy labels; the table selects on it. Under
   symmetric RR, ``E[noisy accuracy] = 1/K + (acc - 1/K) (e^eps K - K) / ((e^eps + K - 1)(K - 1))``,
   increasing in the true accuracy, so the ranking is right in expectation.

Privacy (label substitution, 000 Definition 2): the training part is the run's mechanism, the
held-out part is RR; they read disjoint examples, so by parallel composition the run is
``max(eps_run, validation_epsilon)``-label-DP (:func:`with_validation_release`). Under
add-or-remove the same max is stated with the held-out rows fixed by the public split.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from labeldp.mechanisms.classification import randomized_response
from labeldp.methods.base import PrivacyOutcome

__all__ = [
    "VALIDATION_SEED",
    "validation_split",
    "release_validation_labels",
    "noisy_accuracy_pct",
    "with_validation_release",
]

VALIDATION_SEED = 20231
"""Fixes the held-out rows (and the held-out labels' release stream): public, the same everywhere."""


def validation_split(n: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """``(fit rows, held-out rows)`` of a training split of ``n`` rows, fixed by :data:`VALIDATION_SEED`.

    Raises:
      ValueError: ``fraction`` not in (0, 1), or nothing left to fit on.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"validation_fraction must be in (0, 1), got {fraction}")
    perm = np.random.default_rng(VALIDATION_SEED).permutation(n)
    n_val = max(1, int(round(n * fraction)))
    if n - n_val < 1:
        raise ValueError(f"the training split ({n} rows) is too small to hold out {fraction:.0%} for validation")
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def release_validation_labels(labels: np.ndarray, *, num_classes: int, epsilon: float) -> np.ndarray:
    """The held-out labels through K-ary randomized response at ``epsilon`` (eps-label-DP), from a
    stream fixed by :data:`VALIDATION_SEED`: one release per cell, whatever run asks for it."""
    return np.asarray(
        randomized_response(
            np.asarray(labels, np.int64),
            num_classes=num_classes,
            epsilon=epsilon,
            rng=np.random.default_rng([VALIDATION_SEED, 1]),
        )
    )


def noisy_accuracy_pct(predictions: np.ndarray, noisy_labels: np.ndarray) -> float:
    """Percent of held-out rows whose prediction equals their released (noisy) label."""
    predictions, noisy_labels = np.asarray(predictions), np.asarray(noisy_labels)
    if predictions.shape != noisy_labels.shape or predictions.size == 0:
        raise ValueError(f"{predictions.shape} predictions for {noisy_labels.shape} held-out labels")
    return float(100.0 * np.mean(predictions == noisy_labels))


def with_validation_release(privacy: PrivacyOutcome, *, epsilon: float, fraction: float) -> PrivacyOutcome:
    """``privacy`` of the training part, with the held-out labels' RR release composed in parallel:
    ``max(eps, epsilon)`` under every relation, and the release described in the accounting record.

    Args:
      privacy: the run's privacy on its training rows.
      epsilon: the held-out release's epsilon (> 0).
      fraction: the held-out fraction (recorded).
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"validation_epsilon must be a finite eps > 0, got {epsilon}")
    by_rel = {rel: max(float(e), epsilon) for rel, e in (privacy.epsilon_by_relation or {}).items()}
    release = {
        "mechanism": "randomized_response",
        "epsilon": float(epsilon),
        "fraction": float(fraction),
        "composition": "parallel (the held-out rows are disjoint from the training rows)",
    }
    return dataclasses.replace(
        privacy,
        epsilon=max(float(privacy.epsilon), epsilon),
        epsilon_by_relation=by_rel or None,
        accounting={**dict(privacy.accounting or {}), "validation_release": release},
        mechanism=f"{privacy.mechanism}; held-out {fraction:.0%} of the training labels released by randomized "
        f"response at eps {epsilon:g} for model selection (parallel composition)",
    )
