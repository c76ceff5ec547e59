"""Collective graphical models (the Bethe paper's Table 5; Sheldon et al. 2013): approximate MAP
inference of a bird population's movements on a grid from noisy counts, by Bethe-RDA (Algorithm 1)
against an interior-point solver of the same convex problem.

M individuals move independently along a Markov chain over the ``side × side`` cells of a grid for
``steps`` weeks; an observer counts y_t(i) ~ Poisson(α n_t(i)) of the n_t(i) individuals in cell i at
week t. With the counts relaxed to the marginals μ = n / M of a chain over cells (the edge
potentials have s = cells² entries), Stirling's approximation makes the log-posterior
``M (⟨θ, μ⟩ + H_B(μ)) + Σ_t Σ_i log Poisson(y_t(i); α M μ_t(i))``: divided by −M, the Bethe problem

    min_{μ ∈ M}  F(μ) = −⟨θ, μ⟩ − H_B(μ) + L(μ),   L = PoissonCounts(y, λ = α M, ψ = 1/M),

with θ the chain's log-probabilities (initial distribution at week 1, transitions between weeks).
F is strictly convex, so both solvers reach the same μ*, and their objectives are compared.

The synthetic model (ours; the paper used the authors' generator, not public): cells on a grid, an
initial distribution favouring the southern rows, and weekly moves drawn from a Gaussian kernel
around the cell one row north with width ``spread`` cells, mixed with 1 % of the uniform
distribution (see :func:`synthetic` for why).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd
import torch
from scipy import sparse
from scipy.special import entr

import implementations
from implementations.energies import PoissonCounts

from ..environment import set_threads
from ..schema import CGM_COLUMNS
from . import GRIDS


@dataclass(frozen=True)
class CGM:
    """One synthetic problem: ``initial`` (C,) and ``transitions`` (C, C) log-probabilities over the
    C cells, ``counts`` y (steps, C) observed, ``population`` M, ``detection`` α."""

    initial: np.ndarray
    transitions: np.ndarray
    counts: np.ndarray
    population: int
    detection: float

    @property
    def cells(self) -> int:
        return len(self.initial)

    @property
    def steps(self) -> int:
        return len(self.counts)

    @property
    def energy(self) -> PoissonCounts:
        """The count likelihood as an energy on μ (NumPy arrays; batch of one)."""
        return PoissonCounts(self.counts[None], self.detection * self.population, 1.0 / self.population)


def synthetic(
    grid: tuple[int, int],
    rng: np.random.Generator,
    *,
    steps: int = 10,
    population: int = 100_000,
    detection: float = 0.2,
    spread: float = 1.5,
    mixing: float = 0.01,
) -> CGM:
    """A migration on a ``rows × columns`` grid of C cells (edge potentials of s = C² entries),
    simulated for ``steps`` weeks: the individuals' true cells are sampled from the chain, the
    observed counts from the Poisson model. The initial distribution and every move mix
    ``mixing`` of the uniform distribution into the kernel, so that every cell has a probability
    of at least ``mixing / C`` after the first week: a count in a cell the model deems all but
    impossible (a marginal of 1e-8 under a Gaussian kernel's tail) would make the first gradient
    ψ y / μ_0 of the count likelihood thousands of nats, and Bethe-RDA's first full step then
    jumps to a vertex where the other counted cells' gradients are larger still."""
    rows, columns = np.divmod(np.arange(grid[0] * grid[1]), grid[1])
    uniform = np.full(len(rows), 1.0 / len(rows))
    initial = np.exp(-1.0 * rows)  # more individuals in the southern rows
    initial = np.log((1 - mixing) * initial / initial.sum() + mixing * uniform)
    north = (rows[None, :] - rows[:, None] - 1.0) ** 2 + (columns[None, :] - columns[:, None]) ** 2
    kernel = np.exp(-north / (2 * spread**2))
    probabilities = (1 - mixing) * kernel / kernel.sum(1, keepdims=True) + mixing * uniform
    cells = np.bincount(rng.choice(len(rows), size=population, p=np.exp(initial)), minlength=len(rows))
    counts = [rng.poisson(detection * cells)]
    for _ in range(steps - 1):
        # a sum of arrays: the population (> 0) leaves some cell occupied, so never the start 0
        cells = cast(np.ndarray, sum(rng.multinomial(n, probabilities[i]) for i, n in enumerate(cells) if n))
        counts.append(rng.poisson(detection * cells))
    return CGM(initial, np.log(probabilities), np.stack(counts).astype(float), population, detection)


def objective(cgm: CGM, unary: np.ndarray, pairwise: np.ndarray) -> float:
    """F(μ) = −⟨θ, μ⟩ − H_B(μ) + L(μ) of node marginals (steps, C) and arc marginals
    (steps-1, C, C) (the chain's Bethe entropy: arcs' entropies less inner nodes' entropies)."""
    score = unary[0] @ cgm.initial + np.sum(pairwise * cgm.transitions)
    entropy = entr(pairwise).sum() - entr(unary[1:-1]).sum()
    energy = float(cgm.energy.value(np, unary[None], pairwise[None], np.ones((1, cgm.steps)))[0])
    return float(-score - entropy + energy)


@dataclass(frozen=True)
class Solution:
    """A solver's μ (node (steps, C), arcs (steps-1, C, C)), its objective F, wall-clock seconds
    and iterations."""

    unary: np.ndarray
    pairwise: np.ndarray
    objective: float
    seconds: float
    iterations: int
    converged: bool


def bethe_rda(cgm: CGM, *, tolerance: float = 1e-7, iterations: int = 2000, beta: float = 0.0) -> Solution:
    """Algorithm 1 (the registry's ``bethe``, torch, float64, batch of one) until no marginal moves
    by more than ``tolerance`` in an iteration; seconds from the call to the result."""
    method = implementations.get("bethe", "torch")
    emissions = np.zeros((1, cgm.steps, cgm.cells))
    emissions[0, 0] = cgm.initial
    arrays = {
        "emissions": torch.tensor(emissions),
        "transitions": torch.tensor(cgm.transitions),
        "lengths": torch.tensor([cgm.steps]),
    }
    energy = PoissonCounts(torch.tensor(cgm.counts[None]), cgm.detection * cgm.population, 1 / cgm.population)
    start = time.perf_counter()
    # the contract's Protocols type the scores positional-only; the kernels take keywords too
    out = method.solve(
        **arrays, energy=energy, solver="rda", beta=beta, iterations=iterations, tolerance=tolerance
    )
    seconds = time.perf_counter() - start
    unary, pairwise = out.unary[0].numpy(), out.pairwise[0].numpy()
    return Solution(
        unary, pairwise, objective(cgm, unary, pairwise), seconds, int(out.iterations), bool(out.converged[0])
    )


def _operators(cells: int, steps: int) -> tuple[sparse.csr_matrix, sparse.csr_matrix, sparse.csr_matrix]:
    """Sparse maps of the stacked arc marginals x = vec(P_1, …, P_{steps−1}) (row-major, each
    P_t (C, C)): each arc's row sums and column sums ((steps−1)·C), and the expansion of arc
    row sums m to the arc entries ((steps−1)·C·C: entry (t, a, b) reads m_t(a))."""
    arcs = steps - 1
    t, a, b = np.unravel_index(np.arange(arcs * cells * cells), (arcs, cells, cells))
    ones, entries = np.ones(len(t)), np.arange(len(t))
    rows = sparse.csr_matrix((ones, (t * cells + a, entries)), shape=(arcs * cells, len(t)))
    columns = sparse.csr_matrix((ones, (t * cells + b, entries)), shape=(arcs * cells, len(t)))
    expand = sparse.csr_matrix((ones, (entries, t * cells + a)), shape=(len(t), arcs * cells))
    return rows, columns, expand


def interior_point(cgm: CGM) -> Solution:
    """The same problem as a conic program solved by Clarabel's interior-point method through
    cvxpy, over the stacked arc marginals x ≥ 0 and node marginals m (each arc's row sums; the
    last node's are the last arc's column sums), with
    ``−H_B(μ) = Σ_t Σ_ab rel_entr(P_t(a,b), μ_t(a)) − H(μ_1)`` (each arc's conditional entropy
    plus the first node's) and the Poisson term's ``−y log μ`` as exponential cones. Seconds
    cover building and solving the program; ``iterations`` are Clarabel's; ``converged`` is false
    where Clarabel reports its solution inaccurate."""
    import cvxpy as cp  # the pipeline's extra; imported here so the rest of the module needs none

    start = time.perf_counter()
    cells, steps = cgm.cells, cgm.steps
    rows, columns, expand = _operators(cells, steps)
    # The program is solved for x' = k x with k = C² (arc entries of order 1, not 1/C²: at
    # C = 224 Clarabel stalls on the unscaled program), and its objective is k F: rel_entr is
    # homogeneous, k entr(u/k) = entr(u) + u log k, and Σ first = k makes the last term constant.
    k = float(cells) ** 2
    x = cp.Variable(rows.shape[1], nonneg=True)
    # Each arc's row sums as variables of their own (one constraint row each): the cones then
    # read one entry of x and one of m, which keeps the interior-point system sparse.
    m = cp.Variable(rows.shape[0], nonneg=True)
    mu = cp.hstack([m, columns[-cells:] @ x])  # node marginals (steps·C,), times k
    first = m[:cells]
    inner = cells * (steps - 2)  # consistency: arc t's column sums are arc t+1's row sums
    constraints = [rows @ x == m, cp.sum(first) == k, columns[:inner] @ x == m[cells:]]
    rate, weight = cgm.detection * cgm.population, 1.0 / cgm.population
    counts = cgm.counts.ravel()
    seen = np.flatnonzero(counts)
    free_energy = (
        -(first @ cgm.initial)
        - np.tile(cgm.transitions.ravel(), steps - 1) @ x
        + cp.sum(cp.rel_entr(x, expand @ m))
        - cp.sum(cp.entr(first))
        + weight * (rate * cp.sum(mu) - k * counts[seen] @ cp.log(rate / k * mu[seen]))
    )
    problem = cp.Problem(cp.Minimize(free_energy), constraints)
    problem.solve(solver=cp.CLARABEL, max_threads=1)  # as the Bethe solver: one thread
    seconds = time.perf_counter() - start
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"Clarabel ended with status {problem.status!r} on the CGM with {cells} cells")
    iterations = problem.solver_stats.num_iters
    if x.value is None or iterations is None:  # set by an optimal solve
        raise RuntimeError(f"Clarabel left no solution or iteration count on the CGM with {cells} cells")
    pairwise = np.clip(x.value / k, 0.0, None).reshape(steps - 1, cells, cells)
    unary = np.concatenate([pairwise.sum(2), pairwise[-1:].sum(1)])
    return Solution(
        unary,
        pairwise,
        objective(cgm, unary, pairwise),
        seconds,
        int(iterations),
        problem.status == cp.OPTIMAL,
    )


#: The table's columns (``crfbench.schema``, which the report reads too).
COLUMNS = CGM_COLUMNS


@dataclass(frozen=True)
class Settings:
    """Table 5's protocol: the ``sizes`` (keys of :data:`GRIDS`), ``trials`` problems each (the
    paper: 10), and the simulated migration (:func:`synthetic`); Bethe-RDA with prox weight
    ``beta`` stops at ``tolerance``."""

    sizes: tuple[str, ...] = tuple(GRIDS)
    trials: int = 10
    steps: int = 10
    population: int = 100_000
    detection: float = 0.2
    tolerance: float = 1e-7
    beta: float = 0.0


def run(settings: Settings, seed: int = 0) -> pd.DataFrame:
    """Time both solvers on one thread (torch's and Clarabel's): one row per (size, trial, solver)
    with seconds, iterations, converged, the objective F, its gap to the better solver's F on that
    problem, and the largest difference between the two solvers' marginals. Trial k's problem
    comes from the random seed (seed, C, k), whatever else runs."""
    set_threads(1)
    rows = []
    for size in settings.sizes:
        grid = GRIDS[size]
        for trial in range(settings.trials):
            rng = np.random.default_rng([seed, grid[0] * grid[1], trial])
            problem = synthetic(
                grid, rng, steps=settings.steps, population=settings.population, detection=settings.detection
            )
            solutions = {
                "bethe-rda": bethe_rda(problem, tolerance=settings.tolerance, beta=settings.beta),
                "interior-point": interior_point(problem),
            }
            best = min(solution.objective for solution in solutions.values())
            difference = float(np.abs(solutions["bethe-rda"].unary - solutions["interior-point"].unary).max())
            for model, solution in solutions.items():
                rows.append(
                    (
                        f"cgm-synthetic-{size}",
                        problem.cells,
                        problem.cells**2,
                        trial,
                        model,
                        solution.seconds,
                        solution.iterations,
                        solution.converged,
                        solution.objective,
                        solution.objective - best,
                        difference,
                    )
                )
    return pd.DataFrame(rows, columns=list(COLUMNS))
