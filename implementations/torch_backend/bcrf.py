"""Bregman CRF (Corro, Lacroix & Le Roux, 2025): entropy of the transition marginals, solved by
iterative Bregman projections (IBP) whose depth does not grow with N.

``q = argmax_{q ∈ conv(Y)} <q, w/τ> + H(q)`` is approached by alternating KL projections onto
C_odd and C_even (the paper's 1-indexed inner clusters); each projection resets every node's
throughput to the normalised geometric mean of its in- and out-flow (docs/derivations.md §3.3). One
*iteration* is one projection onto C_odd then one onto C_even (``order="odd-even"``). All work is
in log space; a node with no in- or out-mass is killed (``alive``) so -inf never becomes NaN, and
clusters past a sequence's length are skipped, so padding never changes a result.

Lengths 1 and 2 have no inner cluster: length 1 is a softmax over tags, length 2 a softmax over
tag pairs (every arc group is normalised before the first projection, which leaves the iterates
of longer sequences unchanged because they are invariant to per-group shifts).
"""

from __future__ import annotations

from typing import Any

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
    log_node = (log_in + log_out) / 2  # log sqrt(in · out): the node's new throughput, unnormalised
    log_norm = logsumexp(log_node, dim=-1).unsqueeze(-1)
    alive = torch.isfinite(log_node)
    half_gap = torch.where(alive, (log_out - log_in) / 2, 0.0)
    active = (positions < (lengths - 1).unsqueeze(-1)).unsqueeze(-1)  # (B, P, 1)
    dead = active & ~alive
    column_shift = torch.where(dead, -torch.inf, torch.where(active, half_gap - log_norm, 0.0))
    row_shift = torch.where(dead, -torch.inf, torch.where(active, -half_gap - log_norm, 0.0))
    columns = log_q.new_zeros(batch, num_arcs, num_tags).index_copy(1, positions - 1, column_shift)
    rows = log_q.new_zeros(batch, num_arcs, num_tags).index_copy(1, positions, row_shift)
    return log_q + (rows.unsqueeze(-1) + columns.unsqueeze(-2))


def _initial(weights: Tensor, temperature: float) -> Tensor:
    """``log q`` before the first projection: ``w/τ`` with every arc group normalised."""
    log_q = weights / temperature
    return log_q - logsumexp(log_q.flatten(2), dim=-1)[:, :, None, None]


def _step(lengths: Tensor, order: str):
    """One iteration: a projection onto each parity of inner clusters, in ``order``."""

    def step(log_q: Tensor) -> Tensor:
        for first in _first_clusters(order):
            log_q = _project(log_q, lengths, first)
        return log_q

    return step


def _error(lengths: Tensor):
    """The convergence error of an iterate: its constraint violation (B,)."""
    return lambda log_q, _: _violation(_arc_marginals(log_q, lengths), lengths)


def _iterate(
    weights: Tensor, lengths: Tensor, temperature: float, iterations: int, order: str, tolerance: float | None
) -> Tensor:
    """Log arc marginals ``log q`` (B, N-1, T, T) after ``iterations`` pairs of projections."""
    initial = _initial(weights, temperature)
    return iterate(_step(lengths, order), initial, iterations, tolerance, _error(lengths))


def _arc_mask(lengths: Tensor, num_arcs: int) -> Tensor:
    return position_mask(lengths - 1, num_arcs)[:, :, None, None]


def _arc_marginals(log_q: Tensor, lengths: Tensor) -> Tensor:
    """q (B, N-1, T, T), zero on padding."""
    return torch.where(_arc_mask(lengths, log_q.shape[1]), torch.exp(log_q), 0.0)


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
    """``B_Y(w/τ) = Σ q (w/τ − log q)`` (B,) at the iterate; arcs with q = 0 contribute 0 (guarded
    before the product); a length-1 sequence's is the log-sum-exp of its tag scores."""
    live = _arc_mask(lengths, log_q.shape[1]) & torch.isfinite(log_q)
    gap = torch.where(live, weights / temperature - log_q, 0.0)
    value = (pairwise * gap).flatten(1).sum(-1)
    return torch.where(lengths == 1, logsumexp(singles / temperature, dim=-1), value)


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
    ``solver`` is ``(iterations, order, tolerance)``."""
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
    def forward(ctx, weights, singles, lengths, temperature, iterations, order, tolerance):  # type: ignore[override]
        options = (temperature, iterations, order, tolerance)
        value, pairwise, single_probs = _danskin_pieces(weights, singles, lengths, *options)
        ctx.save_for_backward(weights, singles, lengths, pairwise, single_probs)
        ctx.options = options
        return value

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        weights, singles, lengths, pairwise, single_probs = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: record the iterations the gradient comes from
            _, pairwise, single_probs = _danskin_pieces(weights, singles, lengths, *ctx.options)
        return grad[:, None, None, None] * pairwise, grad[:, None] * single_probs, *(None,) * 5


def _scaled_value(
    weights: Tensor,
    singles: Tensor,
    lengths: Tensor,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    gradient: str,
) -> Tensor:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    if gradient == "danskin":
        return _DanskinValue.apply(weights, singles, lengths, temperature, iterations, order, tolerance)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance)
    pairwise = _arc_marginals(log_q, lengths)
    return temperature * _value(log_q, pairwise, weights, singles, lengths, temperature)


def marginals(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance):
    """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance)
    pairwise = _arc_marginals(log_q, lengths)
    return _unary(pairwise, singles, lengths, temperature), pairwise


def decode(emissions, transitions, lengths, start, end, **options):
    """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1),
    -1 on padding. Like the paper's, the output can contain a forbidden bigram before convergence."""
    return argmax_tags(marginals(emissions, transitions, lengths, start, end, **options)[0], lengths)


def log_partition(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance):
    """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable by autograd."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance)
    return _value(log_q, _arc_marginals(log_q, lengths), weights, singles, lengths, temperature)


def solve(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance):
    """The IBP iterate with its value ``B_Y(w/τ)`` and its constraint violation after each
    iteration (``implementations.solver.SolverOutput``)."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    initial = _initial(weights, temperature)
    log_q, run, errors = iterate_with_errors(
        _step(lengths, order), initial, iterations, tolerance, _error(lengths)
    )
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
