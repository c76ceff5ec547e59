"""The contract's scores on torch: the shared kernels of ``implementations.kernels.scores``, run
as they are (each torch operation runs eagerly)."""

from __future__ import annotations

from ..kernels.scores import (
    ArcTerms,
    arc_terms,
    arc_weights,
    boundary,
    clean_padding,
    forbidden_pattern,
    gold_score,
    mask_emissions,
    per_position,
    position_mask,
)

__all__ = [
    "ArcTerms",
    "arc_terms",
    "arc_weights",
    "boundary",
    "clean_padding",
    "forbidden_pattern",
    "gold_score",
    "mask_emissions",
    "per_position",
    "position_mask",
]
