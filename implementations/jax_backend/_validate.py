"""Contract checks for jax inputs: shapes and values (``contract``) plus the ones that need
inference: is any tag sequence allowed, and is the gold sequence's score finite.

Under tracing (``jax.jit``, ``jax.grad``, ``jax.vmap``, ...) values are unknown: when any argument
is a ``jax.core.Tracer`` only the shape and dtype checks run (the same messages, from
``contract``), and the value checks (NaN or +inf, lengths in range, tags in range, feasibility,
a gold sequence with score -inf) are skipped. Validate concrete arrays outside the transformed
function to get them all; ``validate=False`` skips every check, traced or not.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from .. import contract
from . import _chain
from ._scores import forbidden_pattern, gold_score, mask_emissions


class _Abstract:
    """Stand-in for a traced float array: its shape and dtype, and no NaN or +inf to report."""

    def __init__(self, x: Array):
        self.shape, self.ndim, self.dtype = tuple(x.shape), x.ndim, x.dtype

    def __eq__(self, other: object) -> np.bool_:  # type: ignore[override]
        return np.False_

    def __ne__(self, other: object) -> np.bool_:  # type: ignore[override]
        return np.False_

    __hash__ = None  # type: ignore[assignment]


def _traced(*arrays: Array | None) -> bool:
    return any(isinstance(a, jax.core.Tracer) for a in arrays)


def _abstract(x: Array | None, fill: int = 0) -> _Abstract | np.ndarray | None:
    """What the shape/dtype checks see of a traced argument: a float array becomes an
    :class:`_Abstract`, an integer or bool array a host array of ``fill`` (a value that passes)."""
    if x is None:
        return None
    if contract.dtype_kind(x) == "f":
        return _Abstract(x)
    return np.full(x.shape, fill, dtype=x.dtype)


def _has_forbidden(*scores: Array | None) -> bool:
    return any(s is not None and bool(jnp.isneginf(s).any()) for s in scores)


def _check_feasible(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    start: Array | None,
    end: Array | None,
    problem: str,
) -> None:
    """Raise for sequences whose every tag sequence has score -inf (a max-plus pass on the
    -inf pattern; skipped when no score is -inf, since then every sequence is allowed)."""
    if not _has_forbidden(emissions, transitions, start, end):
        return
    best, _ = _chain.viterbi(
        *map(forbidden_pattern, (emissions, transitions)), lengths, *map(forbidden_pattern, (start, end))
    )
    contract.raise_for_rows(jnp.isneginf(best), problem)


def check_scores(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> contract.ChainShape:
    """Validate the scores; every sequence must allow at least one tag sequence."""
    if _traced(emissions, transitions, lengths, start, end):  # shapes and dtypes only
        abstract = (_abstract(emissions), _abstract(transitions), _abstract(lengths, fill=1))
        return contract.check_scores(*abstract, _abstract(start), _abstract(end))
    shape = contract.check_scores(emissions, transitions, lengths, start, end)
    _check_feasible(
        emissions, transitions, lengths, start, end, "allow no tag sequence (every path has score -inf)"
    )
    return shape


def check_gold(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    tags: Array,
    start: Array | None,
    end: Array | None,
) -> None:
    """Validate the scores and gold tags; the gold sequence's score must be finite."""
    shape = check_scores(emissions, transitions, lengths, start, end)
    if _traced(emissions, transitions, lengths, tags, start, end):  # shapes and dtypes only
        contract.check_tags(_abstract(tags), shape, _abstract(lengths, fill=1))
        return
    contract.check_tags(tags, shape, lengths)
    emissions, transitions = lax.stop_gradient(emissions), lax.stop_gradient(transitions)
    score = gold_score(emissions, transitions, lengths, tags, start, end)
    contract.raise_for_rows(jnp.isneginf(score), "have a gold tag sequence (tags) with score -inf")


def check_partial(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    allowed: Array,
    start: Array | None,
    end: Array | None,
) -> None:
    """Validate the scores and the partial-annotation mask; it must allow some tag sequence."""
    shape = check_scores(emissions, transitions, lengths, start, end)
    contract.check_allowed(allowed, shape)
    if _traced(emissions, transitions, lengths, allowed, start, end):  # shapes and dtypes only
        return
    _check_feasible(
        mask_emissions(lax.stop_gradient(emissions), allowed),
        transitions,
        lengths,
        start,
        end,
        "allow no tag sequence under the partial annotation (allowed)",
    )
