"""Helpers shared by the label-randomisation baselines (RR, RR-Debiased, ALIBI, LP-2ST).

Not a method module (the registry skips ``common``). Top level imports only the standard
library and :mod:`labeldp.methods.base`; numpy / JAX are imported inside the functions so the
method modules that import this one stay cheap to discover.

Label randomness. Every baseline draws its label noise from
``numpy.random.default_rng([spec.seed, stream])`` with a fixed ``stream`` constant per
mechanism draw (:data:`STREAM_RANDOMIZED_RESPONSE`, ...), so the same seed always gives the
same noisy labels. RR and RR-Debiased deliberately share one stream: for a given seed they
train on the *same* randomized labels and differ only in the loss, so their comparison in
000 Table 5 is paired. Model initialisation, batch shuffling and dropout are seeded by
``spec.seed`` through :func:`labeldp.training.train_weighted`, independently of the labels.
"""

from __future__ import annotations

import math

from labeldp.methods.base import PrivacyOutcome, RunSpec, check_options, label_dp_outcome  # noqa: F401 (re-exported)
from labeldp.mechanisms.multi_stage_queries import prior_from_logits

__all__ = [
    "STREAM_RANDOMIZED_RESPONSE",
    "STREAM_ALIBI",
    "STREAM_RR_WITH_PRIOR",
    "STREAM_LP_2ST",
    "label_rng",
    "release_digest",
    "require_private",
    "check_options",
    "pure_label_dp",
    "label_accuracy",
    "softmax",
    "training_seed",
]

# Stream ids of the label-noise generators (second entry of the SeedSequence entropy).
STREAM_RANDOMIZED_RESPONSE = 1  # rr and rr_debiased (same noisy labels for the same seed)
STREAM_ALIBI = 3
STREAM_RR_WITH_PRIOR = 5  # rr_with_prior: the histogram noise, then RRWithPrior (one generator, in that order)
STREAM_LP_2ST = 4


def label_rng(seed: int, stream: int):
    """``numpy.random.default_rng([seed, stream])``: the label-noise generator of a run."""
    import numpy as np

    return np.random.default_rng([int(seed), int(stream)])


def release_digest(released) -> str:
    """SHA-256 of a label release (its dtype, shape and bytes), stored as ``details.label_release_sha256``.

    Provenance, and the check of a module's ``LABEL_RELEASE_FIXED_BY_SEED``: runs of one seed must
    release the same labels whatever their hyper-parameters (``tests/baselines/test_label_baselines.py``).
    Equal digests do not make two independent draws one release: the search spend
    (:mod:`labeldp.report.search_cost`) groups runs by their seed entropy, and their digests only split a
    group whose released labels differ.
    """
    import hashlib

    import numpy as np

    a = np.ascontiguousarray(released)
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def training_seed(seed: int, stream: int, part: int) -> int:
    """A training seed (init / shuffling / dropout) for part ``part`` of a multi-part run.

    Derived with a SeedSequence so that, e.g., LP-2ST's stage-2 shuffling of seed ``s`` is
    not the stage-1 shuffling of seed ``s + 1``. Fits in 31 bits (a valid JAX / numpy seed).
    """
    import numpy as np

    state = np.random.SeedSequence([int(seed), int(stream), int(part)]).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


def require_private(spec: RunSpec, name: str) -> float:
    """The run's epsilon; a ValueError for ``epsilon = inf`` (use ``nonprivate`` instead)."""
    if not spec.private:
        raise ValueError(
            f"{name} is a label-DP method and needs a finite epsilon > 0, got "
            f"{spec.epsilon}; the non-private reference is the 'nonprivate' method"
        )
    eps = float(spec.epsilon)
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"{name}: epsilon must be a positive finite float, got {spec.epsilon!r}")
    return eps


def pure_label_dp(epsilon: float, mechanism: str, *, event) -> PrivacyOutcome:
    """The record of a label randomizer that queries every label once (pure eps-label-DP).

    Parallel composition (001 Observation 4 / Section 4): each label is randomised once by an
    eps-DP randomizer and everything else (training, post-processing) only sees the
    randomised labels, so the run is (eps, 0)-label-DP; no composition over steps.

    Args:
      epsilon: the stated per-label epsilon.
      mechanism: a short description.
      event: the randomizer's ``dp_accounting`` event (:mod:`labeldp.accounting.label_events`);
        the record stores it and refuses an ``epsilon`` the event does not reach.
    """
    return label_dp_outcome(epsilon=epsilon, mechanism=mechanism, event=event)


def label_accuracy(noisy_labels, true_labels) -> float:
    """Fraction of noisy labels equal to the true labels (a diagnostic only; never trained on)."""
    import numpy as np

    noisy_labels = np.asarray(noisy_labels)
    true_labels = np.asarray(true_labels)
    if noisy_labels.size == 0:
        return float("nan")
    return float(np.mean(noisy_labels == true_labels))


def softmax(logits, *, temperature: float = 1.0):
    """Row softmax of ``logits / temperature`` in float64 (rows sum to 1 within 1e-12): RRWithPrior's prior
    from a model (:func:`labeldp.mechanisms.multi_stage_queries.prior_from_logits`)."""
    return prior_from_logits(logits, temperature=temperature)
