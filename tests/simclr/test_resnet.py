"""ResNet-18 with the CIFAR stem (labeldp/simclr/resnet.py)."""

import jax
import numpy as np

from labeldp.simclr.resnet import ResNet18, SimCLRNet


def test_representation_and_projection_shapes_for_cifar_and_mnist_inputs():
    for shape in ((32, 32, 3), (28, 28, 1)):
        net = SimCLRNet(width=4, projection_dim=16)
        x = np.zeros((2, *shape), np.float32)
        v = net.init(jax.random.key(0), x)
        assert net.apply(v, x).shape == (2, 16)
        assert net.apply(v, x, method=SimCLRNet.encode).shape == (2, 32)  # 8 * width


def test_cifar_stem_keeps_the_resolution_and_has_18_weighted_layers():
    enc = ResNet18(width=4)
    v = enc.init(jax.random.key(0), np.zeros((1, 32, 32, 3), np.float32))
    stem = v["params"]["Conv_0"]["kernel"]
    assert stem.shape == (3, 3, 3, 4)  # 3x3 stem (not 7x7), stride 1, no max-pool
    convs = [k for k in jax.tree_util.tree_leaves_with_path(v["params"]) if "kernel" in str(k[0])]
    assert len([c for c in convs if c[1].shape[:2] == (3, 3)]) == 17  # stem + 16 block convs (+ the FC-free head)
    _, state = enc.apply(v, np.zeros((2, 32, 32, 3), np.float32), train=True, mutable=["batch_stats"])
    assert "batch_stats" in state
