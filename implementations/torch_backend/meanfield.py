"""Naive mean field with parallel (Jacobi) updates, the paper's MF baseline (App. G; AIN).

``r_i ← softmax_t( u_i(t) + Σ_{t'} r_{i-1}(t') s_{i-1}(t', t) + Σ_{t'} r_{i+1}(t') s_i(t, t') )``
for all positions at once, ``iterations`` times, where ``u`` are the tag scores (emissions, with
``start`` at the first and ``end`` at the last position) and ``s`` the transitions.

Mean field multiplies transition scores by probabilities, so a -inf transition would give
``0 · (−inf) = NaN``: every -inf *transition* is replaced by the finite ``penalty``. -inf *tag*
scores (emissions, start, end) never meet a product and stay exact.

The default ``penalty=0`` scores a forbidden transition as neutral: mean field does not see the
hard constraints, as the paper says it cannot (App. G), and may output invalid sequences. A large
penalty swamps the model's scores and locks the parallel updates into a 2-cycle (docs/methods.md, "Mean
field and hard constraints").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..solver import SolverOutput
from ._fixed_point import iterate, iterate_with_errors
from ._scores import boundary, clean_padding, position_mask
from ._tokens import argmax_tags, product_marginals, token_nll, token_partial_nll


def _tag_scores(emissions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None) -> Tensor:
    """u (B, N, T): emissions plus start at position 0 and end at position len - 1."""
    is_last = torch.arange(emissions.shape[1], device=lengths.device) == (lengths - 1).unsqueeze(-1)
    scores = torch.cat([emissions[:, :1] + boundary(start, emissions), emissions[:, 1:]], dim=1)
    return torch.where(is_last.unsqueeze(-1), scores + boundary(end, emissions), scores)


def _penalised(transitions: Tensor, penalty: float) -> Tensor:
    """Transitions with every -inf replaced by the finite ``penalty``."""
    return torch.where(torch.isneginf(transitions), penalty, transitions)


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
    scores = _tag_scores(torch.where(mask.unsqueeze(-1), emissions, 0.0), lengths, start, end)
    transitions = _penalised(transitions, penalty)
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


def _lower_bound(emissions, transitions, lengths, start, end, log_r: Tensor, penalty: float) -> Tensor:
    """``E_r[score] + H(r)`` (B,) at the marginals ``r`` (see :func:`log_partition`)."""
    clean_emissions, clean_transitions = clean_padding(emissions, transitions, lengths)
    scores = _tag_scores(clean_emissions, lengths, start, end)
    mask = position_mask(lengths, emissions.shape[1]).unsqueeze(-1)
    r = torch.exp(log_r) * mask
    live = mask & torch.isfinite(log_r)
    tag_terms = (r * torch.where(live, scores - log_r, 0.0)).flatten(1).sum(-1)
    _, pairwise = product_marginals(r, lengths)
    return tag_terms + (pairwise * _penalised(clean_transitions, penalty)).flatten(1).sum(-1)


def _marginals(log_r: Tensor, lengths: Tensor) -> Tensor:
    """r (B, N, T), zero on padding."""
    return torch.exp(log_r) * position_mask(lengths, log_r.shape[1]).unsqueeze(-1)


def marginals(emissions, transitions, lengths, start, end, **options):
    """Factorised marginals r (B, N, T) and their products ``r_i ⊗ r_{i+1}`` (B, N-1, T, T)."""
    log_r = _iterate(emissions, transitions, lengths, start, end, **options)
    return product_marginals(_marginals(log_r, lengths), lengths)


def decode(emissions, transitions, lengths, start, end, **options):
    """Most probable tag of each factorised marginal (B, N), -1 on padding."""
    log_r = _iterate(emissions, transitions, lengths, start, end, **options)
    return argmax_tags(_marginals(log_r, lengths), lengths)


def loss(emissions, transitions, lengths, tags, start, end, **options):
    """Token cross-entropy on the final marginals (B,), backpropagated through every update (AIN)."""
    return token_nll(_iterate(emissions, transitions, lengths, start, end, **options), lengths, tags)


def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """``−Σ_i log Σ_{t allowed} r_i(t)`` (B,) on the final marginals, through every update."""
    return token_partial_nll(
        _iterate(emissions, transitions, lengths, start, end, **options), lengths, allowed
    )


def log_partition(emissions, transitions, lengths, start, end, **options):
    """Mean-field lower bound ``E_r[score] + H(r)`` (B,) with -inf transitions at ``penalty``.

    For finite scores it never exceeds the exact ``log Z``.
    """
    log_r = _iterate(emissions, transitions, lengths, start, end, **options)
    return _lower_bound(emissions, transitions, lengths, start, end, log_r, options["penalty"])


def solve(emissions, transitions, lengths, start, end, *, iterations, init, penalty, tolerance):
    """The marginals with their lower bound and the size of each update
    (``implementations.solver.SolverOutput``)."""
    initial, step, error = _setup(emissions, transitions, lengths, start, end, init, penalty)
    logits, run, errors = iterate_with_errors(step, initial, iterations, tolerance, error)
    log_r = torch.log_softmax(logits, dim=-1)
    unary, pairwise = product_marginals(_marginals(log_r, lengths), lengths)
    value = _lower_bound(emissions, transitions, lengths, start, end, log_r, penalty)
    converged = errors[run - 1] <= (tolerance or 0.0)
    return SolverOutput(unary, pairwise, value, run, converged, errors)
