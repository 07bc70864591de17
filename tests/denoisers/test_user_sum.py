"""The user-level AltConv (000 Section 6): k x the per-example set of the alternative batch's
rows is the hull of each user's 2^k labelling gradients (averaged over users), so the denoiser
reaches the exact optimum of that projection, found by enumerating every labelling."""

from __future__ import annotations

import itertools

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from labeldp.ads.model import AdsMLP, two_class_logits
from labeldp.ads.train import init_params
from labeldp.denoisers import UserSum, alt_conv
from labeldp.denoisers.zonotope import project_onto_zonotope_reference


def _setup(k, users=1, seed=0):
    rng = np.random.default_rng(seed)
    model = AdsMLP(hidden=(4,), vocab_sizes=(3,), embed_dims=(2,))
    x_num = rng.normal(size=(users * k, 1)).astype(np.float32)
    x_cat = rng.integers(0, 3, size=(users * k, 1)).astype(np.int32)
    params = init_params(model, x_num, x_cat, seed=seed)
    logits = two_class_logits(model)
    flat, unravel = jax.flatten_util.ravel_pytree(params)

    def grad_at(i, label):
        def loss(p):
            z = logits(p, (x_num[i : i + 1], x_cat[i : i + 1]))[0]
            return -jax.nn.log_softmax(z)[label]

        return np.asarray(jax.flatten_util.ravel_pytree(jax.grad(loss)(params))[0], np.float64)

    g = np.array([[grad_at(i, c) for c in (0, 1)] for i in range(users * k)])  # (rows, 2, d)
    return logits, params, (x_num, x_cat), g, unravel, flat.shape[0]


def _denoiser(k):
    inner = alt_conv(
        steps=20000,
        step_size="auto",
        smoothing=1.0,
        momentum="nesterov",
        coefficient_set="per_example",
        vertices="raw",
        start="uniform",
        tol=1e-12,
        solver="jacobian",
    )
    return UserSum(inner=inner, examples_per_user=k)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_one_user_projection_is_the_exact_projection_onto_its_labelling_hull(k):
    logits, params, x, g, unravel, d = _setup(k)
    rng = np.random.default_rng(10 + k)
    a, D = g[:, 0].sum(0), (g[:, 1] - g[:, 0]).T
    v = a + D @ rng.uniform(-0.5, 1.5, size=k) + 0.3 * np.linalg.norm(D) * rng.normal(size=d) / np.sqrt(d)
    out, _ = _denoiser(k)(unravel(jnp.asarray(v, jnp.float32)), logits_fn=logits, params=params, x=None, x_alt=x)
    out = np.asarray(jax.flatten_util.ravel_pytree(out)[0], np.float64)
    # enumerate all 2^k labellings: the vertices of the user's hull, and the exact QP over them
    verts = np.array([sum(g[i, y[i]] for i in range(k)) for y in itertools.product((0, 1), repeat=k)])
    m = len(verts)
    qp = minimize(
        lambda w: np.sum((w @ verts - v) ** 2),
        np.full(m, 1 / m),
        jac=lambda w: 2 * verts @ (w @ verts - v),
        bounds=[(0, 1)] * m,
        constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    best = qp.x @ verts
    ref, _ = project_onto_zonotope_reference(v, a, D)
    scale = np.linalg.norm(D) + 1e-12
    np.testing.assert_allclose(ref, best, atol=1e-5 * scale)
    np.testing.assert_allclose(out, ref, atol=2e-3 * scale)
    assert np.sum((out - v) ** 2) <= np.sum((best - v) ** 2) * (1 + 1e-3) + 1e-9


def test_several_users_project_onto_the_mean_of_their_hulls():
    k, users = 2, 3
    logits, params, x, g, unravel, d = _setup(k, users=users, seed=3)
    a = g[:, 0].sum(0) / users
    D = (g[:, 1] - g[:, 0]).T / users  # (1/n2) sum_u Z_u: each row's segment scaled by 1/n2
    rng = np.random.default_rng(7)
    v = a + D @ rng.uniform(0, 1, size=users * k) + 0.5 * np.linalg.norm(D) * rng.normal(size=d) / np.sqrt(d)
    out, _ = _denoiser(k)(unravel(jnp.asarray(v, jnp.float32)), logits_fn=logits, params=params, x=None, x_alt=x)
    ref, _ = project_onto_zonotope_reference(v, a, D)
    np.testing.assert_allclose(np.asarray(jax.flatten_util.ravel_pytree(out)[0]), ref, atol=2e-3 * np.linalg.norm(D))


def test_user_sum_refuses_sets_that_are_not_sums_of_per_example_sets():
    with pytest.raises(ValueError, match="per_example"):
        UserSum(inner=alt_conv(), examples_per_user=2)
    with pytest.raises(ValueError, match="examples_per_user"):
        UserSum(inner=alt_conv(coefficient_set="per_example", momentum="nesterov", tol=1e-3), examples_per_user=0)
