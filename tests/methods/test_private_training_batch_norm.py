"""DP-SGD refuses 001's BatchNorm networks (labeldp.models.require_no_batch_norm): batch statistics
mix examples, and the DP-SGD step keeps no BatchNorm state."""

from __future__ import annotations

import pytest

from labeldp.denoisers import noop
from labeldp.methods.private_training import prepare_private_run
from labeldp.models import build_model, require_no_batch_norm
from tests.helpers import dpsgd_spec, fake_mnist_images


def _spec(options):
    return dpsgd_spec(options, variant="bn", batch_size=16)


@pytest.mark.parametrize("model", ["inception_001", "resnet18_v2_cifar"])
def test_a_batch_norm_model_is_refused_for_dp_sgd_naming_the_problem_and_the_fix(model):
    with pytest.raises(ValueError, match=f"DP-SGD, which does not support BatchNorm model '{model}'.*drop the"):
        prepare_private_run(fake_mnist_images(32, 8), _spec({"model": model}), denoiser=noop())
    require_no_batch_norm(build_model("mnist_cnn", input_shape=(8, 8, 1)), method="dpsgd")  # no BatchNorm: fine
