"""The contract's scores on jax: the shared kernels of ``implementations.kernels.scores``.

The array-to-array helpers are ``jax.jit``-compiled, so an eager call runs one cached program
per shape instead of one per operation (inside a traced caller they are simply inlined)."""

from __future__ import annotations

import jax

from ..kernels import scores as _shared
from ..kernels.scores import ArcTerms, boundary, per_position, position_mask  # noqa: F401 - re-exported

clean_padding = jax.jit(_shared.clean_padding)
gold_score = jax.jit(_shared.gold_score)
forbidden_pattern = jax.jit(_shared.forbidden_pattern)
mask_emissions = jax.jit(_shared.mask_emissions)
arc_terms = jax.jit(_shared.arc_terms)
arc_weights = jax.jit(_shared.arc_weights)
