"""BCRF's exactness policy in JAX, as in the torch backend: the scaling form's flows are products
in linear space, exact to rounding above ``e^{F/2}``; where some product that is read is not, one
``lax.cond`` recomputes every flow of the projection in log space from its arcs."""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import Array, lax

from ...kernels.bcrf import Request
from ...kernels.bcrf_numerics import _floor, _safe_log
from .._semiring import logsumexp
from .numerics import _interleaved
from .transition_kernel import _Kernel, _product, _Vectors


def _flows(kernel: _Kernel, *requests: Request) -> tuple[Array, ...]:
    """The log flows (B, P, T) of each request, as in the torch backend: one product in linear
    space each, exact to rounding where it is above ``e^{F/2}``; if some product that is read is
    not, one ``lax.cond`` recomputes every request's flows in log space from the arcs (its outputs
    are O(N T): no arc array is copied through the conditional)."""
    products = [_product(kernel.parities[r.parity], r.x.linear, r.into, r.tags_first) for r in requests]
    half = math.exp(_floor(products[0]) / 2)
    # one reduction per product (``initial``: a batch or parity may hold none)
    read = [jnp.min(p + r.read(), initial=jnp.inf) for p, r in zip(products, requests, strict=True)]
    faint = jnp.stack(read).min() <= half
    return lax.cond(
        faint,
        lambda: tuple(_exact_flows(kernel, r.parity, r.x.log, r.into, r.tags_first) for r in requests),
        lambda: tuple(r.x.shift + _safe_log(p) for p, r in zip(products, requests, strict=True)),
    )


def _exact_flows(kernel: _Kernel, parity: int, log_x: Array, into: bool, tags_first: bool) -> Array:
    """The flows of :func:`_flows` as log-sum-exps over the T arcs of each group, in the layout
    of ``log_x`` (:class:`Request`)."""
    log = kernel.log if kernel.log.ndim == 2 else kernel.log[:, parity::2]
    if tags_first:  # arcs (T_from, T_to, P, B)
        log = log[..., None, None]
        return logsumexp(log + log_x[:, None], axis=0) if into else logsumexp(log + log_x[None], axis=1)
    if into:
        return logsumexp(log + log_x[..., :, None], axis=-2)
    return logsumexp(log + log_x[..., None, :], axis=-1)


def _group_flows(kernel: _Kernel, x: _Vectors, into: bool, unused: Array) -> Array:
    """The flows of :func:`_flows` through every arc group (B, N-1, T), given the vectors ``x``
    (B, N-1, T) for each: both parities' products, interleaved."""
    if kernel.log.ndim == 2:
        return _flows(kernel, Request(0, x, into, unused))[0]
    requests = [Request(p, x.rows(slice(p, None, 2)), into, unused[:, p::2]) for p in (0, 1)]
    return _interleaved(*_flows(kernel, *requests))
