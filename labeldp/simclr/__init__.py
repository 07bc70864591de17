"""SimCLR self-supervised pre-training and frozen features (000 Section 5.3 / Appendix D.2; Chen et al. 2020).

Modules: :mod:`.resnet` (ResNet-18 with the CIFAR stem, projection head), :mod:`.augment` (SimCLR
augmentations in JAX), :mod:`.ntxent` (the NT-Xent loss), :mod:`.pretrain` (the training loop with
orbax checkpoints; CLI of the ``pretrain_simclr`` rule) and :mod:`.features` (the frozen encoder's
representations and a linear probe; CLI of the ``features`` rule). Nothing here reads a label
except the linear probe, a non-private diagnostic of encoder quality.
"""
