"""BCRF's scaling form in torch (``form="scaling"``, the default but for ``decode``): the iterate
keeps ``log q = log K + log v ⊕ log u`` with a fixed kernel ``K`` (:mod:`.transition_kernel`) and
one log scaling vector per node side, as Sinkhorn keeps ``diag(u) K diag(v)``. The unaries start
in the scalings, so ``K = exp(transitions/τ)`` holds the transitions alone: one (T, T) matrix
where they are shared. A projection is then two matrix products (one GEMM over the whole batch
for a shared kernel) and an O(N T) update of the scalings, its flows exact to rounding
(:mod:`.exactness`); the loss's value and gradient are read off the scalings and the flows, so
with shared transitions no (B, N-1, T, T) array is ever written (docs/derivations.md §3.12)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ...kernels.bcrf import Request, Solution
from ...kernels.bcrf_log_form import _cluster_shifts, _scaled
from ...kernels.bcrf_numerics import _floor, _padding
from .._scores import ArcTerms
from .._semiring import logsumexp
from ..ops import recorded
from . import compilation, run_state
from .exactness import _flows, _group_flows
from .numerics import _inner, _interleaved
from .transition_kernel import (
    _in_layout,
    _Kernel,
    _kernel,
    _tag_dim,
    _tags_first,
    _unused,
    _Vectors,
    _vectors,
    _with_transposes,
)

#: A scaling-form iterate, ``log q[i, a, b] = log K[i, a, b] + log_v[i, a] + log_u[i+1, b]``: the log
#: in-scalings ``log_u`` and out-scalings ``log_v`` of every node, stacked (``[:, 0, k] = log_u``,
#: ``[:, 1, k] = log_v`` of node ``2k + parity``) as the even nodes' (B, 2, ⌈N/2⌉, T) and the odd
#: nodes' (B, 2, ⌊N/2⌋, T), so that a projection reads and writes whole contiguous arrays; -inf
#: marks a dead node or tag. With a shared kernel the batch and the tags swap places, (T, 2,
#: ⌈N/2⌉, B) and (T, 2, ⌊N/2⌋, B) (:func:`_tags_first`): the kernel's products are then one
#: (T, T) × (T, P·B) matrix product of a view, and the reductions over the tags run along
#: contiguous rows of sequences, where over a last dim of 16–31 tags torch reduces float32 slowly
#: (derivations §3.12). The kernel is fixed, so the iterations carry the scalings alone.
Scalings = tuple[Tensor, Tensor]


def _scaled_initial(terms: ArcTerms, lengths: Tensor, temperature: float) -> tuple[_Kernel, Scalings]:
    """``log q = w/τ`` with every arc group normalised, in scaling form: the unaries in the
    scalings (the rows' less the group's log-sum-exp, ``log_v[i] = rows[i]/τ − log Z_i`` and
    ``log_u[i+1] = columns[i]/τ``), the transitions alone in the kernel; in the iterate's layout
    from the start (:data:`Scalings`)."""
    kernel = _kernel(terms.transitions, temperature)
    dim = _tag_dim(kernel)
    rows, columns = (_in_layout(kernel, _scaled(x, temperature)) for x in (terms.rows, terms.columns))
    edge = rows.new_zeros(rows.shape[0], 1, rows.shape[-1])
    unused = _unused(rows) + _in_layout(kernel, _padding(lengths, rows.shape[1], rows.dtype))
    log_norm = logsumexp(rows + _group_flows(kernel, _vectors(columns, dim), False, unused), dim=dim)
    log_u = torch.cat([edge, columns], dim=1)
    log_v = torch.cat([rows - log_norm.unsqueeze(dim), edge], dim=1)
    scalings = torch.stack([log_u, log_v], dim=1)  # (B, 2, N, T) or (T, 2, N, B)
    return kernel, (scalings[:, :, 0::2].contiguous(), scalings[:, :, 1::2].contiguous())


def _scaled_rows_and_columns(
    kernel: _Kernel, scalings: Scalings, lengths: Tensor
) -> tuple[_Vectors, _Vectors]:
    """The :class:`_Vectors` of the rows ``log v`` and columns ``log u`` of every arc group
    (B, N-1, T) of a scaling-form iterate on ``kernel``, in its layout ((T, N-1, B) where
    :func:`_tags_first`), -inf past each sequence's length."""
    log_u, log_v = _interleaved(*(x.transpose(1, 2) for x in scalings)).unbind(2)  # (B, N, T) or (T, N, B)
    padding = _in_layout(kernel, _padding(lengths, log_u.shape[1] - 1, log_u.dtype))
    dim = _tag_dim(kernel)
    return _vectors(log_v[:, :-1] - padding, dim), _vectors(log_u[:, 1:] - padding, dim)


def _scaled_marginals(kernel: _Kernel, lengths: Tensor, scalings: Scalings) -> Tensor:
    """q (B, N-1, T, T), zero on padding, of a scaling-form iterate: ``K ⊙ e^{s} ṽ ũᵀ``
    (:func:`_arc_gradient` with unit weights), two multiplications per arc in linear space where
    ``log q`` cost two additions, an ``exp`` and a mask, each writing a new (B, N-1, T, T) array."""
    rows, columns = _scaled_rows_and_columns(kernel, scalings, lengths)
    return _arc_gradient((kernel, rows, columns), rows.log.new_ones(len(lengths)), shared=False)


def _groups(scalings: Scalings, parity: int) -> int:
    """The number of arc groups of ``parity`` in a chain whose scalings are ``scalings``: one per
    odd node for the even groups, one less than the even nodes for the odd ones."""
    return scalings[1].shape[2] if parity == 0 else scalings[0].shape[2] - 1


def _in_clusters(lengths: Tensor, num_arcs: int, parity: int) -> Tensor:
    """(B, P): which nodes of ``parity`` (node ``2k + parity`` in column k) a cluster holds in each
    sequence: the inner nodes, ``1 ≤ p < len − 1``."""
    nodes = torch.arange(parity, num_arcs + 1, 2, device=lengths.device)
    return (nodes >= 1) & (nodes < (lengths - 1).unsqueeze(-1))


def _scaling_projection(kernel: _Kernel, lengths: Tensor, num_arcs: int, first: int):
    """The projection of :func:`_project` on a scaling-form iterate (a function of its log
    scalings): :func:`_projected` on the parity's nodes, compiled whole (:func:`compilation._run_compiled`)
    where the kernel is per position with at least ``FUSED_FROM`` entries a parity (laid out
    ``by_parity``) and vouched for, and autograd does not record (the Danskin loss,
    ``marginals``), but the linear state does not apply (:func:`_linear_start`) or its call runs
    again: the products and the ~25 operators over the (B, 2, P, T) scalings then take one kernel
    of a few loops."""
    parity, kernel = first % 2, _with_transposes(kernel)
    tags_first = _tags_first(kernel)
    active = _in_clusters(lengths, num_arcs, parity)  # (B, P)
    count, clusters = active.shape[1], len(range(first, num_arcs, 2))
    active = active.T.unsqueeze(0) if tags_first else active.unsqueeze(-1)  # (1, P, B) or (B, P, 1)
    active = active.unsqueeze(1)  # the side: (1, 1, P, B) or (B, 1, P, 1)
    dtype, num_tags = kernel.linear.dtype, kernel.linear.shape[-1]
    # 1 inside the clusters, in the shape of the scalings (a broadcast multiply is 3× slower)
    shape = (num_tags, 2, count, len(lengths)) if tags_first else (len(lengths), 2, count, num_tags)
    inside = active.to(dtype).expand(shape).contiguous()
    # +inf outside them (read by the exactness tests alone)
    outside = None if kernel.vouched else torch.where(active[:, 0], 0.0, math.inf).to(dtype)
    fused = kernel.vouched and kernel.by_parity  # a large per-position kernel, vouched for

    def project(scalings: Scalings) -> Scalings:
        if clusters == 0:
            return scalings
        if fused and not recorded(kernel.linear, *scalings):
            new = compilation._run_compiled(_projected, scalings, kernel, inside, outside, parity)
        else:
            new = _projected(scalings, kernel, inside, outside, parity)
        return (new, scalings[1]) if parity == 0 else (scalings[0], new)

    return project


def _projected(
    scalings: Scalings, kernel: _Kernel, inside: Tensor, outside: Tensor | None, parity: int
) -> Tensor:
    """The scalings of the nodes of ``parity`` (:data:`Scalings`) after their projection, given
    ``inside`` (1 for a node of a cluster, 0 elsewhere, in their shape) and ``outside`` (+inf for a
    node outside the clusters, 0 inside; ``None`` where the kernel is vouched for). Every size is
    read off the arrays, not a closure, so that once shapes vary a compilation serves them all.

    Node p's in-flow is ``u_p ⊙ (K_{p-1}ᵀ v_{p-1})`` and its out-flow ``v_p ⊙ (K_p u_{p+1})``: two
    batched matrix–vector products (:func:`_flows`, exact to rounding) over every group of a
    parity, then the shifts of §3.3 (:func:`_cluster_shifts`) move the log scalings of every node
    of the parity (0 outside the clusters), not the arcs: a node's log in-flow is its log
    in-scaling plus its product's, added in place into the node's rows (a node with no such arc
    group is outside the clusters). Node ``2k + parity`` is row k of its parity's scalings; its
    in-group ``p − 1`` is row ``k − 1 + parity`` of the other parity's groups and its out-group p
    row k of its own; its neighbours are rows ``k − 1 + parity`` and ``k + parity`` of the other
    parity's nodes."""
    other = 1 - parity
    tags_first, dim = _tags_first(kernel), _tag_dim(kernel)
    in_groups, out_groups = _groups(scalings, other), _groups(scalings, parity)
    first_in = 1 - parity  # the row of the node the other parity's first group flows into
    mine, theirs = scalings[parity], _vectors(scalings[other], dim)
    # +inf for the flows of dead tags and of nodes outside the clusters: nobody reads them
    unused = None if outside is None else _unused(mine[:, 0] + mine[:, 1]) + outside
    products = _flows(
        kernel,
        Request(
            other,
            theirs.rows(slice(0, in_groups), 1),
            True,
            None if unused is None else unused[:, first_in : first_in + in_groups],
            tags_first,
        ),
        Request(
            parity,
            theirs.rows(slice(parity, parity + out_groups), 0),
            False,
            None if unused is None else unused[:, :out_groups],
            tags_first,
        ),
    )
    flows = mine.clone()  # the nodes' log flows: their log scalings plus the products'
    flows[:, 0, first_in : first_in + in_groups].add_(products[0])
    flows[:, 1, :out_groups].add_(products[1])
    return mine + _cluster_shifts(flows, inside, dim)


def _scaled_solution(
    scalings: Scalings, kernel: _Kernel, terms: ArcTerms, lengths: Tensor, temperature: float
) -> Solution:
    """The :class:`Solution` of a scaling-form iterate, with no (B, N-1, T, T) array: with
    ``log q = log K + log v ⊕ log u`` and ``w/τ = transitions/τ + rows/τ ⊕ columns/τ``,
    ``Σ q (w/τ − log q) = Σ_g shift_g Σ q_g + <out flows, rows/τ − log v>``
    ``+ <in flows, columns/τ − log u>``."""
    rows, columns = _scaled_rows_and_columns(kernel, scalings, lengths)
    log_rows, log_columns = rows.log, columns.log
    out_flows = torch.exp(log_rows + _group_flows(kernel, columns, False, _unused(log_rows)))
    in_flows = torch.exp(log_columns + _group_flows(kernel, rows, True, _unused(log_columns)))
    row_gaps = _gaps(_in_layout(kernel, _scaled(terms.rows, temperature), contiguous=False), log_rows)
    column_gaps = _gaps(
        _in_layout(kernel, _scaled(terms.columns, temperature), contiguous=False), log_columns
    )
    tags, positions = _tag_dim(kernel), 0 if _tags_first(kernel) else -1
    value = (
        (kernel.shift * out_flows.sum(tags)).sum(positions)
        + _inner(out_flows, row_gaps, _tags_first(kernel))
        + _inner(in_flows, column_gaps, _tags_first(kernel))
    )
    value = torch.where(lengths == 1, logsumexp(terms.singles / temperature, dim=-1), value)
    out_flows, in_flows = (_in_layout(kernel, x, contiguous=False) for x in (out_flows, in_flows))
    return Solution(value, out_flows, in_flows, (kernel, rows, columns))


def _gaps(scores: Tensor, log_scalings: Tensor) -> Tensor:
    """``scores − log_scalings``, 0 where the scaling is -inf: a dead tag has no mass, and its gap
    is ``+inf`` or ``-inf − -inf``."""
    return torch.nan_to_num(scores - log_scalings, nan=0.0, posinf=0.0, neginf=0.0)


def _arc_gradient(arcs: Tensor | tuple[_Kernel, _Vectors, _Vectors], weights: Tensor, shared: bool) -> Tensor:
    """``Σ_b weights_b q_b`` over the batch (and over the arc groups if ``shared``): (T, T) or
    (B, N-1, T, T), given the ``arcs`` of a :class:`Solution`.

    In scaling form ``q = K ⊙ e^{s} ṽ ũᵀ`` with ṽ, ũ the rows' and columns' scalings over their
    largest and ``s`` the sum of those: a shared kernel's sum is one matrix product over the batch
    and the groups. Linear space loses only terms under ``e^{F/2}`` while ``s ≤ −F/2``; past that
    (a large scaling facing small kernel entries), and wherever the call is captured or traced
    (:func:`run_state.capturing`), q is summed in log space."""
    if isinstance(arcs, Tensor):
        weighted = weights[:, None, None, None] * arcs
        return weighted.sum((0, 1)) if shared else weighted
    kernel, rows, columns = arcs
    tags_first = _tags_first(kernel)
    log_scale = rows.shift + columns.shift  # (B, N-1, 1), or (1, N-1, B) tags first
    in_log_space = log_scale.numel() and (  # always where captured or traced: no read-back
        run_state.capturing(log_scale) or float(log_scale.detach().amax()) > -_floor(log_scale) / 2
    )
    if tags_first and (in_log_space or not shared):  # the per-arc formulas read (B, N-1, T) vectors
        rows, columns = (
            _Vectors(*(_in_layout(kernel, x, contiguous=False) for x in v)) for v in (rows, columns)
        )
        log_scale, tags_first = rows.shift + columns.shift, False
    if in_log_space:
        log_q = (kernel.log() + rows.log.unsqueeze(-1)).add_(columns.log.unsqueeze(-2))
        return _arc_gradient(torch.exp(log_q), weights, shared)
    row_weights = rows.linear * ((weights if tags_first else weights[:, None, None]) * torch.exp(log_scale))
    linear_columns = columns.linear
    if tags_first:  # shared: (T, (N-1)·B) × ((N-1)·B, T)
        return (row_weights.flatten(1) @ linear_columns.flatten(1).T) * kernel.linear
    if shared:
        return (row_weights.flatten(0, 1).T @ linear_columns.flatten(0, 1)) * kernel.linear
    if not kernel.by_parity:
        weighted = kernel.linear * row_weights.unsqueeze(-1)
    elif recorded(kernel.linear, row_weights):
        weighted = _interleaved(
            *(k * row_weights[:, p::2].unsqueeze(-1) for p, (k, _) in enumerate(kernel.parities))
        )
    else:  # each parity's block written into its groups of one fresh array
        weighted = kernel.linear.new_empty(kernel.linear.shape)
        for p, (k, _) in enumerate(kernel.parities):
            torch.mul(k, row_weights[:, p::2].unsqueeze(-1), out=weighted[:, p::2])
    if recorded(weighted, linear_columns):
        return weighted * linear_columns.unsqueeze(-2)  # the product's backward reads ``weighted``
    return weighted.mul_(linear_columns.unsqueeze(-2))  # in place: one (B, N-1, T, T) array, not two
