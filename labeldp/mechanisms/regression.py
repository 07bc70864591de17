"""Label randomizers for regression with label DP (paper 003 and its baselines).

Public entry points (all pure numpy / scipy; randomness only from an explicit
``rng: numpy.random.Generator``):

Additive noise (003 Appendix F, Definitions 17-20), ``eps``-label-DP for labels in
``[lower, upper]``:
  * :func:`laplace_mechanism`, :func:`staircase_mechanism` -- continuous or discrete, clipped
    or not; :func:`laplace_transition_matrix`, :func:`staircase_transition_matrix` give the
    exact matrices of the discrete variants; :func:`laplace_noise`, :func:`staircase_noise`
    the noise distributions (density, cdf, variance, sampler).

Randomized response on bins:
  * :func:`rr_on_bins` -- the optimal RR-on-Bins for the squared loss (Ghazi et al. 2023),
    by a dynamic program over the sorted labels;
  * :func:`debiased_rr` -- debiased RR (003 Definition 23), the unbiased RR baseline;
  * :func:`rr_on_bins_from_map` -- RR-on-Bins for a given map (003 Definition 22).

Optimal unbiased randomizers (003 Section 3):
  * :func:`feasible_output_set` (Algorithm 2), :func:`optimal_unbiased_randomizer`
    (Algorithm 1, LP with HiGHS), :func:`estimate_prior` (Algorithm 4),
    :func:`label_randomizer` (Algorithm 3), :func:`unbiased_randomized_rounding`
    (Section 3.1) and its matrix :func:`randomized_rounding_matrix`.

Every finite randomizer is a :class:`DiscreteRandomizer` (``support``, ``outputs``,
``matrix``, ``probs``; ``noisy_label_loss()``, ``sample()``, ``is_unbiased()``,
``epsilon_dp_ratio()``).
"""

from labeldp.mechanisms.regression_additive import (
    AdditiveNoise,
    TruncatedTransition,
    laplace_mechanism,
    laplace_noise,
    laplace_transition_matrix,
    staircase_gamma_closed_form,
    staircase_mechanism,
    staircase_noise,
    staircase_transition_matrix,
)
from labeldp.mechanisms.regression_bins import (
    debiased_rr,
    debiased_rr_outputs,
    rr_on_bins,
    rr_on_bins_from_map,
    rr_on_bins_loss_by_num_bins,
)
from labeldp.mechanisms.regression_core import DiscreteRandomizer
from labeldp.mechanisms.regression_unbiased import (
    LabelRandomizerResult,
    estimate_prior,
    feasible_output_set,
    label_randomizer,
    noisy_histogram,
    optimal_unbiased_randomizer,
    prior_noise_scale,
    randomized_rounding_matrix,
    unbiased_randomized_rounding,
)

__all__ = [
    "AdditiveNoise",
    "DiscreteRandomizer",
    "LabelRandomizerResult",
    "TruncatedTransition",
    "debiased_rr",
    "debiased_rr_outputs",
    "estimate_prior",
    "feasible_output_set",
    "label_randomizer",
    "laplace_mechanism",
    "laplace_noise",
    "laplace_transition_matrix",
    "noisy_histogram",
    "optimal_unbiased_randomizer",
    "prior_noise_scale",
    "randomized_rounding_matrix",
    "rr_on_bins",
    "rr_on_bins_from_map",
    "rr_on_bins_loss_by_num_bins",
    "staircase_gamma_closed_form",
    "staircase_mechanism",
    "staircase_noise",
    "staircase_transition_matrix",
    "unbiased_randomized_rounding",
]
