"""The label side of LP-MST (001 Algorithm 3): the only access to the true labels and the stages' queries.

A multi-stage run splits the training set into T stages by one seeded permutation (independent of the
labels), queries stage 1's labels with K-ary randomized response and every later stage's with RRWithPrior
under the previous stage's model, and reuses the earlier stages' labels that pass a top-k filter
(001 Appendix B). :class:`LabelOracle` answers each label at most once, so by adaptive parallel
composition (001 Observation 4) the whole run is (eps, 0)-label-DP; the training between the queries is
the caller's (:data:`FitStage`). The LP-MST method (:mod:`baselines.lp_mst`, LP-2ST :mod:`baselines.lp_2st`)
trains the stages.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

__all__ = [
    "TWO_STAGE_FRACTIONS",
    "LabelOracle",
    "stage_fractions_for",
    "split_into_stages",
    "filter_k",
    "top_k_mask",
    "StagePlan",
    "FitStage",
    "plan_multi_stage",
    "prior_from_logits",
]

#: 000 D.1's split of LP-2ST.
TWO_STAGE_FRACTIONS = (0.4, 0.6)


def prior_from_logits(logits, *, temperature: float = 1.0):
    """A model's prior for RRWithPrior: the row softmax of ``logits / temperature`` in float64 (rows sum to 1
    within 1e-12, so it passes the mechanisms' prior checks however confident the model is; 001 Appendix B's
    temperature: below 1 sharpens the prior)."""
    import numpy as np

    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    z = np.asarray(logits, dtype=np.float64) / float(temperature)
    z = z - np.max(z, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


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
            res = oracle.rr_with_prior(idx, prior_from_logits(logits[idx], temperature=temperature))
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
