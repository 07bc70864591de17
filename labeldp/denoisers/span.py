"""Span projection (SELFSPAN, 000 Section 3.1): least squares onto ``span(G)`` by CGLS."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp

from labeldp.denoisers.linear_maps import (
    LogitsFn,
    LoopKind,
    PyTree,
    apply_gram,
    linearize_losses,
    LinearMaps,
    tree_axpy,
    tree_sqnorm,
    resolve_loop,
)


class _CGState(NamedTuple):
    a: jax.Array  # coefficients (n, K)
    r: PyTree  # residual g - G a
    s: jax.Array  # G^T r
    p: jax.Array  # search direction
    gamma: jax.Array  # ||s||^2
    k: jax.Array  # iterations done


def _cg_init(maps: LinearMaps, g: PyTree) -> _CGState:
    s = maps.gt(g)
    gamma = jnp.sum(s * s)
    return _CGState(a=jnp.zeros_like(s), r=g, s=s, p=s, gamma=gamma, k=jnp.zeros((), jnp.int32))


def _cg_iter(maps: LinearMaps, st: _CGState, threshold: jax.Array) -> _CGState:
    active = st.gamma > threshold
    q = maps.g(st.p)
    qq = tree_sqnorm(q)
    step = jnp.where(active & (qq > 0), st.gamma / jnp.where(qq > 0, qq, 1.0), 0.0)
    a = st.a + step * st.p
    r = tree_axpy(-step, q, st.r)
    s = maps.gt(r)
    gamma_new = jnp.sum(s * s)
    beta = jnp.where(st.gamma > 0, gamma_new / jnp.where(st.gamma > 0, st.gamma, 1.0), 0.0)
    p = s + beta * st.p
    keep = lambda new, old: jnp.where(active, new, old)
    return _CGState(
        a=a,
        r=r,
        s=keep(s, st.s),
        p=keep(p, st.p),
        gamma=keep(gamma_new, st.gamma),
        k=st.k + active.astype(jnp.int32),
    )


def _cg_threshold(gamma0: jax.Array, tol: float) -> jax.Array:
    return (tol * tol) * gamma0


@functools.partial(jax.jit, static_argnames=("f", "iters", "tol"))
def _span_fori(f, params, x, mask, g, iters, tol):
    maps = linearize_losses(f, params, x, mask)
    st = _cg_init(maps, g)
    thr = _cg_threshold(st.gamma, tol)
    st = jax.lax.while_loop(lambda s: (s.k < iters) & (s.gamma > thr), lambda s: _cg_iter(maps, s, thr), st)
    return maps.g(st.a), st.k, jnp.sqrt(st.gamma)


@functools.partial(jax.jit, static_argnames=("f",))
def _span_init(f, params, x, mask, g):
    return _cg_init(linearize_losses(f, params, x, mask), g)


@functools.partial(jax.jit, static_argnames=("f", "n_iters"))
def _span_chunk(f, params, x, mask, st, thr, n_iters):
    maps = linearize_losses(f, params, x, mask)
    for _ in range(n_iters):
        st = _cg_iter(maps, st, thr)
    return st


def span_projection(
    f: LogitsFn,
    params: PyTree,
    x: jax.Array,
    g: PyTree,
    *,
    mask: jax.Array | None = None,
    iters: int = 100,
    tol: float = 1e-6,
    loop: LoopKind = "auto",
    chunk: int = 10,
) -> PyTree:
    """Least-squares projection of ``g`` onto ``span{grad_theta l(theta, (x_i, kappa))}``.

    000 Table 1 (SelfSpan). Solves ``min_a ||G a - g||`` by conjugate gradients on the normal
    equations ``(G^T G) a = G^T g`` in the CGLS form (same iterates as CG on the normal
    equations, better rounding), with ``G^T v`` a JVP and ``G u`` a VJP of the linearized loss
    map (000 Appendix C); ``G`` is never materialised. Returns ``G a``.

    Args:
      f: logits function ``f(params, x) -> (n, K)`` (hashable).
      params: model parameters theta.
      x: inputs (n, ...), features only.
      g: target gradient, a pytree shaped like ``params``.
      mask: optional (n,) 0/1; masked rows contribute no column.
      iters: maximum CG iterations (exact convergence can take up to rank(G) <= nK).
      tol: stop when ``||G^T (g - G a)|| <= tol * ||G^T g||``.
      loop: ``"auto"``, ``"fori"`` (``lax.while_loop``) or ``"python"`` (jitted unrolled chunks
        of ``chunk`` iterations; the tolerance is checked between chunks).
      chunk: iterations per jitted chunk in ``python`` mode.

    Returns:
      The projection ``G a``, shaped like ``params``.
    """
    mode = resolve_loop(loop, params, x, g)
    mask = None if mask is None else jnp.asarray(mask, jnp.float32)
    if mode == "fori":
        return _span_fori(f, params, x, mask, g, iters=int(iters), tol=float(tol))[0]
    st = _span_init(f, params, x, mask, g)
    thr = _cg_threshold(st.gamma, tol)
    done = 0
    while done < iters:
        n = min(int(chunk), int(iters) - done)
        st = _span_chunk(f, params, x, mask, st, thr, n_iters=n)
        done += n
        if not bool(st.gamma > thr):
            break
    return apply_gram(f, params, x, mask, st.a)
