"""The converged convex-hull projection: exact QP optima for every vertex set, coefficient set and
solver, the Frank-Wolfe stopping rule as a certificate, clipped vertices containing the clipped
batch gradient, and the label-free predicted start."""

from __future__ import annotations

import dataclasses

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from labeldp import denoisers as D
from labeldp.denoisers.hull_converged import (
    HullOptions,
    converged_hull_projection,
    frank_wolfe_gap,
    project_rows_simplex,
)
from tests.test_denoisers import explicit_G, make_problem, mlp, ravel

K = 3


def qp(G, g, *, per_example: bool, n: int):
    """min ||G a - g||^2 over one simplex or a product of n K-simplices, by SLSQP (independent)."""
    m = G.shape[1]
    if per_example:
        cons = [{"type": "eq", "fun": (lambda a, i=i: np.sum(a[i * K : (i + 1) * K]) - 1.0)} for i in range(n)]
        a0 = np.full(m, 1.0 / K)
    else:
        cons = [{"type": "eq", "fun": lambda a: np.sum(a) - 1.0}]
        a0 = np.full(m, 1.0 / m)
    res = minimize(
        lambda a: float(np.sum((G @ a - g) ** 2)),
        a0,
        jac=lambda a: 2.0 * G.T @ (G @ a - g),
        method="SLSQP",
        bounds=[(0.0, None)] * m,
        constraints=cons,
        options={"ftol": 1e-15, "maxiter": 3000},
    )
    # SLSQP can stop at its line-search precision ("positive directional derivative"); its value
    # is then still an upper bound on the optimum, and the tests also check the gap certificate
    assert res.success or res.status == 8, res.message
    return res.x, res.fun


def effective_G(params, x, *, clip, per_example):
    G = explicit_G(params, x)
    if clip is not None:
        G = G * np.minimum(1.0, clip / np.linalg.norm(G, axis=0))[None, :]
    if per_example:
        G = G / x.shape[0]
    return G


_PROBLEMS = [
    ("raw", "joint", "uniform"),
    ("clipped", "joint", "predicted"),
    ("clipped", "per_example", "predicted"),
    ("raw", "per_example", "uniform"),
]
_SOLVERS = [("jacobian", "fista"), ("matrix_free", "fista"), ("gram", "fista"), ("gram", "pairwise_frank_wolfe")]


# pairwise Frank-Wolfe runs over the joint simplex only (refused otherwise: test_options_are_checked)
@pytest.mark.parametrize(
    "solver,algorithm,vertices,coef,start",
    [s + p for s in _SOLVERS for p in _PROBLEMS if not (s[1] == "pairwise_frank_wolfe" and p[1] == "per_example")],
)
def test_reaches_the_exact_qp_optimum_and_the_gap_certifies_it(solver, algorithm, vertices, coef, start):
    with jax.enable_x64(True):
        n = 5
        params, x, unravel, g_vec = make_problem(n=n, seed=2)
        clip = 0.5 if vertices == "clipped" else None
        G = effective_G(params, x, clip=clip, per_example=coef == "per_example")
        _, f_star = qp(G, g_vec, per_example=coef == "per_example", n=n)
        opts = HullOptions(
            vertices=vertices,
            clip_norm=clip,
            coefficient_set=coef,
            start=start,
            tol=1e-10,
            max_steps=20000,
            smoothing=1.0,
            solver=solver,
            algorithm=algorithm,
            chunk=50,
        )
        res = converged_hull_projection(mlp, params, x, unravel(jnp.asarray(g_vec)), options=opts)
        a = np.asarray(res.alpha).reshape(-1)
        f = float(np.sum((G @ a - g_vec) ** 2))
        assert f - f_star <= 1e-9 * max(1.0, f_star) + 1e-12, (f, f_star)  # at least as good as SLSQP
        assert f - f_star <= float(res.gap) + 1e-12  # the certificate bounds the true suboptimality
        assert float(res.objective) == pytest.approx(f, rel=1e-9)  # the reported objective is F(alpha)
        assert float(res.gap_relative) <= 1e-10
        np.testing.assert_allclose(ravel(res.projected), G @ a, rtol=1e-9, atol=1e-12)
        assert a.min() >= 0
        if coef == "per_example":
            np.testing.assert_allclose(a.reshape(n, K).sum(axis=1), 1.0, atol=1e-10)
        else:
            assert abs(a.sum() - 1) < 1e-10


@pytest.mark.parametrize(
    "solver,algorithm", [("jacobian", "fista"), ("gram", "fista"), ("gram", "pairwise_frank_wolfe")]
)
def test_gap_is_an_upper_bound_along_the_way(solver, algorithm):
    """On a materialised case: at every stopping tolerance, F(alpha) - F* <= the reported gap."""
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=6, seed=4)
        G = effective_G(params, x, clip=None, per_example=False)
        _, f_star = qp(G, g_vec, per_example=False, n=6)
        for steps in (1, 3, 10, 30):
            res = converged_hull_projection(
                mlp,
                params,
                x,
                unravel(jnp.asarray(g_vec)),
                options=HullOptions(
                    vertices="raw", start="uniform", tol=0.0, max_steps=steps, solver=solver, algorithm=algorithm
                ),
            )
            f = float(np.sum((G @ np.asarray(res.alpha).reshape(-1) - g_vec) ** 2))
            assert int(res.iterations) == steps
            assert f - f_star <= float(res.gap) * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("coef", ["joint", "per_example"])
def test_both_solvers_stop_at_the_first_iterate_within_tolerance(coef):
    """The matrix-free solver's chunks (7 iterations) do not overshoot the stopping rule: it stops
    at the same iterate as the jacobian solver's loop, with the same coefficients."""
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=6, seed=5)
        g = unravel(jnp.asarray(g_vec))
        free = HullOptions(
            vertices="clipped",
            clip_norm=0.5,
            coefficient_set=coef,
            start="uniform",
            tol=1e-4,
            max_steps=500,
            chunk=7,
            solver="jacobian",
        )
        jac = converged_hull_projection(mlp, params, x, g, options=free)
        mf = converged_hull_projection(mlp, params, x, g, options=dataclasses.replace(free, solver="matrix_free"))
        assert 1 <= int(jac.iterations) < 500 and int(jac.iterations) % 7 != 0  # a stop inside a chunk
        assert int(mf.iterations) == int(jac.iterations)
        np.testing.assert_allclose(np.asarray(mf.alpha), np.asarray(jac.alpha), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("coef,smoothing", [("joint", 1.0), ("per_example", 0.85)])
def test_gram_fista_runs_the_jacobian_solvers_iterates(coef, smoothing):
    """FISTA on Q = G^T G and b = G^T g is the same iteration as on G^T: same stop, same
    coefficients, same (smoothed) output, same objective and smoothing bias."""
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=6, seed=7)
        g = unravel(jnp.asarray(g_vec))
        jac_opts = HullOptions(
            vertices="clipped",
            clip_norm=0.5,
            coefficient_set=coef,
            start="predicted",
            tol=1e-5,
            max_steps=500,
            smoothing=smoothing,
            solver="jacobian",
        )
        jac = converged_hull_projection(mlp, params, x, g, options=jac_opts)
        gram = converged_hull_projection(mlp, params, x, g, options=dataclasses.replace(jac_opts, solver="gram"))
        assert gram.solver == "gram" and 1 < int(jac.iterations) < 500
        assert int(gram.iterations) == int(jac.iterations)
        np.testing.assert_allclose(np.asarray(gram.alpha), np.asarray(jac.alpha), rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(ravel(gram.projected), ravel(jac.projected), rtol=1e-8, atol=1e-12)
        for field in ("objective", "objective_init", "gap", "step_size", "smoothing_bias_norm"):
            assert float(getattr(gram, field)) == pytest.approx(float(getattr(jac, field)), rel=1e-7, abs=1e-12), field


def test_pairwise_frank_wolfe_keeps_a_sparse_feasible_iterate_and_descends():
    """Every pairwise step moves mass between two vertices with an exact line search: the iterate
    stays on the simplex and the objective never rises."""
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=6, seed=8)
        G = effective_G(params, x, clip=0.5, per_example=False)
        objs = []
        for steps in (1, 2, 5, 20, 80):
            res = converged_hull_projection(
                mlp,
                params,
                x,
                unravel(jnp.asarray(g_vec)),
                options=HullOptions(
                    vertices="clipped",
                    clip_norm=0.5,
                    start="uniform",
                    tol=0.0,
                    max_steps=steps,
                    solver="gram",
                    algorithm="pairwise_frank_wolfe",
                ),
            )
            a = np.asarray(res.alpha).reshape(-1)
            assert a.min() >= 0 and abs(a.sum() - 1) < 1e-12
            objs.append(float(np.sum((G @ a - g_vec) ** 2)))
        assert all(b <= a_ * (1 + 1e-12) for a_, b in zip(objs, objs[1:])) and objs[-1] < objs[0]


def test_frank_wolfe_gap_against_its_definition():
    rng = np.random.default_rng(0)
    grad = rng.normal(size=(4, 3))
    a = project_rows_simplex(jnp.asarray(rng.random((4, 3))))
    joint = np.asarray(a) / 4
    assert float(frank_wolfe_gap(jnp.asarray(grad), jnp.asarray(joint))) == pytest.approx(
        np.sum(grad * joint) - grad.min()
    )
    assert float(frank_wolfe_gap(jnp.asarray(grad), a, per_example=True)) == pytest.approx(
        np.sum(grad * np.asarray(a)) - grad.min(axis=1).sum()
    )
    mask = jnp.asarray([1.0, 1.0, 0.0, 1.0])
    am = a * mask[:, None]
    assert float(frank_wolfe_gap(jnp.asarray(grad), am, mask=mask, per_example=True)) == pytest.approx(
        np.sum(grad * np.asarray(am)) - grad.min(axis=1)[[0, 1, 3]].sum()
    )
    rows = np.asarray(project_rows_simplex(jnp.asarray(rng.normal(size=(5, 3))), mask=jnp.asarray([1, 0, 1, 1, 1.0])))
    np.testing.assert_allclose(rows.sum(axis=1), [1, 0, 1, 1, 1], atol=1e-6)
    assert rows.min() >= 0


@pytest.mark.parametrize("coef", ["joint", "per_example"])
def test_clipped_vertices_contain_the_clipped_batch_gradient(coef):
    """SelfConv with sigma = 0, lambda = 1 and a fixed batch returns the clipped batch gradient
    (the mean over the batch of the per-example gradients at the true labels, each clipped to C)."""
    with jax.enable_x64(True):
        n, clip = 6, 0.3
        params, x, unravel, _ = make_problem(n=n, seed=5)
        y = np.array([0, 2, 1, 1, 0, 2])
        G = explicit_G(params, x)  # columns (i, kappa)
        cols = G[:, np.arange(n) * K + y]
        clean = (cols * np.minimum(1.0, clip / np.linalg.norm(cols, axis=0))).mean(axis=1)
        assert np.linalg.norm(cols, axis=0).max() > clip  # clipping is active in this case
        den = D.self_conv(
            steps=20000,
            step_size="auto",
            smoothing=1.0,
            vertices="clipped",
            clip_norm=clip,
            coefficient_set=coef,
            start="predicted",
            tol=1e-14,
            momentum="nesterov",
        )
        out, info = den(unravel(jnp.asarray(clean)), logits_fn=mlp, params=params, x=x)
        np.testing.assert_allclose(ravel(out), clean, atol=1e-6 * np.linalg.norm(clean))
        raw = D.self_conv(
            steps=20000,
            step_size="auto",
            smoothing=1.0,
            vertices="raw",
            coefficient_set=coef,
            start="predicted",
            tol=1e-14,
            momentum="nesterov",
        )
        out_raw, _ = raw(unravel(jnp.asarray(clean)), logits_fn=mlp, params=params, x=x)
        # the raw hull contains it too: each example's columns average to 0 under the model's own
        # probabilities (sum_kappa p_kappa grad l_kappa = 0), so s_i g_{i,y_i} + (1 - s_i) 0 is in it;
        # clipping shrinks the hull (and the noise it keeps), it does not decide membership here
        np.testing.assert_allclose(ravel(out_raw), clean, atol=1e-6 * np.linalg.norm(clean))
        assert info["projection_gap_relative"] <= 1e-12


def test_predicted_start_is_label_free_and_zero_for_raw_vertices():
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=5, seed=6)
        res = converged_hull_projection(
            mlp,
            params,
            x,
            unravel(jnp.asarray(g_vec)),
            options=HullOptions(
                vertices="raw", start="predicted", tol=0.0, max_steps=1, smoothing=1.0, solver="jacobian"
            ),
        )
        # G alpha_0 = 0, so the initial objective is ||g||^2
        assert float(res.objective_init) == pytest.approx(float(np.sum(g_vec**2)), rel=1e-10)


def test_options_are_checked():
    with pytest.raises(ValueError, match="clip_norm"):
        HullOptions(vertices="clipped")
    with pytest.raises(ValueError, match="coefficient_set"):
        HullOptions(vertices="raw", coefficient_set="rows")
    with pytest.raises(ValueError, match="start"):
        HullOptions(vertices="raw", start="labels")
    with pytest.raises(ValueError, match="FISTA"):
        D.alt_conv(step_size="auto", vertices="clipped", clip_norm=1.0, tol=1e-3, momentum="none")
    with pytest.raises(ValueError, match="step_size"):
        HullOptions(vertices="raw", step_size=-1.0)
    with pytest.raises(ValueError, match="algorithm"):
        HullOptions(vertices="raw", solver="gram", algorithm="away_steps")
    with pytest.raises(ValueError, match="solver='gram' and coefficient_set='joint'"):
        HullOptions(vertices="raw", solver="gram", coefficient_set="per_example", algorithm="pairwise_frank_wolfe")
    with pytest.raises(ValueError, match="solver='gram'"):
        HullOptions(vertices="raw", solver="jacobian", algorithm="pairwise_frank_wolfe")
    with pytest.raises(ValueError, match="converged projection"):  # the paper form's PGD has no Gram solver
        D.alt_conv(step_size="auto", solver="gram").projection_solver(rows=4, k=3, params={"w": jnp.zeros(2)})
    with pytest.raises(ValueError, match="converged projection"):
        D.alt_conv(step_size="auto", algorithm="pairwise_frank_wolfe")
