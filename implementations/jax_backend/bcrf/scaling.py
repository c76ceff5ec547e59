"""BCRF's scaling form in JAX (``form="scaling"``, the default but for ``decode``), as in the
torch backend: ``log q = log K + log v ⊕ log u`` with the unaries in the scalings and the
transitions alone in ``K``; a projection is two matrix products (:mod:`.exactness`) and an O(N T)
update of the scalings, and the loss's value and gradient are read off the scalings and the
flows."""

from __future__ import annotations

from typing import cast

import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from ...kernels.bcrf import Request, Solution, iteration
from ...kernels.bcrf_log_form import _cluster_shifts
from ...kernels.bcrf_numerics import _floor, _padding
from ...kernels.bcrf_options import first_clusters
from .._scores import ArcTerms
from .._semiring import logsumexp
from .exactness import _flows, _group_flows
from .transition_kernel import _Kernel, _kernel, _tags_first, _unused, _Vectors, _vectors

#: A scaling-form iterate, ``log q[i, a, b] = log K[i, a, b] + log_v[i, a] + log_u[i+1, b]``: the log
#: in-scalings ``log_u`` and out-scalings ``log_v`` of every node, -inf for a dead node or tag, each
#: held by parity: (B, 2, ⌈N/2⌉, T), node ``p`` of sequence ``b`` at ``[b, p % 2, p // 2]``
#: (:func:`_by_parity`), or with a shared kernel tags first and sequences last, (T, 2, ⌈N/2⌉, B),
#: node ``p`` at ``[:, p % 2, p // 2, b]`` (:func:`_tags_first`). By parity, a projection reads and
#: writes blocks (slices and in-place updates, no gather or scatter: faster than strided slices of
#: (B, N, T) arrays). Tags first, the shared kernel's products are one (T, T) × (T, P·B) matrix
#: product, and XLA's elementwise loops run along the batch: along a few tags they vectorise badly
#: on the CPU (derivations §3.12). Per-arc-group
#: kernels keep the tags last, where their batched products read the matrices fastest. The kernel
#: is fixed, so the iterations carry the scalings alone.
Scalings = tuple[Array, Array]


def _by_parity(x: Array, tags_first: bool) -> Array:
    """(B, N, T) node values held by parity, (B, 2, ⌈N/2⌉, T) or ``tags_first`` (T, 2, ⌈N/2⌉, B);
    an odd N's last slot is -inf."""
    batch, length, num_tags = x.shape
    x = jnp.pad(x, ((0, 0), (0, length % 2), (0, 0)), constant_values=-jnp.inf)
    x = x.reshape(batch, (length + 1) // 2, 2, num_tags)
    return x.transpose(3, 2, 1, 0) if tags_first else x.transpose(0, 2, 1, 3)


def _by_position(x: Array, length: int, tags_first: bool) -> Array:
    """The (B, N, T) node values of :func:`_by_parity`'s layout."""
    x = x.transpose(3, 2, 1, 0) if tags_first else x.transpose(0, 2, 1, 3)
    batch, half, _, num_tags = x.shape
    return x.reshape(batch, 2 * half, num_tags)[:, :length]


def _scaled_initial(terms: ArcTerms, lengths: Array, temperature: float) -> tuple[_Kernel, Scalings]:
    """``log q = w/τ`` with every arc group normalised, in scaling form: the unaries in the
    scalings (the rows' less the group's log-sum-exp), the transitions alone in the kernel."""
    kernel = _kernel(terms.transitions, temperature)
    edge = jnp.zeros((terms.rows.shape[0], 1, terms.rows.shape[-1]), terms.rows.dtype)
    rows, columns = terms.rows / temperature, terms.columns / temperature
    unused = _unused(rows) + _padding(lengths, rows.shape[1], rows.dtype)
    log_norm = logsumexp(rows + _group_flows(kernel, _vectors(columns), False, unused), axis=-1)
    log_u = jnp.concatenate([edge, columns], axis=1)
    log_v = jnp.concatenate([rows - log_norm[..., None], edge], axis=1)
    tags_first = _tags_first(kernel)
    return kernel, (_by_parity(log_u, tags_first), _by_parity(log_v, tags_first))


def _by_node(kernel: _Kernel, scalings: Scalings, num_arcs: int) -> Scalings:
    """The log scalings of every node (B, N, T) of a scaling-form iterate on ``kernel``."""
    return cast(Scalings, tuple(_by_position(x, num_arcs + 1, _tags_first(kernel)) for x in scalings))


def _scaled_log_q(kernel: _Kernel, num_arcs: int, scalings: Scalings) -> Array:
    """``log q`` (B, N-1, T, T) of a scaling-form iterate."""
    log_u, log_v = _by_node(kernel, scalings, num_arcs)
    return kernel.log + log_v[:, :-1][..., :, None] + log_u[:, 1:][..., None, :]


def _scaling_projection(kernel: _Kernel, lengths: Array, num_arcs: int, first: int):
    """The projection of :func:`_project` on a scaling-form iterate (a function of its scalings), as
    in the torch backend: the flows by two matrix products over every group of a parity
    (:func:`_flows`), then the shifts of §3.3 on the log scalings of the parity's clusters.

    The clusters are nodes ``first, first + 2, ...`` (parity ``first % 2``, rows ``first // 2, ...``
    of it); group ``g`` (of parity ``g % 2``) leaves node ``g`` and enters node ``g + 1``, so the
    groups into the clusters leave the other parity's rows ``0, 1, ...`` and the groups out of them
    enter its rows ``first % 2, ...``."""
    count = len(range(first, num_arcs, 2))
    parity, other = first % 2, 1 - first % 2
    nodes = slice(first // 2, first // 2 + count)  # rows of the clusters in their parity
    into, out_of = other, parity  # parity of the groups p - 1 and p
    positions = np.arange(first, first + 2 * count, 2)  # static
    tags_first = _tags_first(kernel)
    axis = 0 if tags_first else -1  # of the tags
    active = (lengths - 1)[:, None] > positions  # (B, P)
    active = active.T[None] if tags_first else active[..., None]  # (1, P, B) or (B, P, 1)
    outside = jnp.where(active, 0.0, jnp.inf)
    inside = active[:, None].astype(kernel.log.dtype)  # of the stacked flows
    groups_in = slice((first - 1) // 2, (first - 1) // 2 + count)  # of the parity's groups
    groups_out = slice(first // 2, first // 2 + count)
    in_groups, out_groups = len(range(into, num_arcs, 2)), len(range(out_of, num_arcs, 2))

    def project(scalings: Scalings) -> Scalings:
        if count == 0:
            return scalings
        log_u, log_v = scalings
        log_u_p, log_v_p = log_u[:, parity, nodes], log_v[:, parity, nodes]
        unused = _unused(log_u_p + log_v_p) + outside
        pad_in = in_groups - count - groups_in.start
        pad_out = out_groups - count - groups_out.start
        unused_in = jnp.pad(unused, ((0, 0), (groups_in.start, pad_in), (0, 0)), constant_values=jnp.inf)
        unused_out = jnp.pad(unused, ((0, 0), (groups_out.start, pad_out), (0, 0)), constant_values=jnp.inf)
        log_in, log_out = _flows(
            kernel,
            Request(into, _vectors(log_v[:, other, :in_groups], axis), True, unused_in, tags_first),
            Request(
                out_of,
                _vectors(log_u[:, other, parity : parity + out_groups], axis),
                False,
                unused_out,
                tags_first,
            ),
        )
        flows = jnp.stack([log_u_p + log_in[:, groups_in], log_v_p + log_out[:, groups_out]], 1)
        shifts = _cluster_shifts(flows, inside, axis)
        column_shift, row_shift = shifts[:, 0], shifts[:, 1]
        log_u = log_u.at[:, parity, nodes].set(log_u_p + column_shift)
        log_v = log_v.at[:, parity, nodes].set(log_v_p + row_shift)
        return log_u, log_v

    return project


def _scaling_step(kernel: _Kernel, lengths: Array, order: str, num_arcs: int):
    """One iteration on a scaling-form iterate: a projection onto each parity of inner clusters,
    in ``order``."""
    return iteration(
        [_scaling_projection(kernel, lengths, num_arcs, first) for first in first_clusters(order)]
    )


def _scaled_solution(
    scalings: Scalings, kernel: _Kernel, terms: ArcTerms, lengths: Array, temperature: float
) -> Solution:
    """The :class:`Solution` of a scaling-form iterate, with no (B, N-1, T, T) array (torch
    backend: ``Σ_g shift_g Σ q_g + <out flows, rows/τ − log v> + <in flows, columns/τ − log u>``)."""
    log_u, log_v = _by_node(kernel, scalings, terms.rows.shape[1])
    padding = _padding(lengths, terms.rows.shape[1], log_u.dtype)
    log_rows = log_v[:, :-1] - padding  # -inf past the length
    log_columns = log_u[:, 1:] - padding
    rows, columns = _vectors(log_rows), _vectors(log_columns)
    out_flows = jnp.exp(log_rows + _group_flows(kernel, columns, False, _unused(log_rows)))
    in_flows = jnp.exp(log_columns + _group_flows(kernel, rows, True, _unused(log_columns)))
    row_gaps = _gaps(terms.rows / temperature, log_rows)
    column_gaps = _gaps(terms.columns / temperature, log_columns)
    value = (
        (kernel.shift * out_flows.sum(-1)).sum(-1)
        + (out_flows * row_gaps).sum((1, 2))
        + (in_flows * column_gaps).sum((1, 2))
    )
    value = jnp.where(lengths == 1, logsumexp(terms.singles / temperature, axis=-1), value)
    return Solution(value, out_flows, in_flows, (kernel, rows, columns))


def _gaps(scores: Array, log_scalings: Array) -> Array:
    """``scores − log_scalings``, 0 where the scaling is -inf (a dead tag has no mass)."""
    return jnp.nan_to_num(scores - log_scalings, nan=0.0, posinf=0.0, neginf=0.0)


def _arc_gradient(arcs: Array | tuple[_Kernel, _Vectors, _Vectors], weights: Array, shared: bool) -> Array:
    """``Σ_b weights_b q_b`` over the batch (and over the arc groups if ``shared``): (T, T) or
    (B, N-1, T, T), as in the torch backend: in scaling form by products in linear space while
    the scalings' largest sum is at most ``−F/2``, else (``lax.cond``) in log space."""
    if not isinstance(arcs, tuple):
        weighted = weights[:, None, None, None] * arcs
        return weighted.sum((0, 1)) if shared else weighted
    kernel, rows, columns = arcs
    log_scale = rows.shift + columns.shift  # (B, N-1, 1)

    def linear() -> Array:
        weighted = rows.linear * (weights[:, None, None] * jnp.exp(log_scale))
        if shared:
            num_tags = weighted.shape[-1]
            return (weighted.reshape(-1, num_tags).T @ columns.linear.reshape(-1, num_tags)) * kernel.linear
        return kernel.linear * weighted[..., :, None] * columns.linear[..., None, :]

    def in_log_space() -> Array:
        log_q = kernel.log + rows.log[..., :, None] + columns.log[..., None, :]
        return _arc_gradient(jnp.exp(log_q), weights, shared)

    large = (log_scale > -_floor(log_scale) / 2).any()
    return lax.cond(large, in_log_space, linear)
