"""Runs on the fast path write the records the reference path writes: the DP-SGD method with
either clipping formulation, and the non-private steps with either forward pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from labeldp.dpsgd import Batch, make_sgd_step
from labeldp.dpsgd.sgd_step import resolve_forward
from labeldp.methods.base import RunSpec
from labeldp.models import build_model
from tests.helpers import fake_mnist_images


def _fake_data():
    return fake_mnist_images(n_train=256, n_test=64)


@pytest.mark.parametrize("method", ["dpsgd", "labeldp_pro"])
def test_dpsgd_record_same_with_either_formulation(method):
    from labeldp.methods import registry

    data = _fake_data()
    out = {}
    for f in ("vmap_grad", "bookkeeping"):
        options = {"clipping_formulation": f}
        hp = dict(learning_rate=0.5, epochs=2, batch_size=64, clip_norm=1.0)
        if method == "labeldp_pro":
            options.update(denoiser="alt_conv", alt_batch_size=16)
            hp.update(proj_step_size="auto", proj_steps=20, smoothing=1.0)
        spec = RunSpec(
            dataset="mnist",
            method=method,
            variant="default",
            epsilon=1.0,
            delta=1e-5,
            seed=0,
            hparams=hp,
            options=options,
        )
        out[f] = registry.get_method(method).run(data, spec)
    a, b = out["vmap_grad"], out["bookkeeping"]
    assert a.details["clipping_formulation"] == "vmap_grad" and b.details["clipping_formulation"] == "bookkeeping"
    assert a.privacy.to_dict(target_epsilon=1.0) == b.privacy.to_dict(target_epsilon=1.0)  # eps, sigma, steps, event
    assert a.details["noise_multiplier"] == b.details["noise_multiplier"] and a.details["steps"] == b.details["steps"]
    assert b.metrics["final_train_loss"] == pytest.approx(a.metrics["final_train_loss"], rel=1e-4)
    assert abs(b.metrics["test_accuracy_pct"] - a.metrics["test_accuracy_pct"]) <= 100 / 64 + 1e-9  # one test image


def test_resolve_forward():
    assert resolve_forward("auto", tapped_available=True, backend="cpu") == "tapped"
    assert resolve_forward("auto", tapped_available=True, backend="gpu") == "model"
    assert resolve_forward("auto", tapped_available=False, backend="cpu") == "model"
    with pytest.raises(ValueError, match="tapped forward"):
        resolve_forward("tapped", tapped_available=False)


@pytest.mark.parametrize("b", [40, 128])
def test_sgd_step_tapped_equals_model_forward(b):
    """Chunked (b = 128, chunks of 64) or not, padded rows masked: the same update."""
    spec = build_model("mnist_cnn", input_shape=(28, 28, 1))
    params = spec.init(jax.random.key(0))
    rng = np.random.default_rng(1)
    batch = Batch(
        x=jnp.asarray(rng.random((b, 28, 28, 1), dtype=np.float32)),
        y=jnp.asarray(rng.integers(0, 10, b), jnp.int32),
        mask=jnp.asarray((np.arange(b) < b - 5).astype(np.float32)),
    )
    out = {}
    for fwd in ("model", "tapped"):
        step = make_sgd_step(optimizer=optax.sgd(0.5), model=spec, forward=fwd)
        assert step.describe()["sgd_forward"] == fwd
        out[fwd] = step(step.init(params), batch, jax.random.key(2))
    assert float(out["tapped"][1].loss) == pytest.approx(float(out["model"][1].loss), rel=1e-6)
    for u, v in zip(
        jax.tree_util.tree_leaves(out["model"][0].params), jax.tree_util.tree_leaves(out["tapped"][0].params)
    ):
        np.testing.assert_allclose(np.asarray(v), np.asarray(u), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mixup_alpha", [0.0, 0.4])
def test_weighted_sgd_tapped_equals_model_forward(monkeypatch, mixup_alpha):
    """The label baselines' loop: the tapped, chunked gradient (mixup over the whole batch
    first) gives the model forward's update."""
    from labeldp import training, training_step

    spec = build_model("mnist_cnn", input_shape=(28, 28, 1))
    params = spec.init(jax.random.key(0))
    tx = optax.sgd(0.5)
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.random((128, 28, 28, 1), dtype=np.float32))
    w = jax.nn.one_hot(jnp.asarray(rng.integers(0, 10, 128)), 10)
    mask = jnp.asarray((np.arange(128) < 120).astype(np.float32))
    fast = training.make_weighted_sgd_step(spec, tx, mixup_alpha=mixup_alpha)
    assert fast.forward == "tapped"
    monkeypatch.setattr(training_step, "resolve_forward", lambda *a, **k: "model")  # the step's own module
    ref = training.make_weighted_sgd_step(spec, tx, mixup_alpha=mixup_alpha)
    assert ref.forward == "model"
    pa, _, la = ref(params, tx.init(params), x, w, mask, jax.random.key(3))
    pb, _, lb = fast(params, tx.init(params), x, w, mask, jax.random.key(3))
    assert float(lb) == pytest.approx(float(la), rel=1e-6)
    for u, v in zip(jax.tree_util.tree_leaves(pa), jax.tree_util.tree_leaves(pb)):
        np.testing.assert_allclose(np.asarray(v), np.asarray(u), rtol=1e-5, atol=1e-6)
