"""Parallel-scan engine: chain factors multiplied in a balanced binary tree, depth O(log N).

The chain is written as ``N + 1`` log-semiring matrices over the tags, with a virtual boundary
state 0: factor 0 leaves the boundary for the first tag (row 0 holds ``emissions[0] + start``),
factor ``i`` (1 <= i < len) is ``transitions[i-1] + emissions[i]``, factor ``len`` returns from
the last tag to the boundary (column 0 holds ``end``), and factors past it are semiring
identities (exact padding for these semirings; not for BCRF). ``log Z`` is entry (0, 0) of the
product, with no special case for lengths 1 and 2.

Level 0 holds these factors (padded with more identities to a power of two);
each level multiplies neighbouring pairs, all pairs at once, in the log semiring (``log Z``) or
the max-plus semiring (Viterbi). The levels are a Python loop: their shapes are static, so a
traced function unrolls into O(log N) stages. Marginals come from an explicit outside pass down
the same tree, and the Viterbi path from following the stored split points down it, so every
stage is O(log N) dependent steps. Work is O(N T³), against O(N T²) for the sequential engine, and
so is memory: every entry point refuses a batch whose largest intermediate would exceed
``contract.SCAN_MEMORY_BUDGET`` (see ``contract.check_scan_memory`` and :func:`_guarded`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array

from .. import contract
from ._scores import boundary, per_position, position_mask
from ._semiring import log_identity, log_matmul, max_matmul


def chain_factors(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> Array:
    """Log-semiring factors of the chain with a virtual boundary state, (B, N+1, T, T)."""
    batch, length, num_tags = emissions.shape
    start, end = boundary(start, emissions), boundary(end, emissions)
    first = jnp.where(
        jnp.arange(num_tags)[:, None] == 0, (emissions[:, 0] + start)[:, None, :], -jnp.inf
    )  # (B, T, T): row 0 only
    inner = per_position(transitions, batch, length) + emissions[:, 1:, None, :]
    last = jnp.where(jnp.arange(num_tags) == 0, end[:, None], -jnp.inf)  # (T, T): column 0 only
    factors = jnp.concatenate(
        [first[:, None], inner, jnp.broadcast_to(last, (batch, 1, num_tags, num_tags))], axis=1
    )
    index = jnp.arange(length + 1)[None, :, None, None]
    stop = lengths[:, None, None, None]
    eye = log_identity((), num_tags, emissions)
    factors = jnp.where(index == stop, last, factors)
    return jnp.where(index > stop, eye, factors)


def node_and_pair_marginals(factor_marginals: Array, lengths: Array) -> tuple[Array, Array]:
    """Contract marginals from marginals of the chain factors (B, N+1, T, T).

    Factor ``i + 1`` leaves the tag at position ``i``, so its row sums are the unary marginals and,
    for ``i < len - 1``, it is the pairwise marginal of positions (i, i+1).
    Returns unary (B, N, T) and pairwise (B, N-1, T, T), zero on padding.
    """
    length = factor_marginals.shape[1] - 1
    mask = position_mask(lengths, length)
    unary = factor_marginals[:, 1:].sum(-1) * mask[..., None]
    pairwise = factor_marginals[:, 1:length] * mask[:, 1:, None, None]
    return unary, pairwise


def tags_from_states(states: Array, lengths: Array) -> Array:
    """Tags from the boundary-augmented state path (B, N+2): state ``i + 1`` is the tag at ``i``."""
    length = states.shape[1] - 2
    return jnp.where(position_mask(lengths, length), states[:, 1:-1], -1)


def _pad_to_power_of_two(factors: Array) -> Array:
    batch, count, num_tags, _ = factors.shape
    padded = 1 << max(count - 1, 0).bit_length()
    if padded == count:
        return factors
    return jnp.concatenate([factors, log_identity((batch, padded - count), num_tags, factors)], axis=1)


def _interleave(left: Array, right: Array) -> Array:
    """(B, K, ...) and (B, K, ...) -> (B, 2K, ...) as left0, right0, left1, right1, ...
    (sizes spelled out: a -1 cannot be inferred from an empty batch)."""
    batch, count, *rest = left.shape
    return jnp.stack([left, right], axis=2).reshape(batch, 2 * count, *rest)


def _inside(factors: Array) -> list[Array]:
    """Every level of the log-semiring product tree, leaves first; the last is (B, 1, T, T)."""
    levels = [_pad_to_power_of_two(factors)]
    while levels[-1].shape[1] > 1:
        level = levels[-1]
        levels.append(log_matmul(level[:, 0::2], level[:, 1::2]))
    return levels


def _root_indicator(like: Array) -> Array:
    """Log indicator of the boundary-to-boundary entry (0, 0): shape (B, 1, T, T)."""
    outside = jnp.full_like(like[:, :1], -jnp.inf)
    return outside.at[:, :, 0, 0].set(0.0)


def _guarded(engine_function: Callable[..., Any]) -> Callable[..., Any]:
    """``jax.jit(engine_function)`` behind the memory guard (``contract.check_scan_memory``). The
    guard runs at every call, before the compiled program: inside it, it would run only when a
    shape is first traced, and miss a budget lowered since. Under an enclosing ``jax.jit`` it runs
    when that is traced."""
    compiled = jax.jit(engine_function)

    @functools.wraps(engine_function)
    def guarded(emissions: Array, *scores: Array | None) -> Any:
        contract.check_scan_memory(emissions)
        return compiled(emissions, *scores)

    return guarded


@_guarded
def log_partition(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> Array:
    """``log Z`` (B,): entry (0, 0) of the tree product; differentiable by autodiff."""
    return _inside(chain_factors(emissions, transitions, lengths, start, end))[-1][:, 0, 0, 0]


@_guarded
def marginals(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> tuple[Array, Array]:
    """Exact unary (B, N, T) and pairwise (B, N-1, T, T) marginals by inside–outside on the tree."""
    factor_marginals = _factor_marginals(chain_factors(emissions, transitions, lengths, start, end))
    return node_and_pair_marginals(factor_marginals, lengths)


@_guarded
def viterbi(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> tuple[Array, Array]:
    """Best score (B,) and best tags (B, N), -1 on padding."""
    score, states = _best_path(chain_factors(emissions, transitions, lengths, start, end))
    return score, tags_from_states(states, lengths)


def _factor_marginals(factors: Array) -> Array:
    """Inside–outside on the tree: the marginal of every factor entry, (B, N+1, T, T), each
    factor's entries normalised by a softmax over its (T, T) entries, never by subtracting
    ``log Z`` (why: the torch backend's ``_tree._factor_marginals``)."""
    levels = _inside(factors)
    outside = _root_indicator(levels[-1])
    for level in reversed(levels[:-1]):
        left, right = level[:, 0::2], level[:, 1::2]
        outside = _interleave(
            log_matmul(outside, jnp.swapaxes(right, -1, -2)),  # O_left(a, b) = LSE_c O(a, c) + right(b, c)
            log_matmul(jnp.swapaxes(left, -1, -2), outside),  # O_right(b, c) = LSE_a left(a, b) + O(a, c)
        )
    count = factors.shape[1]
    return _normalise(levels[0][:, :count] + outside[:, :count])


def _normalise(log_weights: Array) -> Array:
    """Softmax of (..., T, T) log-weights over their last two axes; an all -inf matrix (a sequence
    with no allowed path, possible only unvalidated) gives zeros rather than NaN."""
    *batch, rows, columns = log_weights.shape
    flat = log_weights.reshape(*batch, rows * columns)  # no -1: it cannot be inferred when B = 0
    top = jnp.maximum(flat.max(-1, keepdims=True), jnp.finfo(flat.dtype).min)
    weights = jnp.exp(flat - top)
    # the largest weight is exp(0) = 1, so a sum below 1 means all -inf (sum 0): no division by 0
    return (weights / jnp.maximum(weights.sum(-1, keepdims=True), 1.0)).reshape(log_weights.shape)


def _best_path(factors: Array) -> tuple[Array, Array]:
    """Best path score (B,) and its states (B, N+2), boundary state 0 at both ends.

    The max-plus tree stores, for each product, the best middle state of every (start, end)
    pair; going down, each node hands its endpoints and that split point to its two children.
    """
    level = _pad_to_power_of_two(factors)
    splits = []
    while level.shape[1] > 1:
        level, best_middle = max_matmul(level[:, 0::2], level[:, 1::2])
        splits.append(best_middle)
    batch, _, num_tags, _ = factors.shape
    starts = jnp.zeros((batch, 1), dtype=int)  # the default integer, like argmax
    ends = jnp.zeros_like(starts)
    for best_middle in reversed(splits):
        flat = best_middle.reshape(*best_middle.shape[:2], num_tags * num_tags)
        middle = jnp.take_along_axis(flat, (starts * num_tags + ends)[..., None], axis=2)[..., 0]
        starts, ends = _interleave(starts, middle), _interleave(middle, ends)
    count = factors.shape[1]
    states = jnp.concatenate([starts[:, :count], ends[:, count - 1 : count]], axis=1)
    return level[:, 0, 0, 0], states
