"""SGD momentum as a variant option of DP-SGD (labeldp.methods.private_training.sgd_momentum):
post-processing of the noisy gradients, so the plan and the privacy block are unchanged."""

from __future__ import annotations

import pytest

from labeldp.methods import dpsgd
from labeldp.methods.private_training import sgd_momentum
from tests.helpers import dpsgd_spec, fake_mnist_images


def _spec(options):
    return dpsgd_spec(options, variant="m", batch_size=64)


def test_momentum_changes_the_training_not_the_privacy():
    data = fake_mnist_images()
    plain, heavy = dpsgd.run(data, _spec({})), dpsgd.run(data, _spec({"momentum": 0.9}))
    assert plain.privacy == heavy.privacy
    assert plain.details["noise_multiplier"] == heavy.details["noise_multiplier"]
    assert plain.metrics["final_train_loss"] != heavy.metrics["final_train_loss"]


@pytest.mark.parametrize("bad", [1.0, -0.1, "0.9", True])
def test_a_bad_momentum_is_refused_naming_the_option(bad):
    with pytest.raises(ValueError, match="option momentum"):
        sgd_momentum(_spec({"momentum": bad}))
    assert sgd_momentum(_spec({})) is None and sgd_momentum(_spec({"momentum": 0})) == 0.0
