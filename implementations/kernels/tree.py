"""Parallel-scan engine, for both backends: chain factors multiplied in a balanced binary tree,
depth O(log N).

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
so is memory: each backend's ``_tree`` refuses a batch whose largest intermediate would exceed
``contract.SCAN_MEMORY_BUDGET`` (``contract.check_scan_memory``) before calling these.
"""

from __future__ import annotations

from typing import Any

from .. import ops
from .scores import boundary, per_position, position_mask

Array = Any  # a torch.Tensor or a jax.Array


def log_matmul(a: Array, b: Array) -> Array:
    """Log-semiring matrix product ``c[..., i, k] = LSE_j a[..., i, j] + b[..., j, k]``."""
    return ops.of(a).logsumexp(a[..., :, :, None] + b[..., None, :, :], -2)


def max_matmul(a: Array, b: Array) -> tuple[Array, Array]:
    """Max-plus matrix product and its argmax: ``c[..., i, k] = max_j a[..., i, j] + b[..., j, k]``."""
    return ops.of(a).max_argmax(a[..., :, :, None] + b[..., None, :, :], -2)


def log_identity(batch_shape: tuple[int, ...], num_tags: int, like: Array) -> Array:
    """Log-semiring identity matrices: 0 on the diagonal, -inf elsewhere, shape (*batch, T, T)."""
    o = ops.of(like)
    eye = o.where(o.astype(o.eye(num_tags, like), o.bool_), 0.0, o.full((num_tags, num_tags), -o.inf, like))
    return o.broadcast_to(eye, (*batch_shape, num_tags, num_tags))


def chain_factors(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> Array:
    """Log-semiring factors of the chain with a virtual boundary state, (B, N+1, T, T)."""
    o = ops.of(emissions)
    batch, length, num_tags = emissions.shape
    start, end = boundary(start, emissions), boundary(end, emissions)
    tags = o.arange(num_tags, emissions)
    first = o.where(tags[:, None] == 0, (emissions[:, 0] + start)[:, None, :], -o.inf)  # (B, T, T): row 0
    inner = per_position(transitions, batch, length) + emissions[:, 1:, None, :]
    last = o.where(tags == 0, end[:, None], -o.inf)  # (T, T): column 0 only
    factors = o.concatenate([first[:, None], inner, o.broadcast_to(last, (batch, 1, num_tags, num_tags))], 1)
    index = o.arange(length + 1, emissions)[None, :, None, None]
    stop = lengths[:, None, None, None]
    factors = o.where(index == stop, last, factors)
    return o.where(index > stop, log_identity((), num_tags, emissions), factors)


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
    return ops.of(states).where(position_mask(lengths, length), states[:, 1:-1], -1)


def log_partition(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> Array:
    """``log Z`` (B,): entry (0, 0) of the tree product; differentiable by autodiff."""
    return _inside(chain_factors(emissions, transitions, lengths, start, end))[-1][:, 0, 0, 0]


def marginals(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> tuple[Array, Array]:
    """Exact unary (B, N, T) and pairwise (B, N-1, T, T) marginals by inside–outside on the tree."""
    factor_marginals = _factor_marginals(chain_factors(emissions, transitions, lengths, start, end))
    return node_and_pair_marginals(factor_marginals, lengths)


def viterbi(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> tuple[Array, Array]:
    """Best score (B,) and best tags (B, N), -1 on padding."""
    score, states = _best_path(chain_factors(emissions, transitions, lengths, start, end))
    return score, tags_from_states(states, lengths)


def _pad_to_power_of_two(factors: Array) -> Array:
    batch, count, num_tags, _ = factors.shape
    padded = 1 << max(count - 1, 0).bit_length()
    if padded == count:
        return factors
    identities = log_identity((batch, padded - count), num_tags, factors)
    return ops.of(factors).concatenate([factors, identities], 1)


def _interleave(left: Array, right: Array) -> Array:
    """(B, K, ...) and (B, K, ...) -> (B, 2K, ...) as left0, right0, left1, right1, ...
    (sizes spelled out: a -1 cannot be inferred from an empty batch)."""
    batch, count, *rest = left.shape
    return ops.of(left).stack([left, right], 2).reshape(batch, 2 * count, *rest)


def _inside(factors: Array) -> list[Array]:
    """Every level of the log-semiring product tree, leaves first; the last is (B, 1, T, T)."""
    levels = [_pad_to_power_of_two(factors)]
    while levels[-1].shape[1] > 1:
        level = levels[-1]
        levels.append(log_matmul(level[:, 0::2], level[:, 1::2]))
    return levels


def _root_indicator(like: Array) -> Array:
    """Log indicator of the boundary-to-boundary entry (0, 0): shape (B, 1, T, T)."""
    o = ops.of(like)
    batch, _, rows, columns = like.shape
    corner = (o.arange(rows, like)[:, None] == 0) & (o.arange(columns, like) == 0)
    return o.where(corner, o.zeros((batch, 1, rows, columns), like), -o.inf)


def _factor_marginals(factors: Array) -> Array:
    """Inside–outside on the tree: the marginal of every factor entry, (B, N+1, T, T).

    An entry's log-weight ``leaf + outside`` is the log-sum of the scores of every path through
    it. Each factor is crossed by every path exactly once, so its entries' marginals sum to 1:
    they are normalised over the factor's (T, T) entries (a softmax), not by subtracting ``log Z``.
    ``exp(leaf + outside − log Z)`` cancels two numbers of the size of the path scores, whose
    rounding error (relative to that size) the ``exp`` turns into marginals of 1.28 at scores of
    1e6 and of inf from 1e12 on in float32; the softmax's largest entry is exactly ``exp(0) = 1``
    and the others only see differences between entries. No rescaling of the outside pass is
    needed: its entries are log-sums of partial path scores, no larger than the path scores, so
    they overflow only where ``crf``'s forward scores would.
    """
    o = ops.of(factors)
    levels = _inside(factors)
    outside = _root_indicator(levels[-1])
    for level in reversed(levels[:-1]):
        left, right = level[:, 0::2], level[:, 1::2]
        outside = _interleave(
            log_matmul(outside, o.swapaxes(right, -1, -2)),  # O_left(a, b) = LSE_c O(a, c) + right(b, c)
            log_matmul(o.swapaxes(left, -1, -2), outside),  # O_right(b, c) = LSE_a left(a, b) + O(a, c)
        )
    count = factors.shape[1]
    return _normalise(levels[0][:, :count] + outside[:, :count])


def _normalise(log_weights: Array) -> Array:
    """Softmax of (..., T, T) log-weights over their last two axes; an all -inf matrix (a sequence
    with no allowed path, possible only unvalidated) gives zeros rather than NaN."""
    o = ops.of(log_weights)
    *batch, rows, columns = log_weights.shape
    flat = log_weights.reshape(*batch, rows * columns)  # no -1: it cannot be inferred when B = 0
    top = o.maximum(o.amax(flat, -1)[..., None], o.finfo(flat.dtype).min)
    weights = o.exp(flat - top)
    # the largest weight is exp(0) = 1, so a sum below 1 means all -inf (sum 0): no division by 0
    return (weights / o.maximum(weights.sum(-1)[..., None], 1.0)).reshape(log_weights.shape)


def _best_path(factors: Array) -> tuple[Array, Array]:
    """Best path score (B,) and its states (B, N+2), boundary state 0 at both ends.

    The max-plus tree stores, for each product, the best middle state of every (start, end)
    pair; going down, each node hands its endpoints and that split point to its two children.
    """
    o = ops.of(factors)
    level = _pad_to_power_of_two(factors)
    splits = []
    while level.shape[1] > 1:
        level, best_middle = max_matmul(level[:, 0::2], level[:, 1::2])
        splits.append(best_middle)
    batch, _, num_tags, _ = factors.shape
    starts = o.zeros((batch, 1), factors, dtype=int)  # the default integer, like argmax
    ends = starts
    for best_middle in reversed(splits):
        flat = best_middle.reshape(*best_middle.shape[:2], num_tags * num_tags)
        middle = o.take_along_axis(flat, (starts * num_tags + ends)[..., None], 2)[..., 0]
        starts, ends = _interleave(starts, middle), _interleave(middle, ends)
    count = factors.shape[1]
    states = o.concatenate([starts[:, :count], ends[:, count - 1 : count]], 1)
    return level[:, 0, 0, 0], states
