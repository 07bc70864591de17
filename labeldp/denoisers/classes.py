"""The denoisers of 000 Table 1 behind one call signature, and their factories."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

from labeldp.denoisers.hull import simplex_least_squares_with_g, smooth
from labeldp.denoisers.hull_converged import HullOptions, converged_hull_projection, resolve_hull_solver
from labeldp.denoisers.linear_maps import LoopKind, PyTree, SolverKind, check_solver, resolve_loop, resolve_solver
from labeldp.denoisers.span import span_projection


@dataclasses.dataclass(frozen=True)
class Denoiser:
    """Base class: a gradient denoiser of 000 Table 1.

    Call signature (common to all)::

        denoiser(noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None)
            -> (denoised_grad, info)

    where ``x``/``mask`` are the features and 0/1 mask of the current (padded) batch I^G and
    ``x_alt``/``alt_mask`` those of the alternative batch I^P (AltConv only); labels are never
    passed. ``info`` is a dict of scalar diagnostics.

    Attributes:
      name: ``noop``, ``self_span``, ``self_conv`` or ``alt_conv``.
      breaks_amplification: True when the output depends on which examples are in I^G, so
        accounting must not use amplification by subsampling (000 Section 3.4, Table 1).
      uses_alt_batch: True when the training loop must supply ``x_alt``.
    """

    name: str = dataclasses.field(init=False, default="base")
    breaks_amplification: bool = dataclasses.field(init=False, default=False)
    uses_alt_batch: bool = dataclasses.field(init=False, default=False)

    def host_loop(self, *trees: PyTree) -> bool:
        """True when this denoiser runs a Python-driven loop (cannot be inside a jit)."""
        return False

    def projection_solver(self, *, rows: int, k: int, params: PyTree) -> str | None:
        """The convex-hull solver this denoiser uses on ``rows`` examples of ``k`` classes
        (:func:`resolve_solver`), or None when it runs no convex-hull projection."""
        del rows, k, params
        return None

    @property
    def projection(self) -> str | None:
        """Which convex-hull projection runs, by name (the hull denoisers), else None."""
        return None

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class NoOp(Denoiser):
    """NOOP: returns the noisy gradient (plain DP-SGD)."""

    name: str = dataclasses.field(init=False, default="noop")

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        del logits_fn, params, x, mask, x_alt, alt_mask
        return noisy_grad, {}


@dataclasses.dataclass(frozen=True)
class SelfSpan(Denoiser):
    """SELFSPAN: projection onto the span of the batch's per-example per-class gradients.

    Attributes:
      iters, tol, loop, chunk: see :func:`span_projection`.
    """

    iters: int = 100
    tol: float = 1e-6
    loop: LoopKind = "auto"
    chunk: int = 10
    name: str = dataclasses.field(init=False, default="self_span")
    breaks_amplification: bool = dataclasses.field(init=False, default=True)

    def host_loop(self, *trees: PyTree) -> bool:
        return resolve_loop(self.loop, *trees) == "python"

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        del x_alt, alt_mask
        out = span_projection(
            logits_fn,
            params,
            x,
            noisy_grad,
            mask=mask,
            iters=self.iters,
            tol=self.tol,
            loop=self.loop,
            chunk=self.chunk,
        )
        return out, {}


@dataclasses.dataclass(frozen=True)
class _ConvBase(Denoiser):
    """The convex-hull denoisers' projection settings.

    The paper's form (000 Section 3.2 and Appendix C: raw vertices, one joint simplex, the
    uniform start, ``steps`` PGD iterations; :mod:`labeldp.denoisers.hull`) runs when
    ``vertices="raw"``, ``coefficient_set="joint"``, ``start="uniform"`` and ``tol=None`` (the
    defaults here). Any other choice runs the converged projection
    (:mod:`labeldp.denoisers.hull_converged`): FISTA with step 1/L to a Frank-Wolfe gap of
    ``tol * ||g||^2``, at most ``steps`` iterations (step ``step_size``, ``"auto"``: 1/L); it
    needs ``momentum="nesterov"``.
    """

    steps: int = 200
    step_size: float | str = 0.02
    smoothing: float = 0.75
    momentum: str = "none"
    loop: LoopKind = "auto"
    chunk: int = 10
    solver: SolverKind = "auto"
    vertices: str = "raw"
    clip_norm: float | None = None
    coefficient_set: str = "joint"
    start: str = "uniform"
    tol: float | None = None
    algorithm: str = "fista"

    def __post_init__(self):
        check_solver(self.solver)
        if not self.converged and self.algorithm != "fista":
            raise ValueError(
                f"projection algorithm {self.algorithm!r} needs the converged projection (set projection_tol); "
                "the paper form runs PGD"
            )
        if self.converged:
            if self.momentum != "nesterov":
                raise ValueError("the converged projection runs FISTA: set projection_momentum: nesterov")
            self.hull_options  # validates the options

    @property
    def converged(self) -> bool:
        """True when this is not the paper's form (see the class docstring)."""
        return (self.vertices, self.coefficient_set, self.start, self.tol) != ("raw", "joint", "uniform", None)

    @property
    def projection(self) -> str:
        """Which projection runs, by name (the ``projection`` option of ``labeldp_pro``):
        ``paper_pgd`` (000's form, plain PGD), ``paper_form_fista`` (000's form with momentum),
        ``converged`` (the converged projection's defaults) or ``converged_variant`` (the
        converged projection with other vertices / coefficients / start)."""
        if not self.converged:
            return "paper_pgd" if self.momentum == "none" else "paper_form_fista"
        defaults = (self.vertices, self.coefficient_set, self.start) == ("clipped", "joint", "predicted")
        return "converged" if defaults else "converged_variant"

    @property
    def hull_options(self) -> HullOptions:
        return HullOptions(
            vertices=self.vertices,
            clip_norm=self.clip_norm,
            coefficient_set=self.coefficient_set,
            start=self.start,
            tol=0.0 if self.tol is None else float(self.tol),
            max_steps=int(self.steps),
            smoothing=float(self.smoothing),
            solver=self.solver,
            algorithm=self.algorithm,
            chunk=int(self.chunk),
            step_size=None if self.step_size == "auto" else float(self.step_size),
        )

    def projection_solver(self, *, rows: int, k: int, params: PyTree) -> str | None:
        if self.converged:
            return resolve_hull_solver(self.solver, rows, k, params)
        return resolve_solver(self.solver, rows, k, params, self.steps)

    def host_loop(self, *trees: PyTree) -> bool:
        if self.converged:
            # the matrix-free converged solver (what ``auto`` picks for large batches) checks its gap
            # from Python; the jacobian and gram solvers iterate in a lax.while_loop, so with one of
            # them named explicitly the projection runs in-jit where the loop resolves to ``fori``
            # (a GPU, or loop="fori"), and a vmapped step runs it until every run has converged
            return self.solver not in ("jacobian", "gram") or resolve_loop(self.loop, *trees) == "python"
        return resolve_loop(self.loop, *trees) == "python"

    def _project(self, noisy_grad, logits_fn, params, x, mask):
        if self.converged:
            res = converged_hull_projection(logits_fn, params, x, noisy_grad, options=self.hull_options, mask=mask)
            out_norm = jnp.sqrt(sum(jnp.sum(v * v) for v in jax.tree_util.tree_leaves(res.projected)))
            return res.projected, {
                "projection_objective": res.objective,
                "projection_objective_init": res.objective_init,
                "alpha_max": jnp.max(res.alpha),
                "projection_gap_relative": res.gap_relative,
                "projection_iterations": res.iterations,
                "smoothing_bias_ratio": res.smoothing_bias_norm / jnp.maximum(out_norm, 1e-30),
            }
        res, apply_g = simplex_least_squares_with_g(
            logits_fn,
            params,
            x,
            noisy_grad,
            steps=self.steps,
            step_size=self.step_size,
            mask=mask,
            init=None,
            momentum=self.momentum,
            loop=self.loop,
            chunk=self.chunk,
            solver=self.solver,
        )
        m = None if mask is None else jnp.asarray(mask, jnp.float32)
        out = apply_g(smooth(res.alpha, float(self.smoothing), m))
        obj = res.objectives[-1] if self.steps > 0 else res.initial_objective
        return out, {
            "projection_objective": obj,
            "projection_objective_init": res.initial_objective,
            "alpha_max": jnp.max(res.alpha),
        }


@dataclasses.dataclass(frozen=True)
class SelfConv(_ConvBase):
    """SELFCONV: projection onto the convex hull of the batch's per-example per-class gradients.

    Attributes:
      steps, step_size, smoothing, momentum, loop, chunk, solver: see :func:`convex_hull_projection`.
    """

    name: str = dataclasses.field(init=False, default="self_conv")
    breaks_amplification: bool = dataclasses.field(init=False, default=True)

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        del x_alt, alt_mask
        return self._project(noisy_grad, logits_fn, params, x, mask)


@dataclasses.dataclass(frozen=True)
class AltConv(_ConvBase):
    """ALTCONV: projection onto the convex hull of an independent alternative batch I^P.

    The training loop samples I^P (``alt_batch_size`` examples, ``None`` = n1, independent of
    I^G) and passes its features as ``x_alt``; compatible with amplification (000 Section 3.4).

    Attributes:
      alt_batch_size: n2 (``None``: the expected batch size n1).
      steps, step_size, smoothing, momentum, loop, chunk, solver: see :func:`convex_hull_projection`.
    """

    alt_batch_size: int | None = None
    name: str = dataclasses.field(init=False, default="alt_conv")
    uses_alt_batch: bool = dataclasses.field(init=False, default=True)

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        del x, mask
        if x_alt is None:
            raise ValueError("alt_conv needs the alternative batch features x_alt")
        return self._project(noisy_grad, logits_fn, params, x_alt, alt_mask)


def noop() -> NoOp:
    """NOOP denoiser (DP-SGD)."""
    return NoOp()


def self_span(*, iters: int = 100, tol: float = 1e-6, loop: LoopKind = "auto", chunk: int = 10) -> SelfSpan:
    """SELFSPAN denoiser (000 Table 1); ``breaks_amplification=True``."""
    return SelfSpan(iters=iters, tol=tol, loop=loop, chunk=chunk)


def self_conv(
    *,
    steps: int = 200,
    step_size: float | str = 0.02,
    smoothing: float = 0.75,
    momentum: str = "none",
    loop: LoopKind = "auto",
    chunk: int = 10,
    solver: SolverKind = "auto",
    vertices: str = "raw",
    clip_norm: float | None = None,
    coefficient_set: str = "joint",
    start: str = "uniform",
    tol: float | None = None,
    algorithm: str = "fista",
) -> SelfConv:
    """SELFCONV denoiser (000 Table 1); ``breaks_amplification=True``. The defaults are the
    paper's form; see :class:`_ConvBase` for the converged projection's options."""
    return SelfConv(
        steps=steps,
        step_size=step_size,
        smoothing=smoothing,
        momentum=momentum,
        loop=loop,
        chunk=chunk,
        solver=solver,
        vertices=vertices,
        clip_norm=clip_norm,
        coefficient_set=coefficient_set,
        start=start,
        tol=tol,
        algorithm=algorithm,
    )


def alt_conv(
    *,
    steps: int = 200,
    step_size: float | str = 0.02,
    smoothing: float = 0.75,
    momentum: str = "none",
    alt_batch_size: int | None = None,
    loop: LoopKind = "auto",
    chunk: int = 10,
    solver: SolverKind = "auto",
    vertices: str = "raw",
    clip_norm: float | None = None,
    coefficient_set: str = "joint",
    start: str = "uniform",
    tol: float | None = None,
    algorithm: str = "fista",
) -> AltConv:
    """ALTCONV denoiser (000 Table 1, the paper's default); amplification-compatible. The
    defaults are the paper's form; see :class:`_ConvBase` for the converged projection's options."""
    return AltConv(
        steps=steps,
        step_size=step_size,
        smoothing=smoothing,
        momentum=momentum,
        alt_batch_size=alt_batch_size,
        loop=loop,
        chunk=chunk,
        solver=solver,
        vertices=vertices,
        clip_norm=clip_norm,
        coefficient_set=coefficient_set,
        start=start,
        tol=tol,
        algorithm=algorithm,
    )


DENOISERS: dict[str, Callable[..., Denoiser]] = {
    "noop": noop,
    "self_span": self_span,
    "self_conv": self_conv,
    "alt_conv": alt_conv,
}


def make_denoiser(name: str, **options: Any) -> Denoiser:
    """Builds a denoiser by name (``noop``, ``self_span``, ``self_conv``, ``alt_conv``)."""
    if name not in DENOISERS:
        raise ValueError(f"unknown denoiser {name!r}; known: {sorted(DENOISERS)}")
    return DENOISERS[name](**options)


@dataclasses.dataclass(frozen=True)
class UserSum(Denoiser):
    """A convex-hull denoiser for per-USER gradients (000 Section 6, Table 7), binary or K-class.

    A user's gradient is the sum of its k per-example gradients, so under every labelling of its
    k examples it lies in ``Z_u = sum_i conv{g_i(kappa)}`` (for K = 2 the zonotope of
    :mod:`labeldp.denoisers.zonotope`: the hull of its 2^k labelling sums). The noisy gradient
    estimates the mean over users, so the set to project on is ``(1/n2) sum_u Z_u`` over the
    alternative batch's n2 users, which is ``k`` times the per-example set
    ``(1/(n2 k)) sum_rows conv{g_r(kappa)}`` of the inner denoiser (``coefficient_set =
    "per_example"``) over the batch's ``n2 k`` rows. Hence ``P_{kS}(v) = k P_S(v / k)``.
    Vertices are the raw per-example gradients: the hull of CLIPPED per-user sums is not a sum
    of per-example sets (000 does not say which set it used; see labeldp.denoisers.zonotope).

    Attributes:
      inner: the per-example denoiser (``coefficient_set="per_example"``, ``vertices="raw"``).
      examples_per_user: k.
    """

    inner: Denoiser = None  # type: ignore[assignment]
    examples_per_user: int = 1
    name: str = dataclasses.field(init=False, default="user_sum")

    def __post_init__(self):
        inner = self.inner
        if not isinstance(inner, _ConvBase):
            raise ValueError("UserSum wraps a convex-hull denoiser (alt_conv or self_conv)")
        if (inner.coefficient_set, inner.vertices) != ("per_example", "raw"):
            raise ValueError(
                "a user-level projection sums per-example sets: the inner denoiser needs "
                "coefficient_set='per_example' and vertices='raw' (got "
                f"{inner.coefficient_set!r}, {inner.vertices!r})"
            )
        if int(self.examples_per_user) < 1:
            raise ValueError(f"examples_per_user must be >= 1, got {self.examples_per_user}")
        object.__setattr__(self, "name", f"{inner.name}_per_user")
        object.__setattr__(self, "breaks_amplification", inner.breaks_amplification)
        object.__setattr__(self, "uses_alt_batch", inner.uses_alt_batch)

    def host_loop(self, *trees: PyTree) -> bool:
        return self.inner.host_loop(*trees)

    @property
    def projection(self) -> str | None:
        return self.inner.projection

    def projection_solver(self, *, rows: int, k: int, params: PyTree) -> str | None:
        return self.inner.projection_solver(rows=rows, k=k, params=params)

    def __call__(self, noisy_grad, *, logits_fn, params, x, mask=None, x_alt=None, alt_mask=None):
        scale = float(self.examples_per_user)
        shrunk = jax.tree_util.tree_map(lambda v: v / scale, noisy_grad)
        out, info = self.inner(
            shrunk, logits_fn=logits_fn, params=params, x=x, mask=mask, x_alt=x_alt, alt_mask=alt_mask
        )
        return jax.tree_util.tree_map(lambda v: v * scale, out), info
