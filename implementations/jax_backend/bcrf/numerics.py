"""BCRF's arithmetic that both forms of the iterations share, in JAX (as in the torch backend's
``bcrf/numerics.py``): the projection's shifts given the flows (docs/derivations.md §3.3), -inf
handling, the masks of padding, and what is read off arc marginals: node marginals and the value
(the convergence error and the records the forms pass on are shared with torch, in
:mod:`implementations.kernels.bcrf`)."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array

from .._scores import position_mask
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


def _floor(dtype: Any) -> float:
    """``F``: the log of the dtype's smallest normal number; kernel entries under ``e^F`` are flushed."""
    return math.log(float(jnp.finfo(dtype).tiny))


def _safe_log(x: Array) -> Array:
    """``log x`` with ``log 0 = -inf`` and a finite gradient everywhere (0 where ``x = 0``)."""
    positive = x > 0
    return jnp.where(positive, jnp.log(jnp.where(positive, x, 1.0)), -jnp.inf)


def _finite_or_zero(x: Array) -> Array:
    """``x`` with -inf replaced by 0; NaN and +inf are kept."""
    return jnp.nan_to_num(x, nan=jnp.nan, posinf=jnp.inf, neginf=0.0)


def _interleaved(even: Array, odd: Array) -> Array:
    """(B, P0 + P1, …): the rows of ``even`` (B, P0, …) at even and of ``odd`` (B, P1, …) at odd
    positions."""
    whole = jnp.empty((even.shape[0], even.shape[1] + odd.shape[1], *even.shape[2:]), even.dtype)
    return whole.at[:, 0::2].set(even).at[:, 1::2].set(odd)


def _group_mask(lengths: Array, num_arcs: int) -> Array:
    """(B, N-1, 1): the arc groups inside each sequence."""
    return position_mask(lengths - 1, num_arcs)[..., None]


def _padding(lengths: Array, num_arcs: int, dtype: Any) -> Array:
    """(B, N-1, 1): 0 for the arc groups inside each sequence, +inf past its length."""
    return jnp.where(_group_mask(lengths, num_arcs), 0.0, jnp.inf).astype(dtype)


def _arc_mask(lengths: Array, num_arcs: int) -> Array:
    return position_mask(lengths - 1, num_arcs)[:, :, None, None]


def _arc_marginals(log_q: Array, lengths: Array) -> Array:
    """q (B, N-1, T, T), zero on padding."""
    return jnp.where(_arc_mask(lengths, log_q.shape[1]), jnp.exp(log_q), 0.0)


def _unary(pairwise: Array, singles: Array, lengths: Array, temperature: float) -> Array:
    """Node marginals (B, N, T) read off the arc marginals; a softmax for length-1 sequences."""
    batch, num_arcs = pairwise.shape[:2]
    single = lengths == 1
    # tag i < len - 1 from the arcs leaving it; the last tag from the arcs entering it
    no_arc = jnp.zeros((batch, 1, singles.shape[-1]), pairwise.dtype)
    leaving = jnp.concatenate([pairwise.sum(-1), no_arc], axis=1)
    entering = leaving[:, 0]  # any (B, T) placeholder: only read where a sequence has arcs
    if num_arcs:
        last_arc = jnp.maximum(lengths - 2, 0)[:, None, None]
        entering = jnp.take_along_axis(pairwise.sum(-2), last_arc, axis=1)[:, 0]
    single_probs = jnp.exp(jax.nn.log_softmax(singles / temperature, axis=-1))
    last_tag = jnp.where(single[:, None], single_probs, entering)
    is_last = jnp.arange(num_arcs + 1) == (lengths - 1)[:, None]
    return jnp.where(is_last[..., None], last_tag[:, None], leaving)
