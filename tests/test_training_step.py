"""The non-private training step (labeldp.training_step) with 001's BatchNorm networks and data
augmentation: training moves the running statistics and the parameters, evaluation reads the
statistics, augmentation changes the run deterministically per seed."""

from __future__ import annotations

import dataclasses as dc

import jax
import numpy as np
import pytest

from labeldp.models import build_model
from labeldp.training import TrainConfig, one_hot, predict_logits, train_weighted


def _tiny(n=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, 8, 8, 1)).astype(np.float32), one_hot(rng.integers(0, 10, n), 10)


_CFG = TrainConfig(learning_rate=0.05, epochs=1, batch_size=16, momentum=0.9, l2=1e-4, progress=False)


def test_batch_norm_model_trains_its_parameters_and_running_statistics():
    spec = build_model("inception_001", input_shape=(8, 8, 1))
    x, w = _tiny()
    init = spec.init(jax.random.split(jax.random.key(0))[1])  # train_weighted's initialisation for seed 0
    res = train_weighted(spec, x_train=x, target_weights=w, config=_CFG, seed=0)
    assert set(res.params) == {"params", "batch_stats"} and res.steps == 2 and np.isfinite(res.final_loss)
    for part in ("params", "batch_stats"):
        moved = jax.tree_util.tree_map(
            lambda a, b: bool(np.any(np.asarray(a) != np.asarray(b))), init[part], res.params[part]
        )
        assert all(jax.tree_util.tree_leaves(moved)), part
    # evaluation uses the trained running statistics
    logits = predict_logits(spec, res.params, x[:4])
    stale = predict_logits(spec, {"params": res.params["params"], "batch_stats": init["batch_stats"]}, x[:4])
    assert logits.shape == (4, 10) and not np.allclose(logits, stale)


def test_augmentation_changes_training_and_is_deterministic_per_seed():
    spec = build_model("mnist_cnn", input_shape=(8, 8, 1))
    x, w = _tiny()
    aug = dc.replace(_CFG, augment="crop_flip_cutout", augment_pad=2, augment_cutout=3)
    plain = train_weighted(spec, x_train=x, target_weights=w, config=_CFG, seed=0)
    a1 = train_weighted(spec, x_train=x, target_weights=w, config=aug, seed=0)
    a2 = train_weighted(spec, x_train=x, target_weights=w, config=aug, seed=0)
    a3 = train_weighted(spec, x_train=x, target_weights=w, config=aug, seed=1)
    assert a1.final_loss == a2.final_loss and a1.final_loss != plain.final_loss and a1.final_loss != a3.final_loss


@pytest.mark.parametrize(
    "bad, match",
    [({"augment": "rotate"}, "augment must be one of"), ({"augment_pad": -1}, "augment_pad and augment_cutout")],
)
def test_bad_augmentation_settings_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        dc.replace(_CFG, **bad)
