"""The exact linear-chain CRF behind the contract, for any *engine* that multiplies chain factors.

An engine is a module with ``log_partition``, ``marginals`` and ``viterbi``, each taking
``(emissions, transitions, lengths, start, end)``: ``_chain`` runs position by position,
``_tree`` in a binary tree of depth O(log N). Everything else (validation, losses, the partial
annotation mask) is shared here, so ``crf`` and ``crf-scan`` differ only in the engine.
"""

from __future__ import annotations

from types import ModuleType

from jax import Array

from . import _validate
from ._scores import gold_score, mask_emissions


class ExactCRF:
    """Contract functions of the exact CRF computed with ``engine``."""

    def __init__(self, engine: ModuleType):
        self.engine = engine

    def log_partition(
        self,
        emissions: Array,
        transitions: Array,
        lengths: Array,
        *,
        start: Array | None = None,
        end: Array | None = None,
        validate: bool = True,
    ) -> Array:
        """``log Z`` (B,): log-sum-exp of the scores of every tag sequence; differentiable."""
        if validate:
            _validate.check_scores(emissions, transitions, lengths, start, end)
        return self.engine.log_partition(emissions, transitions, lengths, start, end)

    def marginals(
        self,
        emissions: Array,
        transitions: Array,
        lengths: Array,
        *,
        start: Array | None = None,
        end: Array | None = None,
        validate: bool = True,
    ) -> tuple[Array, Array]:
        """Exact tag marginals (B, N, T) and transition marginals (B, N-1, T, T), zero on padding."""
        if validate:
            _validate.check_scores(emissions, transitions, lengths, start, end)
        return self.engine.marginals(emissions, transitions, lengths, start, end)

    def decode(
        self,
        emissions: Array,
        transitions: Array,
        lengths: Array,
        *,
        start: Array | None = None,
        end: Array | None = None,
        validate: bool = True,
    ) -> Array:
        """Viterbi: the highest-scoring tag sequence (B, N) of the default integer dtype (int64 with
        ``jax_enable_x64``, else int32), -1 on padding."""
        if validate:
            _validate.check_scores(emissions, transitions, lengths, start, end)
        return self.engine.viterbi(emissions, transitions, lengths, start, end)[1]

    def loss(
        self,
        emissions: Array,
        transitions: Array,
        lengths: Array,
        tags: Array,
        *,
        start: Array | None = None,
        end: Array | None = None,
        validate: bool = True,
    ) -> Array:
        """Negative log-likelihood of the gold ``tags`` (B,): ``log Z − score(tags)``."""
        if validate:
            _validate.check_gold(emissions, transitions, lengths, tags, start, end)
        log_z = self.engine.log_partition(emissions, transitions, lengths, start, end)
        return log_z - gold_score(emissions, transitions, lengths, tags, start, end)

    def partial_loss(
        self,
        emissions: Array,
        transitions: Array,
        lengths: Array,
        allowed: Array,
        *,
        start: Array | None = None,
        end: Array | None = None,
        validate: bool = True,
    ) -> Array:
        """Partial-label NLL (B,): ``log Z − log Z_allowed``, the second summing only the tag
        sequences whose every tag is ``allowed`` (B, N, T) (marginal likelihood of the annotation)."""
        if validate:
            _validate.check_partial(emissions, transitions, lengths, allowed, start, end)
        log_z = self.engine.log_partition(emissions, transitions, lengths, start, end)
        restricted = mask_emissions(emissions, allowed)
        return log_z - self.engine.log_partition(restricted, transitions, lengths, start, end)
