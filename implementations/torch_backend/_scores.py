"""Shared handling of the contract's scores: masks, padding, gold scores, constraint patterns
and the BCRF paper's arc weights ``w`` (every unary folded into exactly one arc group)."""

from __future__ import annotations

from typing import NamedTuple

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


def _arc_index(transitions: Tensor, batch: int, length: int) -> tuple[Tensor, ...]:
    """The leading indices (sequence, arc group) that pick each arc's (T, T) matrix out of per-arc
    transitions (B, N-1, T, T), none for shared ones (T, T). Indexing shared transitions directly
    keeps the gold score and its gradient at (T, T): broadcasting them to (B, N-1, T, T) first cost
    the backward pass a zero-filled array of that size (about a fifth of the exact CRF loss at
    B = 64, N = 50, T = 17)."""
    if transitions.ndim == 2:
        return ()
    device = transitions.device
    return torch.arange(batch, device=device)[:, None], torch.arange(length - 1, device=device)


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
        binary = transitions[(*_arc_index(transitions, batch, length), safe[:, :-1], safe[:, 1:])]
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


class ArcTerms(NamedTuple):
    """The paper's arc weights ``w`` (B, N-1, T, T) kept as their three terms,
    ``w[i, a, b] = transitions[i, a, b] + rows[i, a] + columns[i, b]``, and the tag scores of
    length-1 sequences."""

    transitions: Tensor  # (T, T) shared, or (B, N-1, T, T) zeroed past each length
    rows: Tensor  # (B, N-1, T): emissions[0] + start on the first arc, 0 elsewhere
    columns: Tensor  # (B, N-1, T): emissions[i+1], plus end on arc len - 2
    singles: Tensor  # (B, T): emissions[0] + start + end for length 1, 0 for longer sequences

    def weights(self) -> Tensor:
        """The arcs ``w`` (B, N-1, T, T), by one broadcast sum of the row and column terms onto the
        transitions, with no mask over it: passes over it dominate the cost."""
        batch, num_arcs, num_tags = self.rows.shape
        pairs = self.transitions.expand(batch, num_arcs, num_tags, num_tags)
        return pairs + (self.rows.unsqueeze(-1) + self.columns.unsqueeze(-2))


def arc_terms(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> ArcTerms:
    """The terms of the paper's arc weights (see :class:`ArcTerms`): every unary folded into
    exactly one arc group, ``emissions[i+1]`` into the columns of arc ``i``, ``emissions[0] + start``
    into the rows of the first arc and ``end`` into the columns of arc ``len - 2``. Padding arcs
    hold 0 row and column terms; a length-1 sequence has no arc."""
    batch, length, num_tags = emissions.shape
    real = position_mask(lengths, length)
    emissions = torch.where(real.unsqueeze(-1), emissions, 0.0)
    start, end = boundary(start, emissions), boundary(end, emissions)
    first_tag = emissions[:, 0] + start
    # 0 for longer sequences: their tag scores may all be -inf, and no such row may reach a softmax
    singles = torch.where(lengths.unsqueeze(-1) == 1, first_tag + end, 0.0)
    if transitions.ndim == 4:
        transitions = torch.where(real[:, 1:, None, None], transitions, 0.0)
    is_last = torch.arange(length - 1, device=emissions.device) == (lengths - 2).unsqueeze(-1)
    columns = emissions[:, 1:] + torch.where(is_last.unsqueeze(-1), end, 0.0)
    first_row = torch.where(lengths.unsqueeze(-1) > 1, first_tag, 0.0)  # a length-1 sequence: padding
    rest = first_row.new_zeros(batch, max(length - 2, 0), num_tags)
    rows = torch.cat([first_row.unsqueeze(1), rest], dim=1)[:, : length - 1]
    return ArcTerms(transitions, rows, columns, singles)


def arc_weights(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> tuple[Tensor, Tensor]:
    """The paper's arc weights ``w`` (B, N-1, T, T) and the tag scores of length-1 sequences (B, T)
    (see :func:`arc_terms`). Arcs past ``len - 2`` (padding, never read) hold the shared
    transitions, or 0 where transitions are given per position (their padding may be anything)."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    return terms.weights(), terms.singles
