"""Gradient denoisers of LabelDP-Pro (000 Table 1, Sections 3.2-3.4, Appendix C).

A denoiser maps the privatized gradient ``g~`` of DP-SGD (000 Algorithm 1, line 5) to a
denoised gradient using only *features* (never labels): it projects ``g~`` onto the span or
the convex hull of the per-example per-class gradients

    G = [grad_theta l(theta, (x_i, kappa))]_{i in I, kappa in [K]}     (d x nK),

with ``l(theta, (x, kappa)) = -log softmax(f(theta, x))_kappa`` (cross-entropy). ``G`` is never
materialised: with ``L(theta) = [l(theta, (x_i, kappa))]_{i, kappa}`` (an (n, K) array), ``G^T``
is the Jacobian of ``L``, so ``G^T v`` is a Jacobian-vector product (forward mode) and ``G u``
a vector-Jacobian product (reverse mode), exactly as in 000 Appendix C. Each call linearizes
``L`` once (``jax.linearize``) and transposes the linear map (``jax.linear_transpose``), so an
iteration of the projection is two linear-map applications, with no new forward pass.

Two projections:

* :func:`span_projection` -- least-squares projection onto ``span(G)`` by conjugate gradients
  on the normal equations ``(G^T G) a = G^T g`` (in the numerically preferable CGLS form).
* :func:`convex_hull_projection` -- ``min_{alpha in simplex} ||G alpha - g||^2`` by projected
  gradient descent ``alpha <- Proj_simplex(alpha - 2 eta G^T (G alpha - g))`` (000 Section 3.2)
  with the sort-based simplex projection of Wang & Carreira-Perpinan (2013), followed by the
  coefficient smoothing ``alpha~ = lambda alpha + (1 - lambda) / (nK)`` of 000 Section 3.3; the
  output is ``G alpha~``.

Choices the paper leaves open (000 Appendix C gives only the two subroutines):

* initialisation ``alpha_0``: the uniform point ``1/(nK)`` of the simplex (``init=`` takes a
  warm start instead);
* the step size ``eta`` is used as given, *not* rescaled (000 Appendix D.2 searches
  ``eta in {0.01, 0.02, 0.05}`` and 100/200/500 steps); ``step_size="auto"`` instead uses
  ``1/L`` with ``L = 2 lambda_max(G^T G)`` estimated by power iteration (an option, not the
  paper's);
* ``momentum="nesterov"`` (FISTA with function-value restart, O'Donoghue & Candes 2015) is an
  option; the default is the paper's plain PGD.

Loops. 000 Appendix D.4 runs the iterations in ``jax.lax.fori_loop`` inside ``jit`` (GPU). On
XLA's CPU backend a while loop around a convolutional JVP/VJP is about 10x slower than the same
iterations unrolled (``/work/shared/MACHINE_NOTES.md``; re-measured by
``benchmarks/bench_step.py``), so every iterative routine takes ``loop="auto" | "fori" |
"python"``: ``fori`` is one jitted ``lax.fori_loop``/``while_loop``; ``python`` drives a jitted,
unrolled chunk of ``chunk`` iterations from a Python loop (the linearization is redone once per
chunk); ``auto`` is ``python`` on the CPU backend and ``fori`` elsewhere. Under an outer
``jax.jit`` trace the Python driver is impossible, so ``auto`` then means ``fori`` and
``python`` raises.

Solvers. ``solver="matrix_free"`` applies ``G`` and ``G^T`` as above: every iteration re-runs
the linearized network over the n examples. ``solver="jacobian"`` materialises ``G^T`` once per
call as an (nK, d) matrix (the per-example per-class gradients, one reverse pass per example and
class, the cost of about K per-example-gradient batches) and then each iteration is two dense
matrix-vector products; the iterates are the same up to floating-point rounding (tested). For a
convolutional network a matrix-vector product with ``G^T`` is far cheaper than a JVP through
the convolutions, so ``jacobian`` wins when the matrix fits in memory and more than about 40
iterations run (measured on the MNIST CNN on a CPU: ``benchmarks/bench_projection_solver.py``). ``solver="auto"`` picks ``jacobian``
when the matrix takes at most ``JACOBIAN_MAX_BYTES`` and at least ``JACOBIAN_MIN_STEPS``
iterations run, ``matrix_free`` otherwise. Materialising row by
row assumes ``f`` treats examples independently (no batch statistics), which DP-SGD's
per-example clipping assumes already. ``solver="gram"`` (the converged projection only,
:mod:`labeldp.denoisers.hull_gram`) goes one step further: it builds ``Q = G^T G`` (nK x nK) once
per call and iterates on the nK coefficients alone, with FISTA (the ``jacobian`` solver's iterates)
or pairwise Frank-Wolfe; ``auto`` never picks it, so runs already recorded with ``auto`` are
reproduced as they ran (``benchmarks/bench_hull_solvers.py`` times all of them side by side).

Masks. Padding rows of a Poisson batch (``mask == 0``) contribute no column to ``G``: for the
span their columns are zero, for the convex hull their coefficients are pinned to 0 (the
simplex, its uniform point and the smoothing are over the real rows only).

Denoisers (000 Table 1): :func:`noop`, :func:`self_span`, :func:`self_conv`, :func:`alt_conv`
build :class:`Denoiser` objects with one call signature; ``breaks_amplification`` is True for
SelfSpan/SelfConv (000 Section 3.4: their output depends on which examples were sampled, so the
accountant must not use amplification by subsampling).
"""

from labeldp.denoisers.classes import (
    DENOISERS,
    AltConv,
    Denoiser,
    NoOp,
    SelfConv,
    SelfSpan,
    UserSum,
    alt_conv,
    make_denoiser,
    noop,
    self_conv,
    self_span,
)
from labeldp.denoisers.hull import SimplexLSResult, convex_hull_projection, estimate_lipschitz, simplex_least_squares
from labeldp.denoisers.linear_maps import (
    JACOBIAN_MAX_BYTES,
    JACOBIAN_MIN_STEPS,
    SOLVERS,
    LogitsFn,
    SolverKind,
    tree_sqnorm,
    tree_vdot,
    jacobian_matrix,
    per_class_losses,
    resolve_loop,
    resolve_solver,
)
from labeldp.denoisers.simplex import project_simplex
from labeldp.denoisers.span import span_projection

__all__ = [
    "LogitsFn",
    "per_class_losses",
    "project_simplex",
    "span_projection",
    "convex_hull_projection",
    "simplex_least_squares",
    "SimplexLSResult",
    "estimate_lipschitz",
    "resolve_loop",
    "resolve_solver",
    "jacobian_matrix",
    "JACOBIAN_MAX_BYTES",
    "JACOBIAN_MIN_STEPS",
    "SolverKind",
    "SOLVERS",
    "Denoiser",
    "NoOp",
    "SelfSpan",
    "SelfConv",
    "AltConv",
    "UserSum",
    "noop",
    "self_span",
    "self_conv",
    "alt_conv",
    "make_denoiser",
    "DENOISERS",
]
