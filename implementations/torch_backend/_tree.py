"""Parallel-scan engine: chain factors multiplied in a balanced binary tree, depth O(log N).

The chain is written as ``N + 1`` log-semiring matrices over the tags, with a virtual boundary
state 0: factor 0 leaves the boundary for the first tag (row 0 holds ``emissions[0] + start``),
factor ``i`` (1 <= i < len) is ``transitions[i-1] + emissions[i]``, factor ``len`` returns from
the last tag to the boundary (column 0 holds ``end``), and factors past it are semiring
identities (exact padding for these semirings; not for BCRF). ``log Z`` is entry (0, 0) of the
product, with no special case for lengths 1 and 2.

Level 0 holds these factors (padded with more identities to a power of two);
each level multiplies neighbouring pairs, all pairs at once, in the log semiring (``log Z``) or
the max-plus semiring (Viterbi). Marginals come from an explicit outside pass down the same
tree, and the Viterbi path from following the stored split points down it, so every stage is
O(log N) dependent steps. Work is O(N T³), against O(N T²) for the sequential engine, and so is
memory: every entry point refuses a batch whose largest intermediate would exceed
``contract.SCAN_MEMORY_BUDGET`` (see ``contract.check_scan_memory``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import contract
from ._scores import boundary, per_position, position_mask
from ._semiring import log_identity, log_matmul, max_matmul


def chain_factors(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> Tensor:
    """Log-semiring factors of the chain with a virtual boundary state, (B, N+1, T, T)."""
    batch, length, num_tags = emissions.shape
    start, end = boundary(start, emissions), boundary(end, emissions)
    neg_inf = torch.full((), -torch.inf, dtype=emissions.dtype, device=emissions.device)
    first = torch.where(
        torch.arange(num_tags, device=emissions.device)[:, None] == 0,
        (emissions[:, 0] + start).unsqueeze(1),
        neg_inf,
    )  # (B, T, T): row 0 only
    inner = per_position(transitions, batch, length) + emissions[:, 1:].unsqueeze(2)
    last = torch.where(
        torch.arange(num_tags, device=emissions.device) == 0, end.unsqueeze(-1), neg_inf
    )  # (T, T): column 0 only
    factors = torch.cat([first.unsqueeze(1), inner, last.expand(batch, 1, num_tags, num_tags)], dim=1)
    index = torch.arange(length + 1, device=emissions.device)[None, :, None, None]
    stop = lengths[:, None, None, None]
    eye = torch.full((num_tags, num_tags), -torch.inf, dtype=emissions.dtype, device=emissions.device)
    eye.fill_diagonal_(0.0)
    factors = torch.where(index == stop, last, factors)
    return torch.where(index > stop, eye, factors)


def node_and_pair_marginals(factor_marginals: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """Contract marginals from marginals of the chain factors (B, N+1, T, T).

    Factor ``i + 1`` leaves the tag at position ``i``, so its row sums are the unary marginals and,
    for ``i < len - 1``, it is the pairwise marginal of positions (i, i+1).
    Returns unary (B, N, T) and pairwise (B, N-1, T, T), zero on padding.
    """
    length = factor_marginals.shape[1] - 1
    mask = position_mask(lengths, length)
    unary = factor_marginals[:, 1:].sum(-1) * mask.unsqueeze(-1)
    pairwise = factor_marginals[:, 1:length] * mask[:, 1:, None, None]
    return unary, pairwise


def tags_from_states(states: Tensor, lengths: Tensor) -> Tensor:
    """Tags from the boundary-augmented state path (B, N+2): state ``i + 1`` is the tag at ``i``."""
    length = states.shape[1] - 2
    return torch.where(position_mask(lengths, length), states[:, 1:-1], -1)


def _pad_to_power_of_two(factors: Tensor) -> Tensor:
    batch, count, num_tags, _ = factors.shape
    padded = 1 << max(count - 1, 0).bit_length()
    if padded == count:
        return factors
    return torch.cat([factors, log_identity((batch, padded - count), num_tags, factors)], dim=1)


def _interleave(left: Tensor, right: Tensor) -> Tensor:
    """(B, K, ...) and (B, K, ...) -> (B, 2K, ...) as left0, right0, left1, right1, ..."""
    return torch.stack([left, right], dim=2).flatten(1, 2)


def _inside(factors: Tensor) -> list[Tensor]:
    """Every level of the log-semiring product tree, leaves first; the last is (B, 1, T, T)."""
    levels = [_pad_to_power_of_two(factors)]
    while levels[-1].shape[1] > 1:
        level = levels[-1]
        levels.append(log_matmul(level[:, 0::2], level[:, 1::2]))
    return levels


def _root_indicator(like: Tensor) -> Tensor:
    """Log indicator of the boundary-to-boundary entry (0, 0): shape (B, 1, T, T)."""
    outside = torch.full_like(like[:, :1], -torch.inf)
    outside[:, :, 0, 0] = 0.0
    return outside


def log_partition(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> Tensor:
    """``log Z`` (B,): entry (0, 0) of the tree product; differentiable by autograd."""
    contract.check_scan_memory(emissions)
    return _inside(chain_factors(emissions, transitions, lengths, start, end))[-1][:, 0, 0, 0]


def marginals(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Exact unary (B, N, T) and pairwise (B, N-1, T, T) marginals by inside–outside on the tree."""
    contract.check_scan_memory(emissions)
    factor_marginals = _factor_marginals(chain_factors(emissions, transitions, lengths, start, end))
    return node_and_pair_marginals(factor_marginals, lengths)


def viterbi(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Best score (B,) and best tags (B, N), -1 on padding."""
    contract.check_scan_memory(emissions)
    score, states = _best_path(chain_factors(emissions, transitions, lengths, start, end))
    return score, tags_from_states(states, lengths)


def _factor_marginals(factors: Tensor) -> Tensor:
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
    levels = _inside(factors)
    outside = _root_indicator(levels[-1])
    for level in reversed(levels[:-1]):
        left, right = level[:, 0::2], level[:, 1::2]
        outside = _interleave(
            log_matmul(outside, right.transpose(-1, -2)),  # O_left(a, b) = LSE_c O(a, c) + right(b, c)
            log_matmul(left.transpose(-1, -2), outside),  # O_right(b, c) = LSE_a left(a, b) + O(a, c)
        )
    count = factors.shape[1]
    return _normalise(levels[0][:, :count] + outside[:, :count])


def _normalise(log_weights: Tensor) -> Tensor:
    """Softmax of (..., T, T) log-weights over their last two axes; an all -inf matrix (a sequence
    with no allowed path, possible only unvalidated) gives zeros rather than NaN."""
    flat = log_weights.flatten(-2)
    top = flat.amax(-1, keepdim=True).clamp_min(torch.finfo(flat.dtype).min)
    weights = torch.exp(flat - top)
    # the largest weight is exp(0) = 1, so a sum below 1 means all -inf (sum 0): no division by 0
    return (weights / weights.sum(-1, keepdim=True).clamp_min(1.0)).unflatten(-1, log_weights.shape[-2:])


def _best_path(factors: Tensor) -> tuple[Tensor, Tensor]:
    """Best path score (B,) and its states (B, N+2), boundary state 0 at both ends.

    The max-plus tree stores, for each product, the best middle state of every (start, end)
    pair; going down, each node hands its endpoints and that split point to its two children.
    """
    level = _pad_to_power_of_two(factors)
    splits = []
    while level.shape[1] > 1:
        level, best_middle = max_matmul(level[:, 0::2], level[:, 1::2])
        splits.append(best_middle)
    num_tags = factors.shape[-1]
    starts = torch.zeros(factors.shape[0], 1, dtype=torch.long, device=factors.device)
    ends = torch.zeros_like(starts)
    for best_middle in reversed(splits):
        middle = best_middle.flatten(2).gather(2, (starts * num_tags + ends).unsqueeze(-1)).squeeze(-1)
        starts, ends = _interleave(starts, middle), _interleave(middle, ends)
    count = factors.shape[1]
    states = torch.cat([starts[:, :count], ends[:, count - 1 : count]], dim=1)
    return level[:, 0, 0, 0], states
