"""Sequential engine: forward filtering / backward smoothing and Viterbi, one step per position.

Works on the scores directly (no (B, N, T, T) factor tensor is built for shared transitions).
Each step is batched over sequences and tags; only the positions are a Python loop. Sequences
shorter than N stop updating at their length (their state is carried through padding).

Forward filtering keeps, for every step, the normalised weights ``exp(x − max)`` of
``x[a, b] = alpha[a] + transitions[a, b] + emissions[b]`` and their column sums: together they
are ``P(y_{i-1} = a | y_i = b, prefix)``. Backward smoothing turns node marginals at position i
into pairwise marginals at (i-1, i) and node marginals at i-1 with products and sums only, so a
forward–backward pass costs one ``exp`` per score entry (autograd through a log-sum-exp forward
costs two). ``log Z`` uses it as its backward. Everything that can be -inf is guarded, so
forbidden tags get exactly zero marginals and no NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ._scores import boundary, position_mask


def _steps(transitions: Tensor, batch: int, length: int) -> Tensor:
    """Transitions indexable by step: (N-1, B, T, T) or a shared (T, T) repeated lazily."""
    if transitions.ndim == 4:
        return transitions.transpose(0, 1)
    return transitions.expand(max(length - 1, 0), *transitions.shape)


def forward_step(
    alpha: Tensor, transition: Tensor, emission: Tensor, active: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """One filtering step from position i-1 to i: the new ``alpha`` (B, T), the weights (B, T, T)
    and the inverse column sums (B, T) of ``P(y_{i-1} | y_i, prefix)`` (zero where not ``active``,
    (B, 1)); ``transition`` is (B, T, T) or (T, T), ``emission`` (B, T). The hot kernel of ``crf``."""
    weight = alpha.unsqueeze(-1) + transition
    top = weight.amax(1).clamp_min_(torch.finfo(weight.dtype).min)  # all -inf: keep the tag at -inf
    weight = weight.sub_(top.unsqueeze(1)).exp_()
    total = weight.sum(1)
    alpha = torch.where(active, top + torch.log(total) + emission, alpha)
    return alpha, weight, active / total.clamp_min(1.0)


def _filter(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor, end: Tensor
) -> tuple[Tensor, Tensor, list[Tensor], list[Tensor]]:
    """Forward filtering: ``log Z`` (B,), the last tag's marginal (B, T), and per step i >= 1 the
    weights (B, T, T) and inverse column sums (B, T) of ``P(y_{i-1} | y_i, prefix)``.

    ``emissions[i, b]`` is constant in the previous tag, so it cancels from those weights and is
    added to ``alpha`` after the reduction. A column sum is 0 (unreachable tag) or >= 1 (its
    largest weight is 1), so ``1 / max(sum, 1)`` is exact and never divides by zero; it is stored
    as 0 past a sequence's length, which stops smoothing there.
    """
    batch, length, _ = emissions.shape
    active = position_mask(lengths, length).unsqueeze(-1)
    alpha = emissions[:, 0] + start
    weights, inverse_sums = [], []
    for i, step in enumerate(_steps(transitions, batch, length), start=1):
        alpha, weight, inverse_sum = forward_step(alpha, step, emissions[:, i], active[:, i])
        weights.append(weight)
        inverse_sums.append(inverse_sum)
    final = alpha + end
    log_z = torch.logsumexp(final, dim=-1)
    last_marginal = torch.exp(final - log_z.unsqueeze(-1))
    return log_z, last_marginal, weights, inverse_sums


def _smooth(
    last_marginal: Tensor, weights: list[Tensor], inverse_sums: list[Tensor], lengths: Tensor
) -> tuple[Tensor, Tensor]:
    """Backward smoothing: unary (B, N, T) and pairwise (B, N-1, T, T) marginals, zero on padding.

    Linear in ``last_marginal``: scaling it scales every output (the backward of ``log Z`` passes
    its incoming gradient this way).
    """
    active = position_mask(lengths, len(weights) + 1).unsqueeze(-1)
    marginal = last_marginal
    unary, pairwise = [], []
    for i in range(len(weights), 0, -1):  # position i, from the last to 1
        pair = weights[i - 1] * (marginal * inverse_sums[i - 1]).unsqueeze(1)  # zero past the length
        unary.append(marginal)
        pairwise.append(pair)
        marginal = torch.where(active[:, i], pair.sum(-1), marginal)
    unary.append(marginal)
    unary_t = torch.stack(unary[::-1], dim=1) * active
    if not pairwise:  # N = 1: no arcs
        num_tags = last_marginal.shape[-1]
        return unary_t, last_marginal.new_zeros(last_marginal.shape[0], 0, num_tags, num_tags)
    return unary_t, torch.stack(pairwise[::-1], dim=1)


def _last_tag(unary: Tensor, lengths: Tensor) -> Tensor:
    """(B, T) marginal of each sequence's last tag."""
    return unary.gather(1, (lengths - 1)[:, None, None].expand(-1, 1, unary.shape[-1])).squeeze(1)


class _LogPartition(torch.autograd.Function):
    """``log Z`` whose backward is forward filtering / backward smoothing (no per-step graph)."""

    @staticmethod
    def forward(ctx, emissions, transitions, lengths, start, end):  # type: ignore[override]
        log_z, last_marginal, weights, sums = _filter(emissions, transitions, lengths, start, end)
        ctx.save_for_backward(lengths, last_marginal, *weights, *sums)
        ctx.shared = transitions.ndim == 2
        return log_z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):  # type: ignore[override]
        lengths, last_marginal, *saved = ctx.saved_tensors
        steps = len(saved) // 2
        unary, pairwise = _smooth(grad.unsqueeze(-1) * last_marginal, saved[:steps], saved[steps:], lengths)
        grad_transitions = pairwise.sum((0, 1)) if ctx.shared else pairwise
        return unary, grad_transitions, None, unary[:, 0].sum(0), _last_tag(unary, lengths).sum(0)


def log_partition(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> Tensor:
    """``log Z`` (B,); differentiable, its gradient being the marginals."""
    start, end = boundary(start, emissions), boundary(end, emissions)
    return _LogPartition.apply(emissions, transitions, lengths, start, end)


def marginals(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Exact unary (B, N, T) and pairwise (B, N-1, T, T) marginals by forward–backward."""
    _, last_marginal, weights, sums = _filter(
        emissions, transitions, lengths, boundary(start, emissions), boundary(end, emissions)
    )
    return _smooth(last_marginal, weights, sums, lengths)


def viterbi(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Best score (B,) and best tags (B, N), -1 on padding.

    Back-pointers past a sequence's length point to the same tag, so one backtrace over the
    whole batch (a gather per position, no per-item loop) carries each last tag through padding.
    """
    batch, length, num_tags = emissions.shape
    score = emissions[:, 0] + boundary(start, emissions)
    same_tag = torch.arange(num_tags, device=emissions.device).expand(batch, num_tags)
    pointers = []
    for i, step in enumerate(_steps(transitions, batch, length), start=1):
        new_score, best_previous = (score.unsqueeze(-1) + step + emissions[:, i].unsqueeze(-2)).max(dim=1)
        active = (i < lengths).unsqueeze(-1)
        score = torch.where(active, new_score, score)
        pointers.append(torch.where(active, best_previous, same_tag))
    best, tag = (score + boundary(end, emissions)).max(dim=-1, keepdim=True)
    tags = [tag]
    for best_previous in reversed(pointers):
        tag = best_previous.gather(1, tag)
        tags.append(tag)
    path = torch.cat(tags[::-1], dim=1)
    return best.squeeze(-1), torch.where(position_mask(lengths, length), path, -1)
