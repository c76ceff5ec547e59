"""BCRF's arithmetic that both forms of the iterations share, in torch: the projection's shifts
given the flows (docs/derivations.md §3.3), -inf handling (a dead tag or node is -inf, never
NaN), the masks of padding, and what is read off arc marginals: node marginals and the value
(the convergence error and the records the forms pass on are shared with JAX, in
:mod:`implementations.kernels.bcrf`)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .._scores import position_mask
from .._semiring import logsumexp


def _cluster_shifts(flows: Tensor, inside: Tensor, dim: int = -1) -> Tensor:
    """The projection of §3.3 given each node's log in- and out-flow, stacked (B, 2, P, T) (in
    first), or (T, 2, P, B) with the tags first (``dim`` 0 of the flows of one side): the shifts
    of the log of its in-arcs and of its out-arcs, stacked alike; -inf for a dead tag, 0 outside
    the clusters (``inside``, broadcast: 1 for a cluster, 0 elsewhere).

    Each flow moves to the node's new throughput, the normalised geometric mean of its two flows,
    ``log sqrt(in · out) − log Σ_tags sqrt(in · out)``. A dead tag's (a -inf flow) is -inf, and so
    is its shift (its -inf flow taken as 0); a dead node's normaliser is taken as 0. Written
    without boolean masks (a ``where`` with a broadcast condition is several times slower than a
    multiply): the shifts outside the clusters are multiplied by 0 (:func:`_inside_only`)."""
    log_node = (flows[:, 0] + flows[:, 1]).mul_(0.5)  # log sqrt(in · out), unnormalised
    throughput = log_node - _finite_or_zero(logsumexp(log_node, dim=dim)).unsqueeze(dim)
    return _inside_only(throughput.unsqueeze(1) - _finite_or_zero(flows), inside)


def _inside_only(shifts: Tensor, inside: Tensor) -> Tensor:
    """``shifts`` inside the clusters, 0 outside (a -inf there times 0 is NaN, set to 0)."""
    return torch.nan_to_num(shifts * inside, nan=0.0, posinf=math.inf, neginf=-math.inf)


def _scaled(weights: Tensor, temperature: float) -> Tensor:
    """``w/τ``: ``weights`` themselves at τ = 1 (no copy of the arcs)."""
    return weights if temperature == 1 else weights / temperature


def _floor(dtype: torch.dtype) -> float:
    """``F``: the log of the dtype's smallest normal number; kernel entries under ``e^F`` are flushed."""
    return math.log(torch.finfo(dtype).tiny)


def _finite_or_zero(x: Tensor) -> Tensor:
    """``x`` with -inf replaced by 0 (and a zero gradient there); NaN and +inf are kept."""
    return torch.nan_to_num(x, nan=math.nan, posinf=math.inf, neginf=0.0)


def _recorded(*tensors: Tensor) -> bool:
    """Autograd records the operations on ``tensors``: an in-place update must then spare what
    a backward reads, and a -inf must not meet a derivative."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _safe_log(x: Tensor) -> Tensor:
    """``log x`` with ``log 0 = -inf`` and a finite gradient everywhere (0 where ``x = 0``)."""
    if not _recorded(x):
        return torch.log(x)
    positive = x > 0
    return torch.where(positive, torch.log(torch.where(positive, x, 1.0)), -torch.inf)


def _interleaved(even: Tensor, odd: Tensor) -> Tensor:
    """(B, P0 + P1, …): the rows of ``even`` (B, P0, …) at even and of ``odd`` (B, P1, …) at odd
    positions."""
    whole = even.new_empty(even.shape[0], even.shape[1] + odd.shape[1], *even.shape[2:])
    whole[:, 0::2], whole[:, 1::2] = even, odd
    return whole


def _padding(lengths: Tensor, num_arcs: int, dtype: torch.dtype) -> Tensor:
    """(B, N-1, 1): 0 for the arc groups inside each sequence, +inf past its length."""
    return torch.where(_group_mask(lengths, num_arcs), 0.0, math.inf).to(dtype)


def _group_mask(lengths: Tensor, num_arcs: int) -> Tensor:
    """(B, N-1, 1): the arc groups inside each sequence."""
    return position_mask(lengths - 1, num_arcs).unsqueeze(-1)


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


def _inner(x: Tensor, y: Tensor, batch_last: bool = False) -> Tensor:
    """``Σ x ⊙ y`` (B,) over all but the batch dim, of arrays (B, …) or ``batch_last`` (…, B);
    batch first as a batched dot, with no temporary as big as ``x``."""
    if batch_last:
        return (x * y).flatten(0, -2).sum(0)
    return torch.bmm(x.flatten(1).unsqueeze(1), y.flatten(1).unsqueeze(2)).view(-1)
