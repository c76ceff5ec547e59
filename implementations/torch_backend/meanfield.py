"""Naive mean field with parallel (Jacobi) updates, the paper's MF baseline (App. G; AIN).

``r_i ← softmax_t( u_i(t) + Σ_{t'} r_{i-1}(t') s_{i-1}(t', t) + Σ_{t'} r_{i+1}(t') s_i(t, t') )``
for all positions at once, ``iterations`` times, where ``u`` are the tag scores (emissions, with
``start`` at the first and ``end`` at the last position) and ``s`` the transitions.

Mean field multiplies transition scores by probabilities, so a -inf transition would give
``0 · (−inf) = NaN``: every -inf *transition* is replaced by the finite ``penalty``. -inf *tag*
scores (emissions, start, end) never meet a product and stay exact.

The default ``penalty=0`` scores a forbidden transition as neutral: mean field does not see the
hard constraints, as the paper says it cannot (App. G), and may output invalid sequences. A large
penalty swamps the model's scores and locks the parallel updates into a 2-cycle (README, "Mean
field and hard constraints").
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import contract
from . import _validate
from ._scores import boundary, clean_padding, position_mask
from ._tokens import argmax_tags, product_marginals, token_nll, token_partial_nll

INITS = ("unary", "uniform")
DEFAULT_ITERATIONS = 10
DEFAULT_PENALTY = 0.0


class MeanFieldResult(NamedTuple):
    """What :func:`solve` returns: the factorised marginals and how much the last update moved."""

    unary: Tensor  # (B, N, T) r after the last update, zero on padding
    iterations: int  # updates run
    change: Tensor  # (B,) max |r_k − r_{k−1}| of the last update


def _check_options(iterations: int, init: str, penalty: float) -> None:
    contract.check_positive("iterations", iterations, integer=True)
    contract.check_choice("init", init, INITS)
    if not (math.isfinite(penalty) and penalty <= 0):
        raise ValueError(f"penalty must be a finite score <= 0 replacing -inf transitions, got {penalty!r}")


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


def _iterate(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    start: Tensor | None,
    end: Tensor | None,
    iterations: int,
    init: str,
    penalty: float,
) -> tuple[Tensor, Tensor]:
    """Log marginals after the last update and after the one before it, both (B, N, T)."""
    mask = position_mask(lengths, emissions.shape[1])
    scores = _tag_scores(torch.where(mask.unsqueeze(-1), emissions, 0.0), lengths, start, end)
    transitions = _penalised(transitions, penalty)
    arcs = mask[:, 1:].unsqueeze(-1).to(scores.dtype)
    if init == "unary":
        log_r = torch.log_softmax(scores, dim=-1)
    else:
        log_r = torch.full_like(scores, -math.log(scores.shape[-1]))
    previous = log_r
    for _ in range(iterations):
        messages = _messages(torch.exp(log_r), transitions, arcs)
        previous, log_r = log_r, torch.log_softmax(scores + messages, dim=-1)
    return log_r, previous


def solve(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    *,
    start: Tensor | None = None,
    end: Tensor | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    init: str = "unary",
    penalty: float = DEFAULT_PENALTY,
) -> MeanFieldResult:
    """Run the parallel updates and report the marginals and the size of the last update."""
    _check_options(iterations, init, penalty)
    if validate:
        _validate.check_scores(emissions, transitions, lengths, start, end)
    log_r, previous = _iterate(emissions, transitions, lengths, start, end, iterations, init, penalty)
    mask = position_mask(lengths, emissions.shape[1]).unsqueeze(-1)
    r = torch.exp(log_r) * mask
    change = ((r - torch.exp(previous) * mask).abs().flatten(1)).amax(-1)
    return MeanFieldResult(r, iterations, change)


def marginals(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    *,
    start: Tensor | None = None,
    end: Tensor | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    init: str = "unary",
    penalty: float = DEFAULT_PENALTY,
) -> tuple[Tensor, Tensor]:
    """Factorised marginals r (B, N, T) and their products ``r_i ⊗ r_{i+1}`` (B, N-1, T, T)."""
    result = solve(
        emissions,
        transitions,
        lengths,
        start=start,
        end=end,
        validate=validate,
        iterations=iterations,
        init=init,
        penalty=penalty,
    )
    return product_marginals(result.unary, lengths)


def decode(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    *,
    start: Tensor | None = None,
    end: Tensor | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    init: str = "unary",
    penalty: float = DEFAULT_PENALTY,
) -> Tensor:
    """Most probable tag of each factorised marginal (B, N), -1 on padding."""
    result = solve(
        emissions,
        transitions,
        lengths,
        start=start,
        end=end,
        validate=validate,
        iterations=iterations,
        init=init,
        penalty=penalty,
    )
    return argmax_tags(result.unary, lengths)


def loss(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    tags: Tensor,
    *,
    start: Tensor | None = None,
    end: Tensor | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    init: str = "unary",
    penalty: float = DEFAULT_PENALTY,
) -> Tensor:
    """Token cross-entropy on the final marginals (B,), backpropagated through every update (AIN)."""
    _check_options(iterations, init, penalty)
    if validate:
        _validate.check_gold(emissions, transitions, lengths, tags, start, end)
    log_r, _ = _iterate(emissions, transitions, lengths, start, end, iterations, init, penalty)
    return token_nll(log_r, lengths, tags)


def partial_loss(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    allowed: Tensor,
    *,
    start: Tensor | None = None,
    end: Tensor | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    init: str = "unary",
    penalty: float = DEFAULT_PENALTY,
) -> Tensor:
    """``−Σ_i log Σ_{t allowed} r_i(t)`` (B,) on the final marginals, through every update."""
    _check_options(iterations, init, penalty)
    if validate:
        _validate.check_partial(emissions, transitions, lengths, allowed, start, end)
    log_r, _ = _iterate(emissions, transitions, lengths, start, end, iterations, init, penalty)
    return token_partial_nll(log_r, lengths, allowed)


def log_partition(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    *,
    start: Tensor | None = None,
    end: Tensor | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    init: str = "unary",
    penalty: float = DEFAULT_PENALTY,
) -> Tensor:
    """Mean-field lower bound ``E_r[score] + H(r)`` (B,) with -inf transitions at ``penalty``.

    For finite scores it never exceeds the exact ``log Z``.
    """
    _check_options(iterations, init, penalty)
    if validate:
        _validate.check_scores(emissions, transitions, lengths, start, end)
    log_r, _ = _iterate(emissions, transitions, lengths, start, end, iterations, init, penalty)
    clean_emissions, clean_transitions = clean_padding(emissions, transitions, lengths)
    scores = _tag_scores(clean_emissions, lengths, start, end)
    mask = position_mask(lengths, emissions.shape[1]).unsqueeze(-1)
    r = torch.exp(log_r) * mask
    live = mask & torch.isfinite(log_r)
    tag_terms = (r * torch.where(live, scores - log_r, 0.0)).flatten(1).sum(-1)
    _, pairwise = product_marginals(r, lengths)
    return tag_terms + (pairwise * _penalised(clean_transitions, penalty)).flatten(1).sum(-1)
