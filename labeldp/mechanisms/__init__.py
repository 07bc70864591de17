"""Label randomizers of the four papers (privacy core).

- :mod:`labeldp.mechanisms.classification`: RR, RR-Debiased, RR-Top-k, RRWithPrior, ALIBI,
  discrete-Laplace k-means priors, group privacy (000, 001, 002).
- :mod:`labeldp.mechanisms.regression`: Laplace / staircase, RR-on-Bins, the optimal unbiased
  randomizer and its pipeline (003).

Every randomizer's transition matrix is checked against its exact eps-DP constraint in
``tests/mechanisms``. Import the submodules directly (they are independent).
"""
