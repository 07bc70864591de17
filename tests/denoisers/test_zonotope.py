"""The user-level binary-label projection onto a zonotope (labeldp.denoisers.zonotope).

* The JAX solver reaches the optimum of the same problem solved independently over the convex
  hull of ALL 2^k labellings' gradients (SLSQP on the simplex of vertex weights) and the exact
  box least-squares optimum (scipy BVLS), for k in {1, 2, 3, 5} and d in {2, 7} (d < k included).
* hull(vertices) = zonotope both ways: product weights rebuild any a + D t from the vertices, and
  the hull optimiser's point projects onto Z with zero distance.
* Points of Z project to themselves; outputs have t in [0, 1]^k; KKT conditions of box LS hold;
  the Frank-Wolfe gap certifies the objective and the tol stopping rule.
* a + D y is every labelling's per-user gradient for a real binary cross-entropy model.
"""

from __future__ import annotations

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from labeldp.denoisers import zonotope as Z

KS = [1, 2, 3, 5]
DS = [2, 7]
REPS = 6
STEPS = 5000


def random_problems(rng, k, d, reps=REPS):
    D = rng.normal(size=(reps, d, k))
    a = rng.normal(size=(reps, d))
    v = 3.0 * rng.normal(size=(reps, d))  # mostly outside Z
    return v, a, D


def scale2(D):
    """S^2, S = sum_i ||d_i|| >= diam(Z)."""
    return float(np.sum(np.linalg.norm(D, axis=0)) ** 2)


def hull_qp(vertices, v):
    """min ||V^T w - v||^2 over the simplex of the 2^k vertex weights, by SLSQP (independent)."""
    m = vertices.shape[0]
    res = minimize(
        lambda w: float(np.sum((vertices.T @ w - v) ** 2)),
        np.full(m, 1.0 / m),
        jac=lambda w: 2.0 * vertices @ (vertices.T @ w - v),
        method="SLSQP",
        bounds=[(0.0, None)] * m,
        constraints=[{"type": "eq", "fun": lambda w: np.sum(w) - 1.0}],
        options={"ftol": 1e-16, "maxiter": 5000},
    )
    assert res.success or res.status == 8, res.message  # 8: line-search precision, still feasible
    w = np.clip(res.x, 0.0, None)
    w = w / w.sum()
    point = vertices.T @ w
    return point, float(np.sum((point - v) ** 2))


@pytest.fixture(scope="module")
def x64():
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("d", DS)
@pytest.mark.parametrize("k", KS)
def test_projection_reaches_the_hull_of_all_labellings(k, d, x64):
    rng = np.random.default_rng(100 * k + d)
    v, a, D = random_problems(rng, k, d)
    res = Z.project_onto_zonotope(v, a, D, steps=STEPS, tol=1e-15)
    assert res.projected.shape == (REPS, d) and res.t.shape == (REPS, k)
    for r in range(REPS):
        s2 = scale2(D[r])
        verts = Z.labelling_gradients(a[r], D[r])
        assert verts.shape == (2**k, d)
        hull_point, hull_obj = hull_qp(verts, v[r])
        ref_point, ref_t = Z.project_onto_zonotope_reference(v[r], a[r], D[r])
        ref_obj = float(np.sum((ref_point - v[r]) ** 2))
        ours = float(res.objective[r])
        np.testing.assert_allclose(
            ours, float(np.sum((np.asarray(res.projected[r]) - v[r]) ** 2)), rtol=1e-12, atol=1e-14 * s2
        )
        # the JAX solver reaches the exact box-LS optimum ...
        assert abs(ours - ref_obj) <= 1e-9 * max(ref_obj, s2)
        # ... which is the optimum over the hull of the 2^k labellings' gradients
        assert abs(hull_obj - ours) <= 1e-6 * max(ours, 1e-3 * s2)
        # projections are unique: the three points agree
        tol_pt = 1e-3 * np.sqrt(s2)
        np.testing.assert_allclose(np.asarray(res.projected[r]), ref_point, atol=1e-6 * np.sqrt(s2))
        np.testing.assert_allclose(hull_point, ref_point, atol=tol_pt)
        # the hull optimiser's point lies in Z (hull subset of Z): its projection onto Z is itself
        back, _ = Z.project_onto_zonotope_reference(hull_point, a[r], D[r])
        assert np.linalg.norm(back - hull_point) <= 1e-7 * np.sqrt(s2)
        # certificate: objective - optimum <= gap
        assert ours - ref_obj <= float(res.gap[r]) + 1e-12 * s2


@pytest.mark.parametrize("k", [1, 3, 5])
def test_product_weights_rebuild_every_point_of_z_from_the_vertices(k):
    rng = np.random.default_rng(k)
    d = 4
    D = rng.normal(size=(d, k))
    a = rng.normal(size=d)
    verts = Z.labelling_gradients(a, D)
    for t in [rng.uniform(size=k), np.zeros(k), np.ones(k), rng.integers(0, 2, size=k).astype(float)]:
        w = Z.product_weights(t)
        assert np.all(w >= 0) and w.sum() == pytest.approx(1.0, abs=1e-14)
        np.testing.assert_allclose(w @ verts, a + D @ t, rtol=1e-12, atol=1e-12)


def test_labellings_order_matches_labelling_gradients():
    y = Z.labellings(3)
    assert y.shape == (8, 3)
    np.testing.assert_array_equal(y[1], [1, 0, 0])  # bit 0 of j is y_0
    np.testing.assert_array_equal(y[6], [0, 1, 1])
    assert len({tuple(r) for r in y}) == 8
    D = np.arange(6.0).reshape(2, 3)
    a = np.array([10.0, 20.0])
    np.testing.assert_allclose(Z.labelling_gradients(a, D), a + y @ D.T)
    with pytest.raises(ValueError, match="k must be an integer"):
        Z.labellings(0)


@pytest.mark.parametrize("momentum,shapes", [("nesterov", [(2, 7), (5, 7), (5, 2), (3, 2)]), ("none", [(5, 2)])])
def test_points_of_z_project_to_themselves(momentum, shapes, x64):
    rng = np.random.default_rng(7)
    for k, d in shapes:
        D = rng.normal(size=(REPS, d, k))
        a = rng.normal(size=(REPS, d))
        t_true = rng.uniform(0.05, 0.95, size=(REPS, k))
        t_true[0, 0] = 1.0  # a point on a facet
        v = a + np.einsum("rdk,rk->rd", D, t_true)
        res = Z.project_onto_zonotope(v, a, D, steps=STEPS, tol=1e-16, momentum=momentum)
        for r in range(REPS):
            s = np.sqrt(scale2(D[r]))
            assert np.linalg.norm(np.asarray(res.projected[r]) - v[r]) <= 1e-6 * s
            assert float(res.objective[r]) <= 1e-12 * s * s


@pytest.mark.parametrize("d", DS)
@pytest.mark.parametrize("k", KS)
def test_output_in_box_and_kkt_conditions(k, d, x64):
    rng = np.random.default_rng(200 + 10 * k + d)
    v, a, D = random_problems(rng, k, d)
    v = 2.0 * v  # further out: more coordinates at the bounds
    res = Z.project_onto_zonotope(v, a, D, steps=STEPS, tol=1e-15)
    t = np.asarray(res.t)
    assert np.all(t >= 0.0) and np.all(t <= 1.0)
    np.testing.assert_allclose(np.asarray(res.projected), a + np.einsum("rdk,rk->rd", D, t), atol=1e-12)
    for r in range(REPS):
        s2 = scale2(D[r])
        grad = 2.0 * D[r].T @ (a[r] + D[r] @ t[r] - v[r])
        gtol = 1e-6 * s2
        lower = t[r] <= 1e-12
        upper = t[r] >= 1.0 - 1e-12
        free = ~lower & ~upper
        # stationarity with the box multipliers: grad = 0 inside, >= 0 at 0, <= 0 at 1
        assert np.all(np.abs(grad[free]) <= gtol), (grad, t[r])
        assert np.all(grad[lower] >= -gtol) and np.all(grad[upper] <= gtol)
        # equivalently the natural residual t - clip(t - grad) vanishes
        assert np.max(np.abs(t[r] - np.clip(t[r] - grad, 0.0, 1.0))) <= gtol
        assert 0.0 <= float(res.gap[r]) <= 1e-12 * s2


def test_tol_stops_early_with_a_valid_certificate(x64):
    rng = np.random.default_rng(11)
    k, d = 5, 7
    v, a, D = random_problems(rng, k, d)
    tol = 1e-6
    res = Z.project_onto_zonotope(v, a, D, steps=STEPS, tol=tol)
    assert np.all(np.asarray(res.iterations) < STEPS)
    for r in range(REPS):
        s2 = scale2(D[r])
        assert float(res.gap[r]) <= tol * s2
        ref_point, _ = Z.project_onto_zonotope_reference(v[r], a[r], D[r])
        ref_obj = float(np.sum((ref_point - v[r]) ** 2))
        assert float(res.objective[r]) - ref_obj <= float(res.gap[r]) + 1e-12 * s2
        assert np.linalg.norm(np.asarray(res.projected[r]) - ref_point) <= np.sqrt(tol * s2) * (1 + 1e-9)
    # the step is 1/L with L = 2 lambda_max(D^T D)
    np.testing.assert_allclose(
        np.asarray(res.step_size), [1.0 / (2.0 * np.linalg.eigvalsh(Dr.T @ Dr)[-1]) for Dr in D], rtol=1e-10
    )


def test_float32_broadcasting_and_init():
    rng = np.random.default_rng(12)
    k, d = 3, 7
    D = rng.normal(size=(d, k)).astype(np.float32)  # one user's set, many noisy vectors
    a = rng.normal(size=d).astype(np.float32)
    v = 3.0 * rng.normal(size=(2, 4, d)).astype(np.float32)
    res = Z.project_onto_zonotope(v, a, D, steps=300)
    assert res.projected.shape == (2, 4, d) and res.t.shape == (2, 4, k) and res.objective.shape == (2, 4)
    assert res.projected.dtype == jnp.float32
    t = np.asarray(res.t)
    assert np.all(t >= 0) and np.all(t <= 1)
    for idx in np.ndindex(2, 4):
        ref_point, _ = Z.project_onto_zonotope_reference(v[idx], a, D)
        np.testing.assert_allclose(np.asarray(res.projected[idx]), ref_point, atol=1e-4 * np.sqrt(scale2(D)))
    # a warm start at the solution stays there and certifies at once
    res2 = Z.project_onto_zonotope(v, a, D, steps=300, init=res.t, tol=1e-5)
    np.testing.assert_allclose(np.asarray(res2.projected), np.asarray(res.projected), atol=1e-4)
    assert int(np.max(res2.iterations)) <= 1
    # under jit, and with zero (padding) generator columns
    Dp = np.concatenate([D, np.zeros((d, 2), np.float32)], axis=1)
    f = jax.jit(lambda v_: Z.project_onto_zonotope(v_, a, Dp, steps=300).projected)
    np.testing.assert_allclose(np.asarray(f(v)), np.asarray(res.projected), atol=1e-4)


def bce_logit(w, x):
    h = jnp.tanh(x @ w["w1"])
    return h @ w["w2"]


def test_zonotope_from_endpoints_is_every_labellings_per_user_gradient(x64):
    """For binary cross-entropy on a small MLP: sum_i grad l(x_i, y_i) = a + D y for all y, and
    d_i = -grad_theta f(theta, x_i)."""
    rng = np.random.default_rng(13)
    k, din, h = 4, 3, 5
    params = {"w1": jnp.asarray(rng.normal(size=(din, h))), "w2": jnp.asarray(rng.normal(size=h))}
    x = jnp.asarray(rng.normal(size=(k, din)))
    flat, unravel = jax.flatten_util.ravel_pytree(params)

    def loss(p_flat, xi, yi):
        z = bce_logit(unravel(p_flat), xi)
        return -(yi * jax.nn.log_sigmoid(z) + (1.0 - yi) * jax.nn.log_sigmoid(-z))

    per_ex = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, None)))
    g0, g1 = per_ex(flat, x, 0.0), per_ex(flat, x, 1.0)  # (k, d)
    a, D = Z.zonotope_from_endpoints(g0, g1)
    assert a.shape == (flat.size,) and D.shape == (flat.size, k)
    ys = jnp.asarray(Z.labellings(k), jnp.float64)
    # the per-user gradient of every labelling, straight from autodiff of the summed loss
    direct = jax.jit(
        jax.vmap(jax.grad(lambda p, y: jnp.sum(jax.vmap(loss, in_axes=(None, 0, 0))(p, x, y))), in_axes=(None, 0))
    )(flat, ys)
    np.testing.assert_allclose(np.asarray(a[None, :] + ys @ D.T), np.asarray(direct), rtol=1e-10, atol=1e-12)
    logit_grads = jax.vmap(jax.grad(lambda p, xi: bce_logit(unravel(p), xi)), in_axes=(None, 0))(flat, x)
    np.testing.assert_allclose(np.asarray(D), -np.asarray(logit_grads).T, rtol=1e-10, atol=1e-12)
    # batched over users: (users, k, d) -> a (users, d), D (users, d, k)
    a2, D2 = Z.zonotope_from_endpoints(jnp.stack([g0, g1]), jnp.stack([g1, g0]))
    assert a2.shape == (2, flat.size) and D2.shape == (2, flat.size, k)


def test_argument_errors():
    D = np.ones((3, 2))
    with pytest.raises(ValueError, match="momentum must be one of"):
        Z.project_onto_zonotope(np.ones(3), np.ones(3), D, momentum="heavy")
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        Z.project_onto_zonotope(np.ones(3), np.ones(3), D, steps=0)
    with pytest.raises(ValueError, match="tol must be a finite float >= 0"):
        Z.project_onto_zonotope(np.ones(3), np.ones(3), D, tol=-1.0)
    with pytest.raises(ValueError, match="must agree on d"):
        Z.project_onto_zonotope(np.ones(2), np.ones(3), D)
    with pytest.raises(ValueError, match="do not broadcast"):
        Z.project_onto_zonotope(np.ones((2, 3)), np.ones((3, 3)), D)
    with pytest.raises(ValueError, match="grads_label0 and grads_label1"):
        Z.zonotope_from_endpoints(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="t must be a 1-D array in"):
        Z.product_weights(np.array([0.5, 1.5]))
