"""SparseMAP's solvers side by side (the SparseMAP paper's Fig. 2 on chains): on the same random
scores as the timings, the active set against vanilla, away-step and pairwise Frank–Wolfe, each
with the registry's iteration budget and support size: time to solve, iterations run, support
size and the Wolfe gap left. CPU, torch, one thread (``common.use_device``).
"""

from __future__ import annotations

import numpy as np

import implementations
from implementations import registry
from implementations.contract import to_numpy

from .common import GRID, random_scores, skip_unless_fits, use_device


class SparseMAPSolvers:
    """One solve of a batch by each solver; the ``track_*`` report on that solve."""

    params = (registry.SPARSEMAP_SOLVERS, GRID.lengths, GRID.num_tags, GRID.batch)
    param_names = ("solver", "N", "T", "B")
    timeout = 600.0

    def setup(self, solver: str, length: int, num_tags: int, batch: int) -> None:
        use_device("torch", "cpu")
        skip_unless_fits("sparsemap", "cpu", batch, length, num_tags)
        emissions, transitions, lengths, _, start, end = random_scores(
            "torch", "cpu", batch, length, num_tags
        )
        module = implementations.get("sparsemap", "torch")
        self.solve = lambda: module.solve(
            emissions, transitions, lengths, start=start, end=end, solver=solver, validate=False
        )
        self.result = self.solve()

    def time_solve(self, solver: str, length: int, num_tags: int, batch: int) -> None:
        self.solve()

    def track_iterations(self, solver: str, length: int, num_tags: int, batch: int) -> float:
        return float(self.result.iterations)

    track_iterations.unit = "iterations"  # type: ignore[attr-defined]

    def track_support_size(self, solver: str, length: int, num_tags: int, batch: int) -> float:
        """Mean number of sequences in the support per sentence."""
        return float((to_numpy(self.result.weights) > 0).sum(-1).mean())

    track_support_size.unit = "sequences"  # type: ignore[attr-defined]

    def track_gap(self, solver: str, length: int, num_tags: int, batch: int) -> float:
        """Largest Wolfe gap left in the batch (0 up to rounding once every sentence converged)."""
        return float(np.max(to_numpy(self.result.error)))

    track_gap.unit = "Wolfe gap"  # type: ignore[attr-defined]

    def track_converged(self, solver: str, length: int, num_tags: int, batch: int) -> float:
        """Share of the batch that reached its optimality certificate."""
        return float(to_numpy(self.result.converged).mean())

    track_converged.unit = "fraction of sentences"  # type: ignore[attr-defined]
