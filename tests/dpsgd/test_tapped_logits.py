"""LabelDP-Pro's per-class gradient rows through the tape equal the vmap(jacrev) rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from labeldp import denoisers as D
from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step
from labeldp.dpsgd.tapped_logits import TappedLogits, tapped_jacobian_rows
from labeldp.models import build_model


@pytest.mark.parametrize(
    "name,shape,padding",
    [("mnist_cnn", (28, 28, 1), "SAME"), ("mnist_cnn", (28, 28, 1), "VALID"), ("linear", (12,), "SAME")],
)
def test_rows_equal_jacobian_matrix(name, shape, padding):
    spec = build_model(name, input_shape=shape, padding=padding)
    params = spec.init(jax.random.key(0))
    x = jnp.asarray(np.random.default_rng(0).random((9, *shape), dtype=np.float32))
    mask = jnp.asarray([1, 1, 0, 1, 1, 1, 1, 0, 1], jnp.float32)
    ref = D.jacobian_matrix(spec.logits, params, x, mask=mask)
    fast = tapped_jacobian_rows(spec.tapped, params, x, mask)
    assert fast.shape == ref.shape
    np.testing.assert_allclose(np.asarray(fast), np.asarray(ref), rtol=1e-4, atol=1e-6 * float(jnp.max(jnp.abs(ref))))
    assert float(jnp.max(jnp.abs(fast.reshape(9, -1)[2]))) == 0.0  # masked example: zero rows
    # the hook: jacobian_matrix of a TappedLogits uses them
    tl = TappedLogits(spec.logits, spec.tapped)
    np.testing.assert_allclose(
        np.asarray(D.jacobian_matrix(tl, params, x, mask=mask)),
        np.asarray(fast),
        rtol=1e-5,
        atol=1e-7 * float(jnp.max(jnp.abs(ref))),
    )
    np.testing.assert_array_equal(np.asarray(tl(params, x)), np.asarray(spec.logits(params, x)))


def test_embedding_models_are_refused():
    from labeldp.ads.model import AdsMLP, two_class_logits

    model = AdsMLP(hidden=(4,), vocab_sizes=(3,), embed_dims=(2,))
    x = (jnp.zeros((2, 1)), jnp.zeros((2, 1), jnp.int32))
    params = model.init(jax.random.key(0), x)
    with pytest.raises(ValueError, match="dense and convolution layers only"):
        tapped_jacobian_rows(two_class_logits(model).tapped, params, x)


@pytest.mark.parametrize("solver", ["jacobian", "gram"])
def test_labeldp_pro_step_same_with_tapped_rows(solver):
    """A converged-projection step: book-keeping (tapped rows) and the reference agree."""
    spec = build_model("mnist_cnn", input_shape=(28, 28, 1))
    params = spec.init(jax.random.key(0))
    rng = np.random.default_rng(5)
    batch = Batch(
        x=jnp.asarray(rng.random((40, 28, 28, 1), dtype=np.float32)),
        y=jnp.asarray(rng.integers(0, 10, 40), jnp.int32),
        mask=jnp.ones(40),
        x_alt=jnp.asarray(rng.random((16, 28, 28, 1), dtype=np.float32)),
    )
    cfg = DPSGDConfig(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=32, pad_to=40)
    out = {}
    for f in ("vmap_grad", "bookkeeping"):
        den = D.alt_conv(
            steps=50,
            step_size="auto",
            smoothing=1.0,
            solver=solver,
            momentum="nesterov",
            tol=1e-3,
            vertices="clipped",
            start="predicted",
            clip_norm=1.0,
        )
        step = make_dpsgd_step(optimizer=optax.sgd(1.0), config=cfg, model=spec, denoiser=den, formulation=f)
        assert isinstance(step.projection_logits_fn, TappedLogits) == (f == "bookkeeping")
        out[f], _ = step(step.init(params), batch, jax.random.key(3))
    for u, v in zip(
        jax.tree_util.tree_leaves(out["vmap_grad"].params), jax.tree_util.tree_leaves(out["bookkeeping"].params)
    ):
        np.testing.assert_allclose(np.asarray(v), np.asarray(u), rtol=1e-4, atol=1e-5)
