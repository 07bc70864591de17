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
and the grid's ``mixup_alpha1`` (stage 1) / ``mixup_alpha2`` (every later stage). Not
implemented: 001's data augmentation (random crop, flip, cutout) and its simplified Inception
network; the model is the dataset's 000 Table 10 model.

Privacy: every label is queried exactly once, by an eps-DP randomizer whose prior depends only
on earlier randomised labels and public inputs, so by adaptive parallel composition (001
Observation 4) the run is (eps, 0)-label-DP; filtering and reuse are post-processing.
:class:`LabelOracle` is the module's only access to the true labels and raises if an index is
queried twice.

Label randomness (split and every query): ``numpy.random.default_rng([spec.seed, 4])``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from labeldp.methods.base import MethodResult, RunSpec

NAME = "lp_mst"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size")
OPTIONAL_HYPERPARAMETERS = {"mixup_alpha1": 0.0, "mixup_alpha2": 0.0}
DATASET_KINDS = ("image", "features")

MECHANISM = (
    "lp_mst (randomized_response in stage 1, rr_with_prior in later stages; pure eps-label-DP, each label queried once)"
)
DEFAULT_STAGES = 3
#: 000 D.1's split of LP-2ST.
TWO_STAGE_FRACTIONS = (0.4, 0.6)
STAGE_OPTIONS = ("stages", "stage_fractions", "stage1_fraction", "temperature")


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
            raise RuntimeError("a label would be queried twice; LP-MST queries each label once (001 Observation 4)")
        self._queried[idx] = True
        self.log.append((mechanism, idx.copy()))
        return idx

    def randomized_response(self, idx):
        """K-ary RR of the labels at ``idx`` (stage 1)."""
        from labeldp.mechanisms import classification

        idx = self._claim(idx, "randomized_response")
        return classification.randomized_response(
            self._labels[idx], num_classes=self.num_classes, epsilon=self.epsilon, rng=self._rng
        )

    def rr_with_prior(self, idx, priors):
        """RRWithPrior of the labels at ``idx`` with one prior row per index (stages >= 2)."""
        from labeldp.mechanisms import classification

        idx = self._claim(idx, "rr_with_prior")
        return classification.rr_with_prior(self._labels[idx], priors, epsilon=self.epsilon, rng=self._rng)

    @property
    def queried_indices(self):
        """All queried indices, in query order."""
        import numpy as np

        if not self.log:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([i for _, i in self.log])


def stage_fractions_for(stages: int, fractions: Sequence[float] | None = None) -> tuple[float, ...]:
    """The checked stage shares: ``fractions`` if given, else 000 D.1's (0.4, 0.6) for two stages and
    equal shares otherwise. They must be ``stages`` positive numbers summing to 1."""
    import math

    if not (isinstance(stages, int) and not isinstance(stages, bool) and stages >= 1):
        raise ValueError(f"option stages must be an integer >= 1 (LP-1ST is RR), got {stages!r}")
    if fractions is None:
        fractions = TWO_STAGE_FRACTIONS if stages == 2 else (1.0 / stages,) * stages
    fractions = tuple(float(f) for f in fractions)
    if len(fractions) != stages or any(not f > 0 for f in fractions) or not math.isclose(sum(fractions), 1.0):
        raise ValueError(f"stage_fractions must be {stages} positive shares summing to 1, got {list(fractions)}")
    return fractions


def split_into_stages(n: int, *, fractions: Sequence[float], rng) -> list:
    """Seeded, label-independent split of ``range(n)`` into ``len(fractions)`` sorted index sets.

    Stage ``t`` is entries ``round(c_{t-1} n) .. round(c_t n)`` of ``rng.permutation(n)`` (``c``:
    cumulative shares), so two stages with shares (f, 1 - f) take the first ``round(f n)``.
    """
    import numpy as np

    cuts = [0] + [int(round(float(c) * n)) for c in np.cumsum(fractions)[:-1]] + [n]
    if any(b <= a for a, b in zip(cuts, cuts[1:])):
        raise ValueError(
            f"cannot split {n} examples into {len(fractions)} non-empty stages with shares {list(fractions)}"
        )
    perm = rng.permutation(n)
    return [np.sort(perm[a:b]) for a, b in zip(cuts, cuts[1:])]


def filter_k(mean_k: float, num_classes: int) -> int:
    """``round(mean k*)`` (half up), clipped to [1, K]: the top-k of the reuse filter."""
    import math

    return int(min(max(math.floor(float(mean_k) + 0.5), 1), int(num_classes)))


def top_k_mask(scores, labels, k: int):
    """True where ``labels[i]`` is among the ``k`` largest ``scores[i]`` (ties: smaller id)."""
    import numpy as np

    scores = np.asarray(scores)
    order = np.argsort(-scores, axis=-1, kind="stable")[:, : int(k)]
    return np.any(order == np.asarray(labels)[:, None], axis=-1)


@dataclasses.dataclass(frozen=True)
class StagePlan:
    """One stage of an LP-MST run.

    Attributes:
      idx: the stage's sorted indices ``S^(t)``.
      noisy: their randomised labels (RR in stage 1, RRWithPrior later).
      k: the ``k*`` RRWithPrior chose per example (K for every stage-1 example).
      filter_k: ``round(mean k)``, the top-k of the reuse filter (K in stage 1: nothing earlier).
      train_idx: the stage's training set: ``idx`` then the kept earlier indices in stage order.
      train_labels: the noisy labels of ``train_idx``.
      num_reused: how many earlier labels passed the filter.
    """

    idx: Any
    noisy: Any
    k: Any
    filter_k: int
    train_idx: Any
    train_labels: Any
    num_reused: int

    @property
    def mean_k(self) -> float:
        return float(self.k.mean()) if self.k.size else float("nan")


FitStage = Callable[[int, Any, Any], Any]
"""``(stage, train_idx, train_labels) -> logits``: trains stage ``stage`` (1-based; from the previous
stage's parameters when ``stage > 1``) and returns its (n, K) logits on the whole training set (they
may depend on the labels only through ``train_labels``); the last stage may return None."""


def plan_multi_stage(
    labels,
    *,
    num_classes: int,
    epsilon: float,
    rng,
    fit_stage: FitStage,
    fractions: Sequence[float],
    temperature: float = 1.0,
    oracle: LabelOracle | None = None,
) -> tuple[StagePlan, ...]:
    """Runs the label queries of LP-MST around a per-stage training callback (001 Algorithm 3).

    Args:
      labels: (n,) true labels (read only through a :class:`LabelOracle`).
      num_classes: K.
      epsilon: the label-DP budget (every label is queried once at this epsilon).
      rng: the ``numpy.random.Generator`` of the split and of every query.
      fit_stage: the training callback (:data:`FitStage`).
      fractions: the stages' shares (:func:`stage_fractions_for`).
      temperature: prior temperature (001 Appendix B).
      oracle: a :class:`LabelOracle` to use (default: a new one on ``labels``).

    Returns:
      One :class:`StagePlan` per stage.
    """
    import numpy as np

    from baselines.common import softmax

    if oracle is None:
        oracle = LabelOracle(labels, num_classes=num_classes, epsilon=epsilon, rng=rng)
    n = oracle.n
    parts = split_into_stages(n, fractions=fractions, rng=rng)
    plans: list[StagePlan] = []
    logits = None
    for t, idx in enumerate(parts, start=1):
        if t == 1:
            noisy, k_star = oracle.randomized_response(idx), np.full(idx.size, num_classes)
            train_idx, train_labels, k_f, reused = idx, noisy, int(num_classes), 0
        else:
            res = oracle.rr_with_prior(idx, softmax(logits[idx], temperature=temperature))
            noisy, k_star = res.noisy_labels, np.asarray(res.k)
            k_f = filter_k(res.mean_k, num_classes)
            prev_idx = np.concatenate([p.idx for p in plans])
            prev_noisy = np.concatenate([p.noisy for p in plans])
            keep = top_k_mask(logits[prev_idx], prev_noisy, k_f)
            train_idx = np.concatenate([idx, prev_idx[keep]])
            train_labels = np.concatenate([noisy, prev_noisy[keep]])
            reused = int(keep.sum())
        plans.append(
            StagePlan(
                idx=idx,
                noisy=noisy,
                k=k_star,
                filter_k=k_f,
                train_idx=train_idx,
                train_labels=train_labels,
                num_reused=reused,
            )
        )
        logits = fit_stage(t, train_idx, train_labels)
        if t < len(parts):
            logits = np.asarray(logits)
            if logits.shape != (n, num_classes):
                raise ValueError(f"fit_stage must return ({n}, {num_classes}) logits, got {logits.shape}")
    return tuple(plans)


def stages_of(spec: RunSpec, *, default_stages: int) -> tuple[int, tuple[float, ...]]:
    """(T, shares) from the options ``stages``, ``stage_fractions`` and LP-2ST's ``stage1_fraction``."""
    stages = spec.options.get("stages", default_stages)
    fractions = spec.options.get("stage_fractions")
    if "stage1_fraction" in spec.options:
        if fractions is not None or stages != 2:
            raise ValueError("option stage1_fraction is LP-2ST's (two stages); give stage_fractions instead")
        f1 = float(spec.options["stage1_fraction"])
        if not 0.0 < f1 < 1.0:
            raise ValueError(f"stage1_fraction must be in (0, 1), got {f1!r}")
        fractions = (f1, 1.0 - f1)
    return stages, stage_fractions_for(stages, fractions)


@dataclasses.dataclass(frozen=True)
class MultiStageRun:
    """A trained LP-MST run, before its record is written.

    Attributes:
      stages, fractions, temperature: what ran.
      plans: one :class:`StagePlan` per stage.
      results: one :class:`labeldp.training.TrainResult` per stage.
      stage_test_accuracy_pct: each stage's model's test accuracy (the last is the run's).
      config: the stages' training settings (mixup aside).
      mixup: ``{1: stage 1's alpha, 2: every later stage's}``.
      audit_log_probs: the final model's log-probabilities at the audit canaries (or None).
    """

    stages: int
    fractions: tuple[float, ...]
    temperature: float
    plans: tuple[StagePlan, ...]
    results: tuple[Any, ...]
    stage_test_accuracy_pct: tuple[float, ...]
    config: Any
    mixup: dict
    audit_log_probs: Any

    def metrics(self) -> dict[str, Any]:
        import math

        final = self.results[-1]
        diverged = any(r.diverged for r in self.results) or not math.isfinite(final.final_loss)
        return {
            "test_accuracy_pct": self.stage_test_accuracy_pct[-1],
            "diverged": bool(diverged),
            "final_train_loss": final.final_loss,
            "steps": int(sum(r.steps for r in self.results)),
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

    from baselines import common
    from labeldp.methods.common import build_model_for, train_config
    from labeldp.training import accuracy_pct, audit_log_probs, one_hot, predict_logits, to_float_images, train_weighted

    eps = common.require_private(spec, name)
    common.check_options(spec, tuple(options), name)
    stages, fractions = stages_of(spec, default_stages=default_stages)
    k = int(data.num_classes)
    temperature = float(spec.options.get("temperature", 1.0))
    model = build_model_for(data)
    config = train_config(spec)
    mixup = {s: float(spec.hparams.get(f"mixup_alpha{s}", OPTIONAL_HYPERPARAMETERS[f"mixup_alpha{s}"])) for s in (1, 2)}
    x_train, x_test = to_float_images(data.x_train), to_float_images(data.x_test)
    results: list[Any] = []

    def fit_stage(t, train_idx, train_labels):
        res = train_weighted(
            model,
            x_train=x_train[train_idx],
            target_weights=one_hot(train_labels, k),
            config=dataclasses.replace(config, mixup_alpha=mixup[1 if t == 1 else 2]),
            seed=common.training_seed(spec.seed, common.STREAM_LP_2ST, t),
            init_params=results[-1].params if results else None,
            desc=f"{name} stage {t}",
        )
        results.append(res)
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
        config=config,
        mixup=mixup,
        audit_log_probs=audit_log_probs(model, results[-1].params, data),
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

    from baselines import common
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
                "diverged": bool(r.diverged),
            }
            for p, r, acc in zip(staged.plans, staged.results, staged.stage_test_accuracy_pct)
        ],
        "temperature": staged.temperature,
        "epochs_per_stage": int(cfg.epochs),
        "mixup_alpha": {"stage1": staged.mixup[1], "later_stages": staged.mixup[2]},
        "recipe": {
            "momentum": cfg.momentum,
            "lr_schedule": cfg.lr_schedule,
            "warmup_fraction": cfg.warmup_fraction,
            "l2": cfg.l2,
        },
        "label_rng": [int(spec.seed), common.STREAM_LP_2ST],
    }
    return MethodResult(
        metrics=staged.metrics(),
        privacy=common.pure_label_dp(spec.epsilon, MECHANISM),
        timings=staged.timings(),
        details=details,
        audit_log_probs=staged.audit_log_probs,
    )
