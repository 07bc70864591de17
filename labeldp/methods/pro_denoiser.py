"""LabelDP-Pro's variant options and the denoiser they describe (000 Table 1; the projection of
000 Section 3.2 / Appendix C or the converged one): what :mod:`labeldp.methods.labeldp_pro` trains
with, and what the user-level ads path (:mod:`labeldp.tasks.ads`) wraps, in a module of its own so
neither imports the other. The options are documented in :mod:`labeldp.methods.labeldp_pro`.
"""

from __future__ import annotations

from labeldp.methods.base import SELECTION_OPTIONS, RunSpec, check_options
from labeldp import denoisers

__all__ = [
    "HULL_DEFAULTS",
    "OPTIONS",
    "PROJECTIONS",
    "make_denoiser_for",
    "projection_options",
    "projection_step_size",
]

METHOD = "labeldp_pro"  # the method these options belong to (for messages)
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
# options of the DP-SGD step every denoiser runs in (the denoiser's name, amplification, the clipping formulation and
# SGD ``momentum``, which acts after the denoiser: post-processing)
_STEP_OPTIONS = ("denoiser", "amplification", "clipping_formulation", "momentum")
OPTIONS = _STEP_OPTIONS + ("alt_batch_size",) + _HULL_OPTIONS + SELECTION_OPTIONS
_DENOISER_OPTIONS = {  # the options each denoiser uses; any other is refused, not ignored
    "alt_conv": OPTIONS,
    "self_conv": _STEP_OPTIONS + _HULL_OPTIONS + SELECTION_OPTIONS,
    "self_span": _STEP_OPTIONS + SELECTION_OPTIONS,
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
    name = spec.options.get("denoiser", "alt_conv")
    if name not in _DENOISER_OPTIONS:
        raise ValueError(f"unknown denoiser {name!r} in variant {spec.variant!r}; use alt_conv, self_conv or self_span")
    check_options(spec, _DENOISER_OPTIONS[name], f"{METHOD} with denoiser {name}")
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
