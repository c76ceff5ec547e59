"""BCRF's log form in JAX (``form="log"``): the iterate is ``log q`` itself (B, N-1, T, T), every
projection reads and writes every arc."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import Array

from ...kernels.bcrf import Solution
from ...kernels.bcrf_numerics import _arc_marginals
from .._semiring import logsumexp
from .numerics import _cluster_shifts


def _project(log_q: Array, lengths: Array, first: int) -> Array:
    """KL projection onto the clusters at positions ``first, first + 2, ...`` (one parity).

    Cluster p reads arc group p - 1 (into it) and p (out of it); clusters of one parity touch
    disjoint groups, so they are projected all at once. The projection rescales the columns of
    group p - 1 and the rows of group p, so it is one broadcast add of a column shift and a row
    shift per group (-inf for a dead node). Clusters with ``p > len - 2`` are skipped.
    """
    batch, num_arcs, num_tags, _ = log_q.shape
    count = len(range(first, num_arcs, 2))
    if count == 0:
        return log_q
    positions = np.arange(first, first + 2 * count, 2)  # static
    into = slice(first - 1, first - 1 + 2 * count, 2)  # groups p - 1
    out_of = slice(first, first + 2 * count, 2)  # groups p
    log_in = logsumexp(log_q[:, into], axis=-2)  # (B, P, T) in-flow of each node
    log_out = logsumexp(log_q[:, out_of], axis=-1)  # (B, P, T) out-flow of each node
    active = ((lengths - 1)[:, None] > positions)[..., None]  # (B, P, 1)
    column_shift, row_shift = _cluster_shifts(log_in, log_out, active)
    columns = jnp.zeros((batch, num_arcs, num_tags), log_q.dtype).at[:, positions - 1].set(column_shift)
    rows = jnp.zeros((batch, num_arcs, num_tags), log_q.dtype).at[:, positions].set(row_shift)
    return log_q + (rows[..., :, None] + columns[..., None, :])


def _initial(weights: Array, temperature: float) -> Array:
    """``log q`` before the first projection: ``w/τ`` with every arc group normalised."""
    log_q = weights / temperature
    batch, num_arcs, num_tags, _ = log_q.shape
    return log_q - logsumexp(log_q.reshape(batch, num_arcs, num_tags * num_tags), axis=-1)[:, :, None, None]


def _value(
    log_q: Array, pairwise: Array, weights: Array, singles: Array, lengths: Array, temperature: float
) -> Array:
    """``B_Y(w/τ) = Σ q (w/τ − log q)`` (B,) at the iterate; arcs with q = 0 contribute 0 (guarded
    before the product); a length-1 sequence's is the log-sum-exp of its tag scores."""
    gap = jnp.where(pairwise > 0, weights / temperature - log_q, 0.0)  # q > 0: a live arc
    value = (pairwise * gap).sum((1, 2, 3))
    return jnp.where(lengths == 1, logsumexp(singles / temperature, axis=-1), value)


def _log_solution(
    log_q: Array, weights: Array, singles: Array, lengths: Array, temperature: float
) -> Solution:
    """The :class:`Solution` of a log-form iterate (``weights``: the arcs w)."""
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    return Solution(value, pairwise.sum(-1), pairwise.sum(-2), pairwise)
