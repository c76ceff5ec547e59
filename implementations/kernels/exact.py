"""The exact CRF's kernels for both backends and any *engine* that multiplies chain factors.

An engine is a module with ``log_partition``, ``marginals`` and ``viterbi``, each taking
``(emissions, transitions, lengths, start, end)``: a backend's ``_chain`` runs position by
position, its ``_tree`` in a binary tree of depth O(log N). The losses need only ``log Z`` and the
backend's ``gold_score`` and ``mask_emissions`` (its ``_scores``), so ``crf`` and ``crf-scan``, in
torch and in jax, differ only in the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

Array = Any  # a torch.Tensor or a jax.Array


def exact_kernels(engine: ModuleType, scores: ModuleType) -> tuple[Callable[..., Any], ...]:
    """``(marginals, decode, log_partition, loss, partial_loss)`` computed with ``engine``."""

    def marginals(emissions, transitions, lengths, start, end) -> tuple[Array, Array]:
        """Exact tag marginals (B, N, T) and transition marginals (B, N-1, T, T), zero on padding."""
        return engine.marginals(emissions, transitions, lengths, start, end)

    def decode(emissions, transitions, lengths, start, end) -> Array:
        """Viterbi: the highest-scoring tag sequence (B, N) of the backend's default integer dtype
        (torch: int64; jax: int32, int64 with ``jax_enable_x64``), -1 on padding."""
        return engine.viterbi(emissions, transitions, lengths, start, end)[1]

    def log_partition(emissions, transitions, lengths, start, end) -> Array:
        """``log Z`` (B,): log-sum-exp of the scores of every tag sequence; differentiable to any order."""
        return engine.log_partition(emissions, transitions, lengths, start, end)

    def loss(emissions, transitions, lengths, tags, start, end) -> Array:
        """Negative log-likelihood of the gold ``tags`` (B,): ``log Z − score(tags)``."""
        log_z = engine.log_partition(emissions, transitions, lengths, start, end)
        return log_z - scores.gold_score(emissions, transitions, lengths, tags, start, end)

    def partial_loss(emissions, transitions, lengths, allowed, start, end) -> Array:
        """Partial-label NLL (B,): ``log Z − log Z_allowed``, the second summing only the tag
        sequences whose every tag is ``allowed`` (B, N, T) (marginal likelihood of the annotation)."""
        log_z = engine.log_partition(emissions, transitions, lengths, start, end)
        restricted = scores.mask_emissions(emissions, allowed)
        return log_z - engine.log_partition(restricted, transitions, lengths, start, end)

    return marginals, decode, log_partition, loss, partial_loss
