"""The SparseMAP paper's Fig. 2 in its own setting: SparseMAP over random-potential dependency trees
(``tree-sparsemap``) solved by the active set and by vanilla, away-step and pairwise Frank–Wolfe,
each traced iteration by iteration (the chain's version, on a trained model's scores, is
``crfbench.sweep``).

Each instance is one sentence of ``words`` words with standard normal arc scores (the paper says
"random potentials" and gives no distribution), the instances drawn in turn from one generator
seeded with ``seed``, so instance i is the same whatever the number of instances. Each solver runs
on each instance alone (a batch of one, so its time and its stopping are its own), in torch on one
CPU thread in float64, from the MAP tree for at most ``iterations`` iterations, stopping earlier
only once converged (the Wolfe gap within rounding). Every solver has ``iterations + 1`` support
slots, so none stops for a full support (at most one tree enters per iteration): the slots are
fixed-size arrays, so every solver's time carries the same cost of the unused ones.

The optimum f* of an instance is the largest objective seen on it: the active set's run continued
to ``reference_iterations`` (the solver is deterministic, so its first ``iterations`` iterates are
the traced ones) and every solver's traced objectives. ``gap = f* − objective ≥ 0``.

The table (``crfbench.schema.TREE_SOLVER_COLUMNS``), one row per (instance, solver, iteration):
``instance``, ``words``, ``solver``, ``iteration`` (0: the MAP tree alone, before any step),
``seconds`` (the solver's own time since it began, the oracle's Chu-Liu-Edmonds calls included, the
recording excluded), ``objective`` (``θᵀy − ½‖μ‖²`` of the iterate), ``optimum`` (f* of the
instance), ``gap`` (f* − objective), ``wolfe_gap`` (the solver's duality gap), ``support`` (trees
of positive weight) and ``converged`` (the solver has stopped converged). A solver's rows end where
it stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from implementations.kernels import sparsemap as kernel
from implementations.kernels import sparsemap_algebra as algebra
from implementations.registry import SPARSEMAP_SOLVERS
from implementations.torch_backend import tree_sparsemap as trees

from .schema import TREE_SOLVER_COLUMNS

#: The solver whose continued run gives the optimum (the paper's Algorithm 2).
REFERENCE_SOLVER = "active-set"


@dataclass(frozen=True)
class Settings:
    """The study's size: sentences of ``words`` words, ``instances`` of them drawn from ``seed``,
    ``iterations`` per solver, the active set continued to ``reference_iterations`` for f*."""

    words: int = 20
    instances: int = 5
    iterations: int = 100
    reference_iterations: int = 1000
    seed: int = 0
    solvers: tuple[str, ...] = SPARSEMAP_SOLVERS

    def __post_init__(self) -> None:
        for name in ("words", "instances", "iterations", "reference_iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.reference_iterations < self.iterations:
            raise ValueError(
                f"reference_iterations ({self.reference_iterations}) must be at least iterations "
                f"({self.iterations})"
            )
        unknown = [name for name in self.solvers if name not in SPARSEMAP_SOLVERS]
        if unknown or not self.solvers:
            raise ValueError(f"solvers: use some of {', '.join(SPARSEMAP_SOLVERS)}, got {list(self.solvers)}")


def random_scores(settings: Settings) -> list[np.ndarray]:
    """Each instance's standard normal arc scores (N+1, N+1), float64, drawn in turn from ``seed``."""
    generator = np.random.default_rng(settings.seed)
    size = settings.words + 1
    return [generator.standard_normal((size, size)) for _ in range(settings.instances)]


def trace(scores: np.ndarray, solver: str, iterations: int, slots: int) -> pd.DataFrame:
    """``solver`` on one sentence's arc ``scores`` (N+1, N+1) for at most ``iterations``: one row
    per iterate (iteration, seconds, objective, wolfe_gap, support, converged), 0 the MAP tree."""
    batch = torch.as_tensor(scores, dtype=torch.float64)[None]
    lengths = torch.tensor([scores.shape[0] - 1])
    rows = []
    with torch.no_grad():
        start = time.perf_counter()
        problem, state = trees.begin(batch, lengths, tolerance=None, max_support=slots)
        elapsed = time.perf_counter() - start
        for iteration in range(iterations + 1):
            if iteration:
                if bool(state.done.all()):
                    break
                start = time.perf_counter()
                state = kernel.iterate(problem, state, solver)
                elapsed += time.perf_counter() - start
            unary = algebra.unary(state.paths, state.weights, problem.emissions.shape[-1])
            rows.append(
                {
                    "iteration": iteration,
                    "seconds": elapsed,
                    "objective": float(kernel.objective(state, unary)[0]),
                    "wolfe_gap": max(float(state.gap[0]), 0.0),
                    "support": int((state.active & (state.weights > 0)).sum()),
                    "converged": bool(state.done[0] & ~state.stalled[0]),
                }
            )
    return pd.DataFrame(rows)


def run(settings: Settings) -> pd.DataFrame:
    """Every solver of ``settings`` on every instance: the table of the module's docstring."""
    slots = settings.iterations + 1
    parts = []
    for instance, scores in enumerate(random_scores(settings)):
        traces = {}
        for solver in settings.solvers:
            cap = settings.reference_iterations if solver == REFERENCE_SOLVER else settings.iterations
            traces[solver] = trace(scores, solver, cap, slots)
        if REFERENCE_SOLVER not in traces:
            reference = trace(scores, REFERENCE_SOLVER, settings.reference_iterations, slots)
        else:
            reference = traces[REFERENCE_SOLVER]
        optimum = max(float(frame["objective"].max()) for frame in [reference, *traces.values()])
        for solver, frame in traces.items():
            frame = frame[frame["iteration"] <= settings.iterations]
            parts.append(
                frame.assign(
                    instance=instance,
                    words=settings.words,
                    solver=solver,
                    optimum=optimum,
                    gap=optimum - frame["objective"],
                )
            )
    return pd.concat(parts, ignore_index=True)[list(TREE_SOLVER_COLUMNS)]
