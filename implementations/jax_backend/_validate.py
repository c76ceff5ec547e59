"""Contract checks for jax inputs (``implementations._validation``, with jax's pieces).

Under tracing (``jax.jit``, ``jax.grad``, ``jax.vmap``, ...) values are unknown: when any argument
is a ``jax.core.Tracer`` only the shape and dtype checks run (the same messages, from
``contract``), and the value checks (NaN or +inf, lengths in range, tags in range, feasibility,
a gold sequence with score -inf) are skipped, unless the function is wrapped in
``jax_backend.checked``, which stages NaN, +inf and the lengths' range as checkify checks.
Validate concrete arrays outside the transformed function to get them all; ``validate=False``
skips every check, traced or not.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import Array

from .. import contract
from .._validation import Checks
from . import _chain, _scores, ops
from .checked import check_traced


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


check_scores, check_gold, check_partial = Checks(
    _chain, _scores, ops, _traced, _abstract, check_traced
).functions()
