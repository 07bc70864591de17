"""001 Table 3's two-branch NCF network: its parameters, its outputs, and no mixup over ids."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from labeldp.models import build_model, num_params
from labeldp.training import TrainConfig, one_hot, train_weighted


def test_parameters_are_the_two_branches_and_the_output_layer():
    spec = build_model("ncf", input_shape=(2,), num_classes=5, num_users=7, num_items=11)
    params = spec.init(jax.random.PRNGKey(0))
    gmf = (7 + 11) * 8
    mlp_embed = (7 + 11) * 32
    tower = (64 * 64 + 64) + (64 * 32 + 32) + (32 * 16 + 16) + (16 * 8 + 8)
    output = (8 + 8) * 5 + 5
    assert num_params(params) == gmf + mlp_embed + tower + output
    x = np.array([[0, 0], [6, 10], [3, 4]], dtype=np.float32)
    assert np.asarray(spec.logits(params, x)).shape == (3, 5)


def test_the_output_depends_on_both_ids():
    spec = build_model("ncf", input_shape=(2,), num_classes=5, num_users=4, num_items=4)
    params = spec.init(jax.random.PRNGKey(1))
    out = np.asarray(spec.logits(params, np.array([[0, 0], [1, 0], [0, 1]], dtype=np.float32)))
    assert not np.allclose(out[0], out[1]) and not np.allclose(out[0], out[2])


def test_mixup_over_id_inputs_is_refused_with_the_fix():
    spec = build_model("ncf", input_shape=(2,), num_classes=5, num_users=4, num_items=4)
    x = np.array([[0, 1], [2, 3]], dtype=np.float32)
    config = TrainConfig(learning_rate=0.1, epochs=1, batch_size=2, mixup_alpha=4.0, progress=False)
    with pytest.raises(ValueError, match="mixup_alpha1 / mixup_alpha2 to 0"):
        train_weighted(spec, x_train=x, target_weights=one_hot(np.array([0, 4]), 5), config=config, seed=0)
