"""The one interface every method implements (LabelDP-Pro, DP-SGD and every baseline).

A method is ONE module, in ``labeldp/methods/`` (methods of the main paper) or ``baselines/``
(the other methods), whose file name is the method id and which defines:

``NAME: str``
    the method id used in configs, result paths, records and tables (e.g. ``"rr"``); it must
    equal the module name.
``HYPERPARAMETERS: tuple[str, ...]``
    the grid axes it consumes (a subset of the table grid's keys, e.g.
    ``("learning_rate", "epochs", "batch_size")``); the planner takes the product of only
    these axes, so a method never runs twice for an axis it ignores.
``OPTIONAL_HYPERPARAMETERS: dict[str, Any]`` (optional)
    further grid axes with their default: searched only when the table's grid lists them
    (else the default is used and the axis is left out of the run id, so records made before
    the axis existed keep their names), e.g. LP-2ST's ``{"mixup_alpha1": 0.0, ...}``.
``DATASET_KINDS: tuple[str, ...]``
    the dataset kinds it runs on (``"image"``, ...).
``run(data, spec) -> MethodResult``
    trains and evaluates one configuration and seed.
``CALIBRATES_WITH_ACCOUNTANT: bool`` (optional, default False)
    True for DP-SGD-family methods whose noise multiplier the accountant calibrates to the
    target epsilon; the planner then gives their runs ``spec.calibration_relation`` (config key
    ``calibration_relation``), and records calibrated under label substitution get their own
    directory. Label randomizers (RR, ALIBI, ...) are exact per label and ignore it.

``SAMPLED_BATCH_KEYS: tuple[str, ...]`` (optional, default none)
    the hyper-parameters that are a Poisson sampler's expected batch size (``batch_size``,
    Hybrid's ``dp_batch_size``); the planner refuses, before any job, a grid point whose batch
    exceeds the training data where the config fixes its size (:func:`labeldp.batch_fit.check_batches_fit`).

``HELDOUT_SELECTION_BY_RUNNER: bool`` (optional, default False)
    True for a method that releases labels and then trains (RR, RR-Debiased, LP-2ST, ALIBI): a variant
    with ``validation_fraction`` / ``validation_epsilon`` then runs on the fitting rows and the runner
    scores it on the RR-released held-out labels (:mod:`labeldp.selection`). The DP-SGD family takes
    those options itself.

``LABEL_RELEASE_FIXED_BY_SEED: bool`` (optional, default False)
    True for a label randomizer whose released labels depend only on the training labels, eps and the
    seed's label-noise stream (recorded as ``details.label_rng``), not on the hyper-parameters or a
    model (RR, RR-Debiased, ALIBI; not LP-2ST, whose stage 2 uses the stage-1 model): the runs of one
    seed in a searched cell then share one release, which :mod:`labeldp.report.search_cost` composes
    once. Such a module also records the release's digest (``details.label_release_sha256``), by
    which the tests check the claim.

``USES_PRIVATE_PRIOR: bool`` (optional, default False)
    True for 003's randomizers that spend part of eps (eps1, ``labeldp.regression.pipeline``) on a
    private label prior; config validation then refuses a table eps that does not exceed eps1.

Module top levels import only the standard library and this module; heavy imports (JAX,
PyTorch) happen inside ``run``, so the Snakefile can discover methods cheaply. Adding a
method is adding one module; nothing else changes (the registry discovers it by name).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One planned run.

    Attributes:
      dataset: dataset id (``mnist``, ...).
      method: method id.
      variant: method variant (``default`` or a table-specific option set's name).
      epsilon: target epsilon (``math.inf`` for non-private).
      delta: target delta (0 for pure-DP label randomizers, which ignore it).
      seed: random seed.
      hparams: hyper-parameters (grid point).
      options: method options of the variant (e.g. ``{"amplification": False}``).
      accountant: ``pld`` or ``rdp``.
      profile: config profile name (smoke / quick / full).
      sampling: batch sampling of DP-SGD-family methods: ``poisson`` (what the accountant
        assumes) or ``shuffle`` (fixed-size batches; then the Poisson accounting is an
        approximation and the record is marked not valid).
      calibration_relation: for methods whose noise the accountant calibrates
        (``CALIBRATES_WITH_ACCOUNTANT``), the neighbouring relation the target ``epsilon`` is
        met under when it is not the papers' convention: ``label_substitution`` (label DP
        exactly). None: ``add_or_remove`` (the papers' convention, 000 Section 3.4), and for
        every method the accountant does not calibrate.
    """

    dataset: str
    method: str
    variant: str
    epsilon: float
    delta: float
    seed: int
    hparams: Mapping[str, Any]
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    accountant: str = "pld"
    profile: str = "full"
    sampling: str = "poisson"
    calibration_relation: str | None = None

    @property
    def private(self) -> bool:
        return not math.isinf(self.epsilon)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["epsilon"] = "inf" if math.isinf(self.epsilon) else self.epsilon
        d["hparams"] = dict(self.hparams)
        d["options"] = dict(self.options)
        if d["calibration_relation"] is None:  # the papers' convention: specs (and Snakemake's
            del d["calibration_relation"]  # params) of runs made before the field stay the same
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunSpec":
        d = dict(d)
        eps = d.get("epsilon")
        d["epsilon"] = math.inf if eps in ("inf", None) else float(eps)
        return cls(**d)


@dataclasses.dataclass(frozen=True)
class PrivacyOutcome:
    """What was actually guaranteed by the run.

    Attributes:
      epsilon: achieved epsilon from the accountant (or the per-label epsilon of a pure-DP
        randomizer, or ``math.inf``).
      delta: achieved delta.
      valid: False when the reported (epsilon, delta) is not a valid guarantee for what ran
        (e.g. amplification by subsampling claimed for SelfSpan/SelfConv, 000 Section 3.4).
      invalid_reason: why, when not valid.
      mechanism: short description (``randomized_response``, ``dpsgd_poisson_gaussian``...).
      accounting: the accountant's record (noise multiplier, sampling rate, steps, event),
        None for mechanisms that need no composition accounting.
      neighboring_relation: the relation ``epsilon`` is stated under, ``dp_accounting``'s
        ``NeighboringRelation`` (or its record name): ``label_substitution``
        (one example's label changes: label DP, 000 Definition 2) or ``add_or_remove``.
      epsilon_by_relation: the run's epsilon under every relation it has a guarantee for
        (DP-SGD family: both; a label randomizer: ``label_substitution`` only).
      privacy_unit: whose labels the relation changes: ``"example"`` (one example's label, 000
        Definition 2) or ``"user"`` (all labels of one user together, 000 Section 6 / Table 7).
      event: for a label randomizer, its guarantee as a ``dp_accounting`` ``DpEvent`` under
        ``REPLACE_ONE`` (:mod:`labeldp.accounting.label_events`); the record stores it and
        :meth:`to_dict` refuses an ``epsilon`` below what the PLD accountant gives for it.
    """

    epsilon: float
    delta: float
    valid: bool = True
    invalid_reason: str | None = None
    mechanism: str = "none"
    accounting: Mapping[str, Any] | None = None
    neighboring_relation: Any = None
    epsilon_by_relation: Mapping[str, float] | None = None
    privacy_unit: str = "example"
    event: Any = None

    def to_dict(self, *, target_epsilon: float) -> dict[str, Any]:
        enc = lambda e: "inf" if math.isinf(e) else float(e)  # noqa: E731
        if self.neighboring_relation is None:
            raise ValueError(
                f"privacy outcome of {self.mechanism!r} states no neighbouring relation: a method must "
                "say which relation its epsilon is for (label_substitution or add_or_remove)"
            )
        if self.privacy_unit not in ("example", "user"):
            raise ValueError(f"privacy_unit must be 'example' or 'user', got {self.privacy_unit!r}")
        if self.accounting is not None and self.epsilon_by_relation is None:
            raise ValueError(
                f"privacy outcome of {self.mechanism!r} has an accountant's record but no "
                "epsilon_by_relation: store the accountant's epsilon under every relation"
            )
        relation = _relation_name(self.neighboring_relation)
        label_event = {}
        if self.event is not None:  # a label event bounds the label-substitution epsilon
            stated = (self.epsilon_by_relation or {}).get("label_substitution", self.epsilon)
            label_event = _checked_label_event(self.event, epsilon=float(stated), delta=self.delta, name=self.mechanism)
        return {
            **label_event,
            "dp_accounting_relation": _dp_accounting_relation(relation),
            "target_epsilon": enc(target_epsilon),
            "epsilon": enc(self.epsilon),
            "delta": float(self.delta),
            "valid": bool(self.valid),
            "invalid_reason": self.invalid_reason,
            "mechanism": self.mechanism,
            "accounting": dict(self.accounting) if self.accounting is not None else None,
            "neighboring_relation": relation,
            "privacy_unit": self.privacy_unit,
            "epsilon_by_relation": (
                {k: enc(float(v)) for k, v in self.epsilon_by_relation.items()}
                if self.epsilon_by_relation is not None
                else {relation: enc(self.epsilon)}
            ),
        }


def label_dp_outcome(*, epsilon: float, mechanism: str, event: Any, privacy_unit: str = "example") -> PrivacyOutcome:
    """The privacy outcome of a label randomizer: pure ``(epsilon, 0)`` under label substitution
    (``dp_accounting``'s ``REPLACE_ONE``), no accountant's record, its guarantee stated by ``event``
    (:mod:`labeldp.accounting.label_events`; the record refuses an ``epsilon`` the event does not reach).

    Args:
      epsilon: the stated epsilon (per label, or per user for ``privacy_unit="user"``).
      mechanism: a short description.
      event: the randomizer's ``dp_accounting`` event.
      privacy_unit: ``"example"`` or ``"user"`` (all of one user's labels, group privacy).
    """
    from labeldp.accounting.label_events import LABEL_EVENT_RELATION

    return PrivacyOutcome(
        epsilon=float(epsilon),
        delta=0.0,
        valid=True,
        mechanism=mechanism,
        accounting=None,
        neighboring_relation=LABEL_EVENT_RELATION,
        privacy_unit=privacy_unit,
        event=event,
    )


NON_PRIVATE = PrivacyOutcome(
    epsilon=math.inf, delta=0.0, valid=True, mechanism="none (non-private)", neighboring_relation="label_substitution"
)


@dataclasses.dataclass(frozen=True)
class MethodResult:
    """What ``run`` returns; the runner adds config, environment and timestamps.

    Attributes:
      metrics: e.g. ``{"test_accuracy_pct": 97.1, "diverged": False}``.
      privacy: the :class:`PrivacyOutcome`.
      timings: e.g. ``{"train_seconds": .., "seconds_per_epoch": ..}``.
      details: anything method-specific worth keeping (chosen k of RRWithPrior, ...).
      audit_log_probs: the final model's log-probabilities at ``data.audit_inputs`` (an (m, K)
        array) when the data carries audit inputs (the label-canary audit, :mod:`labeldp.audit`, or the
        held-out rows of honest selection, :func:`labeldp.selection.heldout_data`); else None. Every
        classification method sets it; the audit runner and the runner's held-out scoring read it.
      audit_log_probs_by_epoch: the same after every epoch (a list of (m, K) arrays), from a method that
        records a per-epoch curve (ALIBI's ``test_curve_diagnostic``) on data with ``audit_inputs``; else
        None. The runner's held-out scoring turns it into the noisy held-out accuracy after every epoch
        (:func:`labeldp.selection.score_heldout`). Records store neither.
    """

    metrics: Mapping[str, Any]
    privacy: PrivacyOutcome
    timings: Mapping[str, float]
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    audit_log_probs: Any = None
    audit_log_probs_by_epoch: Any = None


#: Options of a variant that change the non-private training recipe (:class:`~labeldp.training.TrainConfig`):
#: 001 Appendix B's is ``{momentum: 0.9, lr_schedule: warmup_linear_decay, warmup_fraction: 0.15, l2: 1.0e-4}``;
#: ``model`` picks a registered network instead of the dataset's (001's ``inception_001`` /
#: ``resnet18_v2_cifar``, :mod:`labeldp.models`), ``init_from`` starts it from a network pre-trained on
#: public labels (001 Table 1's CIFAR-100 pre-training, :mod:`labeldp.pretraining`) and ``augment``
#: (``crop_flip_cutout``, with ``augment_pad`` / ``augment_cutout`` pixels) 001's data augmentation
#: (:mod:`labeldp.augment`).
OPTIMIZER_OPTIONS = ("momentum", "nesterov", "lr_schedule", "warmup_fraction", "l2")
#: The recipe's network choice (``model``), its starting point (``init_from``) and image augmentation (``augment*``).
NETWORK_OPTIONS = ("model", "init_from")
AUGMENT_OPTIONS = ("augment", "augment_pad", "augment_cutout")
RECIPE_OPTIONS = OPTIMIZER_OPTIONS + NETWORK_OPTIONS + AUGMENT_OPTIONS
#: The variant options that ask for honest selection on held-out training rows (:mod:`labeldp.selection`).
SELECTION_OPTIONS = ("validation_fraction", "validation_epsilon")


def heldout_selection_options(options: Mapping[str, Any]) -> list[str]:
    """The held-out selection options (:data:`SELECTION_OPTIONS`) that ``options`` sets, in that order.

    Standard library only, so the planner can ask without loading the selection code."""
    return [k for k in SELECTION_OPTIONS if k in options]


def runner_heldout_selection(*, selection_by_runner: bool, options: Mapping[str, Any]) -> list[str]:
    """The held-out selection options the runner acts on: those ``options`` sets
    (:func:`heldout_selection_options`) when the method module sets ``HELDOUT_SELECTION_BY_RUNNER``
    (a label release, then training: the runner holds out and scores), else none (the DP-SGD family
    selects itself). The one place this rule lives: :func:`labeldp.selection.selected_by_runner` asks
    it with the imported module's flag, the audit planner with the flag read by ``registry.declared``.

    Args:
      selection_by_runner: the method module's ``HELDOUT_SELECTION_BY_RUNNER`` (default False).
      options: the run's variant options.

    Returns:
      The selection option names in :data:`SELECTION_OPTIONS` order; empty when the runner does not select.
    """
    return heldout_selection_options(options) if selection_by_runner else []


def recipe_options_refused(*, optimizer: str, network: str) -> dict[str, str]:
    """``{option: why}`` for a task that trains one fixed recipe: every :data:`RECIPE_OPTIONS` key,
    with the reason that fits it.

    Args:
      optimizer: how the task trains (e.g. "the ads MLP trains with RMSProp at a constant rate").
      network: which network it trains (e.g. "the dataset's ads MLP (labeldp.ads.model.model_for)").

    Returns:
      The reasons, for :attr:`labeldp.tasks.base.Task.unsupported_options`.
    """
    return {
        **{o: optimizer for o in OPTIMIZER_OPTIONS},
        **{o: f"the network is {network}" for o in NETWORK_OPTIONS},
        **{o: "image augmentation does not apply to tabular features" for o in AUGMENT_OPTIONS},
    }


def check_options(spec: RunSpec, allowed: tuple[str, ...], name: str) -> None:
    """Refuses method options this module does not implement (e.g. Table 7's
    ``examples_per_user`` for ``rr``), instead of silently ignoring them."""
    unknown = sorted(set(spec.options) - set(allowed))
    if unknown:
        raise ValueError(
            f"{name} does not implement options {unknown} (variant {spec.variant!r}); "
            f"supported options: {list(allowed) or 'none'}"
        )


def _relation_name(relation: Any) -> str:
    """The record name of a relation given as ``dp_accounting``'s enum or by name."""
    from labeldp.accounting.checks import relation_name

    return relation_name(relation)


def _dp_accounting_relation(relation: Any) -> str:
    """The name of the ``dp_accounting.NeighboringRelation`` member (``REPLACE_ONE`` ...)."""
    from labeldp.accounting.checks import to_relation

    return to_relation(relation).name


def _checked_label_event(event: Any, *, epsilon: float, delta: float, name: str) -> dict[str, Any]:
    """The record keys of a label event, after checking the stated epsilon covers it."""
    from labeldp.accounting import label_events

    accounted = label_events.label_event_epsilon(event, delta=delta, scale=epsilon)
    if accounted > epsilon + label_events.label_event_tolerance(event, epsilon=epsilon):
        raise ValueError(
            f"privacy outcome of {name!r} states epsilon {epsilon} but its event {event!r} accounts to "
            f"{accounted} at delta {delta}: the stated guarantee does not hold"
        )
    return label_events.describe_label_event(event)
