"""Bethe projections' solvers (Vilnis et al. 2015) against N, T and the number of non-local
measurements: one solve of a batch of random scores under a convex soft-constraint energy
(``implementations.energies.Measurements``, J random measurements of the expected tag counts), by
Bethe-RDA, Bethe-MD and accelerated RDA (the registry's defaults otherwise), each until no marginal
moves by more than ``TOLERANCE`` or ``ITERATIONS``: time to solve, iterations run and share
converged. CPU, torch, one thread (``common.use_device``). The scores are float32, whose rounding
(1e-7 on a marginal) leaves the registry's 1e-6 too close to call; RDA's O(1/t) steps on random
energies need far more than its default 40 iterations, hence the larger cap.

What it costs decides its shape. A solve is up to ``ITERATIONS`` forward–backward passes, and a
pass slows sharply past a few million arcs (docs/benchmarks.md, "Why the benchmarks are shaped
so"), so the grid stops at ``ELEMENT_CAP`` arcs, below the profile's general cap. The iterations
and the share converged do not depend on timing, so ``setup_cache`` solves every combination once
for both ``track_*`` benchmarks, and ``time_solve`` times fresh solves without a warm-up (each
sample is already hundreds of passes).
"""

from __future__ import annotations

import itertools

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
#: Largest (B, N-1, T, T) a combination may have, in elements (see the module docstring).
ELEMENT_CAP = 2**23

Point = tuple[str, int, int, int, int]  # (solver, measurements, N, T, B)


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


def solver_call(solver: str, count: int, length: int, num_tags: int, batch: int):
    """A no-argument solve of one combination's batch (``NotImplementedError`` past the cap)."""
    use_device("torch", "cpu")
    skip_unless_fits("bethe", "cpu", batch, length, num_tags, cap=ELEMENT_CAP)
    emissions, transitions, lengths, _, start, end = random_scores("torch", "cpu", batch, length, num_tags)
    energy = measurements_energy(count, num_tags, emissions)
    module = implementations.get("bethe", "torch")
    return lambda: module.solve(
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


def solve_outcomes(points: list[Point]) -> dict[Point, tuple[int, float]]:
    """Iterations run and share of the batch converged, for every point that fits the cap."""
    outcomes = {}
    for point in points:
        try:
            result = solver_call(*point)()
        except NotImplementedError:
            continue
        outcomes[point] = (int(result.iterations), float(to_numpy(result.converged).mean()))
    return outcomes


class BetheSolvers:
    """Time to solve a batch by each solver; the ``track_*`` report on one solve (``setup_cache``)."""

    params = (registry.BETHE_SOLVERS, MEASUREMENTS, GRID.lengths, GRID.num_tags, GRID.batch)
    param_names = ("solver", "measurements", "N", "T", "B")
    repeat = GRID.repeat
    rounds = GRID.rounds
    warmup_time = 0.0
    timeout = 600.0

    def setup_cache(self) -> dict[Point, tuple[int, float]]:
        return solve_outcomes(list(itertools.product(*self.params)))

    setup_cache.timeout = 3600.0  # type: ignore[attr-defined]

    def setup(self, outcomes, *point) -> None:
        self.solve = solver_call(*point)

    def time_solve(self, outcomes, *point) -> None:
        self.solve()

    def track_iterations(self, outcomes, *point) -> float:
        return float(outcomes[point][0])

    track_iterations.unit = "iterations"  # type: ignore[attr-defined]

    def track_converged(self, outcomes, *point) -> float:
        """Share of the batch whose marginals stopped moving (by ``TOLERANCE``) within the cap."""
        return float(outcomes[point][1])

    track_converged.unit = "fraction of sentences"  # type: ignore[attr-defined]
