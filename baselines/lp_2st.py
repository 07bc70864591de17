"""LP-2ST: two-stage label-private training with RRWithPrior (001 Algorithm 3, T = 2).

Protocol (001 Algorithm 3 and Appendix B "Multi-Stage Training"; 000 Appendix D.1):

1. Split the training set by a seeded permutation (independent of the labels) into stage 1,
   the first ``round(0.4 n)`` indices of the permutation, and stage 2, the other 60%
   (000 D.1; option ``stage1_fraction``).
2. Stage 1: query every stage-1 label with K-ary randomized response (RRWithPrior under the
   trivial model ``M^(0)``'s uniform prior picks ``k* = K``, i.e. plain RR) and train a fresh
   model on them.
3. Stage 2: query every stage-2 label with RRWithPrior (001 Algorithm 2) using the stage-1
   model's softmax on that example as its prior (``softmax(logits / t)``, temperature ``t``
   = option ``temperature``, default 1; 001 Appendix B, Fig. 4a).
4. Reuse the stage-1 labels, filtered (001 Appendix B): a stage-1 example is kept iff its
   noisy label is among the stage-1 model's top-``k`` predicted classes on it, with
   ``k = round(mean k*)`` over the stage-2 queries (half-up rounding, clipped to [1, K]; 001
   Appendix E, Fig. 5, uses "the average k (rounded to the nearest integer)"). Top-k ties in the
   predictions go to the smaller class id, as in the mechanisms.
5. Train stage 2 starting from the stage-1 model's parameters (001 Appendix B) on the
   stage-2 noisy labels plus the kept stage-1 labels, with one-hot cross-entropy.

Epochs: each stage runs the full ``epochs`` hyper-parameter (001 Appendix B: "for
multi-stage training, each stage will run 40 epochs separately"), over its own training set
(stage 1: the 40%; stage 2: the 60% plus the kept stage-1 examples). The optimiser state is
fresh in stage 2 (only the parameters carry over); training seeds of the two stages are
derived from ``spec.seed`` (:func:`baselines.common.training_seed`).

Mixup (001 Appendix B, "Learning with Noisy Labels"; :func:`labeldp.training.mixup_batch`) is
a pair of optional hyper-parameters, one per stage, ``mixup_alpha1`` and ``mixup_alpha2``
(default 0 = off; 001 finds alpha in 4-8 good, with less in stage 2, Fig. 4b). They are
searched only where the table's grid lists them.

Training recipe: 000 Table 5's baselines run with 000 Table 8's plain SGD grid (the default);
a variant may set 001 Appendix B's recipe (:data:`labeldp.methods.common.RECIPE_OPTIONS`:
momentum, the warm-up / linear-decay schedule, l2), as 001 Table 4's target does, and may pick
001's networks (option ``model``: ``inception_001`` / ``resnet18_v2_cifar``, with BatchNorm) and
its data augmentation (option ``augment: crop_flip_cutout``); see :mod:`baselines.lp_mst`.

This is :mod:`baselines.lp_mst` with T = 2 (the same code, streams and records); this module
keeps LP-2ST's method id and its record's flat ``details``.

Privacy: every label is queried exactly once (stage-1 labels by RR, stage-2 labels by
RRWithPrior with a prior computed from stage-1 randomised labels and public images only), so
by adaptive parallel composition (001 Observation 4) the run is (eps, 0)-label-DP. Reusing
and filtering stage-1 labels is post-processing of already-randomised labels.
:class:`LabelOracle` is the module's only access to the true labels and raises if an index is
queried twice.

Label randomness (split and both queries): ``numpy.random.default_rng([spec.seed, 4])``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from baselines.lp_mst import augment_record, train_multi_stage
from labeldp.mechanisms.multi_stage_queries import (
    TWO_STAGE_FRACTIONS,
    LabelOracle,
    filter_k,
    plan_multi_stage,
    split_into_stages,
    top_k_mask,
)
from labeldp.methods.base import MethodResult, RunSpec
from baselines import common

# LP-2ST's label side lives in labeldp.mechanisms.multi_stage_queries; these names stay importable from here
__all__ = ["LabelOracle", "TwoStagePlan", "filter_k", "plan_stages", "run", "split_stages", "top_k_mask"]

NAME = "lp_2st"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
#: mixup per stage (001 Appendix B) and, for 001 Figure 4 (a)'s sweep, the split and the prior's temperature
#: as grid axes (their defaults: the options', else 0.4 and 1)
OPTIONAL_HYPERPARAMETERS = {"mixup_alpha1": 0.0, "mixup_alpha2": 0.0, "stage1_fraction": 0.4, "temperature": 1.0}
DATASET_KINDS = ("image", "features", "ratings")  # ratings: 001 Table 3 (MovieLens-1M, NCF)
#: honest selection (variant options validation_fraction / validation_epsilon): the runner trains on the fitting
#: rows and scores the model on the RR-released held-out labels (labeldp.selection.heldout_data)
HELDOUT_SELECTION_BY_RUNNER = True

MECHANISM = (
    "lp_mst (randomized_response in stage 1, rr_with_prior in stage 2; pure eps-label-DP, each label queried once)"
)
DEFAULT_STAGE1_FRACTION = TWO_STAGE_FRACTIONS[0]


def split_stages(n: int, *, stage1_fraction: float, rng):
    """Seeded, label-independent split: (stage-1 indices, stage-2 indices), each sorted.

    Stage 1 is the first ``round(stage1_fraction * n)`` entries of ``rng.permutation(n)``.
    """
    if not 0.0 < float(stage1_fraction) < 1.0:
        raise ValueError(f"stage1_fraction must be in (0, 1), got {stage1_fraction!r}")
    idx1, idx2 = split_into_stages(n, fractions=(float(stage1_fraction), 1.0 - float(stage1_fraction)), rng=rng)
    return idx1, idx2


@dataclasses.dataclass(frozen=True)
class TwoStagePlan:
    """The label side of an LP-2ST run (everything but the two trainings).

    Attributes:
      stage1_idx, stage2_idx: sorted disjoint index sets covering ``range(n)``.
      stage1_noisy: RR labels of ``stage1_idx``.
      stage2_noisy: RRWithPrior labels of ``stage2_idx``.
      stage2_k: the ``k*`` RRWithPrior chose for each stage-2 example.
      mean_k: ``mean(stage2_k)``.
      filter_k: ``round(mean_k)``, the top-k of the stage-1 filter.
      stage1_keep: bool mask over ``stage1_idx``: noisy label in the stage-1 model's top-k.
      train_idx: the stage-2 training set: ``stage2_idx`` then the kept stage-1 indices.
      train_labels: the noisy labels of ``train_idx``.
      query_log: ``((mechanism, indices), ...)`` of every label query, in order.
    """

    stage1_idx: Any
    stage2_idx: Any
    stage1_noisy: Any
    stage2_noisy: Any
    stage2_k: Any
    mean_k: float
    filter_k: int
    stage1_keep: Any
    train_idx: Any
    train_labels: Any
    query_log: tuple

    @property
    def num_stage1_kept(self) -> int:
        return int(self.stage1_keep.sum())


def plan_stages(
    labels,
    *,
    num_classes: int,
    epsilon: float,
    rng,
    fit_stage1: Callable[[Any, Any], Any],
    stage1_fraction: float = DEFAULT_STAGE1_FRACTION,
    temperature: float = 1.0,
    oracle: LabelOracle | None = None,
) -> TwoStagePlan:
    """Runs the label queries of LP-2ST around a stage-1 training callback.

    Args:
      labels: (n,) true labels (read only through a :class:`LabelOracle`).
      num_classes: K.
      epsilon: the label-DP budget (every label is queried once at this epsilon).
      rng: the ``numpy.random.Generator`` of the split and of both queries.
      fit_stage1: ``(stage1_idx, stage1_noisy) -> logits`` trains the stage-1 model on the
        stage-1 RR labels and returns its (n, K) logits on the whole training set (they must
        depend on the labels only through ``stage1_noisy``).
      stage1_fraction: share of the training set in stage 1 (000 D.1: 0.4).
      temperature: prior temperature (001 Appendix B).
      oracle: a :class:`LabelOracle` to use (default: a new one on ``labels``).

    Returns:
      A :class:`TwoStagePlan`.
    """
    if not 0.0 < float(stage1_fraction) < 1.0:
        raise ValueError(f"stage1_fraction must be in (0, 1), got {stage1_fraction!r}")
    if oracle is None:
        oracle = LabelOracle(labels, num_classes=num_classes, epsilon=epsilon, rng=rng)
    s1, s2 = plan_multi_stage(
        labels,
        num_classes=num_classes,
        epsilon=epsilon,
        rng=rng,
        fit_stage=lambda t, idx, noisy: fit_stage1(idx, noisy) if t == 1 else None,
        fractions=(float(stage1_fraction), 1.0 - float(stage1_fraction)),
        temperature=temperature,
        oracle=oracle,
    )
    keep = top_k_mask_of(s1, s2)
    return TwoStagePlan(
        stage1_idx=s1.idx,
        stage2_idx=s2.idx,
        stage1_noisy=s1.noisy,
        stage2_noisy=s2.noisy,
        stage2_k=s2.k,
        mean_k=s2.mean_k,
        filter_k=s2.filter_k,
        stage1_keep=keep,
        train_idx=s2.train_idx,
        train_labels=s2.train_labels,
        query_log=tuple(oracle.log),
    )


def top_k_mask_of(stage1, stage2):
    """The mask over stage 1's indices of the labels stage 2 reuses."""
    import numpy as np

    return np.isin(stage1.idx, stage2.train_idx[stage2.idx.size :])


def run(data, spec: RunSpec) -> MethodResult:
    """Trains LP-2ST (two stages, each label queried once) and evaluates test accuracy.

    Args:
      data: a prepared image dataset.
      spec: the run (finite ``epsilon``); hparams ``learning_rate``, ``epochs``,
        ``batch_size`` and optionally ``mixup_alpha1`` / ``mixup_alpha2`` (mixup in stage 1 /
        stage 2, default 0 = off); options ``stage1_fraction`` (default 0.4),
        ``temperature`` (default 1.0) and the recipe's (:data:`labeldp.methods.common.RECIPE_OPTIONS`).

    Returns:
      A :class:`MethodResult`; ``details`` has the mean ``k*``, the filter ``k``, the number
      of stage-1 labels kept and the noisy-label accuracies of both stages.
    """
    import numpy as np

    from labeldp.accounting import label_events
    from labeldp.methods.common import RECIPE_OPTIONS

    staged = train_multi_stage(
        data, spec, name=NAME, default_stages=2, options=("stage1_fraction", "temperature") + RECIPE_OPTIONS
    )
    y = np.asarray(data.y_train)
    s1, s2 = staged.plans
    keep = top_k_mask_of(s1, s2)
    all_noisy = np.empty_like(y)
    all_noisy[s1.idx] = s1.noisy
    all_noisy[s2.idx] = s2.noisy
    kept_idx = s1.idx[keep]
    res1 = staged.results[0]
    timings = staged.timings()
    details = {
        "noisy_label_accuracy": common.label_accuracy(all_noisy, y),
        "stage1_noisy_label_accuracy": common.label_accuracy(s1.noisy, y[s1.idx]),
        "stage2_noisy_label_accuracy": common.label_accuracy(s2.noisy, y[s2.idx]),
        "kept_stage1_label_accuracy": common.label_accuracy(s1.noisy[keep], y[kept_idx]),
        "mean_k": s2.mean_k,
        "filter_k": s2.filter_k,
        "num_stage1": int(s1.idx.size),
        "num_stage2": int(s2.idx.size),
        "num_stage1_kept": int(keep.sum()),
        "num_stage2_train": int(s2.train_idx.size),
        "stage1_test_accuracy_pct": staged.stage_test_accuracy_pct[0],
        # the stage-1 model's test top-k accuracy, k = 1..K (001 Figure 5 reads it at k = filter_k)
        "stage1_test_top_k_accuracy_pct": list(staged.top_k_test_accuracy_pct[0]),
        "stage1_diverged": bool(res1.diverged),
        "stage1_fraction": staged.fractions[0],
        "temperature": staged.temperature,
        "epochs_per_stage": int(staged.config.epochs),
        "mixup_alpha": {"stage1": staged.mixup[1], "stage2": staged.mixup[2]},
        "label_rng": [int(spec.seed), common.STREAM_LP_2ST],
        # the test accuracy after each epoch of each stage (001 Figure 3's learning curves)
        "test_accuracy_by_epoch": {f"stage{t}": list(a) for t, a in enumerate(staged.epoch_test_accuracy_pct, start=1)},
    }
    if spec.options.keys() & set(RECIPE_OPTIONS):
        cfg = staged.config
        details["recipe"] = {
            "momentum": cfg.momentum,
            "nesterov": cfg.nesterov,
            "lr_schedule": cfg.lr_schedule,
            "warmup_fraction": cfg.warmup_fraction,
            "l2": cfg.l2,
        }
        details["model"] = staged.model
        details["augment"] = augment_record(cfg)
    if staged.init_from:
        details["init_from"] = staged.init_from
    return MethodResult(
        metrics=staged.metrics(),
        privacy=common.pure_label_dp(
            spec.epsilon, MECHANISM, event=label_events.pure_epsilon_event(epsilon=spec.epsilon)
        ),
        timings=timings,
        details=details,
        audit_log_probs=staged.audit_log_probs,
    )
