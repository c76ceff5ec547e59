"""Shared handling of the contract's scores: masks, padding, gold scores, constraint patterns
and the BCRF paper's arc weights ``w`` (every unary folded into exactly one arc group)."""

from __future__ import annotations

import torch
from torch import Tensor


def position_mask(lengths: Tensor, length: int) -> Tensor:
    """(B, N) bool, True where ``position < lengths[b]``."""
    return torch.arange(length, device=lengths.device) < lengths.unsqueeze(-1)


def per_position(transitions: Tensor, batch: int, length: int) -> Tensor:
    """Transitions as a (B, N-1, T, T) view, broadcasting a shared (T, T) matrix."""
    if transitions.ndim == 4:
        return transitions
    num_tags = transitions.shape[-1]
    return transitions.expand(batch, max(length - 1, 0), num_tags, num_tags)


def boundary(scores: Tensor | None, like: Tensor) -> Tensor:
    """Start/end scores, zeros when absent, shape (T,)."""
    return torch.zeros(like.shape[-1], dtype=like.dtype, device=like.device) if scores is None else scores


def clean_padding(emissions: Tensor, transitions: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """Replace scores past each length by 0, so padding can never produce NaN or -inf rows.

    Returns emissions (B, N, T) and per-position transitions (B, N-1, T, T).
    """
    batch, length, _ = emissions.shape
    mask = position_mask(lengths, length)
    emissions = torch.where(mask.unsqueeze(-1), emissions, 0.0)
    transitions = per_position(transitions, batch, length)
    transitions = torch.where(mask[:, 1:, None, None], transitions, 0.0)
    return emissions, transitions


def gold_score(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    tags: Tensor,
    start: Tensor | None,
    end: Tensor | None,
) -> Tensor:
    """Score of the gold sequence, (B,): its emissions, transitions, start and end scores."""
    batch, length, _ = emissions.shape
    mask = position_mask(lengths, length)
    safe = torch.where(mask, tags, 0)
    unary = emissions.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    score = torch.where(mask, unary, 0.0).sum(-1)
    if length > 1:
        pairs = per_position(transitions, batch, length)
        rows = pairs.gather(2, safe[:, :-1, None, None].expand(-1, -1, 1, pairs.shape[-1])).squeeze(2)
        binary = rows.gather(-1, safe[:, 1:, None]).squeeze(-1)
        score = score + torch.where(mask[:, 1:], binary, 0.0).sum(-1)
    first, last = safe[:, 0], safe.gather(1, (lengths - 1).unsqueeze(-1)).squeeze(-1)
    if start is not None:
        score = score + start[first]
    if end is not None:
        score = score + end[last]
    return score


def forbidden_pattern(scores: Tensor | None) -> Tensor | None:
    """The constraints alone: 0 where a score is allowed, -inf where it is forbidden."""
    if scores is None:
        return None
    return torch.where(torch.isneginf(scores), -torch.inf, 0.0).to(scores.dtype)


def mask_emissions(emissions: Tensor, allowed: Tensor) -> Tensor:
    """Emissions with every tag a partial annotation forbids set to -inf."""
    return torch.where(allowed, emissions, -torch.inf)


def arc_weights(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> tuple[Tensor, Tensor]:
    """The paper's arc weights ``w`` (B, N-1, T, T) and the tag scores of length-1 sequences (B, T).

    ``w[i, a, b] = transitions[i, a, b] + emissions[i+1, b]``; the first arc also gets
    ``emissions[0, a] + start[a]`` and arc ``len - 2`` gets ``end[b]``. Arcs past ``len - 2``
    (padding, never read) hold the shared transitions, or 0 where transitions are given per
    position (their padding may be anything). A length-1 sequence has no arc: its scores are
    ``emissions[0] + start + end`` (0 for longer sequences).

    The full (B, N-1, T, T) array is written by one broadcast sum of a row term and a column term
    (B, N-1, T) onto the transitions, with no mask over it: passes over it dominate the cost.
    """
    batch, length, num_tags = emissions.shape
    real = position_mask(lengths, length)
    emissions = torch.where(real.unsqueeze(-1), emissions, 0.0)
    start, end = boundary(start, emissions), boundary(end, emissions)
    first_tag = emissions[:, 0] + start
    # 0 for longer sequences: their tag scores may all be -inf, and no such row may reach a softmax
    singles = torch.where(lengths.unsqueeze(-1) == 1, first_tag + end, 0.0)
    if transitions.ndim == 4:
        transitions = torch.where(real[:, 1:, None, None], transitions, 0.0)
    transitions = per_position(transitions, batch, length)
    if length == 1:
        return transitions, singles
    is_last = torch.arange(length - 1, device=emissions.device) == (lengths - 2).unsqueeze(-1)
    columns = emissions[:, 1:] + torch.where(is_last.unsqueeze(-1), end, 0.0)
    first_row = torch.where(lengths.unsqueeze(-1) > 1, first_tag, 0.0)  # a length-1 sequence: padding
    rows = torch.cat([first_row.unsqueeze(1), first_row.new_zeros(batch, length - 2, num_tags)], dim=1)
    return transitions + (rows.unsqueeze(-1) + columns.unsqueeze(-2)), singles
