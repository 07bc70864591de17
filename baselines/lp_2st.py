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

Not implemented: data augmentation, 001's learning-rate schedule, momentum and weight decay. 000 Table 5's baselines are run with
000 Table 8's plain SGD grid, which is what this module uses (as the other baselines), so
accuracies can fall short of 001's own LP-2ST numbers.

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

from labeldp.methods.base import MethodResult, RunSpec

NAME = "lp_2st"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
OPTIONAL_HYPERPARAMETERS = {"mixup_alpha1": 0.0, "mixup_alpha2": 0.0}
DATASET_KINDS = ("image", "features")

MECHANISM = ("lp_mst (randomized_response in stage 1, rr_with_prior in stage 2; "
             "pure eps-label-DP, each label queried once)")
DEFAULT_STAGE1_FRACTION = 0.4


class LabelOracle:
    """The only access to the true labels: answers each index at most once, by an eps-DP query.

    Both queries call the randomizers through the module
    :mod:`labeldp.mechanisms.classification` at call time (so tests can spy on them) and log
    ``(mechanism, indices)``; a second query of any index raises ``RuntimeError``.

    Args:
      labels: (n,) true labels.
      num_classes: K.
      epsilon: the per-query budget.
      rng: the ``numpy.random.Generator`` of the label noise.
    """

    def __init__(self, labels, *, num_classes: int, epsilon: float, rng):
        import numpy as np

        self._labels = np.asarray(labels).astype(np.int64)
        self.num_classes = int(num_classes)
        self.epsilon = float(epsilon)
        self._rng = rng
        self._queried = np.zeros(self._labels.shape[0], dtype=bool)
        self.log: list[tuple[str, Any]] = []

    @property
    def n(self) -> int:
        return int(self._labels.shape[0])

    def _claim(self, idx, mechanism: str):
        import numpy as np

        idx = np.asarray(idx, dtype=np.int64)
        if idx.ndim != 1:
            raise ValueError(f"indices must be 1-D, got shape {idx.shape}")
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise IndexError(f"label index out of range [0, {self.n})")
        if np.unique(idx).size != idx.size or np.any(self._queried[idx]):
            raise RuntimeError("a label would be queried twice; LP-MST queries each label once "
                               "(001 Observation 4)")
        self._queried[idx] = True
        self.log.append((mechanism, idx.copy()))
        return idx

    def randomized_response(self, idx):
        """K-ary RR of the labels at ``idx`` (stage 1)."""
        from labeldp.mechanisms import classification

        idx = self._claim(idx, "randomized_response")
        return classification.randomized_response(self._labels[idx], num_classes=self.num_classes,
                                                  epsilon=self.epsilon, rng=self._rng)

    def rr_with_prior(self, idx, priors):
        """RRWithPrior of the labels at ``idx`` with one prior row per index (stage 2)."""
        from labeldp.mechanisms import classification

        idx = self._claim(idx, "rr_with_prior")
        return classification.rr_with_prior(self._labels[idx], priors, epsilon=self.epsilon,
                                            rng=self._rng)

    @property
    def queried_indices(self):
        """All queried indices, in query order."""
        import numpy as np

        if not self.log:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([i for _, i in self.log])


def split_stages(n: int, *, stage1_fraction: float, rng):
    """Seeded, label-independent split: (stage-1 indices, stage-2 indices), each sorted.

    Stage 1 is the first ``round(stage1_fraction * n)`` entries of ``rng.permutation(n)``.
    """
    import numpy as np

    if not 0.0 < float(stage1_fraction) < 1.0:
        raise ValueError(f"stage1_fraction must be in (0, 1), got {stage1_fraction!r}")
    n1 = int(round(float(stage1_fraction) * n))
    if not 1 <= n1 <= n - 1:
        raise ValueError(f"cannot split {n} examples into two non-empty stages with "
                         f"stage1_fraction={stage1_fraction}")
    perm = rng.permutation(n)
    return np.sort(perm[:n1]), np.sort(perm[n1:])


def filter_k(mean_k: float, num_classes: int) -> int:
    """``round(mean k*)`` (half up), clipped to [1, K]: the top-k of the stage-1 filter."""
    import math

    return int(min(max(math.floor(float(mean_k) + 0.5), 1), int(num_classes)))


def top_k_mask(scores, labels, k: int):
    """True where ``labels[i]`` is among the ``k`` largest ``scores[i]`` (ties: smaller id)."""
    import numpy as np

    scores = np.asarray(scores)
    order = np.argsort(-scores, axis=-1, kind="stable")[:, :int(k)]
    return np.any(order == np.asarray(labels)[:, None], axis=-1)


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


def plan_stages(labels, *, num_classes: int, epsilon: float, rng,
                fit_stage1: Callable[[Any, Any], Any], stage1_fraction: float = DEFAULT_STAGE1_FRACTION,
                temperature: float = 1.0, oracle: LabelOracle | None = None) -> TwoStagePlan:
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
    import numpy as np

    from baselines.common import softmax

    if oracle is None:
        oracle = LabelOracle(labels, num_classes=num_classes, epsilon=epsilon, rng=rng)
    n = oracle.n
    idx1, idx2 = split_stages(n, stage1_fraction=stage1_fraction, rng=rng)
    noisy1 = oracle.randomized_response(idx1)
    logits = np.asarray(fit_stage1(idx1, noisy1))
    if logits.shape != (n, num_classes):
        raise ValueError(f"fit_stage1 must return ({n}, {num_classes}) logits, got {logits.shape}")
    res2 = oracle.rr_with_prior(idx2, softmax(logits[idx2], temperature=temperature))
    mean_k = res2.mean_k
    k_f = filter_k(mean_k, num_classes)
    keep = top_k_mask(logits[idx1], noisy1, k_f)
    train_idx = np.concatenate([idx2, idx1[keep]])
    train_labels = np.concatenate([res2.noisy_labels, noisy1[keep]])
    return TwoStagePlan(stage1_idx=idx1, stage2_idx=idx2, stage1_noisy=noisy1,
                        stage2_noisy=res2.noisy_labels, stage2_k=res2.k, mean_k=float(mean_k),
                        filter_k=k_f, stage1_keep=keep, train_idx=train_idx,
                        train_labels=train_labels, query_log=tuple(oracle.log))


def run(data, spec: RunSpec) -> MethodResult:
    """Trains LP-2ST (two stages, each label queried once) and evaluates test accuracy.

    Args:
      data: a prepared image dataset.
      spec: the run (finite ``epsilon``); hparams ``learning_rate``, ``epochs``,
        ``batch_size`` and optionally ``mixup_alpha1`` / ``mixup_alpha2`` (mixup in stage 1 /
        stage 2, default 0 = off); options ``stage1_fraction`` (default 0.4) and
        ``temperature`` (default 1.0).

    Returns:
      A :class:`MethodResult`; ``details`` has the mean ``k*``, the filter ``k``, the number
      of stage-1 labels kept and the noisy-label accuracies of both stages.
    """
    import numpy as np

    from baselines import common
    from labeldp.methods.common import build_model_for, train_config
    from labeldp.training import (accuracy_pct, audit_log_probs, one_hot, predict_logits, to_float_images,
                                  train_weighted)

    eps = common.require_private(spec, NAME)
    common.check_options(spec, ("stage1_fraction", "temperature"), NAME)
    k = int(data.num_classes)
    y = np.asarray(data.y_train)
    stage1_fraction = float(spec.options.get("stage1_fraction", DEFAULT_STAGE1_FRACTION))
    temperature = float(spec.options.get("temperature", 1.0))
    model = build_model_for(data)
    config = train_config(spec)
    mixup = {stage: float(spec.hparams.get(f"mixup_alpha{stage}", OPTIONAL_HYPERPARAMETERS[f"mixup_alpha{stage}"]))
             for stage in (1, 2)}
    config1 = dataclasses.replace(config, mixup_alpha=mixup[1])
    config2 = dataclasses.replace(config, mixup_alpha=mixup[2])
    x_train = to_float_images(data.x_train)
    x_test = to_float_images(data.x_test)
    rng = common.label_rng(spec.seed, common.STREAM_LP_2ST)
    stage1 = {}

    def fit_stage1(idx1, noisy1):
        res = train_weighted(model, x_train=x_train[idx1], target_weights=one_hot(noisy1, k),
                             config=config1, seed=common.training_seed(spec.seed, common.STREAM_LP_2ST, 1),
                             desc=f"{NAME} stage 1")
        stage1["result"] = res
        return predict_logits(model, res.params, x_train)

    plan = plan_stages(y, num_classes=k, epsilon=eps, rng=rng, fit_stage1=fit_stage1,
                       stage1_fraction=stage1_fraction, temperature=temperature)
    res1 = stage1["result"]
    stage1_acc = accuracy_pct(model, res1.params, x_test, data.y_test)
    res2 = train_weighted(model, x_train=x_train[plan.train_idx],
                          target_weights=one_hot(plan.train_labels, k), config=config2,
                          seed=common.training_seed(spec.seed, common.STREAM_LP_2ST, 2),
                          init_params=res1.params, desc=f"{NAME} stage 2")
    acc = accuracy_pct(model, res2.params, x_test, data.y_test)
    diverged = bool(res1.diverged or res2.diverged or not np.isfinite(res2.final_loss))
    metrics = {"test_accuracy_pct": acc, "diverged": diverged, "final_train_loss": res2.final_loss,
               "steps": int(res1.steps + res2.steps)}
    timings = {"train_seconds": res1.train_seconds + res2.train_seconds,
               "seconds_per_epoch": 0.5 * (res1.seconds_per_epoch + res2.seconds_per_epoch),
               "stage1_seconds_per_epoch": res1.seconds_per_epoch,
               "stage2_seconds_per_epoch": res2.seconds_per_epoch}
    all_noisy = np.empty_like(y)
    all_noisy[plan.stage1_idx] = plan.stage1_noisy
    all_noisy[plan.stage2_idx] = plan.stage2_noisy
    kept_idx = plan.stage1_idx[plan.stage1_keep]
    details = {
        "noisy_label_accuracy": common.label_accuracy(all_noisy, y),
        "stage1_noisy_label_accuracy": common.label_accuracy(plan.stage1_noisy, y[plan.stage1_idx]),
        "stage2_noisy_label_accuracy": common.label_accuracy(plan.stage2_noisy, y[plan.stage2_idx]),
        "kept_stage1_label_accuracy": common.label_accuracy(plan.stage1_noisy[plan.stage1_keep], y[kept_idx]),
        "mean_k": plan.mean_k,
        "filter_k": plan.filter_k,
        "num_stage1": int(plan.stage1_idx.size),
        "num_stage2": int(plan.stage2_idx.size),
        "num_stage1_kept": plan.num_stage1_kept,
        "num_stage2_train": int(plan.train_idx.size),
        "stage1_test_accuracy_pct": stage1_acc,
        "stage1_diverged": bool(res1.diverged),
        "stage1_fraction": stage1_fraction,
        "temperature": temperature,
        "epochs_per_stage": int(config.epochs),
        "mixup_alpha": {"stage1": mixup[1], "stage2": mixup[2]},
        "label_rng": [int(spec.seed), common.STREAM_LP_2ST],
    }
    return MethodResult(metrics=metrics, privacy=common.pure_label_dp(eps, MECHANISM),
                        timings=timings, details=details, audit_log_probs=audit_log_probs(model, res2.params, data))
