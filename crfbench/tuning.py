"""Choosing a learning rate on dev, one rule for every trainer (the chain scorers' ``learning_rates``
grid, ``crfbench.train``; the parsers' grid, ``crfbench.parsing.train``): the rate whose run has the
best dev score wins; when it sits at an edge of the rates tried, the SparseMAP paper widens its grid
by a factor of 2 on that side, so the rule also names the next rate to try."""

from __future__ import annotations

import math
from collections.abc import Mapping


def choose_learning_rate(results: Mapping[float, float]) -> tuple[float, float | None]:
    """The learning rate of the best dev score in ``results`` (rate -> dev score; ties go to the
    smaller rate), and the rate to try next: half the best when it is the smallest tried, twice it
    when it is the largest (the paper's widening at the grid's edges), else None."""
    finite = {rate: value for rate, value in results.items() if not math.isnan(value)}
    if not finite:
        raise ValueError("choose_learning_rate: no run with a dev score")
    best = max(sorted(finite), key=lambda rate: finite[rate])
    if len(finite) < 2:
        return best, None
    if best == min(finite):
        return best, best / 2
    if best == max(finite):
        return best, best * 2
    return best, None
