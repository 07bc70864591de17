"""LabelDP-Pro's projection step size on the model it actually trains (000 Table 10(a) CNN).

The regression this guards: with G exactly as 000 Section 3.2 defines it, the paper's unscaled
PGD step (0.02) is far above 1/L for the CNN, PGD ends at a WORSE objective than its uniform
start, and training stayed at chance accuracy. ``proj_step_size: auto`` (1/L) must decrease the
objective and return a gradient pointing along the target.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from labeldp import denoisers as D
from labeldp.methods.base import RunSpec
from labeldp.methods.labeldp_pro import make_denoiser_for, projection_step_size
from labeldp.models import build_model
from tests.helpers import fake_mnist_images


@pytest.fixture(scope="module")
def cnn_problem():
    model = build_model("mnist_cnn", input_shape=(28, 28, 1), num_classes=10)
    params = model.init(jax.random.key(0))
    rng = np.random.default_rng(0)
    # structured inputs (class-dependent blobs) so per-class gradients are correlated, as on MNIST
    y = rng.integers(0, 10, 64)
    x = rng.normal(0.0, 0.3, (64, 28, 28, 1)).astype(np.float32)
    for i, c in enumerate(y):
        x[i, 2 * c : 2 * c + 8, 4:24, 0] += 1.0
    x, y = jnp.asarray(x), jnp.asarray(y)

    def loss(p):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(model.logits(p, x)), y[:, None], 1))

    return model, params, x, jax.grad(loss)(params)


def _cos(a, b):
    return float(D.tree_vdot(a, b) / jnp.sqrt(D.tree_sqnorm(a) * D.tree_sqnorm(b)))


def test_auto_step_decreases_objective_where_the_unscaled_step_does_not(cnn_problem):
    model, params, x, g = cnn_problem
    lip = float(D.estimate_lipschitz(model.logits, params, x, iters=30))
    assert lip > 1.0 / 0.02, "the premise: 0.02 exceeds 1/L on this CNN"
    auto = D.simplex_least_squares(model.logits, params, x, g, steps=40, step_size="auto")
    assert float(auto.objectives[-1]) < 0.5 * float(auto.initial_objective)
    assert _cos(auto.g_alpha, g) > 0.8
    fixed = D.simplex_least_squares(model.logits, params, x, g, steps=40, step_size=0.02)
    assert float(fixed.objectives[-1]) > float(fixed.initial_objective)


def test_projection_step_size_parsing():
    assert projection_step_size("auto") == "auto"
    assert projection_step_size(0.02) == 0.02
    for bad in ("fast", 0.0, -1.0):
        with pytest.raises(ValueError, match="proj_step_size"):
            projection_step_size(bad)


def test_denoiser_built_from_the_grid_point():
    hp = dict(
        learning_rate=0.2, epochs=1, batch_size=64, clip_norm=5.0, proj_step_size="auto", proj_steps=7, smoothing=0.8
    )
    spec = RunSpec(
        dataset="mnist",
        method="labeldp_pro",
        variant="default",
        epsilon=1.0,
        delta=1e-5,
        seed=0,
        hparams=hp,
        options={"denoiser": "alt_conv"},
    )
    den = make_denoiser_for(spec)
    assert (den.name, den.steps, den.step_size, den.smoothing) == ("alt_conv", 7, "auto", 0.8)
    assert den.uses_alt_batch and not den.breaks_amplification
    spec2 = RunSpec(**{**spec.__dict__, "options": {"denoiser": "self_conv"}})
    assert make_denoiser_for(spec2).breaks_amplification


def test_options_choose_momentum_and_solver():
    hp = dict(
        learning_rate=0.2, epochs=1, batch_size=64, clip_norm=5.0, proj_step_size="auto", proj_steps=7, smoothing=0.8
    )
    spec = RunSpec(
        dataset="mnist",
        method="labeldp_pro",
        variant="v",
        epsilon=1.0,
        delta=1e-5,
        seed=0,
        hparams=hp,
        options={"denoiser": "alt_conv", "projection_momentum": "nesterov", "projection_solver": "jacobian"},
    )
    den = make_denoiser_for(spec)
    assert (den.momentum, den.solver) == ("nesterov", "jacobian")
    assert make_denoiser_for(RunSpec(**{**spec.__dict__, "options": {"denoiser": "alt_conv"}})).solver == "auto"
    with pytest.raises(ValueError, match="solver"):
        make_denoiser_for(RunSpec(**{**spec.__dict__, "options": {"denoiser": "alt_conv", "projection_solver": "x"}}))


def _pro_spec(options, variant="v"):
    hp = dict(
        learning_rate=0.2, epochs=1, batch_size=64, clip_norm=5.0, proj_step_size="auto", proj_steps=7, smoothing=0.8
    )
    return RunSpec(
        dataset="mnist",
        method="labeldp_pro",
        variant=variant,
        epsilon=1.0,
        delta=1e-5,
        seed=0,
        hparams=hp,
        options={"denoiser": "alt_conv", **options},
    )


def test_the_projection_is_one_explicit_option():
    """``projection: paper_pgd`` is exactly the four knobs the paper-form variants set, with plain
    PGD; ``projection: converged`` is what a variant that says nothing runs; knobs that contradict
    the named projection are refused; the denoiser names what runs (the record's
    ``details.projection``)."""
    legacy_paper = make_denoiser_for(
        _pro_spec({"vertices": "raw", "projection_start": "uniform", "projection_tol": None})
    )
    paper = make_denoiser_for(_pro_spec({"projection": "paper_pgd"}))
    assert paper == legacy_paper and paper.projection == "paper_pgd" and not paper.converged
    assert paper.momentum == "none" and paper.tol is None and paper.vertices == "raw"
    converged = make_denoiser_for(_pro_spec({"projection": "converged"}))
    assert converged == make_denoiser_for(_pro_spec({})) and converged.projection == "converged"
    assert (converged.vertices, converged.start, converged.tol, converged.momentum) == (
        "clipped",
        "predicted",
        1e-3,
        "nesterov",
    )
    # refinements keep the named projection; the ablation knobs of labeldp_pro_cpu.yaml still work
    assert make_denoiser_for(_pro_spec({"projection": "converged", "vertices": "raw"})).projection == (
        "converged_variant"
    )
    fista = make_denoiser_for(_pro_spec({"projection": "paper_pgd", "projection_momentum": "nesterov"}))
    assert fista.projection == "paper_form_fista"
    with pytest.raises(ValueError, match="projection_tol"):
        make_denoiser_for(_pro_spec({"projection": "paper_pgd", "projection_tol": 1e-3}))
    with pytest.raises(ValueError, match="projection must be one of"):
        make_denoiser_for(_pro_spec({"projection": "pgd"}))
    assert D.noop().projection is None


@pytest.mark.parametrize("momentum", ["none", "nesterov"])
def test_jacobian_solver_matches_matrix_free_on_the_cnn(cnn_problem, momentum):
    """Materialising G^T row by row is exact for the convolutional model training uses (float32)."""
    model, params, x, g = cnn_problem
    mask = jnp.asarray((np.arange(64) % 7 != 3).astype(np.float32))
    kw = dict(steps=30, step_size="auto", momentum=momentum, mask=mask)
    a = D.simplex_least_squares(model.logits, params, x, g, solver="matrix_free", **kw)
    b = D.simplex_least_squares(model.logits, params, x, g, solver="jacobian", **kw)
    np.testing.assert_allclose(float(a.step_size), float(b.step_size), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(a.objectives), np.asarray(b.objectives), rtol=1e-4)
    assert _cos(a.g_alpha, b.g_alpha) > 1 - 1e-6
    assert float(b.objectives[-1]) < 0.5 * float(b.initial_objective)


def test_training_records_the_solver_and_both_solvers_train_alike():
    """A whole (tiny) LabelDP-Pro run: the record names the solver, and the two solvers, which
    run the same algorithm, end at the same loss up to float32 rounding."""
    from labeldp.methods import labeldp_pro

    data = fake_mnist_images(n_train=192, n_test=64)
    hp = dict(
        learning_rate=0.2, epochs=1, batch_size=64, clip_norm=5.0, proj_step_size="auto", proj_steps=5, smoothing=0.75
    )
    runs = {}
    paper = {"vertices": "raw", "projection_start": "uniform", "projection_tol": None}  # the paper's form
    for solver in ("matrix_free", "jacobian"):
        spec = RunSpec(
            dataset="mnist",
            method="labeldp_pro",
            variant="default",
            epsilon=1.0,
            delta=1e-5,
            seed=1,
            hparams=hp,
            options={"denoiser": "alt_conv", "alt_batch_size": 16, "projection_solver": solver, **paper},
        )
        runs[solver] = labeldp_pro.run(data, spec)
        assert runs[solver].details["projection_solver"] == solver
    a, b = runs["matrix_free"], runs["jacobian"]
    assert a.privacy.epsilon == b.privacy.epsilon and a.privacy.valid
    np.testing.assert_allclose(a.metrics["final_train_loss"], b.metrics["final_train_loss"], rtol=1e-3)
    spec_auto = RunSpec(**{**spec.__dict__, "options": {"denoiser": "alt_conv", "alt_batch_size": 16, **paper}})
    cnn = build_model("mnist_cnn", input_shape=(28, 28, 1), num_classes=10).init(jax.random.key(0))
    # 5 steps: too few to pay for G^T; JACOBIAN_MIN_STEPS pay for its 160 x 15,210 floats (the
    # resolution alone; the converged run below records an auto choice)
    assert make_denoiser_for(spec_auto).projection_solver(rows=16, k=10, params=cnn) == "matrix_free"
    spec_many = RunSpec(**{**spec_auto.__dict__, "hparams": {**hp, "proj_steps": D.JACOBIAN_MIN_STEPS}})
    assert make_denoiser_for(spec_many).projection_solver(rows=16, k=10, params=cnn) == "jacobian"
    # a variant that says nothing runs the converged projection (clipped, predicted start, to 1e-3)
    spec_conv = RunSpec(**{**spec.__dict__, "options": {"denoiser": "alt_conv", "alt_batch_size": 16}})
    den = labeldp_pro.make_denoiser_for(spec_conv)
    assert den.converged and (den.vertices, den.clip_norm, den.start, den.tol, den.momentum) == (
        "clipped",
        5.0,
        "predicted",
        1e-3,
        "nesterov",
    )
    res = labeldp_pro.run(data, spec_conv)
    assert res.details["projection_solver"] == "jacobian"  # converged: whenever G^T fits
    assert np.isfinite(res.metrics["final_train_loss"])
    d = res.details  # the record states how far each step's projection got
    assert 1 <= d["projection_iterations_max"] <= 5 and d["projection_gap_relative_final"] >= 0.0
    assert 0.0 <= d["smoothing_bias_ratio_median"]


def test_gram_solver_and_pairwise_frank_wolfe_from_variant_options():
    """``projection_solver: gram`` with ``projection_algorithm: pairwise_frank_wolfe`` reach the
    runner: a whole tiny run records the solver and every step stops within the tolerance (the
    iterates themselves are tested in tests/denoisers/test_hull_converged.py); the paper form
    refuses both, with the fix in the message."""
    from labeldp.methods import labeldp_pro

    data = fake_mnist_images(n_train=128, n_test=32)
    hp = dict(
        learning_rate=0.2, epochs=1, batch_size=64, clip_norm=5.0, proj_step_size="auto", proj_steps=5000, smoothing=1.0
    )
    base = RunSpec(
        dataset="mnist",
        method="labeldp_pro",
        variant="v",
        epsilon=1.0,
        delta=1e-5,
        seed=1,
        hparams=hp,
        options={"denoiser": "alt_conv", "alt_batch_size": 16},
    )
    spec = RunSpec(
        **{
            **base.__dict__,
            "options": {**base.options, "projection_solver": "gram", "projection_algorithm": "pairwise_frank_wolfe"},
        }
    )
    den = labeldp_pro.make_denoiser_for(spec)
    assert (den.solver, den.algorithm) == ("gram", "pairwise_frank_wolfe")
    assert labeldp_pro.make_denoiser_for(base).algorithm == "fista"
    res = labeldp_pro.run(data, spec)
    assert res.details["projection_solver"] == "gram" and res.privacy.valid
    assert res.details["projection_gap_relative_final"] <= 1e-3 and res.details["projection_iterations_max"] < 5000
    assert np.isfinite(res.metrics["final_train_loss"])
    paper = {"vertices": "raw", "projection_start": "uniform", "projection_tol": None}
    for extra in ({"projection_solver": "gram"}, {"projection_algorithm": "pairwise_frank_wolfe"}):
        bad = RunSpec(**{**base.__dict__, "options": {**base.options, **paper, **extra}})
        with pytest.raises(ValueError, match="converged projection"):
            labeldp_pro.run(data, bad)


def test_unknown_options_are_refused_not_ignored():
    """A misspelt or unsupported variant option (e.g. Table 7's examples_per_user, not implemented
    for image DP-SGD) stops the run with the supported list instead of being silently ignored."""
    from labeldp.methods import dpsgd, labeldp_pro

    hp = dict(
        learning_rate=0.2, epochs=1, batch_size=64, clip_norm=5.0, proj_step_size="auto", proj_steps=5, smoothing=0.75
    )
    data = fake_mnist_images(n_train=64, n_test=16)
    for module, options in (
        (labeldp_pro, {"denoiser": "alt_conv", "projection_momentun": "nesterov"}),
        (dpsgd, {"examples_per_user": 2}),
    ):
        spec = RunSpec(
            dataset="mnist",
            method=module.NAME,
            variant="v",
            epsilon=1.0,
            delta=1e-5,
            seed=0,
            hparams=hp,
            options=options,
        )
        with pytest.raises(ValueError, match="does not implement options"):
            module.run(data, spec)
    # options one denoiser uses are refused for a denoiser that would ignore them
    for options in (
        {"denoiser": "self_span", "projection_solver": "jacobian"},
        {"denoiser": "self_conv", "alt_batch_size": 16},
    ):
        spec = RunSpec(
            dataset="mnist",
            method="labeldp_pro",
            variant="v",
            epsilon=1.0,
            delta=1e-5,
            seed=0,
            hparams=hp,
            options=options,
        )
        with pytest.raises(ValueError, match=f"denoiser {options['denoiser']} does not implement options"):
            make_denoiser_for(spec)


@pytest.mark.parametrize("denoiser", ["self_span", "self_conv"])
def test_denoisers_that_break_amplification_are_accounted_without_it_or_marked_not_private(denoiser):
    """000 Section 3.4: SelfSpan and SelfConv project onto the sampled batch, so amplification by subsampling
    does not hold. Without it (Table 3's valid columns) the plan is accounted at q = 1 (more noise, valid);
    with it claimed (the reference-only columns) the run states why it is not private."""
    from labeldp.methods.private_training import prepare_private_run

    data = fake_mnist_images(n_train=256, n_test=32)
    runs = {}
    for amp in (False, True):
        spec = _pro_spec({"denoiser": denoiser, "amplification": amp})
        runs[amp] = prepare_private_run(data, spec, denoiser=make_denoiser_for(spec))
    plain, claimed = runs[False], runs[True]
    assert not plain.plan.amplification and not plain.reasons
    assert plain.plan.privacy_outcome(mechanism="m").valid
    assert claimed.plan.amplification and any("not private" in r for r in claimed.reasons)
    outcome = claimed.plan.privacy_outcome(mechanism="m", reasons=claimed.reasons)
    assert not outcome.valid and denoiser in outcome.invalid_reason
    assert plain.plan.noise_multiplier > claimed.plan.noise_multiplier  # q = 1 needs more noise at the same eps


def test_sgd_momentum_is_post_processing_of_the_denoised_update():
    """A ``momentum`` variant option (issue 29's optimiser experiment) changes the training, never the
    accounting: the same sigma and eps as plain SGD, a different trained model; a bad value is refused."""
    from labeldp.methods import labeldp_pro

    data = fake_mnist_images(n_train=192, n_test=64)
    base = {"alt_batch_size": 16, "projection_tol": None}
    runs = {}
    for name, extra in (("plain", {}), ("momentum", {"momentum": 0.9})):
        spec = RunSpec(
            **{**_pro_spec({**base, **extra}).__dict__, "hparams": {**_pro_spec({}).hparams, "proj_steps": 3}}
        )
        runs[name] = labeldp_pro.run(data, spec)
    plain, mom = runs["plain"], runs["momentum"]
    assert plain.privacy.valid and mom.privacy.valid
    assert plain.privacy.epsilon == mom.privacy.epsilon
    assert plain.details["noise_multiplier"] == mom.details["noise_multiplier"]
    assert plain.metrics["final_train_loss"] != mom.metrics["final_train_loss"]
    for denoiser in ("self_span", "self_conv"):  # every denoiser's step takes it
        make_denoiser_for(_pro_spec({"denoiser": denoiser, "amplification": False, "momentum": 0.9}))
    bad = RunSpec(**{**_pro_spec({**base, "momentum": 1.5}).__dict__})
    with pytest.raises(ValueError, match="momentum must be a number in"):
        labeldp_pro.run(data, bad)
