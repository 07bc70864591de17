"""The ads model's per-class gradient norms without dense per-row embedding-table gradients equal
the norms of the dense per-row gradients (issue 15's speed goal: they were 97% of a user-level
LabelDP-Pro step), for the full and the truncated (002) model, with and without a mask."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from labeldp.ads.model import AdsMLP, logit_gradient_norms, two_class_logits
from labeldp.ads.train import init_params
from labeldp.denoisers import hull_converged
from labeldp.denoisers.linear_maps import jacobian_matrix


def _setup(seed=0, n=40):
    rng = np.random.default_rng(seed)
    model = AdsMLP(
        hidden=(16, 8),
        vocab_sizes=(7, 5, 9),
        embed_dims=(3, 2, 4),
        output_bias=0.3,
        sensitive_cat=(False, True, False),
        sensitive_num=(True, False),
    )
    x_num = rng.normal(size=(n, 2)).astype(np.float32)
    x_cat = np.stack([rng.integers(0, v, size=n) for v in (7, 5, 9)], axis=1).astype(np.int32)
    x_cat[:3] = 0  # the missing/unseen row too
    params = init_params(model, x_num, x_cat, seed=seed)
    # move away from the initialisation so that no gradient is special
    params = jax.tree_util.tree_map(lambda a: a + 0.3 * jnp.asarray(rng.normal(size=a.shape), a.dtype), params)
    return model, params, (jnp.asarray(x_num), jnp.asarray(x_cat))


def _dense_norms(model, params, x, truncated, mask=None):
    logits = two_class_logits(model, truncated=truncated)
    plain = lambda p, xx: logits(p, xx)  # no column_norms attribute: the dense per-row Jacobian
    rows = jacobian_matrix(plain, params, x, mask=mask)
    return np.linalg.norm(np.asarray(rows), axis=1).reshape(-1, 2)


@pytest.mark.parametrize("truncated", [False, True])
def test_per_class_norms_equal_the_dense_per_row_gradient_norms(truncated):
    model, params, x = _setup()
    fast = np.asarray(two_class_logits(model, truncated=truncated).column_norms(params, x))
    np.testing.assert_allclose(fast, _dense_norms(model, params, x, truncated), rtol=2e-5, atol=1e-7)


def test_truncated_norms_leave_out_the_zeroed_embeddings_tables():
    model, params, x = _setup(seed=1)
    full = np.asarray(logit_gradient_norms(model, params, x, truncated=False))
    trunc = np.asarray(logit_gradient_norms(model, params, x, truncated=True))
    assert np.all(full > 0) and np.all(trunc > 0)
    assert not np.allclose(full, trunc)  # the sensitive table and column make a difference


def test_mask_zeroes_rows_and_hull_column_norms_uses_the_models_norms(monkeypatch):
    model, params, x = _setup(seed=2, n=24)
    mask = jnp.asarray(np.r_[np.ones(20), np.zeros(4)], jnp.float32)
    f = two_class_logits(model)
    calls = []
    real = f.column_norms
    monkeypatch.setattr(
        f, "column_norms", lambda p, xx, mask=None: calls.append(1) or real(p, xx, mask=mask), raising=True
    )
    got = np.asarray(hull_converged.column_norms(f, params, x, mask=mask))
    assert calls, "hull_converged.column_norms did not use the model's own norms"
    np.testing.assert_allclose(got, _dense_norms(model, params, x, False, mask=mask), rtol=2e-5, atol=1e-7)
    assert np.all(got[20:] == 0)
