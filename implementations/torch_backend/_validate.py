"""Contract checks for torch inputs: shapes and values (``contract``) plus the ones that need
inference: is any tag sequence allowed, and is the gold sequence's score finite."""

from __future__ import annotations

import torch
from torch import Tensor

from .. import contract
from . import _chain
from ._scores import forbidden_pattern, gold_score, mask_emissions


def _has_forbidden(*scores: Tensor | None) -> bool:
    return any(s is not None and bool(torch.isneginf(s).any()) for s in scores)


def _check_feasible(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    start: Tensor | None,
    end: Tensor | None,
    problem: str,
) -> None:
    """Raise for sequences whose every tag sequence has score -inf (a max-plus pass on the
    -inf pattern; skipped when no score is -inf, since then every sequence is allowed)."""
    if not _has_forbidden(emissions, transitions, start, end):
        return
    best, _ = _chain.viterbi(
        *map(forbidden_pattern, (emissions, transitions)), lengths, *map(forbidden_pattern, (start, end))
    )
    contract.raise_for_rows(torch.isneginf(best), problem)


def check_scores(
    emissions: Tensor, transitions: Tensor, lengths: Tensor, start: Tensor | None, end: Tensor | None
) -> contract.ChainShape:
    """Validate the scores; every sequence must allow at least one tag sequence."""
    shape = contract.check_scores(emissions, transitions, lengths, start, end)
    _check_feasible(
        emissions, transitions, lengths, start, end, "allow no tag sequence (every path has score -inf)"
    )
    return shape


def check_gold(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    tags: Tensor,
    start: Tensor | None,
    end: Tensor | None,
) -> None:
    """Validate the scores and gold tags; the gold sequence's score must be finite."""
    shape = check_scores(emissions, transitions, lengths, start, end)
    contract.check_tags(tags, shape, lengths)
    score = gold_score(emissions.detach(), transitions.detach(), lengths, tags, start, end)
    contract.raise_for_rows(torch.isneginf(score), "have a gold tag sequence (tags) with score -inf")


def check_partial(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    allowed: Tensor,
    start: Tensor | None,
    end: Tensor | None,
) -> None:
    """Validate the scores and the partial-annotation mask; it must allow some tag sequence."""
    shape = check_scores(emissions, transitions, lengths, start, end)
    contract.check_allowed(allowed, shape)
    _check_feasible(
        mask_emissions(emissions.detach(), allowed),
        transitions,
        lengths,
        start,
        end,
        "allow no tag sequence under the partial annotation (allowed)",
    )
