"""LP-MST: label-private multi-stage training with RRWithPrior (001 Algorithm 3), T stages.

Protocol (001 Algorithm 3 and Appendix B "Multi-Stage Training"; 000 Appendix D.1):

1. Split the training set by one seeded permutation (independent of the labels) into stages
   ``S^(1), ..., S^(T)``: stage ``t`` takes the permutation's entries from
   ``round(c_{t-1} n)`` to ``round(c_t n)``, ``c_t`` the cumulative sum of the option
   ``stage_fractions`` (default: 000 D.1's 40% / 60% for T = 2, equal shares otherwise).
2. Stage 1: query every stage-1 label with K-ary randomized response (RRWithPrior under the
   trivial model ``M^(0)``'s uniform prior picks ``k* = K``, i.e. plain RR) and train a fresh
   model on them. With T = 1 this is the whole method: LP-1ST is RR (001 Section 4).
3. Stage t >= 2: query every stage-t label with RRWithPrior (001 Algorithm 2) using the
   stage-(t-1) model's ``softmax(logits / temperature)`` on that example as its prior.
4. Reuse the earlier stages' labels, filtered (001 Appendix B): an example of stages ``1..t-1``
   is kept iff its noisy label is among the stage-(t-1) model's top-``k`` classes on it,
   ``k = round(mean k*)`` over stage t's queries (half up, clipped to [1, K]; 001 Appendix E).
   Top-k ties go to the smaller class id.
5. Train stage t from the stage-(t-1) model's parameters on stage t's labels followed by the
   kept earlier labels (001 Appendix B: "stage-3 training could use the model trained in
   stage-2 as initialization, and use it to filter the queried labels in stage-1 and stage-2").

Every stage runs the full ``epochs`` (001 Appendix B), with a fresh optimiser state; stage
``t``'s training seed is ``training_seed(spec.seed, STREAM_LP_2ST, t)``. With T = 2 and the
default fractions this is exactly :mod:`baselines.lp_2st` (same streams, same records).

Training recipe: the variant's options :data:`labeldp.methods.common.RECIPE_OPTIONS` (001
Appendix B: momentum 0.9, a linear warm-up over 15% of the steps then linear decay, l2 1e-4)
and the grid's ``mixup_alpha1`` (stage 1) / ``mixup_alpha2`` (every later stage). The network
is the dataset's 000 Table 10 model unless the option ``model`` names another: 001 Appendix B's
``inception_001`` (MNIST family) or ``resnet18_v2_cifar`` (CIFAR), both with BatchNorm
(:mod:`labeldp.models_001`); the option ``augment: crop_flip_cutout`` turns on 001's data
augmentation (random crop, flip, cutout; :mod:`labeldp.augment`). The record's ``details`` say
which model and augmentation ran.

Privacy: every label is queried exactly once, by an eps-DP randomizer whose prior depends only
on earlier randomised labels and public inputs, so by adaptive parallel composition (001
Observation 4) the run is (eps, 0)-label-DP; filtering and reuse are post-processing.
:class:`LabelOracle` is the module's only access to the true labels and raises if an index is
queried twice.

Label randomness (split and every query): ``numpy.random.default_rng([spec.seed, 4])``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from labeldp.mechanisms.multi_stage_queries import (  # noqa: F401 (LP-MST's label side, importable from here)
    TWO_STAGE_FRACTIONS,
    FitStage,
    LabelOracle,
    StagePlan,
    filter_k,
    plan_multi_stage,
    split_into_stages,
    stage_fractions_for,
    top_k_mask,
)
from labeldp.methods.base import MethodResult, RunSpec
from baselines import common

NAME = "lp_mst"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
OPTIONAL_HYPERPARAMETERS = {"mixup_alpha1": 0.0, "mixup_alpha2": 0.0}
DATASET_KINDS = ("image", "features", "ratings")  # ratings: 001 Table 3 (MovieLens-1M, NCF)

MECHANISM = (
    "lp_mst (randomized_response in stage 1, rr_with_prior in later stages; pure eps-label-DP, each label queried once)"
)
DEFAULT_STAGES = 3
STAGE_OPTIONS = ("stages", "stage_fractions", "stage1_fraction", "temperature")


#: LP-2ST's settings that 001 Figure 4 (a) sweeps: a variant option or, for such a sweep, a grid axis
GRID_OR_OPTION = ("stage1_fraction", "temperature")


def option_or_axis(spec: RunSpec, key: str, default=None):
    """``key`` from the grid point (a sweep over it, 001 Figure 4) or else from the variant's options.

    Raises:
      ValueError: both set it (one place only, so a record says unambiguously what ran).
    """
    if key in spec.hparams and key in spec.options:
        raise ValueError(f"{key} is both a grid axis and an option of variant {spec.variant!r}; set it in one place")
    return spec.hparams.get(key, spec.options.get(key, default))


def stages_of(spec: RunSpec, *, default_stages: int) -> tuple[int, tuple[float, ...]]:
    """(T, shares) from the options ``stages``, ``stage_fractions`` and LP-2ST's ``stage1_fraction``
    (an option or a grid axis)."""
    stages = spec.options.get("stages", default_stages)
    fractions = spec.options.get("stage_fractions")
    f1 = option_or_axis(spec, "stage1_fraction")
    if f1 is not None:
        if fractions is not None or stages != 2:
            raise ValueError("option stage1_fraction is LP-2ST's (two stages); give stage_fractions instead")
        f1 = float(f1)
        if not 0.0 < f1 < 1.0:
            raise ValueError(f"stage1_fraction must be in (0, 1), got {f1!r}")
        fractions = (f1, 1.0 - f1)
    return stages, stage_fractions_for(stages, fractions)


def augment_record(config) -> dict[str, Any]:
    """What augmentation a run's :class:`labeldp.training.TrainConfig` applied (for its record)."""
    if config.augment == "none":
        return {"kind": "none"}
    return {"kind": config.augment, "pad": int(config.augment_pad), "cutout": int(config.augment_cutout)}


def top_k_accuracy_pct(logits, labels) -> list[float]:
    """The share (%) of ``labels`` among the top-k of ``logits``' rows, for k = 1..K (ties: the lower index)."""
    import numpy as np

    logits, labels = np.asarray(logits), np.asarray(labels)
    order = np.argsort(-logits, axis=1, kind="stable")
    rank = np.argmax(order == labels[:, None], axis=1)  # 0-based rank of the true label
    return [float(100.0 * np.mean(rank < k)) for k in range(1, logits.shape[1] + 1)]


@dataclasses.dataclass(frozen=True)
class MultiStageRun:
    """A trained LP-MST run, before its record is written.

    Attributes:
      stages, fractions, temperature: what ran.
      plans: one :class:`StagePlan` per stage.
      results: one :class:`labeldp.training.TrainResult` per stage.
      stage_test_accuracy_pct: each stage's model's test accuracy (the last is the run's).
      epoch_test_accuracy_pct: per stage, the test accuracy after each of its epochs (001 Figure 3's curves).
      top_k_test_accuracy_pct: per stage, its model's test top-k accuracy for k = 1..K (001 Figure 5).
      config: the stages' training settings (mixup aside).
      mixup: ``{1: stage 1's alpha, 2: every later stage's}``.
      audit_log_probs: the final model's log-probabilities at the audit canaries (or None).
      rating_metrics: the final model's ``test_rmse`` where the classes are ratings (001 Table 3), else empty.
      model: the registry name of the network that trained (:mod:`labeldp.models`).
      init_from: what stage 1 started from when the variant's ``init_from`` names a pre-training (001 Table 1's
        CIFAR-100 pre-training; :mod:`labeldp.pretrained_init`), else None.
    """

    stages: int
    fractions: tuple[float, ...]
    temperature: float
    plans: tuple[StagePlan, ...]
    results: tuple[Any, ...]
    stage_test_accuracy_pct: tuple[float, ...]
    epoch_test_accuracy_pct: tuple[tuple[float, ...], ...]
    top_k_test_accuracy_pct: tuple[tuple[float, ...], ...]
    config: Any
    mixup: dict
    audit_log_probs: Any
    rating_metrics: dict = dataclasses.field(default_factory=dict)
    model: str = ""
    init_from: dict | None = None

    def metrics(self) -> dict[str, Any]:
        import math

        final = self.results[-1]
        diverged = any(r.diverged for r in self.results) or not math.isfinite(final.final_loss)
        return {
            "test_accuracy_pct": self.stage_test_accuracy_pct[-1],
            "diverged": bool(diverged),
            "final_train_loss": final.final_loss,
            "steps": int(sum(r.steps for r in self.results)),
            **self.rating_metrics,
        }

    def timings(self) -> dict[str, float]:
        out = {
            "train_seconds": sum(r.train_seconds for r in self.results),
            "seconds_per_epoch": sum(r.seconds_per_epoch for r in self.results) / len(self.results),
        }
        out.update({f"stage{t}_seconds_per_epoch": r.seconds_per_epoch for t, r in enumerate(self.results, start=1)})
        return out


def train_multi_stage(data, spec: RunSpec, *, name: str, default_stages: int, options: Sequence[str]) -> MultiStageRun:
    """Trains LP-MST as the spec says (see the module docstring).

    Args:
      data: a prepared image (or features) dataset.
      spec: the run (finite ``epsilon``); hparams ``learning_rate``, ``epochs``, ``batch_size`` and
        optionally ``mixup_alpha1`` / ``mixup_alpha2``; options among ``options``: ``stages``,
        ``stage_fractions`` (or LP-2ST's ``stage1_fraction``), ``temperature`` and the recipe's.
      name: the method id (progress labels and errors).
      default_stages: T when the options do not say.
      options: the option names the calling method accepts.

    Returns:
      A :class:`MultiStageRun`.
    """
    import numpy as np

    from labeldp.methods.common import build_model_for, rating_metrics, train_config
    from labeldp.pretrained_init import initial_state
    from labeldp.training import accuracy_pct, audit_log_probs, one_hot, predict_logits, to_float_images, train_weighted

    eps = common.require_private(spec, name)
    common.check_options(spec, tuple(options), name)
    stages, fractions = stages_of(spec, default_stages=default_stages)
    k = int(data.num_classes)
    temperature = float(option_or_axis(spec, "temperature", 1.0))
    model = build_model_for(data, options=spec.options)
    config = train_config(spec)
    mixup = {s: float(spec.hparams.get(f"mixup_alpha{s}", OPTIONAL_HYPERPARAMETERS[f"mixup_alpha{s}"])) for s in (1, 2)}
    x_train, x_test = to_float_images(data.x_train), to_float_images(data.x_test)
    # stage 1 starts from the variant's pre-trained network (classifier re-initialised), if it names one
    stage1_init, init_from = initial_state(
        model, data, spec, seed=common.training_seed(spec.seed, common.STREAM_LP_2ST, 1)
    )
    results: list[Any] = []
    epoch_accuracy: list[list[float]] = []  # per stage, the test accuracy after each epoch (001 Figure 3)
    top_k_accuracy: list[list[float]] = []  # per stage, the test top-k accuracy for k = 1..K (001 Figure 5)

    def fit_stage(t, train_idx, train_labels):
        epoch_accuracy.append([])

        def after_epoch(epoch, params):
            epoch_accuracy[-1].append(accuracy_pct(model, params, x_test, data.y_test))

        res = train_weighted(
            model,
            x_train=x_train[train_idx],
            target_weights=one_hot(train_labels, k),
            config=dataclasses.replace(config, mixup_alpha=mixup[1 if t == 1 else 2]),
            seed=common.training_seed(spec.seed, common.STREAM_LP_2ST, t),
            init_params=results[-1].params if results else stage1_init,
            desc=f"{name} stage {t}",
            on_epoch_end=after_epoch,
        )
        results.append(res)
        top_k_accuracy.append(top_k_accuracy_pct(predict_logits(model, res.params, x_test), data.y_test))
        return predict_logits(model, res.params, x_train) if t < stages else None

    plans = plan_multi_stage(
        np.asarray(data.y_train),
        num_classes=k,
        epsilon=eps,
        rng=common.label_rng(spec.seed, common.STREAM_LP_2ST),
        fit_stage=fit_stage,
        fractions=fractions,
        temperature=temperature,
    )
    accs = tuple(accuracy_pct(model, r.params, x_test, data.y_test) for r in results)
    return MultiStageRun(
        stages=stages,
        fractions=fractions,
        temperature=temperature,
        plans=plans,
        results=tuple(results),
        stage_test_accuracy_pct=accs,
        epoch_test_accuracy_pct=tuple(tuple(a) for a in epoch_accuracy),
        top_k_test_accuracy_pct=tuple(tuple(a) for a in top_k_accuracy),
        config=config,
        mixup=mixup,
        audit_log_probs=audit_log_probs(model, results[-1].params, data),
        rating_metrics=rating_metrics(model, results[-1].params, data),
        model=model.name,
        init_from=init_from,
    )


def run(data, spec: RunSpec) -> MethodResult:
    """Trains LP-MST (option ``stages``, default 3) and evaluates test accuracy.

    Args:
      data: a prepared image (or features) dataset.
      spec: the run; see :func:`train_multi_stage`.

    Returns:
      A :class:`MethodResult`; ``details`` has per stage the labels queried, the mean ``k*``, the
      filter's ``k``, the earlier labels reused, the noisy-label and test accuracies; and the recipe.
    """
    import numpy as np

    from labeldp.accounting import label_events
    from labeldp.methods.common import RECIPE_OPTIONS

    staged = train_multi_stage(
        data, spec, name=NAME, default_stages=DEFAULT_STAGES, options=STAGE_OPTIONS + RECIPE_OPTIONS
    )
    y = np.asarray(data.y_train)
    all_noisy = np.empty_like(y)
    for p in staged.plans:
        all_noisy[p.idx] = p.noisy
    cfg = staged.config
    details = {
        "stages": staged.stages,
        "stage_fractions": list(staged.fractions),
        "noisy_label_accuracy": common.label_accuracy(all_noisy, y),
        "per_stage": [
            {
                "num_queried": int(p.idx.size),
                "noisy_label_accuracy": common.label_accuracy(p.noisy, y[p.idx]),
                "mean_k": p.mean_k,
                "filter_k": p.filter_k,
                "num_reused": p.num_reused,
                "num_train": int(p.train_idx.size),
                "test_accuracy_pct": acc,
                "test_accuracy_by_epoch": list(by_epoch),
                "test_top_k_accuracy_pct": list(top_k),
                "diverged": bool(r.diverged),
            }
            for p, r, acc, by_epoch, top_k in zip(
                staged.plans,
                staged.results,
                staged.stage_test_accuracy_pct,
                staged.epoch_test_accuracy_pct,
                staged.top_k_test_accuracy_pct,
            )
        ],
        "temperature": staged.temperature,
        "epochs_per_stage": int(cfg.epochs),
        "mixup_alpha": {"stage1": staged.mixup[1], "later_stages": staged.mixup[2]},
        "recipe": {
            "momentum": cfg.momentum,
            "nesterov": cfg.nesterov,
            "lr_schedule": cfg.lr_schedule,
            "warmup_fraction": cfg.warmup_fraction,
            "l2": cfg.l2,
        },
        "model": staged.model,
        "augment": augment_record(cfg),
        "label_rng": [int(spec.seed), common.STREAM_LP_2ST],
        **({"init_from": staged.init_from} if staged.init_from else {}),
    }
    return MethodResult(
        metrics=staged.metrics(),
        privacy=common.pure_label_dp(
            spec.epsilon, MECHANISM, event=label_events.pure_epsilon_event(epsilon=spec.epsilon)
        ),
        timings=staged.timings(),
        details=details,
        audit_log_probs=staged.audit_log_probs,
    )
