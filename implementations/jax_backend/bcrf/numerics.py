"""BCRF's arithmetic that both forms of the iterations share and that JAX does its own way (as
the torch backend's ``bcrf/numerics.py`` does torch's): the projection's shifts given the flows
(docs/derivations.md §3.3), and the rows of two parities interleaved. The arithmetic both
frameworks spell alike (-inf handling, the masks of padding, node marginals) is in
:mod:`implementations.kernels.bcrf_numerics`; the convergence error and the records the forms
pass on are in :mod:`implementations.kernels.bcrf`."""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array

from ...kernels.bcrf_numerics import _finite_or_zero
from .._semiring import logsumexp


def _cluster_shifts(log_in: Array, log_out: Array, active: Array, axis: int = -1) -> tuple[Array, Array]:
    """The projection of §3.3 given each node's log in- and out-flow (B, P, T), or with the tags
    along another ``axis``: the shifts of the log of its in-arcs and of its out-arcs, -inf for a
    dead tag, 0 outside the clusters (``active``, broadcast, marks them), as in the torch backend:
    each flow moves to the node's new throughput, ``log sqrt(in · out) − log Σ_tags sqrt(in · out)``
    (a dead tag's -inf flow taken as 0, a dead node's normaliser too)."""
    log_node = (log_in + log_out) / 2  # log sqrt(in · out), unnormalised
    throughput = log_node - _finite_or_zero(jnp.expand_dims(logsumexp(log_node, axis=axis), axis))
    return (
        jnp.where(active, throughput - _finite_or_zero(log_in), 0.0),
        jnp.where(active, throughput - _finite_or_zero(log_out), 0.0),
    )


def _interleaved(even: Array, odd: Array) -> Array:
    """(B, P0 + P1, …): the rows of ``even`` (B, P0, …) at even and of ``odd`` (B, P1, …) at odd
    positions."""
    whole = jnp.empty((even.shape[0], even.shape[1] + odd.shape[1], *even.shape[2:]), even.dtype)
    return whole.at[:, 0::2].set(even).at[:, 1::2].set(odd)
