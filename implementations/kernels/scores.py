"""Shared handling of the contract's scores, for both backends: masks, padding, gold scores,
constraint patterns and the BCRF paper's arc weights ``w`` (every unary folded into exactly one
arc group). Each backend's ``_scores`` module exposes these (jax's compiled by ``jax.jit``)."""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import ops

Array = Any  # a torch.Tensor or a jax.Array


def position_mask(lengths: Array, length: int) -> Array:
    """(B, N) bool, True where ``position < lengths[b]``."""
    return ops.of(lengths).arange(length, lengths) < lengths[..., None]


def per_position(transitions: Array, batch: int, length: int) -> Array:
    """Transitions as a (B, N-1, T, T) array, broadcasting a shared (T, T) matrix (no copy)."""
    if transitions.ndim == 4:
        return transitions
    num_tags = transitions.shape[-1]
    return ops.of(transitions).broadcast_to(transitions, (batch, max(length - 1, 0), num_tags, num_tags))


def _arc_index(transitions: Array, batch: int, length: int) -> tuple[Array, ...]:
    """The leading indices (sequence, arc group) that pick each arc's (T, T) matrix out of per-arc
    transitions (B, N-1, T, T), none for shared ones (T, T). Indexing shared transitions directly
    keeps the gold score and its gradient at (T, T): broadcasting them to (B, N-1, T, T) first cost
    the backward pass a zero-filled array of that size (about a fifth of the exact CRF loss at
    B = 64, N = 50, T = 17)."""
    if transitions.ndim == 2:
        return ()
    o = ops.of(transitions)
    return o.arange(batch, transitions)[:, None], o.arange(length - 1, transitions)


def boundary(scores: Array | None, like: Array) -> Array:
    """Start/end scores, zeros when absent, shape (T,)."""
    return ops.of(like).zeros((like.shape[-1],), like) if scores is None else scores


def clean_padding(emissions: Array, transitions: Array, lengths: Array) -> tuple[Array, Array]:
    """Replace scores past each length by 0, so padding can never produce NaN or -inf rows.

    Returns emissions (B, N, T) and per-position transitions (B, N-1, T, T).
    """
    o = ops.of(emissions)
    batch, length, _ = emissions.shape
    mask = position_mask(lengths, length)
    emissions = o.where(mask[..., None], emissions, 0.0)
    transitions = per_position(transitions, batch, length)
    transitions = o.where(mask[:, 1:, None, None], transitions, 0.0)
    return emissions, transitions


def gold_score(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    tags: Array,
    start: Array | None,
    end: Array | None,
) -> Array:
    """Score of the gold sequence, (B,): its emissions, transitions, start and end scores."""
    o = ops.of(emissions)
    batch, length, _ = emissions.shape
    mask = position_mask(lengths, length)
    safe = o.where(mask, tags, 0)
    unary = o.take_along_axis(emissions, safe[..., None], -1)[..., 0]
    score = o.where(mask, unary, 0.0).sum(-1)
    if length > 1:
        binary = transitions[(*_arc_index(transitions, batch, length), safe[:, :-1], safe[:, 1:])]
        score = score + o.where(mask[:, 1:], binary, 0.0).sum(-1)
    first, last = safe[:, 0], o.take_along_axis(safe, (lengths - 1)[:, None], 1)[:, 0]
    if start is not None:
        score = score + start[first]
    if end is not None:
        score = score + end[last]
    return score


def forbidden_pattern(scores: Array | None) -> Array | None:
    """The constraints alone: 0 where a score is allowed, -inf where it is forbidden."""
    if scores is None:
        return None
    o = ops.of(scores)
    return o.astype(o.where(o.isneginf(scores), -o.inf, 0.0), scores.dtype)


def mask_emissions(emissions: Array, allowed: Array) -> Array:
    """Emissions with every tag a partial annotation forbids set to -inf."""
    o = ops.of(emissions)
    return o.where(allowed, emissions, -o.inf)


class ArcTerms(NamedTuple):
    """The paper's arc weights ``w`` (B, N-1, T, T) kept as their three terms,
    ``w[i, a, b] = transitions[i, a, b] + rows[i, a] + columns[i, b]``, and the tag scores of
    length-1 sequences."""

    transitions: Array  # (T, T) shared, or (B, N-1, T, T) zeroed past each length
    rows: Array  # (B, N-1, T): emissions[0] + start on the first arc, 0 elsewhere
    columns: Array  # (B, N-1, T): emissions[i+1], plus end on arc len - 2
    singles: Array  # (B, T): emissions[0] + start + end for length 1, 0 for longer sequences

    def weights(self) -> Array:
        """The arcs ``w`` (B, N-1, T, T), by one broadcast sum of the row and column terms onto the
        transitions, with no mask over it: passes over it dominate the cost."""
        batch, num_arcs, num_tags = self.rows.shape
        pairs = ops.of(self.rows).broadcast_to(self.transitions, (batch, num_arcs, num_tags, num_tags))
        return pairs + (self.rows[..., :, None] + self.columns[..., None, :])


def arc_terms(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> ArcTerms:
    """The terms of the paper's arc weights (see :class:`ArcTerms`): every unary folded into
    exactly one arc group, ``emissions[i+1]`` into the columns of arc ``i``, ``emissions[0] + start``
    into the rows of the first arc and ``end`` into the columns of arc ``len - 2``. Padding arcs
    hold 0 row and column terms; a length-1 sequence has no arc."""
    o = ops.of(emissions)
    batch, length, num_tags = emissions.shape
    real = position_mask(lengths, length)
    emissions = o.where(real[..., None], emissions, 0.0)
    start, end = boundary(start, emissions), boundary(end, emissions)
    first_tag = emissions[:, 0] + start
    # 0 for longer sequences: their tag scores may all be -inf, and no such row may reach a softmax
    singles = o.where(lengths[:, None] == 1, first_tag + end, 0.0)
    if transitions.ndim == 4:
        transitions = o.where(real[:, 1:, None, None], transitions, 0.0)
    is_last = o.arange(length - 1, emissions) == (lengths - 2)[:, None]
    columns = emissions[:, 1:] + o.where(is_last[..., None], end, 0.0)
    first_row = o.where(lengths[:, None] > 1, first_tag, 0.0)  # a length-1 sequence: padding
    rest = o.zeros((batch, max(length - 2, 0), num_tags), first_row)
    rows = o.concatenate([first_row[:, None], rest], 1)[:, : length - 1]
    return ArcTerms(transitions, rows, columns, singles)


def arc_weights(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> tuple[Array, Array]:
    """The paper's arc weights ``w`` (B, N-1, T, T) and the tag scores of length-1 sequences (B, T)
    (see :func:`arc_terms`). Arcs past ``len - 2`` (padding, never read) hold the shared
    transitions, or 0 where transitions are given per position (their padding may be anything)."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    return terms.weights(), terms.singles
