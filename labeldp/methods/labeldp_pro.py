"""LabelDP-Pro (000): DP-SGD whose noisy gradient is projected by a feature-only denoiser.

The variant's options choose the denoiser of 000 Table 1: ``alt_conv`` (default; the convex
hull of the per-example per-class gradients of an independent alternative batch of n2
examples, compatible with amplification), ``self_conv`` / ``self_span`` (the current batch;
they break amplification, so they are accounted without it unless the variant is one of
Table 3's reference-only "w/ AMP" columns, which the record marks not private). Projection
hyper-parameters: ``proj_steps``, ``proj_step_size`` and the smoothing ``lambda`` (000 D.2).
Implementation options (same algorithm, recorded in the result's ``details``):
``projection_momentum`` (``none``: the paper's PGD; ``nesterov``: FISTA) and
``projection_solver`` (``auto`` | ``matrix_free`` | ``jacobian`` | ``gram``, see :mod:`labeldp.denoisers`)
and, for the converged projection, ``projection_algorithm`` (``fista`` | ``pairwise_frank_wolfe``, the
latter with the ``gram`` solver; :mod:`labeldp.denoisers.hull_gram`).
Which projection runs is ONE option, ``projection`` (:data:`PROJECTIONS`): ``paper_pgd`` (000 Section
3.2 and Appendix C) or ``converged`` (the default). The knobs below refine it for ablations; a knob
that contradicts the named projection is refused, and the record says which ran
(``details.projection``).
Projection options (:data:`HULL_DEFAULTS`; :mod:`labeldp.denoisers.hull_converged`):
``vertices`` (``clipped`` to C | ``raw``), ``coefficient_set`` (``joint`` | ``per_example``),
``projection_start`` (``predicted`` | ``uniform``) and ``projection_tol`` (a relative Frank-Wolfe
gap, ``proj_steps`` the cap; ``null``: exactly ``proj_steps`` iterations).
"""

from __future__ import annotations

from labeldp.methods.base import MethodResult, RunSpec, check_options

NAME = "labeldp_pro"
HYPERPARAMETERS = ("learning_rate", "epochs", "batch_size", "clip_norm", "proj_step_size", "proj_steps", "smoothing")
DATASET_KINDS = ("image", "tabular", "features")  # tabular: binary ads data, user-level AltConv (labeldp.ads)
CALIBRATES_WITH_ACCOUNTANT = True  # the accountant calibrates sigma (spec.calibration_relation)
SAMPLED_BATCH_KEYS = ("batch_size",)  # the Poisson expected batch: at most the training units
_HULL_OPTIONS = (
    "projection",
    "projection_momentum",
    "projection_solver",
    "vertices",
    "coefficient_set",
    "projection_start",
    "projection_tol",
    "projection_algorithm",
)
_SELECTION_OPTIONS = ("validation_fraction", "validation_epsilon")  # honest selection (labeldp.selection)
OPTIONS = ("denoiser", "amplification", "alt_batch_size", "clipping_formulation") + _HULL_OPTIONS + _SELECTION_OPTIONS
_DENOISER_OPTIONS = {  # the options each denoiser uses; any other is refused, not ignored
    "alt_conv": OPTIONS,
    "self_conv": ("denoiser", "amplification", "clipping_formulation") + _HULL_OPTIONS + _SELECTION_OPTIONS,
    "self_span": ("denoiser", "amplification", "clipping_formulation") + _SELECTION_OPTIONS,
}
#: The projection when a variant says nothing (the converged projection, issue 13): vertices
#: clipped to C, one joint simplex, started at the model's predicted probabilities, FISTA to a
#: Frank-Wolfe gap of 1e-3 C^2 (the largest squared vertex norm) with ``proj_steps`` as the cap. The paper's form (000
#: Section 3.2, Appendix C) is ``{vertices: raw, projection_start: uniform, projection_tol: null}``
#: (with ``projection_momentum: none`` for its plain PGD).
HULL_DEFAULTS = {
    "vertices": "clipped",
    "coefficient_set": "joint",
    "projection_start": "predicted",
    "projection_tol": 1e-3,
}


#: The projections by name (the ``projection`` option): each sets the knobs that decide what runs.
PROJECTIONS = {
    # 000 Section 3.2 / Appendix C: raw per-class gradients as vertices, one simplex, the uniform
    # start, exactly ``proj_steps`` plain projected-gradient steps
    "paper_pgd": {
        "vertices": "raw",
        "coefficient_set": "joint",
        "projection_start": "uniform",
        "projection_tol": None,
        "projection_momentum": "none",
    },
    # the converged projection (HULL_DEFAULTS), FISTA to a Frank-Wolfe gap
    "converged": {**HULL_DEFAULTS, "projection_momentum": "nesterov"},
}


def projection_options(options) -> dict:
    """The projection knobs a variant's options describe.

    With ``projection`` named, its :data:`PROJECTIONS` entry, refined by any knob the variant also
    sets; without it, :data:`HULL_DEFAULTS` refined by the knobs, the momentum following the form
    (``none`` for the paper's, ``nesterov`` otherwise), as variants written before the option were.

    Raises:
      ValueError: an unknown projection name, or a knob that makes a named ``paper_pgd`` converge
        (or a named ``converged`` run the paper's form), naming the knob.
    """
    name = options.get("projection")
    if name is not None and name not in PROJECTIONS:
        raise ValueError(f"projection must be one of {sorted(PROJECTIONS)}, got {name!r}")
    knobs = ("vertices", "coefficient_set", "projection_start", "projection_tol", "projection_momentum")
    opt = {**(PROJECTIONS[name] if name else HULL_DEFAULTS), **{k: options[k] for k in knobs if k in options}}
    form = ("vertices", "coefficient_set", "projection_start", "projection_tol")
    paper = PROJECTIONS["paper_pgd"]
    paper_form = all(opt[k] == paper[k] for k in form)
    if name == "paper_pgd" and not paper_form:
        changed = [k for k in form if opt[k] != paper[k]]
        raise ValueError(
            f"projection: paper_pgd is 000's form, but the variant also sets {changed}, which makes it the "
            "converged projection: drop those options or name projection: converged"
        )
    if name == "converged" and paper_form:
        raise ValueError(
            "projection: converged, but the variant's vertices / coefficient_set / projection_start / "
            "projection_tol are 000's form: name projection: paper_pgd instead"
        )
    if "projection_momentum" not in opt:
        opt["projection_momentum"] = "none" if paper_form else "nesterov"
    return opt


def projection_step_size(value) -> float | str:
    """The grid's ``proj_step_size``: a float (the paper's unscaled PGD step, 000 D.2 grid
    {0.01, 0.02, 0.05}) or ``"auto"`` (``1 / (1.05 L)`` with ``L = 2 lambda_max(G^T G)`` from
    power iteration, recomputed at every step).

    Why ``auto`` exists: with ``G`` exactly as 000 Section 3.2 defines it (columns are the
    per-example per-class gradients of the cross-entropy), ``L`` is in the thousands for the
    Table 10 CNN on MNIST (about 6,000 at initialisation with n2 = 256), so PGD is stable only
    for ``eta < 1/L ~ 2e-4``; the paper's unscaled steps make it oscillate at a worse objective
    than its uniform starting point and training never leaves chance accuracy (MNIST, eps 1:
    8.9 / 10.1 / 9.7% at 0.01 / 0.02 / 0.05, ``reports/gpu-2026-11-22/ablation/``). The paper
    does not say how its steps were scaled, so the full grid keeps its values and adds
    ``auto``; best-mean selection chooses.
    """
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"proj_step_size must be a positive number or 'auto', got {value!r}")
        return "auto"
    v = float(value)
    if not v > 0:
        raise ValueError(f"proj_step_size must be > 0, got {value!r}")
    return v


def make_denoiser_for(spec: RunSpec):
    """The denoiser a run's options and hyper-parameters describe."""
    from labeldp import denoisers

    name = spec.options.get("denoiser", "alt_conv")
    if name not in _DENOISER_OPTIONS:
        raise ValueError(f"unknown denoiser {name!r} in variant {spec.variant!r}; use alt_conv, self_conv or self_span")
    check_options(spec, _DENOISER_OPTIONS[name], f"{NAME} with denoiser {name}")
    hp = spec.hparams
    if name == "self_span":
        return denoisers.self_span(iters=int(hp["proj_steps"]))
    opt = projection_options(spec.options)
    tol = opt["projection_tol"]
    kw = {
        "steps": int(hp["proj_steps"]),
        "step_size": projection_step_size(hp["proj_step_size"]),
        "smoothing": float(hp["smoothing"]),
        "solver": spec.options.get("projection_solver", "auto"),
        "momentum": opt["projection_momentum"],
        "vertices": opt["vertices"],
        "clip_norm": float(hp["clip_norm"]),
        "coefficient_set": opt["coefficient_set"],
        "start": opt["projection_start"],
        "tol": None if tol is None else float(tol),
        "algorithm": spec.options.get("projection_algorithm", "fista"),
    }
    return denoisers.alt_conv(**kw) if name == "alt_conv" else denoisers.self_conv(**kw)


def run(data, spec: RunSpec) -> MethodResult:
    """Trains with LabelDP-Pro and reports test accuracy with the accounted eps."""
    from labeldp.methods.private_training import train_private

    if getattr(data, "kind", "image") == "tabular":  # 000 Table 7: per-user gradients, user-level AltConv
        from labeldp.ads.pipeline import run_ads_method

        return run_ads_method(data, spec, method=NAME)
    den = make_denoiser_for(spec)
    return train_private(data, spec, denoiser=den, desc=f"labeldp_pro[{den.name}] eps={spec.epsilon}")


def vmap_key(data, spec: RunSpec) -> str | None:
    """Runs of a sweep with equal keys train as one vmapped program (:func:`run_many`): the same
    denoiser (its projection settings and C) and everything but the learning rate; None for the
    per-user ads path and where the projection runs a Python-driven loop (the CPU's default)."""
    from labeldp.methods.private_training import vmap_group_key

    if getattr(data, "kind", "image") == "tabular":
        return None
    den = make_denoiser_for(spec)
    return None if den.host_loop() else vmap_group_key(spec, denoiser=den)


def run_many(data, specs: list[RunSpec]) -> list[MethodResult]:
    """Trains runs of one :func:`vmap_key` as one vmapped program (a sweep's accelerator path).

    Raises:
      ValueError: the denoiser's projection runs a Python-driven loop on this backend (the CPU).
    """
    from labeldp.methods.private_training import train_private_vmapped

    return train_private_vmapped(data, specs, denoisers=[make_denoiser_for(s) for s in specs])
