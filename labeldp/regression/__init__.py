"""Regression with label DP (paper 003): the Appendix G MLPs, their RMSProp training, and the
pipeline every label-randomizer method shares (randomize the training labels once, train on
them, evaluate).

* :mod:`.model` -- :class:`TabularMLP` (embeddings + MLP) and the model of each data set.
* :mod:`.train` -- :func:`train_regression` (RMSProp, squared loss, l2), :func:`predict`.
* :mod:`.pipeline` -- :func:`run_label_randomizer`, the body of every regression method.
"""

__all__ = ["PRIOR_EPSILON"]

# 003 Section 4: eps1 for the private prior, by data set (0.017 Criteo Search, 0.002 Census);
# the RAND HIE stand-in (16k rows, 21 labels) takes 0.03 (project choice: Lap(2/0.03) per bin
# against counts of about 700 per label). Overridable per variant (option prior_epsilon). Here, not in
# :mod:`.pipeline`, so that config validation (labeldp.config_semantics) reads it without the training stack.
PRIOR_EPSILON = {"criteo_search": 0.017, "census1940": 0.002, "rand_hie": 0.03}
