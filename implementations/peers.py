"""Converters between the contract's scores and the two PyTorch CRF libraries people compare with.

* pytorch-crf 0.7.2 (``torchcrf.CRF``): shared ``transitions[from, to]`` plus ``start_transitions``
  and ``end_transitions``, emissions batch-first, a boolean ``mask`` instead of lengths.
* torch-struct 0.5 (``torch_struct.LinearChainCRF``): one potential per edge,
  ``log_potentials[b, n, cur, prev]`` (B, N-1, T, T), with every unary folded into an edge and
  ``lengths`` masking the rest; it needs every length >= 2 and the longest to be exactly N.
  Its ``NonProjectiveDependencyCRF`` is the peer of ``tree-crf`` (``to_torch_struct_dependency``).

Both are optional dependencies (the ``peers`` extra); they are imported only when called. The
``from_*`` converters give contract scores that define the same distribution over tag sequences.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .torch_backend._scores import arc_weights, position_mask


def to_pytorch_crf(transitions: Tensor, start: Tensor | None = None, end: Tensor | None = None) -> Any:
    """A ``torchcrf.CRF`` (batch-first) holding these shared (T, T) transitions and start/end scores."""
    from torchcrf import CRF

    if transitions.ndim != 2:
        raise ValueError(
            f"pytorch-crf supports shared (T, T) transitions only, got shape {tuple(transitions.shape)}"
        )
    num_tags = transitions.shape[-1]
    crf = CRF(num_tags, batch_first=True).to(dtype=transitions.dtype, device=transitions.device)
    with torch.no_grad():
        crf.transitions.copy_(transitions)
        crf.start_transitions.copy_(transitions.new_zeros(num_tags) if start is None else start)
        crf.end_transitions.copy_(transitions.new_zeros(num_tags) if end is None else end)
    return crf


def pytorch_crf_mask(lengths: Tensor, length: int) -> Tensor:
    """pytorch-crf's (B, N) bool mask for these lengths."""
    return position_mask(lengths, length)


def to_torch_struct(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    start: Tensor | None = None,
    end: Tensor | None = None,
) -> Tensor:
    """torch-struct edge potentials ``[b, n, cur, prev]`` (B, M-1, T, T) with ``M = max(lengths)``:
    the padding past the longest sequence is cut off, because torch-struct requires one sequence
    of length exactly N (a batch padded beyond its longest sequence is fine here; an empty batch
    gives (0, N-1, T, T)). Needs every length >= 2 (torch-struct has no representation of a
    one-tag chain). Differentiable."""
    if emissions.shape[1] < 2 or bool((lengths < 2).any()):
        raise ValueError("torch-struct's LinearChainCRF needs every length >= 2")
    longest = int(lengths.max()) if len(lengths) else emissions.shape[1]  # B = 0: nothing to cut
    emissions = emissions[:, :longest]
    if transitions.ndim == 4:  # per position (B, N-1, T, T)
        transitions = transitions[:, : longest - 1]
    weights, _ = arc_weights(emissions, transitions, lengths, start, end)
    return weights.transpose(-1, -2).contiguous()


def from_pytorch_crf(crf: Any) -> tuple[Tensor, Tensor, Tensor]:
    """``(transitions (T, T), start (T,), end (T,))`` of a ``torchcrf.CRF``; its emissions are
    already the contract's (batch-first)."""
    return crf.transitions.detach(), crf.start_transitions.detach(), crf.end_transitions.detach()


def from_torch_struct(log_potentials: Tensor) -> tuple[Tensor, Tensor]:
    """Contract ``(emissions (B, N, T) zeros, transitions (B, N-1, T, T))`` from torch-struct edge
    potentials ``[b, n, cur, prev]``: each edge potential becomes the transition score, so a
    sequence scores the same sum of potentials. Differentiable."""
    batch, edges, num_tags, _ = log_potentials.shape
    emissions = log_potentials.new_zeros(batch, edges + 1, num_tags)
    return emissions, log_potentials.transpose(-1, -2)


def to_torch_struct_dependency(scores: Tensor) -> Tensor:
    """torch-struct's ``NonProjectiveDependencyCRF`` potentials (B, N, N) from ``tree-crf`` arc
    scores (B, N+1, N+1): ``[b, h-1, m-1]`` is the arc between words ``h -> m``, and the diagonal
    ``[b, m-1, m-1]`` the root's arc to word ``m``. torch-struct adds ``1e-5`` to every arc's weight
    ``exp(score)`` and exponentiates unshifted, so it agrees with ``tree-crf`` only on moderate,
    finite scores, to about that size. Differentiable."""
    words = scores[:, 1:, 1:]
    eye = torch.eye(words.shape[-1], dtype=torch.bool, device=scores.device)
    return torch.where(eye, torch.diag_embed(scores[:, 0, 1:]), words)


def from_torch_struct_dependency(marginals: Tensor) -> Tensor:
    """``tree-crf`` arc marginals (B, N+1, N+1) from torch-struct's (B, N, N), root on the diagonal."""
    batch, words, _ = marginals.shape
    eye = torch.eye(words, dtype=torch.bool, device=marginals.device)
    out = marginals.new_zeros(batch, words + 1, words + 1)
    out[:, 1:, 1:] = marginals.masked_fill(eye, 0.0)
    out[:, 0, 1:] = torch.diagonal(marginals, 0, -2, -1)
    return out
