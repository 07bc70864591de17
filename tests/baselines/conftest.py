"""Shared fixtures of the label baselines' tests."""

import pytest

from tests.helpers import fake_mnist_images


@pytest.fixture(scope="module")
def data():
    """Tiny fake MNIST-shaped images (256 train, 128 test, 10 classes), one per test module."""
    return fake_mnist_images(256, 128, 10, 0)
