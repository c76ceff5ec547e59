"""Contract checks for torch inputs (``implementations._validation``, with torch's pieces)."""

from __future__ import annotations

import torch

from .._validation import Checks
from . import _chain
from ._scores import forbidden_pattern, gold_score, mask_emissions

_CHECKS = Checks(
    viterbi=_chain.viterbi,
    gold_score=gold_score,
    mask_emissions=mask_emissions,
    isneginf=torch.isneginf,
    constant=torch.Tensor.detach,
    forbidden_pattern=forbidden_pattern,
)
check_scores, check_gold, check_partial = _CHECKS.check_scores, _CHECKS.check_gold, _CHECKS.check_partial
