"""Regression with label DP (paper 003): the Appendix G MLPs, their RMSProp training, and the
pipeline every label-randomizer method shares (randomize the training labels once, train on
them, evaluate).

* :mod:`.model` -- :class:`TabularMLP` (embeddings + MLP) and the model of each data set.
* :mod:`.train` -- :func:`train_regression` (RMSProp, squared loss, l2), :func:`predict`.
* :mod:`.pipeline` -- :func:`run_label_randomizer`, the body of every regression method.
"""
