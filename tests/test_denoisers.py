"""Property tests of labeldp.denoisers (000 Table 1, Sections 3.2-3.3, Appendix C).

A tiny MLP lets us materialise G (d x nK) with jax.jacrev and compare the matrix-free
projections with independent solvers (numpy lstsq, scipy SLSQP). Computations that are compared
to 1e-5 or tighter run in float64 (``jax.enable_x64``).
"""

from __future__ import annotations

import itertools

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from labeldp import denoisers as D

DIN, HID, K = 4, 6, 3


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def make_problem(n: int, seed: int = 0, dtype=jnp.float64):
    k = jax.random.split(jax.random.key(seed), 6)
    params = {
        "w1": 0.7 * jax.random.normal(k[0], (DIN, HID), dtype),
        "b1": 0.1 * jax.random.normal(k[1], (HID,), dtype),
        "w2": 0.7 * jax.random.normal(k[2], (HID, K), dtype),
        "b2": 0.1 * jax.random.normal(k[3], (K,), dtype),
    }
    x = jax.random.normal(k[4], (n, DIN), dtype)
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    g_vec = np.asarray(0.3 * jax.random.normal(k[5], flat.shape, dtype))
    return params, x, unravel, g_vec


def explicit_G(params, x, mask=None):
    """G with columns grad_theta l(theta, (x_i, kappa)), ordered (i, kappa) row-major."""
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    jac = jax.jacrev(lambda fl: D.per_class_losses(mlp, unravel(fl), x, mask).reshape(-1))(flat)
    return np.asarray(jac).T  # (d, nK)


def ravel(tree):
    return np.asarray(jax.flatten_util.ravel_pytree(tree)[0])


def qp_simplex(G, g):
    """min_{a in simplex} ||G a - g||^2 by SLSQP (independent of the code under test)."""
    m = G.shape[1]
    res = minimize(
        lambda a: float(np.sum((G @ a - g) ** 2)),
        np.full(m, 1.0 / m),
        jac=lambda a: 2.0 * G.T @ (G @ a - g),
        method="SLSQP",
        bounds=[(0.0, None)] * m,
        constraints=[{"type": "eq", "fun": lambda a: np.sum(a) - 1.0, "jac": lambda a: np.ones(m)}],
        options={"ftol": 1e-15, "maxiter": 2000},
    )
    assert res.success, res.message
    return res.x, res.fun


# ------------------------------------------------------------------------------------------
# Simplex projection
# ------------------------------------------------------------------------------------------


def brute_force_simplex(v):
    """Projection onto the simplex by enumerating supports (KKT: w_S = v_S - tau, w = 0 off S)."""
    best, best_d = None, np.inf
    n = v.size
    for r in range(1, n + 1):
        for s in itertools.combinations(range(n), r):
            s = list(s)
            tau = (v[s].sum() - 1.0) / r
            w = np.zeros(n)
            w[s] = v[s] - tau
            if np.all(w >= -1e-12):
                d = np.sum((w - v) ** 2)
                if d < best_d:
                    best, best_d = w, d
    return best


def test_project_simplex_known_answers():
    with jax.enable_x64(True):
        cases = {
            (0.5, 0.5, 0.5): (1 / 3, 1 / 3, 1 / 3),
            (2.0, 0.0, 0.0): (1.0, 0.0, 0.0),
            (0.2, 0.3, 0.5): (0.2, 0.3, 0.5),  # already on the simplex
            (1.0, 1.0, -5.0): (0.5, 0.5, 0.0),
            (-1.0, -1.0, -1.0, -1.0): (0.25, 0.25, 0.25, 0.25),
        }
        for v, w in cases.items():
            np.testing.assert_allclose(D.project_simplex(jnp.asarray(v)), w, atol=1e-12)


def test_project_simplex_brute_force_and_idempotent():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        for trial in range(40):
            v = rng.normal(scale=rng.choice([0.1, 1.0, 5.0]), size=6)
            w = np.asarray(D.project_simplex(jnp.asarray(v)))
            np.testing.assert_allclose(w, brute_force_simplex(v), atol=1e-10)
            assert w.min() >= 0 and abs(w.sum() - 1) < 1e-12
            np.testing.assert_allclose(D.project_simplex(jnp.asarray(w)), w, atol=1e-12)  # idempotent
        # 2-D input (n, K) is projected jointly
        v2 = rng.normal(size=(3, 2))
        np.testing.assert_allclose(
            np.asarray(D.project_simplex(jnp.asarray(v2))).reshape(-1), brute_force_simplex(v2.reshape(-1)), atol=1e-10
        )


def test_project_simplex_mask_restricts_support():
    rng = np.random.default_rng(1)
    with jax.enable_x64(True):
        v = rng.normal(size=7)
        mask = np.array([1, 0, 1, 1, 0, 1, 0], bool)
        w = np.asarray(D.project_simplex(jnp.asarray(v), mask=jnp.asarray(mask)))
        assert np.all(w[~mask] == 0)
        np.testing.assert_allclose(w[mask], brute_force_simplex(v[mask]), atol=1e-10)


# ------------------------------------------------------------------------------------------
# Span projection
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loop", ["fori", "python"])
def test_span_projection_matches_lstsq(loop):
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=5)  # nK = 15 columns, d = 51
        G = explicit_G(params, x)
        coef, *_ = np.linalg.lstsq(G, g_vec, rcond=None)
        ref = G @ coef
        out = D.span_projection(mlp, params, x, unravel(jnp.asarray(g_vec)), iters=100, tol=1e-14, loop=loop, chunk=4)
        rel = np.linalg.norm(ravel(out) - ref) / np.linalg.norm(ref)
        assert rel < 1e-5, rel
        # the residual is orthogonal to every column (normal equations)
        assert np.abs(G.T @ (g_vec - ravel(out))).max() < 1e-8


def test_span_projection_mask_drops_columns():
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=6, seed=3)
        mask = np.array([1, 1, 0, 1, 0, 1], np.float64)
        G = explicit_G(params, x[mask > 0])
        coef, *_ = np.linalg.lstsq(G, g_vec, rcond=None)
        ref = G @ coef
        x_pad = x.at[mask == 0].set(100.0)  # garbage padding rows must not matter
        out = D.span_projection(mlp, params, x_pad, unravel(jnp.asarray(g_vec)), mask=mask, iters=100, tol=1e-14)
        assert np.linalg.norm(ravel(out) - ref) / np.linalg.norm(ref) < 1e-5


def test_span_projection_float32_default():
    """The float32 path (what training uses) is accurate to single precision on a small instance.

    G has rank n(K-1): sum_kappa p_kappa grad l(theta, (x, kappa)) = 0 for every example, so the
    float32 Jacobian's K-th direction per example is rounding noise; the reference cuts it.
    """
    params, x, unravel, g_vec = make_problem(n=5, dtype=jnp.float32)
    G = explicit_G(params, x).astype(np.float64)
    coef, *_ = np.linalg.lstsq(G, g_vec.astype(np.float64), rcond=1e-5)
    ref = G @ coef
    out = D.span_projection(mlp, params, x, unravel(jnp.asarray(g_vec)), iters=60)
    assert np.linalg.norm(ravel(out) - ref) / np.linalg.norm(ref) < 1e-3


# ------------------------------------------------------------------------------------------
# Convex-hull projection
# ------------------------------------------------------------------------------------------

QP_REL_GAP = 1e-6  # allowed relative objective gap to the SLSQP optimum


@pytest.mark.parametrize(
    "loop,momentum,steps,solver",
    [
        ("fori", "none", 3000, "matrix_free"),
        ("python", "none", 3000, "matrix_free"),
        ("python", "nesterov", 600, "matrix_free"),
        ("auto", "none", 3000, "jacobian"),
        ("auto", "nesterov", 600, "jacobian"),
    ],
)
def test_convex_hull_reaches_qp_optimum(loop, momentum, steps, solver):
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=5, seed=1)
        G = explicit_G(params, x)
        lip = 2.0 * np.linalg.eigvalsh(G.T @ G).max()
        _, f_star = qp_simplex(G, g_vec)
        res = D.simplex_least_squares(
            mlp,
            params,
            x,
            unravel(jnp.asarray(g_vec)),
            steps=steps,
            step_size=1.0 / lip,
            momentum=momentum,
            loop=loop,
            chunk=50,
            solver=solver,
        )
        alpha = np.asarray(res.alpha).reshape(-1)
        f = np.sum((G @ alpha - g_vec) ** 2)
        assert (f - f_star) / f_star < QP_REL_GAP, (f, f_star)
        assert alpha.min() >= 0 and abs(alpha.sum() - 1) < 1e-10
        # the objective trace is the true objective of the iterates
        np.testing.assert_allclose(float(res.objectives[-1]), f, rtol=1e-10)
        np.testing.assert_allclose(ravel(res.g_alpha), G @ alpha, rtol=1e-10, atol=1e-12)


def test_convex_hull_projection_smoothing_is_exact():
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=4, seed=2)
        G = explicit_G(params, x)
        n, m = 4, 4 * K
        for lam in (1.0, 0.75, 0.0):
            proj, alpha = D.convex_hull_projection(
                mlp, params, x, unravel(jnp.asarray(g_vec)), steps=30, step_size=0.01, smoothing=lam
            )
            a = np.asarray(alpha).reshape(-1)
            assert alpha.shape == (n, K)
            assert a.min() >= 0 and abs(a.sum() - 1) < 1e-12
            expected = G @ (lam * a + (1 - lam) / m)
            np.testing.assert_allclose(ravel(proj), expected, rtol=1e-10, atol=1e-13)


def test_convex_hull_paper_step_and_auto_step():
    """The default (unscaled) step and step_size='auto' both stay on the simplex; auto decreases."""
    params, x, unravel, g_vec = make_problem(n=5, seed=4, dtype=jnp.float32)
    g = unravel(jnp.asarray(g_vec))
    res = D.simplex_least_squares(mlp, params, x, g, steps=20, step_size="auto")
    obj = np.asarray(res.objectives)
    assert np.all(np.diff(obj) <= 1e-5 * obj[0])  # monotone for step <= 1/L
    assert obj[-1] < float(res.initial_objective)
    res_paper = D.simplex_least_squares(mlp, params, x, g, steps=20, step_size=0.02)
    a = np.asarray(res_paper.alpha)
    assert a.min() >= 0 and abs(a.sum() - 1) < 1e-5


def test_convex_hull_mask_equals_subset_and_warm_start():
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=6, seed=5)
        mask = np.array([1, 0, 1, 1, 0, 1], np.float64)
        g = unravel(jnp.asarray(g_vec))
        x_pad = x.at[mask == 0].set(-50.0)
        proj_m, alpha_m = D.convex_hull_projection(
            mlp, params, x_pad, g, steps=40, step_size=0.02, smoothing=0.75, mask=mask
        )
        proj_s, alpha_s = D.convex_hull_projection(
            mlp, params, x[mask > 0], g, steps=40, step_size=0.02, smoothing=0.75
        )
        assert np.all(np.asarray(alpha_m)[mask == 0] == 0)
        np.testing.assert_allclose(np.asarray(alpha_m)[mask > 0], alpha_s, atol=1e-10)
        np.testing.assert_allclose(ravel(proj_m), ravel(proj_s), rtol=1e-9, atol=1e-12)
        # warm start from the optimum stays (near) optimal
        G = explicit_G(params, x)
        lip = 2.0 * np.linalg.eigvalsh(G.T @ G).max()
        a_star, f_star = qp_simplex(G, g_vec)
        res = D.simplex_least_squares(mlp, params, x, g, steps=5, step_size=1 / lip, init=a_star.reshape(6, K))
        assert (float(res.objectives[-1]) - f_star) / f_star < 1e-6


def test_fori_and_python_loops_agree():
    params, x, unravel, g_vec = make_problem(n=5, seed=6, dtype=jnp.float32)
    g = unravel(jnp.asarray(g_vec))
    a = D.simplex_least_squares(mlp, params, x, g, steps=23, step_size=0.02, loop="fori", solver="matrix_free")
    b = D.simplex_least_squares(
        mlp, params, x, g, steps=23, step_size=0.02, loop="python", chunk=10, solver="matrix_free"
    )
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-6)
    np.testing.assert_allclose(a.objectives, b.objectives, rtol=1e-5)


def test_jacobian_matrix_is_g_transposed_with_mask():
    with jax.enable_x64(True):
        params, x, _, _ = make_problem(n=5, seed=9)
        mask = np.array([1, 0, 1, 1, 0], np.float64)
        jt = np.asarray(D.jacobian_matrix(mlp, params, x, mask=mask))
        np.testing.assert_allclose(jt, explicit_G(params, x, mask).T, rtol=1e-12, atol=1e-14)
        assert np.all(jt.reshape(5, K, -1)[mask == 0] == 0)


@pytest.mark.parametrize("momentum", ["none", "nesterov"])
@pytest.mark.parametrize("step_size", [0.02, "auto"])
def test_jacobian_and_matrix_free_solvers_give_the_same_iterates(momentum, step_size):
    """The materialised-G^T solver runs the same algorithm: same step, objectives, iterates, output."""
    with jax.enable_x64(True):
        params, x, unravel, g_vec = make_problem(n=6, seed=10)
        g = unravel(jnp.asarray(g_vec))
        mask = np.array([1, 1, 0, 1, 1, 1], np.float64)
        kw = dict(steps=37, step_size=step_size, mask=mask, momentum=momentum)
        a = D.simplex_least_squares(mlp, params, x, g, solver="matrix_free", **kw)
        b = D.simplex_least_squares(mlp, params, x, g, solver="jacobian", **kw)
        np.testing.assert_allclose(float(a.step_size), float(b.step_size), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(a.objectives), np.asarray(b.objectives), rtol=1e-9)
        np.testing.assert_allclose(np.asarray(a.alpha), np.asarray(b.alpha), rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(ravel(a.g_alpha), ravel(b.g_alpha), rtol=1e-9, atol=1e-12)
        pa, _ = D.convex_hull_projection(mlp, params, x, g, smoothing=0.75, solver="matrix_free", **kw)
        pb, _ = D.convex_hull_projection(mlp, params, x, g, smoothing=0.75, solver="jacobian", **kw)
        np.testing.assert_allclose(ravel(pa), ravel(pb), rtol=1e-9, atol=1e-12)
        la = D.estimate_lipschitz(mlp, params, x, mask=mask, iters=15, solver="matrix_free")
        lb = D.estimate_lipschitz(mlp, params, x, mask=mask, iters=15, solver="jacobian")
        np.testing.assert_allclose(float(la), float(lb), rtol=1e-10)


def test_resolve_solver_by_memory_and_bad_names(monkeypatch):
    params, _, _, _ = make_problem(n=2, dtype=jnp.float32)
    d = ravel(params).size
    many, few = D.JACOBIAN_MIN_STEPS, D.JACOBIAN_MIN_STEPS - 1
    assert D.resolve_solver("auto", 8, K, params, many) == "jacobian"
    assert D.resolve_solver("auto", 8, K, params, few) == "matrix_free"  # building G^T would not pay off
    monkeypatch.setattr(D.linear_maps, "JACOBIAN_MAX_BYTES", 4 * 8 * K * d - 1)
    assert D.resolve_solver("auto", 8, K, params, many) == "matrix_free"
    assert D.resolve_solver("auto", 7, K, params, many) == "jacobian"
    assert D.resolve_solver("jacobian", 8, K, params, few) == "jacobian"
    assert D.resolve_solver("matrix_free", 7, K, params, many) == "matrix_free"
    with jax.enable_x64(True):  # float64 parameters take twice the bytes
        params64, _, _, _ = make_problem(n=2, dtype=jnp.float64)
        assert D.resolve_solver("auto", 4, K, params64, many) == "matrix_free"
        assert D.resolve_solver("auto", 3, K, params64, many) == "jacobian"
    with pytest.raises(ValueError, match="matrix_free"):
        D.resolve_solver("dense", 8, K, params, many)
    with pytest.raises(ValueError, match="solver"):
        D.alt_conv(solver="dense")


# ------------------------------------------------------------------------------------------
# Denoiser objects
# ------------------------------------------------------------------------------------------


def test_denoiser_flags_and_registry():
    assert D.noop().breaks_amplification is False
    assert D.self_span().breaks_amplification is True
    assert D.self_conv().breaks_amplification is True
    assert D.alt_conv().breaks_amplification is False
    assert D.alt_conv().uses_alt_batch and not D.self_conv().uses_alt_batch
    assert D.make_denoiser("alt_conv", steps=7).steps == 7
    assert {d().name for d in D.DENOISERS.values()} == set(D.DENOISERS)
    with pytest.raises(ValueError):
        D.make_denoiser("nope")


def test_denoisers_common_signature():
    params, x, unravel, g_vec = make_problem(n=5, seed=7, dtype=jnp.float32)
    g = unravel(jnp.asarray(g_vec))
    x_alt = x[::-1] * 0.5
    mask = jnp.array([1, 1, 1, 0, 1], jnp.float32)
    kw = dict(logits_fn=mlp, params=params, x=x, mask=mask, x_alt=x_alt)
    out, _ = D.noop()(g, **kw)
    np.testing.assert_array_equal(ravel(out), ravel(g))
    # self_conv uses the batch (masked), alt_conv the alternative batch
    sc, _ = D.self_conv(steps=10)(g, **kw)
    ref, _ = D.convex_hull_projection(mlp, params, x, g, steps=10, mask=mask)
    np.testing.assert_allclose(ravel(sc), ravel(ref), rtol=1e-6, atol=1e-7)
    ac, info = D.alt_conv(steps=10)(g, **kw)
    ref, _ = D.convex_hull_projection(mlp, params, x_alt, g, steps=10)
    np.testing.assert_allclose(ravel(ac), ravel(ref), rtol=1e-6, atol=1e-7)
    assert "projection_objective" in info
    ss, _ = D.self_span(iters=30)(g, **kw)
    ref = D.span_projection(mlp, params, x, g, iters=30, mask=mask)
    np.testing.assert_allclose(ravel(ss), ravel(ref), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError):
        D.alt_conv()(g, logits_fn=mlp, params=params, x=x)


def test_denoiser_under_outer_jit():
    """Inside a user's jax.jit, loop='auto' falls back to fori; loop='python' refuses."""
    params, x, unravel, g_vec = make_problem(n=5, seed=8, dtype=jnp.float32)
    g = unravel(jnp.asarray(g_vec))
    eager, _ = D.self_conv(steps=12, loop="python", solver="matrix_free")(g, logits_fn=mlp, params=params, x=x)
    for solver in ("matrix_free", "jacobian"):
        den = D.self_conv(steps=12, loop="auto", solver=solver)
        jitted = jax.jit(lambda p, xx, gg: den(gg, logits_fn=mlp, params=p, x=xx)[0])
        np.testing.assert_allclose(ravel(jitted(params, x, g)), ravel(eager), rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError):
        jax.jit(lambda p, xx, gg: D.self_conv(steps=2, loop="python")(gg, logits_fn=mlp, params=p, x=xx)[0])(
            params, x, g
        )
