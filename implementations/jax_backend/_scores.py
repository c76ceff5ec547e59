"""Shared handling of the contract's scores: masks, padding, gold scores, constraint patterns
and the BCRF paper's arc weights ``w`` (every unary folded into exactly one arc group).

The array-to-array helpers are ``jax.jit``-compiled, so an eager call runs one cached program
per shape instead of one per operation (inside a traced caller they are simply inlined)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array


def position_mask(lengths: Array, length: int) -> Array:
    """(B, N) bool, True where ``position < lengths[b]``."""
    return jnp.arange(length) < lengths[:, None]


def per_position(transitions: Array, batch: int, length: int) -> Array:
    """Transitions as a (B, N-1, T, T) array, broadcasting a shared (T, T) matrix."""
    if transitions.ndim == 4:
        return transitions
    num_tags = transitions.shape[-1]
    return jnp.broadcast_to(transitions, (batch, max(length - 1, 0), num_tags, num_tags))


def _arc_index(transitions: Array, batch: int, length: int) -> tuple[Array, ...]:
    """The leading indices (sequence, arc group) that pick each arc's (T, T) matrix out of per-arc
    transitions (B, N-1, T, T), none for shared ones (T, T), as in the torch backend: indexing
    shared transitions directly keeps the gold score's gradient at (T, T) instead of a zero-filled
    (B, N-1, T, T) array."""
    if transitions.ndim == 2:
        return ()
    return jnp.arange(batch)[:, None], jnp.arange(length - 1)


def boundary(scores: Array | None, like: Array) -> Array:
    """Start/end scores, zeros when absent, shape (T,)."""
    return jnp.zeros(like.shape[-1], dtype=like.dtype) if scores is None else scores


@jax.jit
def clean_padding(emissions: Array, transitions: Array, lengths: Array) -> tuple[Array, Array]:
    """Replace scores past each length by 0, so padding can never produce NaN or -inf rows.

    Returns emissions (B, N, T) and per-position transitions (B, N-1, T, T).
    """
    batch, length, _ = emissions.shape
    mask = position_mask(lengths, length)
    emissions = jnp.where(mask[..., None], emissions, 0.0)
    transitions = per_position(transitions, batch, length)
    transitions = jnp.where(mask[:, 1:, None, None], transitions, 0.0)
    return emissions, transitions


@jax.jit
def gold_score(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    tags: Array,
    start: Array | None,
    end: Array | None,
) -> Array:
    """Score of the gold sequence, (B,): its emissions, transitions, start and end scores."""
    batch, length, _ = emissions.shape
    mask = position_mask(lengths, length)
    safe = jnp.where(mask, tags, 0)
    unary = jnp.take_along_axis(emissions, safe[..., None], axis=-1)[..., 0]
    score = jnp.where(mask, unary, 0.0).sum(-1)
    if length > 1:
        binary = transitions[(*_arc_index(transitions, batch, length), safe[:, :-1], safe[:, 1:])]
        score = score + jnp.where(mask[:, 1:], binary, 0.0).sum(-1)
    first, last = safe[:, 0], jnp.take_along_axis(safe, (lengths - 1)[:, None], axis=1)[:, 0]
    if start is not None:
        score = score + start[first]
    if end is not None:
        score = score + end[last]
    return score


@jax.jit
def forbidden_pattern(scores: Array | None) -> Array | None:
    """The constraints alone: 0 where a score is allowed, -inf where it is forbidden."""
    if scores is None:
        return None
    return jnp.where(jnp.isneginf(scores), -jnp.inf, 0.0).astype(scores.dtype)


@jax.jit
def mask_emissions(emissions: Array, allowed: Array) -> Array:
    """Emissions with every tag a partial annotation forbids set to -inf."""
    return jnp.where(allowed, emissions, -jnp.inf)


class ArcTerms(NamedTuple):
    """The paper's arc weights ``w`` (B, N-1, T, T) kept as their three terms,
    ``w[i, a, b] = transitions[i, a, b] + rows[i, a] + columns[i, b]``, and the tag scores of
    length-1 sequences, as in the torch backend."""

    transitions: Array  # (T, T) shared, or (B, N-1, T, T) zeroed past each length
    rows: Array  # (B, N-1, T): emissions[0] + start on the first arc, 0 elsewhere
    columns: Array  # (B, N-1, T): emissions[i+1], plus end on arc len - 2
    singles: Array  # (B, T): emissions[0] + start + end for length 1, 0 for longer sequences

    def weights(self) -> Array:
        """The arcs ``w`` (B, N-1, T, T), by one broadcast sum of the row and column terms onto the
        transitions, with no mask over it."""
        batch, num_arcs, num_tags = self.rows.shape
        pairs = jnp.broadcast_to(self.transitions, (batch, num_arcs, num_tags, num_tags))
        return pairs + (self.rows[..., :, None] + self.columns[..., None, :])


@jax.jit
def arc_terms(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> ArcTerms:
    """The terms of the paper's arc weights (see :class:`ArcTerms`): every unary folded into
    exactly one arc group, ``emissions[i+1]`` into the columns of arc ``i``, ``emissions[0] + start``
    into the rows of the first arc and ``end`` into the columns of arc ``len - 2``. Padding arcs
    hold 0 row and column terms; a length-1 sequence has no arc."""
    batch, length, num_tags = emissions.shape
    real = position_mask(lengths, length)
    emissions = jnp.where(real[..., None], emissions, 0.0)
    start, end = boundary(start, emissions), boundary(end, emissions)
    first_tag = emissions[:, 0] + start
    # 0 for longer sequences: their tag scores may all be -inf, and no such row may reach a softmax
    singles = jnp.where(lengths[:, None] == 1, first_tag + end, 0.0)
    if transitions.ndim == 4:
        transitions = jnp.where(real[:, 1:, None, None], transitions, 0.0)
    is_last = jnp.arange(length - 1) == (lengths - 2)[:, None]
    columns = emissions[:, 1:] + jnp.where(is_last[..., None], end, 0.0)
    first_row = jnp.where(lengths[:, None] > 1, first_tag, 0.0)  # a length-1 sequence: padding
    rest = jnp.zeros((batch, max(length - 2, 0), num_tags), first_row.dtype)
    rows = jnp.concatenate([first_row[:, None], rest], axis=1)[:, : length - 1]
    return ArcTerms(transitions, rows, columns, singles)


@jax.jit
def arc_weights(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> tuple[Array, Array]:
    """The paper's arc weights ``w`` (B, N-1, T, T) and the tag scores of length-1 sequences (B, T)
    (see :func:`arc_terms`). Arcs past ``len - 2`` (padding, never read) hold the shared
    transitions, or 0 where transitions are given per position (their padding may be anything)."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    return terms.weights(), terms.singles
