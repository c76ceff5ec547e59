"""BCRF's arithmetic that both forms of the iterations share and that torch does its own way: the
projection's shifts given the flows (docs/derivations.md §3.3), in place and without boolean
masks, the rows of two parities interleaved, and the batched inner product the value reads. The
arithmetic both frameworks spell alike (-inf handling, the masks of padding, node marginals) is
in :mod:`implementations.kernels.bcrf_numerics`; the convergence error and the records the forms
pass on are in :mod:`implementations.kernels.bcrf`."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ...kernels.bcrf_numerics import _finite_or_zero
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


def _interleaved(even: Tensor, odd: Tensor) -> Tensor:
    """(B, P0 + P1, …): the rows of ``even`` (B, P0, …) at even and of ``odd`` (B, P1, …) at odd
    positions."""
    whole = even.new_empty(even.shape[0], even.shape[1] + odd.shape[1], *even.shape[2:])
    whole[:, 0::2], whole[:, 1::2] = even, odd
    return whole


def _inner(x: Tensor, y: Tensor, batch_last: bool = False) -> Tensor:
    """``Σ x ⊙ y`` (B,) over all but the batch dim, of arrays (B, …) or ``batch_last`` (…, B);
    batch first as a batched dot, with no temporary as big as ``x``."""
    if batch_last:
        return (x * y).flatten(0, -2).sum(0)
    return torch.bmm(x.flatten(1).unsqueeze(1), y.flatten(1).unsqueeze(2)).view(-1)
