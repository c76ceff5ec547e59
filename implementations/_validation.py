"""The contract's input checks for any backend: shapes and values (``contract``) plus the ones
that need inference (is any tag sequence allowed, is the gold sequence's score finite).

A backend supplies only what is its own: its modules with its max-plus ``viterbi``, its
``gold_score`` and ``mask_emissions``, its ops (how to test for -inf, how to take a value out of
autodiff), and, for a framework that traces (jax), which arrays are abstract and what the shape
checks see of them.
Where any argument is abstract only the shape and dtype checks run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from . import contract

Array = Any  # a torch.Tensor or a jax.Array


@dataclass(frozen=True)
class Checks:
    """``check_scores``, ``check_gold`` and ``check_partial`` for one backend, given its modules:
    ``chain`` (``viterbi``, max-plus), ``scores`` (``gold_score``, ``mask_emissions``,
    ``forbidden_pattern``) and ``ops`` (``isneginf``, ``stop_gradient``)."""

    chain: ModuleType
    scores: ModuleType
    ops: ModuleType
    #: True where any argument is abstract (traced); never, by default
    traced: Callable[..., bool] = lambda *arrays: False
    #: what the shape and dtype checks see of an abstract array (``fill``: a passing integer value)
    stand_in: Callable[..., Any] = lambda x, fill=0: x
    #: the value checks of abstract arrays, staged into the traced program where the backend can
    #: (jax: ``jax_backend.checked``): ``(scores by name, lengths, N)``
    traced_values: Callable[..., None] = lambda scores, lengths, length: None

    def functions(self) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
        """``check_scores``, ``check_gold`` and ``check_partial``, what a backend's ``_validate`` holds."""
        return self.check_scores, self.check_gold, self.check_partial

    def _feasible(self, emissions, transitions, lengths, start, end, problem: str) -> None:
        """Raise for sequences whose every tag sequence has score -inf (a max-plus pass on the
        -inf pattern; skipped when no score is -inf, since then every sequence is allowed)."""
        scores = (emissions, transitions, start, end)
        if not any(s is not None and bool(self.ops.isneginf(s).any()) for s in scores):
            return
        pattern = [self.scores.forbidden_pattern(s) for s in scores]
        best, _ = self.chain.viterbi(pattern[0], pattern[1], lengths, pattern[2], pattern[3])
        contract.raise_for_rows(self.ops.isneginf(best), problem)

    def check_scores(self, emissions, transitions, lengths, start, end) -> contract.ChainShape:
        """Validate the scores; every sequence must allow at least one tag sequence."""
        if self.traced(emissions, transitions, lengths, start, end):  # shapes and dtypes only
            stand_ins = (self.stand_in(emissions), self.stand_in(transitions), self.stand_in(lengths, 1))
            shape = contract.check_scores(*stand_ins, self.stand_in(start), self.stand_in(end))
            scores = {"emissions": emissions, "transitions": transitions, "start": start, "end": end}
            self.traced_values(scores, lengths, shape.length)
            return shape
        shape = contract.check_scores(emissions, transitions, lengths, start, end)
        problem = "allow no tag sequence (every path has score -inf)"
        self._feasible(emissions, transitions, lengths, start, end, problem)
        return shape

    def check_gold(self, emissions, transitions, lengths, tags, start, end) -> None:
        """Validate the scores and gold tags; the gold sequence's score must be finite."""
        shape = self.check_scores(emissions, transitions, lengths, start, end)
        if self.traced(emissions, transitions, lengths, tags, start, end):  # shapes and dtypes only
            contract.check_tags(self.stand_in(tags), shape, self.stand_in(lengths, 1))
            return
        contract.check_tags(tags, shape, lengths)
        emissions, transitions = self.ops.stop_gradient(emissions), self.ops.stop_gradient(transitions)
        score = self.scores.gold_score(emissions, transitions, lengths, tags, start, end)
        contract.raise_for_rows(self.ops.isneginf(score), "have a gold tag sequence (tags) with score -inf")

    def check_partial(self, emissions, transitions, lengths, allowed, start, end) -> None:
        """Validate the scores and the partial-annotation mask; it must allow some tag sequence."""
        shape = self.check_scores(emissions, transitions, lengths, start, end)
        contract.check_allowed(allowed, shape)
        if self.traced(emissions, transitions, lengths, allowed, start, end):  # shapes and dtypes only
            return
        masked = self.scores.mask_emissions(self.ops.stop_gradient(emissions), allowed)
        problem = "allow no tag sequence under the partial annotation (allowed)"
        self._feasible(masked, transitions, lengths, start, end, problem)
