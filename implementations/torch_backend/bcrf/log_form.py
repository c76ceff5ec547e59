"""BCRF's log form in torch (``form="log"``): the iterate is ``log q`` itself (B, N-1, T, T), and
every projection reads and writes every arc, with an ``exp`` per arc. The reference form: the
scaling form (:mod:`.scaling`) computes the same iterates."""

from __future__ import annotations

import torch
from torch import Tensor

from ...kernels.bcrf import Solution
from ...kernels.bcrf_numerics import _arc_marginals, _finite_or_zero
from .._semiring import logsumexp
from .numerics import _cluster_shifts, _inner, _scaled


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
    active = (positions < (lengths - 1).unsqueeze(-1))[:, None, :, None]  # (B, 1, P, 1)
    flows = torch.stack([log_in, log_out], dim=1)
    column_shift, row_shift = _cluster_shifts(flows, active.to(log_q.dtype)).unbind(1)
    columns = log_q.new_zeros(batch, num_arcs, num_tags).index_copy(1, positions - 1, column_shift)
    rows = log_q.new_zeros(batch, num_arcs, num_tags).index_copy(1, positions, row_shift)
    return log_q + (rows.unsqueeze(-1) + columns.unsqueeze(-2))


def _initial(weights: Tensor, temperature: float) -> Tensor:
    """``log q`` before the first projection: ``w/τ`` with every arc group normalised."""
    log_q = _scaled(weights, temperature)
    return log_q - logsumexp(log_q.flatten(2), dim=-1)[:, :, None, None]


def _value(
    log_q: Tensor, pairwise: Tensor, weights: Tensor, singles: Tensor, lengths: Tensor, temperature: float
) -> Tensor:
    """``B_Y(w/τ) = Σ q (w/τ − log q)`` (B,) at the iterate; arcs with q = 0 contribute 0 (a -inf
    log counts as 0 before the product); a length-1 sequence's is the log-sum-exp of its tag scores."""
    expected = _inner(pairwise, _finite_or_zero(_scaled(weights, temperature)))  # <q, w/τ>
    value = expected - _inner(pairwise, _finite_or_zero(log_q))  # + H(q)
    return torch.where(lengths == 1, logsumexp(singles / temperature, dim=-1), value)


def _log_solution(
    log_q: Tensor, weights: Tensor, singles: Tensor, lengths: Tensor, temperature: float
) -> Solution:
    """The :class:`Solution` of a log-form iterate (``weights``: the arcs w)."""
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    return Solution(value, pairwise.sum(-1), pairwise.sum(-2), pairwise)
