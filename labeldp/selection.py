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

Two implementations of step 3 share steps 1-2: the DP-SGD family trains and scores inside its own
loop (:func:`labeldp.methods.private_training.training_arrays`); a method that releases labels
and then trains (RR, RR-Debiased, LP-2ST, ALIBI: module flag ``HELDOUT_SELECTION_BY_RUNNER``) runs on
:func:`heldout_data`'s fitting rows and the runner scores it with :func:`score_heldout`, from the
log-probabilities every method reports at ``data.audit_inputs`` (set to the held-out rows).

Privacy (label substitution, 000 Definition 2): the training part is the run's mechanism, the
held-out part is RR; they read disjoint examples, so by parallel composition the run is
``max(eps_run, validation_epsilon)``-label-DP (:func:`with_validation_release`). Under
add-or-remove the same max is stated with the held-out rows fixed by the public split.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from labeldp.accounting import label_events
from labeldp.accounting.checks import relation_name
from labeldp.mechanisms.classification import randomized_response
from labeldp.methods.base import (
    SELECTION_OPTIONS,
    MethodResult,
    PrivacyOutcome,
    RunSpec,
    runner_heldout_selection,
)

__all__ = [
    "VALIDATION_SEED",
    "validation_split",
    "release_validation_labels",
    "noisy_accuracy_pct",
    "with_validation_release",
    "HeldOutRows",
    "held_out_rows",
    "validation_details",
    "SELECTION_OPTIONS",
    "HeldOut",
    "selected_by_runner",
    "heldout_data",
    "score_heldout",
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

    A label randomizer's stored ``event`` must re-account to the record's eps (issue 30): where the release's
    eps is the larger, it becomes binary RR at that eps (:func:`labeldp.accounting.label_events.pure_epsilon_event`),
    which dominates both parts, each of which is at most that eps-DP for the one example it covers.

    Args:
      privacy: the run's privacy on its training rows.
      epsilon: the held-out release's epsilon (> 0).
      fraction: the held-out fraction (recorded).

    Returns:
      The composed :class:`~labeldp.methods.base.PrivacyOutcome`.
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"validation_epsilon must be a finite eps > 0, got {epsilon}")
    # a label randomizer states one relation (label substitution) and no accountant's record: once the release is
    # in its accounting record, the record must also state eps under that relation (PrivacyOutcome.to_dict)
    stated = privacy.epsilon_by_relation or {relation_name(privacy.neighboring_relation): privacy.epsilon}
    by_rel = {rel: max(float(e), epsilon) for rel, e in stated.items()}
    release = {
        "mechanism": "randomized_response",
        "epsilon": float(epsilon),
        "fraction": float(fraction),
        "composition": "parallel (the held-out rows are disjoint from the training rows)",
    }
    event = privacy.event
    if event is not None and epsilon > float(privacy.epsilon):
        event = label_events.pure_epsilon_event(epsilon=epsilon)
    return dataclasses.replace(
        privacy,
        event=event,
        epsilon=max(float(privacy.epsilon), epsilon),
        epsilon_by_relation=by_rel,
        accounting={**dict(privacy.accounting or {}), "validation_release": release},
        mechanism=f"{privacy.mechanism}; held-out {fraction:.0%} of the training labels released by randomized "
        f"response at eps {epsilon:g} for model selection (parallel composition)",
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeldOutRows:
    """The rows of a run's held-out split and their release (steps 1-2 of the module docstring).

    Attributes:
      fit, val: row indices of the fitting and the held-out part (:func:`validation_split`).
      y_noisy: the held-out labels as released by RR (:func:`release_validation_labels`).
      fraction, epsilon: the held-out fraction and the release's eps (option ``validation_epsilon``, default the
        run's eps).
    """

    fit: np.ndarray
    val: np.ndarray
    y_noisy: np.ndarray
    fraction: float
    epsilon: float


def held_out_rows(labels: np.ndarray, spec: RunSpec, *, num_classes: int) -> HeldOutRows:
    """Splits a run's training labels and releases the held-out ones (both selection paths use it).

    Args:
      labels: the training split's labels.
      spec: the run; options ``validation_fraction`` and optionally ``validation_epsilon``.
      num_classes: K.

    Returns:
      A :class:`HeldOutRows`.

    Raises:
      ValueError: a ``validation_epsilon`` that is not a finite eps > 0, or a fraction not in (0, 1).
    """
    fraction = float(spec.options["validation_fraction"])
    given = spec.options.get("validation_epsilon")
    epsilon = float(spec.epsilon if given is None else given)
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"validation_epsilon must be a finite eps > 0, got {given} (variant {spec.variant!r})")
    labels = np.asarray(labels)
    fit, val = validation_split(labels.shape[0], fraction)
    y_noisy = release_validation_labels(labels[val], num_classes=num_classes, epsilon=epsilon)
    return HeldOutRows(fit=fit, val=val, y_noisy=y_noisy, fraction=fraction, epsilon=epsilon)


def validation_details(*, fraction: float, epsilon: float, n_fit: int, n_validation: int) -> dict:
    """What a held-out run's record says of its split, in its ``details`` (both selection paths)."""
    return {
        "validation_fraction": float(fraction),
        "validation_epsilon": float(epsilon),
        "n_fit": int(n_fit),
        "n_validation": int(n_validation),
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeldOut:
    """A run's data split for held-out selection by the runner.

    Attributes:
      fit_data: the prepared data with only the fitting rows as its training split and the held-out
        rows as ``audit_inputs`` (the method reports its model's log-probabilities there).
      fit_spec: the run without :data:`SELECTION_OPTIONS` (what the method itself sees).
      y_noisy: the held-out labels as released by RR (:func:`release_validation_labels`).
      fraction, epsilon: the held-out fraction and the release's eps.
    """

    fit_data: object
    fit_spec: RunSpec
    y_noisy: np.ndarray
    fraction: float
    epsilon: float


def selected_by_runner(method, spec: RunSpec) -> bool:
    """Whether the runner holds out and scores this run (:func:`heldout_data`).

    Args:
      method: the method's module.
      spec: the run.

    Returns:
      True when the spec asks for selection (:data:`SELECTION_OPTIONS`) and the module sets
      ``HELDOUT_SELECTION_BY_RUNNER`` (a label release, then training); the DP-SGD family selects itself.
    """
    flag = bool(getattr(method, "HELDOUT_SELECTION_BY_RUNNER", False))
    return bool(runner_heldout_selection(selection_by_runner=flag, options=spec.options))


def heldout_data(data, spec: RunSpec) -> HeldOut:
    """The fitting rows and the RR-released held-out labels of ``spec`` (options ``validation_fraction``,
    ``validation_epsilon``, default the run's eps).

    Args:
      data: a prepared classification dataset (:class:`labeldp.data.prepare.PreparedData`).
      spec: the run; its options must hold ``validation_fraction``.

    Returns:
      A :class:`HeldOut`.

    Raises:
      ValueError: no ``validation_fraction``, a non-classification dataset, a label-canary audit
        (which also reports at ``audit_inputs``) on the same run, or the run's seed equal to
        :data:`VALIDATION_SEED` (its label stream would be the release's).
    """
    if "validation_fraction" not in spec.options:
        raise ValueError(
            f"variant {spec.variant!r} sets validation_epsilon without validation_fraction; add validation_fraction "
            "(the held-out share of the training split, e.g. 0.1)"
        )
    if getattr(data, "audit_inputs", None) is not None:
        raise ValueError(
            "held-out selection and the label-canary audit both read the model at data.audit_inputs; audit a variant "
            "without validation_fraction"
        )
    if getattr(data, "num_classes", None) is None or getattr(data, "kind", "image") not in ("image", "features"):
        raise ValueError(
            f"held-out selection by the runner is implemented for image and features datasets, not {data.kind!r}"
        )
    if int(spec.seed) == VALIDATION_SEED:
        raise ValueError(
            f"seed {spec.seed} is the held-out release's seed (VALIDATION_SEED): the run's label noise would repeat the "
            "release's; use another seed"
        )
    y = np.asarray(data.y_train)
    rows = held_out_rows(y, spec, num_classes=int(data.num_classes))
    fit_data = dataclasses.replace(
        data, x_train=data.x_train[rows.fit], y_train=y[rows.fit], audit_inputs=data.x_train[rows.val]
    )
    options = {k: v for k, v in spec.options.items() if k not in SELECTION_OPTIONS}
    return HeldOut(
        fit_data=fit_data,
        fit_spec=dataclasses.replace(spec, options=options),
        y_noisy=rows.y_noisy,
        fraction=rows.fraction,
        epsilon=rows.epsilon,
    )


def score_heldout(result: MethodResult, heldout: HeldOut) -> MethodResult:
    """Scores a run on the held-out rows' released labels.

    Args:
      result: the method's result on ``heldout.fit_data``, with its log-probabilities at the held-out rows.
      heldout: the run's :class:`HeldOut`.

    Returns:
      ``result`` with the noisy held-out accuracy in its metrics (``validation_noisy_accuracy_pct``), the
      release composed into its privacy (:func:`with_validation_release`), the split in its details (as the
      DP-SGD family records them) and no ``audit_log_probs``. Where the method reported
      ``audit_log_probs_by_epoch``, its details also hold the noisy held-out accuracy after every epoch
      (``validation_noisy_accuracy_by_epoch``): choosing the stopping epoch on it reads only released labels.

    Raises:
      ValueError: the method reported no log-probabilities at the held-out rows.
    """
    if result.audit_log_probs is None:
        raise ValueError(
            "the method returned no audit_log_probs: it must report its model's log-probabilities at "
            "data.audit_inputs to be scored on the held-out rows"
        )

    def score(log_probs) -> float:  # the model's argmax against the released held-out labels
        return noisy_accuracy_pct(np.argmax(np.asarray(log_probs), axis=-1), heldout.y_noisy)

    validation = validation_details(
        fraction=heldout.fraction,
        epsilon=heldout.epsilon,
        n_fit=heldout.fit_data.y_train.shape[0],
        n_validation=heldout.y_noisy.size,
    )
    if result.audit_log_probs_by_epoch is not None:  # a per-epoch curve: the honest stopping epoch's score
        validation["validation_noisy_accuracy_by_epoch"] = [score(lp) for lp in result.audit_log_probs_by_epoch]
    return dataclasses.replace(
        result,
        metrics={
            **dict(result.metrics),
            "validation_noisy_accuracy_pct": score(result.audit_log_probs),
        },
        privacy=with_validation_release(result.privacy, epsilon=heldout.epsilon, fraction=heldout.fraction),
        details={**dict(result.details), **validation},
        audit_log_probs=None,
        audit_log_probs_by_epoch=None,
    )
