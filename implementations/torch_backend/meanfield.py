"""Naive mean field on torch (the method: ``implementations.kernels.meanfield``): the parallel
update as a Python loop over iterates laid out (B, N, T), differentiated by autograd through
every update."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..kernels import meanfield as _shared
from ..solver import SolverOutput
from ._fixed_point import iterate, iterate_with_errors
from ._scores import position_mask


def _messages(r: Tensor, transitions: Tensor, arcs: Tensor) -> Tensor:
    """Expected transition scores each position receives from its neighbours, (B, N, T).

    ``arcs`` (B, N-1, 1) is 1 for the arcs inside a sequence, so nothing crosses into padding.
    Shared transitions use one matrix product for the whole batch.
    """
    if transitions.ndim == 2:
        from_left = r[:, :-1] @ transitions  # into positions 1..N-1
        from_right = r[:, 1:] @ transitions.T  # into positions 0..N-2
    else:
        from_left = torch.einsum("bia,biac->bic", r[:, :-1], transitions)
        from_right = torch.einsum("bic,biac->bia", r[:, 1:], transitions)
    return F.pad(from_left * arcs, (0, 0, 1, 0)) + F.pad(from_right * arcs, (0, 0, 0, 1))


def _setup(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    start: Tensor | None,
    end: Tensor | None,
    init: str,
    penalty: float,
):
    """The first iterate, the update step and its error (the largest change of a marginal, (B,));
    nothing crosses into padding.

    An iterate is the logits ``z`` (B, N, T) whose softmax is ``r``: one exponential pass per update,
    where carrying ``log r`` takes two (its ``exp`` and a log-softmax's); the marginals' logs are
    read off the last logits by a log-softmax, exact where ``r`` underflows.
    """
    mask = position_mask(lengths, emissions.shape[1])
    scores = _shared.tag_scores(torch.where(mask.unsqueeze(-1), emissions, 0.0), lengths, start, end)
    transitions = _shared.penalised(transitions, penalty)
    arcs = mask[:, 1:].unsqueeze(-1).to(scores.dtype)
    initial = scores if init == "unary" else torch.zeros_like(scores)

    def step(logits: Tensor) -> Tensor:
        return scores + _messages(torch.softmax(logits, dim=-1), transitions, arcs)

    def error(logits: Tensor, previous: Tensor) -> Tensor:
        change = (torch.softmax(logits, dim=-1) - torch.softmax(previous, dim=-1)) * mask.unsqueeze(-1)
        return change.abs().flatten(1).amax(-1)

    return initial, step, error


def _iterate(emissions, transitions, lengths, start, end, *, iterations, init, penalty, tolerance) -> Tensor:
    """Log marginals ``log r`` (B, N, T) after the last update."""
    initial, step, error = _setup(emissions, transitions, lengths, start, end, init, penalty)
    return torch.log_softmax(iterate(step, initial, iterations, tolerance, error), dim=-1)


marginals, decode, loss, partial_loss, log_partition = _shared.meanfield_kernels(
    _iterate, _shared.lower_bound
)


def solve(emissions, transitions, lengths, start, end, *, iterations, init, penalty, tolerance):
    """The marginals with their lower bound and the size of each update
    (``implementations.solver.SolverOutput``)."""
    initial, step, error = _setup(emissions, transitions, lengths, start, end, init, penalty)
    logits, run, errors = iterate_with_errors(step, initial, iterations, tolerance, error)
    log_r = torch.log_softmax(logits, dim=-1)
    return SolverOutput(
        *_shared.solution(emissions, transitions, lengths, start, end, log_r, run, errors, penalty, tolerance)
    )
