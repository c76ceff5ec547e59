"""Contract checks for torch inputs (``implementations._validation``, with torch's pieces)."""

from __future__ import annotations

from .._validation import Checks
from . import _chain, _scores, ops

check_scores, check_gold, check_partial = Checks(_chain, _scores, ops).functions()
