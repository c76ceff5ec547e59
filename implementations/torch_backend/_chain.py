"""Sequential engine on torch (its mathematics: ``implementations.kernels.chain``): the positions
are a Python loop, and ``log Z``'s backward is forward filtering / backward smoothing in a
``torch.autograd.Function`` (:class:`_LogPartition`)."""

from __future__ import annotations

import torch
from torch import Tensor

from ..kernels.chain import last_tag
from ._scores import boundary, position_mask
from ._semiring import largest


def _steps(transitions: Tensor, batch: int, length: int) -> Tensor:
    """Transitions indexable by step: (N-1, B, T, T) or a shared (T, T) repeated lazily."""
    if transitions.ndim == 4:
        return transitions.transpose(0, 1)
    return transitions.expand(max(length - 1, 0), *transitions.shape)


def forward_step(
    alpha: Tensor, transition: Tensor, emission: Tensor, active: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """One filtering step (``kernels.chain``): ``alpha`` (B, T), the weights (B, T, T) and the inverse
    column sums (B, T), zero where not ``active`` (B, 1); ``transition`` (B, T, T) or (T, T),
    ``emission`` (B, T). The hot kernel of ``crf``, updated in place where autograd allows.

    The shift ``top`` is detached, and a column sum clamped at 1 (a 0 becomes 1, which changes no
    value: ``alpha`` stays -inf); ``clamp_min`` passes the derivative at the tie, sum = 1.
    """
    weight = alpha.unsqueeze(-1) + transition
    top = largest(weight.detach(), 1)
    weight = weight.sub_(top.clamp_min(torch.finfo(weight.dtype).min).unsqueeze(1)).exp_()  # no -inf - -inf
    total = weight.sum(1).clamp_min_(1.0)
    alpha = torch.where(active, top + torch.log(total) + emission, alpha)
    return alpha, weight, active / total


def _filter(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor, end: Tensor
) -> tuple[Tensor, Tensor, list[Tensor], list[Tensor]]:
    """Forward filtering: ``log Z`` (B,), the last tag's marginal (B, T), and per step i >= 1 the
    weights (B, T, T) and inverse column sums (B, T) of ``P(y_{i-1} | y_i, prefix)``, as lists."""
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
    last_marginal = torch.softmax(final, dim=-1)
    return log_z, last_marginal, weights, inverse_sums


def _smooth(
    last_marginal: Tensor,
    weights: list[Tensor],
    inverse_sums: list[Tensor],
    lengths: Tensor,
    summed: bool = False,
) -> tuple[Tensor, Tensor]:
    """Backward smoothing (``kernels.chain``): unary (B, N, T) and pairwise (B, N-1, T, T) marginals,
    zero on padding; with ``summed``, the pairwise marginals' sum over the batch and the positions
    (T, T) instead (the gradient of shared transitions), never building the (B, N-1, T, T) array,
    whose allocation costs more than the sum."""
    active = position_mask(lengths, len(weights) + 1).unsqueeze(-1)
    batch, num_tags = last_marginal.shape
    marginal = last_marginal
    unary, pairwise = [], []
    total = last_marginal.new_zeros(batch, num_tags, num_tags) if summed else None  # Σ_i pairwise
    for i in range(len(weights), 0, -1):  # position i, from the last to 1
        pair = weights[i - 1] * (marginal * inverse_sums[i - 1]).unsqueeze(1)  # zero past the length
        unary.append(marginal)
        if total is not None:
            total.add_(pair)  # one operator a step: on a GPU each is a kernel launch
        else:
            pairwise.append(pair)
        marginal = torch.where(active[:, i], pair.sum(-1), marginal)
    unary.append(marginal)
    unary_t = torch.stack(unary[::-1], dim=1) * active
    if total is not None:
        return unary_t, total.sum(0)
    if not pairwise:  # N = 1: no arcs
        return unary_t, last_marginal.new_zeros(batch, 0, num_tags, num_tags)
    return unary_t, torch.stack(pairwise[::-1], dim=1)


class _LogPartition(torch.autograd.Function):
    """``log Z`` whose backward is forward filtering / backward smoothing (no per-step graph).

    A plain backward smooths with the weights saved by the forward pass. A backward that must
    itself be differentiable (``create_graph=True``: gradient penalties, Hessian-vector products)
    filters again from the saved inputs with autograd recording, so the marginals it returns carry
    their own derivative (to any order) instead of coming back detached.
    """

    @staticmethod
    def forward(ctx, emissions, transitions, lengths, start, end):
        log_z, last_marginal, weights, sums = _filter(emissions, transitions, lengths, start, end)
        ctx.save_for_backward(emissions, transitions, lengths, start, end, last_marginal, *weights, *sums)
        ctx.shared = transitions.ndim == 2
        return log_z

    @staticmethod
    def backward(ctx, grad):
        emissions, transitions, lengths, start, end, last_marginal, *saved = ctx.saved_tensors
        steps = len(saved) // 2
        weights, sums = saved[:steps], saved[steps:]
        if torch.is_grad_enabled():  # create_graph: record the pass the gradient comes from
            _, last_marginal, weights, sums = _filter(emissions, transitions, lengths, start, end)
        marginal = grad.unsqueeze(-1) * last_marginal
        unary, grad_transitions = _smooth(marginal, weights, sums, lengths, summed=ctx.shared)
        return unary, grad_transitions, None, unary[:, 0].sum(0), last_tag(unary, lengths).sum(0)


def log_partition(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> Tensor:
    """``log Z`` (B,); differentiable (twice and more), its gradient being the marginals."""
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
    """Best score (B,) and best tags (B, N), -1 on padding; one backtrace over the whole batch,
    a gather per position."""
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
