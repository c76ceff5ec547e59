"""Bethe projections' solvers (Vilnis et al. 2015) against N, T and the number of non-local
measurements: one solve of a batch of random scores under a convex soft-constraint energy
(``implementations.energies.Measurements``, J random measurements of the expected tag counts), by
Bethe-RDA, Bethe-MD and accelerated RDA (the registry's defaults otherwise), each until no marginal
moves by more than ``TOLERANCE`` or ``ITERATIONS``: time to solve, iterations run and share
converged. CPU, torch, one thread (``common.use_device``). The scores are float32, whose rounding
(1e-7 on a marginal) leaves the registry's 1e-6 too close to call; RDA's O(1/t) steps on random
energies need far more than its default 40 iterations, hence the larger cap.
"""

from __future__ import annotations

import numpy as np
import torch

import implementations
from implementations import energies, registry
from implementations.contract import to_numpy

from .common import GRID, random_scores, skip_unless_fits, use_device

ITERATIONS = 200
TOLERANCE = 1e-4
#: Numbers of measurements J: a few global constraints, and as many as the citation model's.
MEASUREMENTS = (4, 64)


def measurements_energy(count: int, num_tags: int, like: torch.Tensor) -> energies.Measurements:
    """J = ``count`` random convex soft constraints on the expected tag counts, in ``like``'s dtype."""
    rng = np.random.default_rng(count * 1000 + num_tags)
    arrays = {
        "unary_weights": rng.normal(size=(count, num_tags)),
        "offsets": rng.normal(size=count),
        "weights": rng.uniform(0.5, 1.5, size=count),
    }
    return energies.Measurements(
        **{name: torch.tensor(value, dtype=like.dtype) for name, value in arrays.items()}
    )


class BetheSolvers:
    """One solve of a batch by each solver; the ``track_*`` report on that solve."""

    params = (registry.BETHE_SOLVERS, MEASUREMENTS, GRID.lengths, GRID.num_tags, GRID.batch)
    param_names = ("solver", "measurements", "N", "T", "B")
    timeout = 600.0

    def setup(self, solver: str, count: int, length: int, num_tags: int, batch: int) -> None:
        use_device("torch", "cpu")
        skip_unless_fits("bethe", "cpu", batch, length, num_tags)
        emissions, transitions, lengths, _, start, end = random_scores(
            "torch", "cpu", batch, length, num_tags
        )
        energy = measurements_energy(count, num_tags, emissions)
        module = implementations.get("bethe", "torch")
        self.solve = lambda: module.solve(
            emissions,
            transitions,
            lengths,
            start=start,
            end=end,
            energy=energy,
            solver=solver,
            iterations=ITERATIONS,
            tolerance=TOLERANCE,
            validate=False,
        )
        self.result = self.solve()

    def time_solve(self, solver: str, count: int, length: int, num_tags: int, batch: int) -> None:
        self.solve()

    def track_iterations(self, solver: str, count: int, length: int, num_tags: int, batch: int) -> float:
        return float(self.result.iterations)

    track_iterations.unit = "iterations"  # type: ignore[attr-defined]

    def track_converged(self, solver: str, count: int, length: int, num_tags: int, batch: int) -> float:
        """Share of the batch whose marginals stopped moving (by ``TOLERANCE``) within the cap."""
        return float(to_numpy(self.result.converged).mean())

    track_converged.unit = "fraction of sentences"  # type: ignore[attr-defined]
