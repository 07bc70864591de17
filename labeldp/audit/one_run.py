"""One-run label-DP audit after Steinke, Nasr & Jagielski, "Privacy Auditing
with One (1) Training Run" (NeurIPS 2023, arXiv:2305.08846).

Canary ``i`` of ``m`` has labels ``label0[i] != label1[i]`` and a secret fair
bit ``S_i`` and is trained with ``label{S_i}[i]``: flipping ``S_i`` changes
one label (label-DP neighbours). The auditor guesses ``r`` bits (abstaining
on the rest), ``V`` right. With everything but ``S`` fixed and independent of
it, guesses a function of the model and public data, and ``r`` fixed in
advance, ``(eps, delta)``-label-DP training is ``(eps, delta)``-DP in each
coordinate of ``S``, and the paper's main theorem for approximate DP (Sec. 3;
p-value code in Appendix D) gives, with ``X ~ Binomial(r, e^eps/(1+e^eps))``::

  P[V >= v] <= P[X >= v] + 2 m delta * max_{1<=i<=v} P[v-i <= X <= v-1] / i.

So :func:`epsilon_lower_bound` exceeds the true eps with probability <=
``1 - confidence``; :func:`audit` keeps that over several ``r`` (Bonferroni)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Sequence

import numpy as np
from scipy import special, stats

__all__ = [
    "LabelCanaries",
    "AuditResult",
    "make_label_canaries",
    "canary_scores",
    "guesses_from_scores",
    "p_value",
    "epsilon_lower_bound",
    "audit",
    "DEFAULT_GUESS_FRACTIONS",
]

DEFAULT_GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
_METHOD = "Steinke-Nasr-Jagielski 2023 one-run audit, label canaries, max over {k} guess counts, Bonferroni-corrected"


def _int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}.")
    return int(value)


@dataclasses.dataclass(frozen=True)
class LabelCanaries:
    """A label-canary game: (m,) read-only int64 arrays (distinct training-set
    ``indices``, candidate labels ``label0`` != ``label1`` for bits 0 / 1, fair
    ``secret_bits`` in {0, 1}) and ``num_classes`` K."""

    indices: np.ndarray
    label0: np.ndarray
    label1: np.ndarray
    secret_bits: np.ndarray
    num_classes: int

    def __post_init__(self):
        k = _int(self.num_classes, "num_classes", 2)
        object.__setattr__(self, "num_classes", k)
        for f in ("indices", "label0", "label1", "secret_bits"):
            object.__setattr__(self, f, np.array(getattr(self, f), dtype=np.int64))
            getattr(self, f).setflags(write=False)
        idx, y0, y1, bits = self.indices, self.label0, self.label1, self.secret_bits
        if idx.ndim != 1 or not idx.shape == y0.shape == y1.shape == bits.shape:
            raise ValueError(
                "indices, label0, label1 and secret_bits must be 1-D arrays of equal length (one entry per canary)."
            )
        if np.unique(idx).size != idx.size or np.any(idx < 0):
            raise ValueError("indices must be distinct and non-negative.")
        if np.any((np.minimum(y0, y1) < 0) | (np.maximum(y0, y1) >= k) | (y0 == y1)) or np.any(
            (bits != 0) & (bits != 1)
        ):
            raise ValueError(f"need label0 != label1 in [0, num_classes={k}) and secret_bits in {{0, 1}}.")

    @property
    def num_canaries(self) -> int:
        return int(self.indices.size)

    @property
    def training_labels(self) -> np.ndarray:
        """(m,) the label each canary is trained with, ``label{S_i}[i]``."""
        return np.where(self.secret_bits == 1, self.label1, self.label0)


def make_label_canaries(
    *, num_canaries: int, num_classes: int, num_train: int, rng: np.random.Generator
) -> LabelCanaries:
    """Draws canary indices, label pairs and secret bits.

    Args:
      num_canaries: m, 1 <= m <= num_train.
      num_classes: K >= 2.
      num_train: n; ``indices`` are m sorted distinct draws from ``range(n)``
        (then set ``labels[indices] = training_labels``).
      rng: the only source of randomness.

    Returns:
      :class:`LabelCanaries`, label pairs uniform over distinct ordered pairs."""
    m = _int(num_canaries, "num_canaries", 1)
    k = _int(num_classes, "num_classes", 2)
    if _int(num_train, "num_train", 1) < m:
        raise ValueError(f"num_canaries ({m}) must be <= num_train ({num_train}).")
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (default_rng).")
    indices = np.sort(rng.choice(int(num_train), size=m, replace=False))
    label0 = rng.integers(0, k, size=m)
    label1 = (label0 + rng.integers(1, k, size=m)) % k
    return LabelCanaries(
        indices=indices, label0=label0, label1=label1, secret_bits=rng.integers(0, 2, size=m), num_classes=k
    )


def canary_scores(*, log_probs: Any, canaries: LabelCanaries) -> np.ndarray:
    """Per-canary score ``log_probs[i, label1_i] - log_probs[i, label0_i]``.

    Args:
      log_probs: (m, K) log-probabilities (or class scores; -inf allowed) of
        the trained model at the canary inputs, in canary order.
      canaries: the game.

    Returns:
      (m,) float64, > 0 favours bit 1 (0 where both entries are -inf)."""
    lp = np.asarray(log_probs, dtype=np.float64)
    shape = (canaries.num_canaries, canaries.num_classes)
    if lp.shape != shape or np.any(np.isnan(lp) | (lp == np.inf)):
        raise ValueError(
            f"log_probs must be the model's (m, K) = {shape} output "
            f"at canaries.indices without NaN/+inf; got {lp.shape}."
        )
    rows = np.arange(shape[0])
    with np.errstate(invalid="ignore"):
        scores = lp[rows, canaries.label1] - lp[rows, canaries.label0]
    return np.where(np.isnan(scores), 0.0, scores)


def guesses_from_scores(*, scores: Any, num_guesses: int) -> np.ndarray:
    """Guesses 1 for the r/2 highest scores, 0 for the r/2 lowest, else abstains.

    Odd ``r``: the extra guess goes to the more extreme of the next-highest and
    next-lowest score (1 on a tie). Equal scores keep their order (stable sort).

    Args:
      scores: (m,) floats, no NaN.
      num_guesses: r in [0, m].

    Returns:
      (m,) int64 in ``{-1 (abstain), 0, 1}`` with exactly ``r`` guesses."""
    s = np.asarray(scores, dtype=np.float64)
    r = _int(num_guesses, "num_guesses", 0)
    if s.ndim != 1 or np.any(np.isnan(s)) or r > s.size:
        raise ValueError(
            f"scores must be 1-D without NaN and num_guesses <= len(scores); got shape {s.shape}, num_guesses={r}."
        )
    order = np.argsort(s, kind="stable")  # ascending
    n0 = n1 = r // 2
    if r % 2:  # extra guess: 1 if the next-highest is at least as extreme
        up = int(s[order[-n1 - 1]] >= -s[order[n0]])
        n1, n0 = n1 + up, n0 + 1 - up
    out = np.full(s.size, -1, dtype=np.int64)
    out[order[:n0]] = 0
    out[order[s.size - n1 :]] = 1
    return out


def _check(m, r, v, delta, confidence=0.5):
    m, r = _int(m, "num_canaries", 1), _int(r, "num_guesses", 0)
    if _int(v, "num_correct", 0) > r or r > m:
        raise ValueError(f"need num_correct <= num_guesses <= num_canaries, got {v}, {r}, {m}.")
    if not (isinstance(delta, (int, float, np.number)) and 0 <= delta < 1):
        raise ValueError(f"delta must be a float in [0, 1) (the audited claim's delta, e.g. 1e-5), got {delta!r}.")
    if not (isinstance(confidence, (float, np.floating)) and 0 < confidence < 1):
        raise ValueError(f"confidence must be a float in (0, 1), e.g. 0.95, got {confidence!r}.")
    return m, r, int(v), float(delta), float(confidence)


def p_value(*, num_canaries: int, num_guesses: int, num_correct: int, epsilon: float, delta: float) -> float:
    """The module docstring's bound on P[>= num_correct right] (a p-value).

    Pmf terms > 40 sd below the mean (< 1e-300) are left out of the max over
    ``i``: past them the window sum is constant and ``sum / i`` only falls."""
    m, r, v, delta, _ = _check(num_canaries, num_guesses, num_correct, delta)
    if not (isinstance(epsilon, (int, float, np.number)) and 0 <= epsilon < 1e3):
        raise ValueError(f"epsilon must be a float in [0, 1000), got {epsilon!r}.")
    q = float(special.expit(epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))  # P[X >= v]
    if delta == 0.0 or v == 0:
        return min(tail, 1.0)
    k_min = max(0, math.floor(r * q - 40.0 * math.sqrt(r * q * (1 - q))) - 1)
    ks = np.arange(v - 1, min(k_min, v) - 1, -1)  # v-1, v-2, ..., k_min
    window = np.cumsum(stats.binom.pmf(ks, r, q))  # P[v-i <= X <= v-1]
    extra = float(np.max(window / np.arange(1, ks.size + 1), initial=0.0))
    return min(tail + 2.0 * m * delta * extra, 1.0)


def epsilon_lower_bound(
    *, num_canaries: int, num_guesses: int, num_correct: int, delta: float, confidence: float = 0.95
) -> float:
    """Largest eps whose (eps, delta)-label-DP claim the counts reject.

    ``sup{eps >= 0: p_value(eps') < 1 - confidence for all eps' <= eps}``,
    so ``P[result > true eps] <= 1 - confidence``. ``delta = 0``: closed form
    ``logit(Beta.ppf(1 - confidence, v, r - v + 1))``; else bisection below it
    (the p-value increases in eps when ``2 m delta <= 1``, which is required:
    the max is then over mixes of binomial tails).

    Args:
      num_canaries: m, all canaries (guessed or not).
      num_guesses: r, guesses made (abstentions excluded), fixed in advance.
      num_correct: v, correct guesses.
      delta: the audited claim's delta, in [0, 1).
      confidence: in (0, 1).

    Returns:
      The eps lower bound; 0.0 if eps = 0 cannot be rejected."""
    m, r, v, delta, confidence = _check(num_canaries, num_guesses, num_correct, delta, confidence)
    alpha = 1.0 - confidence
    # P[Bin(r, q) >= v] = I_q(v, r - v + 1) < alpha  <=>  q < Beta quantile.
    pure = float(special.logit(stats.beta.ppf(alpha, v, r - v + 1))) if v else 0.0
    if not pure > 0.0 or delta == 0.0:
        return max(pure, 0.0)
    rejects = lambda eps: (
        p_value(  # pylint: disable=g-long-lambda
            num_canaries=m, num_guesses=r, num_correct=v, epsilon=eps, delta=delta
        )
        < alpha
    )
    if 2.0 * m * delta > 1.0:
        raise ValueError(
            f"2 * num_canaries * delta = {2.0 * m * delta:g} > 1: the bound's p-value is then not monotone in "
            "eps and a bisection could overstate it; use fewer canaries or audit a smaller delta."
        )
    if not rejects(0.0):
        return 0.0
    lo, hi = 0.0, pure
    for _ in range(45):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return lo


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`: ``epsilon_lower_bound`` (<= the true eps
    with probability >= ``confidence``) is the max over ``per_count`` rows
    ``(num_guesses, num_correct, bound)``, each bound at
    ``per_count_confidence = 1 - (1 - confidence) / len(per_count)``;
    ``best_num_guesses`` / ``best_num_correct`` attain it (first on ties)."""

    epsilon_lower_bound: float
    confidence: float
    per_count_confidence: float
    num_canaries: int
    best_num_guesses: int
    best_num_correct: int
    per_count: tuple[tuple[int, int, float], ...]
    delta: float
    method: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict of plain Python scalars and lists."""
        keys = ("num_guesses", "num_correct", "epsilon_lower_bound")
        return {**dataclasses.asdict(self), "per_count": [dict(zip(keys, row)) for row in self.per_count]}


def audit(
    *,
    log_probs: Any,
    canaries: LabelCanaries,
    delta: float,
    confidence: float = 0.95,
    guess_counts: Optional[Sequence[int]] = None,
) -> AuditResult:
    """One-run label-DP audit: scores, guesses, Bonferroni-corrected max bound.

    Each of the ``k`` guess counts (fixed in advance; default
    ``round(DEFAULT_GUESS_FRACTIONS * m)`` clipped to [2, m]) is bounded at
    confidence ``1 - (1 - confidence) / k``: the max is a multiple test, and by
    Bonferroni it exceeds the true eps with probability <= ``1 - confidence``.

    Args:
      log_probs: (m, K) model log-probabilities at the canary inputs.
      canaries: the game (its ``secret_bits`` grade the guesses).
      delta: the audited (eps, delta)-label-DP claim's delta, in [0, 1).
      confidence: family-wise confidence in (0, 1).
      guess_counts: integers in [1, m]; duplicates are dropped.

    Returns:
      :class:`AuditResult`."""
    scores = canary_scores(log_probs=log_probs, canaries=canaries)
    m = canaries.num_canaries
    if guess_counts is None:
        guess_counts = [min(m, max(2, round(f * m))) for f in DEFAULT_GUESS_FRACTIONS]
    counts = sorted({_int(c, "guess_counts entries", 1) for c in guess_counts})
    if not counts or counts[-1] > m:
        raise ValueError(
            f"guess_counts must be a non-empty list of integers in [1, num_canaries = {m}], got {list(guess_counts)}."
        )
    per_conf = 1.0 - (1.0 - _check(m, 0, 0, delta, confidence)[4]) / len(counts)
    rows = []
    for r in counts:
        guesses = guesses_from_scores(scores=scores, num_guesses=r)
        v = int(np.sum(guesses == canaries.secret_bits))  # -1 never matches
        rows.append(
            (r, v, epsilon_lower_bound(num_canaries=m, num_guesses=r, num_correct=v, delta=delta, confidence=per_conf))
        )
    best = max(rows, key=lambda row: row[2])  # first maximiser
    return AuditResult(
        epsilon_lower_bound=best[2],
        confidence=float(confidence),
        per_count_confidence=per_conf,
        num_canaries=m,
        best_num_guesses=best[0],
        best_num_correct=best[1],
        per_count=tuple(rows),
        delta=float(delta),
        method=_METHOD.format(k=len(counts)),
    )
