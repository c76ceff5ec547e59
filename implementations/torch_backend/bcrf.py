"""Bregman CRF (Corro, Lacroix & Le Roux, 2025): entropy of the transition marginals, solved by
iterative Bregman projections (IBP) whose depth does not grow with N.

``q = argmax_{q ∈ conv(Y)} <q, w/τ> + H(q)`` is approached by alternating KL projections onto
C_odd and C_even (the paper's 1-indexed inner clusters); each projection resets every node's
throughput to the normalised geometric mean of its in- and out-flow (docs/derivations.md §3.3). One
*iteration* is one projection onto C_odd then one onto C_even (``order="odd-even"``). A node with
no in- or out-mass is killed (``alive``) so -inf never becomes NaN, and clusters past a sequence's
length are skipped, so padding never changes a result.

Two forms compute the same iterates (docs/derivations.md §3.12). ``form="log"`` updates ``log q``
itself: every projection reads and writes every arc, with an ``exp`` per arc. ``form="scaling"``
(the default but for ``decode``) keeps ``log q = log K + log v ⊕ log u`` with a fixed kernel ``K``
and one log scaling vector per node side, as Sinkhorn keeps ``diag(u) K diag(v)``: a projection is
two batched matrix–vector products and an O(N T) update of the scalings. A flow the linear
products cannot vouch for (mass in entries under ``e^{F/2}``) is recomputed in log space from its
arcs, so every flow the projection sees is exact to rounding; the scalings are absorbed into the
kernel once they drift far, which keeps such recomputations rare and float32 rounding small.

Lengths 1 and 2 have no inner cluster: length 1 is a softmax over tags, length 2 a softmax over
tag pairs (every arc group is normalised before the first projection, which leaves the iterates
of longer sequences unchanged because they are invariant to per-group shifts).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..solver import SolverOutput
from ._fixed_point import iterate, iterate_with_errors
from ._scores import arc_weights, gold_score, mask_emissions, position_mask
from ._semiring import logsumexp
from ._tokens import argmax_tags


def _first_clusters(order: str) -> tuple[int, int]:
    """0-indexed position of the first inner cluster of each half-iteration, in order.

    Paper cluster k (1-indexed) is position k - 1: C_odd = {3, 5, ...} starts at position 2,
    C_even = {2, 4, ...} at position 1.
    """
    return (2, 1) if order == "odd-even" else (1, 2)


def _cluster_shifts(log_in: Tensor, log_out: Tensor, active: Tensor) -> tuple[Tensor, Tensor]:
    """The projection of §3.3 given each node's log in- and out-flow (B, P, T): the shift of the
    log of its in-arcs (``column``) and out-arcs (``row``), -inf for a dead node and 0 outside the
    ``active`` (B, P, 1) clusters."""
    log_node = (log_in + log_out) / 2  # log sqrt(in · out): the node's new throughput, unnormalised
    log_norm = logsumexp(log_node, dim=-1).unsqueeze(-1)
    alive = torch.isfinite(log_node)
    half_gap = torch.where(alive, (log_out - log_in) / 2, 0.0)
    dead = active & ~alive
    column_shift = torch.where(dead, -torch.inf, torch.where(active, half_gap - log_norm, 0.0))
    row_shift = torch.where(dead, -torch.inf, torch.where(active, -half_gap - log_norm, 0.0))
    return column_shift, row_shift


def _project(log_q: Tensor, lengths: Tensor, first: int) -> Tensor:
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
    positions = torch.arange(first, first + 2 * count, 2, device=log_q.device)
    into = slice(first - 1, first - 1 + 2 * count, 2)  # groups p - 1
    out_of = slice(first, first + 2 * count, 2)  # groups p
    log_in = logsumexp(log_q[:, into], dim=-2)  # (B, P, T) in-flow of each node
    log_out = logsumexp(log_q[:, out_of], dim=-1)  # (B, P, T) out-flow of each node
    active = (positions < (lengths - 1).unsqueeze(-1)).unsqueeze(-1)  # (B, P, 1)
    column_shift, row_shift = _cluster_shifts(log_in, log_out, active)
    columns = log_q.new_zeros(batch, num_arcs, num_tags).index_copy(1, positions - 1, column_shift)
    rows = log_q.new_zeros(batch, num_arcs, num_tags).index_copy(1, positions, row_shift)
    return log_q + (rows.unsqueeze(-1) + columns.unsqueeze(-2))


def _scaled(weights: Tensor, temperature: float) -> Tensor:
    """``w/τ``: ``weights`` themselves at τ = 1 (no copy of the arcs)."""
    return weights if temperature == 1 else weights / temperature


def _initial(weights: Tensor, temperature: float) -> Tensor:
    """``log q`` before the first projection: ``w/τ`` with every arc group normalised."""
    log_q = _scaled(weights, temperature)
    return log_q - logsumexp(log_q.flatten(2), dim=-1)[:, :, None, None]


def _step(lengths: Tensor, order: str, num_arcs: int, form: str):
    """One iteration: a projection onto each parity of inner clusters, in ``order``, on ``log q``
    (the log form) or on a scaling-form state."""
    if form == "log":
        projections = [partial(_project, lengths=lengths, first=first) for first in _first_clusters(order)]
    else:
        projections = [_scaling_projection(lengths, num_arcs, first) for first in _first_clusters(order)]

    def step(state: Any) -> Any:
        for project in projections:
            state = project(state)
        return state

    return step


def _error(lengths: Tensor):
    """The convergence error of an iterate: its constraint violation (B,)."""
    return lambda log_q, _: _violation(_arc_marginals(log_q, lengths), lengths)


class _Scaled(NamedTuple):
    """An IBP iterate in scaling form:
    ``log q[i, a, b] = log_kernel[i, a, b] + log_v[i, a] + log_u[i+1, b]``.

    ``kernels`` holds ``exp(log_kernel)`` of the even and the odd arc groups, ``transposed`` the same
    matrices transposed, each contiguous, so that either product of a projection reads contiguous
    memory in the layout its fastest routine wants (:func:`_product`); entries below the dtype's
    smallest normal number are flushed to 0 (subnormals are slow). ``faint`` marks, per group, the
    columns and the rows that hold a finite entry under ``e^{F/2}``, whose products may underflow
    (:func:`_scaled_flows`). ``log_u`` (B, N, T) scales the in-arcs of each node, ``log_v``
    (B, N, T) its out-arcs; -inf marks a dead node."""

    log_kernel: Tensor  # (B, N-1, T, T)
    kernels: tuple[Tensor, Tensor]  # (B, ⌈(N-1)/2⌉, T, T) groups 0, 2, ...; (B, ⌊(N-1)/2⌋, T, T) 1, 3, ...
    transposed: tuple[Tensor, Tensor]  # their transposes, likewise
    faint: tuple[Tensor, Tensor]  # (B, N-1, T) columns, (B, N-1, T) rows
    log_u: Tensor  # (B, N, T)
    log_v: Tensor  # (B, N, T)


def _floor(dtype: torch.dtype) -> float:
    """``F``: the log of the dtype's smallest normal number; kernel entries under ``e^F`` are flushed."""
    return math.log(torch.finfo(dtype).tiny)


def _finite_or_zero(x: Tensor) -> Tensor:
    """``x`` with -inf replaced by 0 (and a zero gradient there); NaN and +inf are kept."""
    return torch.nan_to_num(x, nan=math.nan, posinf=math.inf, neginf=0.0)


def _safe_log(x: Tensor) -> Tensor:
    """``log x`` with ``log 0 = -inf`` and a finite gradient everywhere (0 where ``x = 0``)."""
    positive = x > 0
    return torch.where(positive, torch.log(torch.where(positive, x, 1.0)), -torch.inf)


def _inner_nodes(lengths: Tensor, length: int) -> Tensor:
    """(B, N, 1): nodes 1 .. len - 2, the ones a projection can kill."""
    positions = torch.arange(length, device=lengths.device)
    return ((positions >= 1) & (positions < (lengths - 1).unsqueeze(-1))).unsqueeze(-1)


def _absorbed(log_kernel: Tensor, lengths: Tensor, alive: Tensor | None = None) -> _Scaled:
    """The scaling form of ``log q = log_kernel`` (unit scalings): the kernel, and -inf log
    scalings for the dead nodes: ``alive`` (B, N, T) where the caller knows them, else every inner
    node whose in- and out-arcs are all -inf (as the log form leaves a node it killed; one with
    only one side -inf is killed by its next projection)."""
    floor = _floor(log_kernel.dtype)
    kernel = torch.threshold(torch.exp(log_kernel), torch.finfo(log_kernel.dtype).tiny, 0.0)
    faint = _faint(log_kernel, floor / 2)
    if alive is None:
        # a side with a finite arc has a kept entry (a positive sum) or a faint one
        batch, num_arcs, num_tags, _ = log_kernel.shape
        edge = faint[0].new_ones(batch, 1, num_tags)
        has_in = torch.cat([edge, (kernel.sum(-2) > 0) | faint[0]], dim=1)  # (B, N, T)
        has_out = torch.cat([(kernel.sum(-1) > 0) | faint[1], edge], dim=1)
        alive = has_in | has_out | ~_inner_nodes(lengths, num_arcs + 1)
    log_scale = torch.where(alive, 0.0, -torch.inf).to(log_kernel.dtype)
    kernels = tuple(kernel[:, parity::2].contiguous() for parity in (0, 1))
    transposed = tuple(part.transpose(-1, -2).contiguous() for part in kernels)
    return _Scaled(log_kernel, kernels, transposed, faint, log_scale, log_scale)


def _faint(log_kernel: Tensor, half: float) -> tuple[Tensor, Tensor]:
    """The columns and the rows (B, N-1, T) of each arc group that hold a finite entry ``≤ half``.
    Mostly there is none, which one reduction shows (the smallest entry, once -inf is set aside)."""
    none = log_kernel.new_zeros(log_kernel.shape[:-1], dtype=torch.bool)
    if log_kernel.numel() == 0 or float(log_kernel.amin()) > half:  # no -inf, nothing faint
        return none, none
    finite = torch.nan_to_num(log_kernel, nan=math.nan, posinf=math.inf, neginf=math.inf)
    if float(finite.amin()) > half:
        return none, none
    faint = finite <= half
    return faint.any(-2), faint.any(-1)


def _scaled_log_q(state: _Scaled) -> Tensor:
    """``log q`` (B, N-1, T, T) of a scaling-form iterate (a ``_Scaled`` or a plain tuple)."""
    log_kernel, *_, log_u, log_v = state
    # in place on the first sum's fresh result (an addition saves nothing for autograd)
    return (log_kernel + log_v[:, :-1].unsqueeze(-1)).add_(log_u[:, 1:].unsqueeze(-2))


#: From this many tags on, a batch of matrix–vector products ``M x`` is faster as row vector
#: times ``Mᵀ`` (one thread, MKL: 23–57 GB/s against 7–8 for ``bmm`` at T = 32–128; ``bmm`` wins
#: below, 11–16 GB/s against 6 at T = 8–17).
ROW_VECTOR_FROM = 32


def _product(matrices: Tensor, transposed: Tensor, vectors: Tensor) -> Tensor:
    """``M_g x_g`` (B, P, T) for every matrix of ``matrices`` (B, P, T, T), given ``transposed``,
    the same matrices transposed and contiguous; ``vectors`` (B, P, T)."""
    vectors = vectors.unsqueeze(-2)  # (B, P, 1, T)
    if matrices.shape[-1] >= ROW_VECTOR_FROM:
        return torch.matmul(vectors, transposed).squeeze(-2)
    return torch.matmul(matrices, vectors.transpose(-1, -2)).squeeze(-1)


def _shift(log_x: Tensor) -> Tensor:
    """``max log x`` over the last dim, kept (0 for an all -inf row: a dead position)."""
    return _finite_or_zero(log_x.amax(-1, keepdim=True))


def _scaled_flows(matrices: Tensor, transposed: Tensor, log_x: Tensor) -> tuple[Tensor, Tensor]:
    """``log (M_g e^{x_g})`` (B, P, T) by one product in linear space, stabilised by the largest
    ``x`` of each group, and the product itself (for :func:`_vouched`). ``log_x`` (B, ≥P, T): the
    first P are used."""
    log_x = log_x[:, : matrices.shape[1]]
    shift = _shift(log_x)
    product = _product(matrices, transposed, torch.exp(log_x - shift))
    return shift + _safe_log(product), product


def _vouched(product: Tensor, log_x: Tensor, faint: Tensor) -> Tensor:
    """(B, P, T): where a product of :func:`_scaled_flows` (of ``log_x``, (B, ≥P, T)) is exact to
    rounding. Every ``M`` entry and every ``e^{x − max}`` is at most 1, and a term can underflow
    (be flushed, or vanish in the product) only if a factor is under ``e^{F/2}``, so at most
    ``2T e^F`` is lost: the value is exact where the product is above ``e^{F/2}``, or where no
    factor is that faint (``faint``: the rows of ``M`` with a finite entry under ``e^{F/2}``,
    (B, ≥P, T); a dead node's ``x`` is -inf and contributes nothing)."""
    groups = product.shape[1]
    half = _floor(product.dtype) / 2
    log_x = log_x[:, :groups]
    faint_x = (log_x - _shift(log_x) <= half) & (log_x > -torch.inf)
    return (product > math.exp(half)) | (~faint[:, :groups] & ~faint_x.any(-1, keepdim=True))


def _exact_flows(
    log_kernel: Tensor, neighbours: Tensor, where: tuple[Tensor, ...], groups: Tensor, transpose: bool
) -> Tensor:
    """At each (b, k, t) of ``where``, with g = ``groups[k]`` and x = ``neighbours[b, k]``:
    ``log Σ_i exp(log_kernel[b, g, i, t] + x_i)`` (``transpose``: the flow into tag t) or
    ``log Σ_j exp(log_kernel[b, g, t, j] + x_j)`` (out of tag t); a log-sum-exp over T arcs each."""
    batch, cluster, tag = where
    group = groups[cluster]
    arcs = log_kernel[batch, group, :, tag] if transpose else log_kernel[batch, group, tag, :]
    return logsumexp(arcs + neighbours[batch, cluster], dim=-1)


def _scaling_projection(lengths: Tensor, num_arcs: int, first: int):
    """The projection of :func:`_project` on a scaling-form iterate (a function of the state).

    Node p's in-flow is ``u_p ⊙ (K_{p-1}ᵀ v_{p-1})`` and its out-flow ``v_p ⊙ (K_p u_{p+1})``: two
    batched matrix–vector products (:func:`_scaled_flows`). A flow the products cannot vouch for
    (:func:`_vouched`: a product under ``e^{F/2}`` with a faint factor) is recomputed exactly in log
    space from its T arcs (:func:`_exact_flows`), so every flow is exact to rounding; the shifts of
    §3.3 (:func:`_cluster_shifts`) then move the log scalings, not the arcs. Once a log scaling
    leaves ``[F/4, −F/4]`` the scalings are absorbed into the kernel: exactness never depends on
    it, but a kernel far from q leaves more flows to recompute, and float32 rounds a sum of large
    logs."""
    count = len(range(first, num_arcs, 2))
    nodes = slice(first, first + 2 * count, 2)
    into, out_of = (first - 1) % 2, first % 2  # parity of the groups p - 1 and p
    positions = torch.arange(first, first + 2 * count, 2, device=lengths.device)
    active = (positions < (lengths - 1).unsqueeze(-1)).unsqueeze(-1)  # (B, P, 1)
    groups_in = slice((first - 1) // 2, (first - 1) // 2 + count)  # of the parity's groups
    groups_out = slice(first // 2, first // 2 + count)

    def project(state: _Scaled) -> _Scaled:
        if count == 0:
            return state
        log_kernel, kernels, transposed, faint, log_u, log_v = state
        # K_gᵀ v_g into node g + 1, and K_g u_{g+1} out of node g, over every group of the parity
        # (whole arrays: a slice would be copied), then the clusters'
        log_in, in_product = _scaled_flows(transposed[into], kernels[into], log_v[:, into::2])
        log_out, out_product = _scaled_flows(kernels[out_of], transposed[out_of], log_u[:, out_of + 1 :: 2])
        log_in, log_out = log_in[:, groups_in], log_out[:, groups_out]
        log_u_p, log_v_p = log_u[:, nodes], log_v[:, nodes]
        live = active & (log_u_p > -torch.inf) & (log_v_p > -torch.inf)
        half = math.exp(_floor(log_u.dtype) / 2)
        if bool((live & ~((in_product[:, groups_in] > half) & (out_product[:, groups_out] > half))).any()):
            # some product is faint: recompute from the arcs each flow it cannot vouch for
            redo_in = live & ~_vouched(in_product, log_v[:, into::2], faint[0][:, into::2])[:, groups_in]
            redo_out = (
                live
                & ~_vouched(out_product, log_u[:, out_of + 1 :: 2], faint[1][:, out_of::2])[:, groups_out]
            )
            if bool(redo_in.any()):
                where = redo_in.nonzero(as_tuple=True)
                exact = _exact_flows(log_kernel, log_v[:, positions - 1], where, positions - 1, True)
                log_in = log_in.index_put(where, exact)
            if bool(redo_out.any()):
                where = redo_out.nonzero(as_tuple=True)
                exact = _exact_flows(log_kernel, log_u[:, positions + 1], where, positions, False)
                log_out = log_out.index_put(where, exact)
        column, row = _cluster_shifts(log_u_p + log_in, log_v_p + log_out, active)
        new = torch.stack([log_u_p + column, log_v_p + row])
        log_u, log_v = log_u.clone(), log_v.clone()
        log_u[:, nodes], log_v[:, nodes] = new
        low, high = _finite_or_zero(new).flatten().aminmax() if new.numel() else (0, 0)
        if max(-float(low), float(high)) > -_floor(new.dtype) / 4:
            log_q = _scaled_log_q((log_kernel, kernels, transposed, faint, log_u, log_v))
            return _absorbed(log_q, lengths, (log_u > -torch.inf) & (log_v > -torch.inf))
        return _Scaled(log_kernel, kernels, transposed, faint, log_u, log_v)

    return project


def _solver(weights: Tensor, lengths: Tensor, temperature: float, order: str, form: str):
    """``(initial state, step, error, log q of a state)`` of IBP in ``form``."""
    initial = _initial(weights, temperature)
    step, error = _step(lengths, order, initial.shape[1], form), _error(lengths)
    if form == "log":
        return initial, step, error, lambda log_q: log_q
    return (
        _absorbed(initial, lengths),
        step,
        lambda state, _: error(_scaled_log_q(state), None),
        _scaled_log_q,
    )


def _iterate(
    weights: Tensor,
    lengths: Tensor,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
) -> Tensor:
    """Log arc marginals ``log q`` (B, N-1, T, T) after ``iterations`` pairs of projections."""
    initial, step, error, log_q = _solver(weights, lengths, temperature, order, form)
    return log_q(iterate(step, initial, iterations, tolerance, error))


def _arc_mask(lengths: Tensor, num_arcs: int) -> Tensor:
    return position_mask(lengths - 1, num_arcs)[:, :, None, None]


def _arc_marginals(log_q: Tensor, lengths: Tensor) -> Tensor:
    """q (B, N-1, T, T), zero on padding."""
    return torch.exp(log_q) * _arc_mask(lengths, log_q.shape[1])  # log q is never +inf or NaN


def _unary(pairwise: Tensor, singles: Tensor, lengths: Tensor, temperature: float) -> Tensor:
    """Node marginals (B, N, T) read off the arc marginals; a softmax for length-1 sequences."""
    batch, num_arcs = pairwise.shape[:2]
    single = lengths == 1
    # tag i < len - 1 from the arcs leaving it; the last tag from the arcs entering it
    leaving = torch.cat([pairwise.sum(-1), pairwise.new_zeros(batch, 1, singles.shape[-1])], dim=1)
    entering = leaving[:, 0]  # any (B, T) placeholder: only read where a sequence has arcs
    if num_arcs:
        last_arc = (lengths - 2).clamp(min=0)[:, None, None].expand(-1, 1, singles.shape[-1])
        entering = pairwise.sum(-2).gather(1, last_arc).squeeze(1)
    last_tag = torch.where(
        single.unsqueeze(-1), torch.exp(torch.log_softmax(singles / temperature, dim=-1)), entering
    )
    is_last = torch.arange(num_arcs + 1, device=lengths.device) == (lengths - 1).unsqueeze(-1)
    return torch.where(is_last.unsqueeze(-1), last_tag.unsqueeze(1), leaving)


def _value(
    log_q: Tensor, pairwise: Tensor, weights: Tensor, singles: Tensor, lengths: Tensor, temperature: float
) -> Tensor:
    """``B_Y(w/τ) = Σ q (w/τ − log q)`` (B,) at the iterate; arcs with q = 0 contribute 0 (a -inf
    log counts as 0 before the product); a length-1 sequence's is the log-sum-exp of its tag scores."""
    expected = _inner(pairwise, _finite_or_zero(_scaled(weights, temperature)))  # <q, w/τ>
    value = expected - _inner(pairwise, _finite_or_zero(log_q))  # + H(q)
    return torch.where(lengths == 1, logsumexp(singles / temperature, dim=-1), value)


def _inner(x: Tensor, y: Tensor) -> Tensor:
    """``Σ x ⊙ y`` (B,) over all but the batch dim, as a batched dot: no temporary as big as ``x``."""
    return torch.bmm(x.flatten(1).unsqueeze(1), y.flatten(1).unsqueeze(2)).view(-1)


def _violation(pairwise: Tensor, lengths: Tensor) -> Tensor:
    """(B,) distance to the paper's polytope description (Prop. 2): the largest error in (7) unit
    in-flow into each inner cluster and (8) flow conservation at each inner node. Lengths 1 and 2
    have no inner cluster, hence 0."""
    inflow = pairwise[:, :-1].sum(-2)  # (B, N-2, T) into inner position p = 1 .. N-2
    outflow = pairwise[:, 1:].sum(-1)  # (B, N-2, T) out of the same positions
    errors = torch.maximum((inflow.sum(-1) - 1).abs(), (inflow - outflow).abs().amax(-1))
    errors = torch.where(position_mask(lengths - 2, errors.shape[1]), errors, 0.0)
    return torch.cat([errors, errors.new_zeros(errors.shape[0], 1)], dim=1).amax(-1)


def _danskin_pieces(
    weights: Tensor, singles: Tensor, lengths: Tensor, temperature: float, *solver: Any
) -> tuple[Tensor, Tensor, Tensor]:
    """``τ B_Y(w/τ)`` (B,) at the iterate, and its Danskin gradient: the arc marginals q
    (B, N-1, T, T) and the tag probabilities of length-1 sequences (B, T), zero for longer ones.
    ``solver`` is ``(iterations, order, tolerance, form)``."""
    log_q = _iterate(weights, lengths, temperature, *solver)
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    single_probs = torch.softmax(singles / temperature, dim=-1) * (lengths == 1).unsqueeze(-1)
    return temperature * value, pairwise, single_probs


class _DanskinValue(torch.autograd.Function):
    """``τ B_Y(w/τ)`` whose gradient is the iterate ``q`` itself (Danskin), not a backward
    pass through the iterations: exact at convergence, the paper's "use the inference algorithm".

    A plain backward returns the q saved by the forward pass. A backward that must itself be
    differentiable (``create_graph=True``: gradient penalties, Hessian-vector products) runs the
    iterations again from the saved weights with autograd recording, so the derivative of the
    gradient ``q − y`` is the exact ``dq/dw`` through the iterations (what finite differences of
    the Danskin gradient measure), never a detached constant.
    """

    @staticmethod
    def forward(ctx, weights, singles, lengths, temperature, iterations, order, tolerance, form):  # type: ignore[override]
        options = (temperature, iterations, order, tolerance, form)
        value, pairwise, single_probs = _danskin_pieces(weights, singles, lengths, *options)
        ctx.save_for_backward(weights, singles, lengths, pairwise, single_probs)
        ctx.options = options
        return value

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        weights, singles, lengths, pairwise, single_probs = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: record the iterations the gradient comes from
            _, pairwise, single_probs = _danskin_pieces(weights, singles, lengths, *ctx.options)
        return grad[:, None, None, None] * pairwise, grad[:, None] * single_probs, *(None,) * 6


def _scaled_value(
    weights: Tensor,
    singles: Tensor,
    lengths: Tensor,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
    gradient: str,
) -> Tensor:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    if gradient == "danskin":
        return _DanskinValue.apply(weights, singles, lengths, temperature, iterations, order, tolerance, form)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance, form)
    pairwise = _arc_marginals(log_q, lengths)
    return temperature * _value(log_q, pairwise, weights, singles, lengths, temperature)


def marginals(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance, form)
    pairwise = _arc_marginals(log_q, lengths)
    return _unary(pairwise, singles, lengths, temperature), pairwise


def decode(emissions, transitions, lengths, start, end, **options):
    """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1),
    -1 on padding. Like the paper's, the output can contain a forbidden bigram before convergence."""
    return argmax_tags(marginals(emissions, transitions, lengths, start, end, **options)[0], lengths)


def log_partition(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable by autograd."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance, form)
    return _value(log_q, _arc_marginals(log_q, lengths), weights, singles, lengths, temperature)


def solve(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form):
    """The IBP iterate with its value ``B_Y(w/τ)`` and its constraint violation after each
    iteration (``implementations.solver.SolverOutput``)."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    initial, step, error, read_log_q = _solver(weights, lengths, temperature, order, form)
    state, run, errors = iterate_with_errors(step, initial, iterations, tolerance, error)
    log_q = read_log_q(state)
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    converged = errors[run - 1] <= (tolerance or 0.0)
    return SolverOutput(
        _unary(pairwise, singles, lengths, temperature), pairwise, value, run, converged, errors
    )


def loss(emissions, transitions, lengths, tags, start, end, **options):
    """Fenchel–Young loss (B,): ``τ B_Y(w/τ) − <w, y>``, gradient ``q − y`` with ``"danskin"``.

    ``gradient="unrolled"`` backpropagates through the iterations instead; both agree at
    convergence. At τ = 1 this is the paper's ``B_Y(w) − <w, y>``.

    Second-order derivatives (gradient penalties, Hessian-vector products) are exact in both
    modes: with ``"danskin"`` they differentiate the gradient it returns, ``q − y``, with ``q``
    differentiated through the iterations (before convergence its Jacobian is not symmetric).
    """
    value = _scaled_value(*arc_weights(emissions, transitions, lengths, start, end), lengths, **options)
    return value - gold_score(emissions, transitions, lengths, tags, start, end)


def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label Fenchel–Young loss (B,): ``τ B_Y(w/τ) − τ B_Ỹ(w/τ)``, two IBP runs, the second
    with every tag that ``allowed`` (B, N, T) forbids set to -inf."""
    full = _scaled_value(*arc_weights(emissions, transitions, lengths, start, end), lengths, **options)
    masked = arc_weights(mask_emissions(emissions, allowed), transitions, lengths, start, end)
    return full - _scaled_value(*masked, lengths, **options)
