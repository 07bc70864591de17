"""The plan of one DP-SGD-family run: what the accountant and the training loop must agree on.

A :class:`DPTrainingPlan` is built once per run by :func:`make_training_plan`, before training:
the sampler (Poisson at rate ``q = n1 / n``, or shuffled fixed-size batches), the number of steps
``floor(epochs n / n1)``, the noise multiplier sigma calibrated by ``dp_accounting`` so that exactly
those steps meet the target (epsilon, delta) under the run's neighbouring relation, whether
amplification by subsampling is claimed, and the accountant's record (its DpEvent and the run's
epsilon under every relation). The training loop draws its batches from :meth:`DPTrainingPlan.batches`
(exactly ``steps`` of them) and the record's privacy block comes from
:meth:`DPTrainingPlan.privacy_outcome`, so the two cannot drift apart (the role of jax_privacy's
``DPExecutionPlan``).

Formal guarantee: with Poisson sampling and amplification, the run is (epsilon, delta)-DP under
``accounting.neighboring_relation`` for the unit sampled (an example, or a user whose k examples'
gradients are summed then clipped), by the PLD (or RDP) accounting of the subsampled Gaussian
mechanism composed ``steps`` times (000 Section 3.4). Shuffled batches are accounted as Poisson
(an approximation, marked not valid); a denoiser that breaks amplification is accounted without it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterator

import numpy as np

from labeldp import accounting
from labeldp.dpsgd.sampling import num_steps, poisson_batches, shuffled_batches
from labeldp.methods.base import PrivacyOutcome

__all__ = ["DPTrainingPlan", "make_training_plan"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPTrainingPlan:
    """Sampling, steps, noise and accounting of one run (module docstring).

    Attributes:
      n: training units (examples, or users); expected_batch_size: n1.
      sampling: ``"poisson"`` or ``"shuffle"``.
      steps: ``floor(epochs n / n1)``: the batches the loop draws.
      amplification: whether the accountant used amplification by subsampling.
      accounting: the :func:`labeldp.accounting.account_dpsgd` record (sigma, eps, delta, event,
        relation, eps under every relation).
      seconds: the accountant's time.
    """

    n: int
    expected_batch_size: int
    sampling: str
    steps: int
    amplification: bool
    accounting: Any
    seconds: float

    @property
    def sampling_rate(self) -> float:
        """q = n1 / n."""
        return self.expected_batch_size / self.n

    @property
    def neighboring_relation(self) -> accounting.Relation:
        """The relation sigma was calibrated under (``dp_accounting``'s enum)."""
        return accounting.to_relation(self.accounting.neighboring_relation)

    @property
    def noise_multiplier(self) -> float:
        """sigma, calibrated for exactly this plan."""
        return float(self.accounting.noise_multiplier)

    def batches(self, *, rng: np.random.Generator, pad_to: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Exactly :attr:`steps` batches ``(indices, mask)`` of the plan's sampler."""
        if self.sampling == "poisson":
            return poisson_batches(
                self.n, sampling_rate=self.sampling_rate, rng=rng, pad_to=pad_to, num_batches=self.steps
            )
        return shuffled_batches(self.n, batch_size=self.expected_batch_size, rng=rng, num_batches=self.steps)

    def privacy_outcome(
        self, *, mechanism: str, reasons: tuple[str, ...] = (), privacy_unit: str | None = None
    ) -> PrivacyOutcome:
        """The record's privacy block for this plan: the accountant's eps and delta; not valid
        (with every reason) when the batches were shuffled or ``reasons`` name another problem."""
        reasons = tuple(reasons)
        if self.sampling != "poisson":
            reasons += ("shuffled fixed-size batches accounted as Poisson subsampling (an approximation, not a proof)",)
        acc = self.accounting
        extra = {} if privacy_unit is None else {"privacy_unit": privacy_unit}
        return PrivacyOutcome(
            epsilon=float(acc.epsilon),
            delta=float(acc.delta),
            valid=not reasons,
            invalid_reason="; ".join(reasons) or None,
            mechanism=mechanism,
            accounting=acc.to_dict(),
            neighboring_relation=acc.neighboring_relation,
            epsilon_by_relation=dict(acc.epsilon_by_relation),
            **extra,
        )


def make_training_plan(
    *,
    target_epsilon: float,
    target_delta: float,
    n: int,
    expected_batch_size: int,
    epochs: float | None = None,
    steps: int | None = None,
    sampling: str = "poisson",
    amplification: bool = True,
    accountant: str = "pld",
    neighboring_relation: accounting.Relation | str | None = None,
) -> DPTrainingPlan:
    """Calibrates sigma for exactly the run described; the one place a DP run's plan is made.

    Args:
      target_epsilon, target_delta: the target the whole run meets.
      n: training units; expected_batch_size: n1 (``batch_size`` of the grid).
      epochs: passes over the units; the plan runs ``floor(epochs n / n1)`` steps.
      steps: instead of ``epochs``, the exact number of steps (for a method whose step count
        follows another rule, e.g. 002's user-level Hybrid, whose steps do not depend on the cap k).
      sampling: ``"poisson"`` (what the accountant assumes) or ``"shuffle"``.
      amplification: False for denoisers that depend on which units were sampled (000 Section 3.4).
      accountant: ``"pld"`` or ``"rdp"``.
      neighboring_relation: the relation the target is met under, ``dp_accounting``'s enum or its
        config name (``spec.calibration_relation``); None: ``ADD_OR_REMOVE_ONE``, the papers' convention.

    Returns:
      The :class:`DPTrainingPlan`.

    Raises:
      ValueError: the batch is larger than the data (lower ``batch_size`` in the grid), the run
        has less than one step, or not exactly one of ``epochs`` and ``steps`` is given.
    """
    n1 = int(expected_batch_size)
    if n1 > n:
        raise ValueError(f"batch_size {n1} exceeds the training set size {n}; lower it in the grid")
    if (epochs is None) == (steps is None):
        raise ValueError("give exactly one of epochs and steps")
    if steps is None:
        steps = num_steps(n=n, expected_batch_size=n1, epochs=epochs)
        if steps < 1:
            raise ValueError(
                f"{epochs} epochs of batch {n1} over {n} units is less than one step; raise epochs in the grid"
            )
    elif int(steps) < 1:
        raise ValueError(f"a DP run needs at least one step, got {steps}")
    t0 = time.perf_counter()
    acc = accounting.account_dpsgd(
        target_epsilon=target_epsilon,
        target_delta=target_delta,
        sampling_rate=n1 / n,
        steps=steps,
        amplification=amplification,
        accountant=accountant,
        neighboring_relation=accounting.to_relation(neighboring_relation or accounting.DEFAULT_RELATION),
    )
    return DPTrainingPlan(
        n=int(n),
        expected_batch_size=n1,
        sampling=sampling,
        steps=int(steps),
        amplification=amplification,
        accounting=acc,
        seconds=time.perf_counter() - t0,
    )
