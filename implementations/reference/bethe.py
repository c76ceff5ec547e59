"""Bethe projections by brute force on one tiny chain: :func:`solve`, the distribution q over every
allowed tag sequence that minimises ``−H(q) − ⟨θ, μ(q)⟩ + L(μ(q))``, found by SciPy's L-BFGS over
logits; and :func:`mirror_descent`, the backends' RDA and MD iterations with every projection a
softmax over all sequences (the agreement report's oracle: same iterations, same numbers).

Among the distributions with marginals μ the chain distribution has the largest entropy, and that
entropy is H_B(μ); so this problem over q and the Bethe problem over the marginal polytope have the
same optimal value and the minimiser's marginals are μ*. It shares nothing with the backends but
the energy objects (called with NumPy): no forward–backward, no mirror descent, no Bethe entropy
formula. For a convex energy (measurements with ψ ≥ 0) the optimum is unique.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy.optimize import minimize

from ..energies import Energy
from .brute_force import all_paths, enumerate_scores
from .common import boundary, dot_safe, entropy, logsumexp, softmax

#: ``(unary, pairwise)``: a shift or dual average, rebuilt element-wise from another pair.
_Pair = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class BetheSolution:
    """μ* of one chain: ``unary (n, T)``, ``pairwise (n-1, T, T)``, and ``value`` = −F(μ*); and,
    from :func:`mirror_descent`, the scores it solved for (start and end folded in, transitions
    per position) and the shift ``(unary, pairwise)`` of its last projection ``softmax(θ − s)``."""

    unary: np.ndarray
    pairwise: np.ndarray
    value: float
    emissions: np.ndarray | None = None
    transitions: np.ndarray | None = None
    shift: tuple[np.ndarray, np.ndarray] | None = None


def _marginals(q: np.ndarray, paths: np.ndarray, num_tags: int) -> tuple[np.ndarray, np.ndarray]:
    n = paths.shape[1]
    unary = np.zeros((n, num_tags))
    pairwise = np.zeros((max(n - 1, 0), num_tags, num_tags))
    for i in range(n):
        np.add.at(unary[i], paths[:, i], q)
    for i in range(n - 1):
        np.add.at(pairwise[i], (paths[:, i], paths[:, i + 1]), q)
    return unary, pairwise


def energy_gradient(energy: Energy, unary: np.ndarray, pairwise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``∇L(μ)`` of one chain: (n, T) and (n-1, T, T), zeros where the energy has no arc term."""
    to_unary, to_pairwise = energy.gradient(np, unary[None], pairwise[None], np.ones((1, len(unary))))
    return to_unary[0], np.zeros_like(pairwise) if to_pairwise is None else to_pairwise[0]


def _energy_value(energy: Energy, unary: np.ndarray, pairwise: np.ndarray) -> float:
    return float(energy.value(np, unary[None], pairwise[None], np.ones((1, len(unary))))[0])


def _on_paths(unary: np.ndarray, pairwise: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """``⟨g, S(y)⟩`` for each path y, for scores or a gradient g = (unary, pairwise) on the
    marginals."""
    n = paths.shape[1]
    total = sum(unary[i, paths[:, i]] for i in range(n))
    return total + sum(pairwise[i, paths[:, i], paths[:, i + 1]] for i in range(n - 1))


def solve(
    emissions: np.ndarray,
    transitions: np.ndarray,
    energy: Energy,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
    gtol: float = 1e-13,
) -> BetheSolution:
    """μ* of one chain (``emissions (n, T)``, ``transitions (T, T)`` or ``(n-1, T, T)``) with an
    energy whose parameters are NumPy arrays for a batch of one."""
    enumeration = enumerate_scores(emissions, transitions, start, end)
    allowed = np.isfinite(enumeration.scores)
    paths, scores = enumeration.paths[allowed], enumeration.scores[allowed]
    num_tags = np.shape(emissions)[1]

    def objective(logits: np.ndarray) -> tuple[float, np.ndarray]:
        log_q = logits - logsumexp(logits)
        q = np.exp(log_q)
        unary, pairwise = _marginals(q, paths, num_tags)
        free_energy = float(np.sum(q * (log_q - scores))) + _energy_value(energy, unary, pairwise)
        slope = log_q + 1 - scores + _on_paths(*energy_gradient(energy, unary, pairwise), paths)  # ∂F/∂q
        return free_energy, q * (slope - np.dot(q, slope))

    result = minimize(
        objective,
        scores - scores.max(),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": gtol, "ftol": 1e-16, "maxiter": 20_000, "maxcor": 30},
    )
    q = softmax(result.x)
    unary, pairwise = _marginals(q, paths, num_tags)
    return BetheSolution(unary, pairwise, -float(result.fun))


def mirror_descent(
    emissions: np.ndarray,
    transitions: np.ndarray,
    energy: Energy,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
    *,
    solver: str = "rda",
    iterations: int = 40,
    beta: float = 0.0,
    decay: float = 1.0,
    **_: object,
) -> BetheSolution:
    """The last iterate of RDA or MD after ``iterations`` on one chain, each projection a softmax
    over every sequence (no forward–backward), and its value ``⟨θ, μ⟩ + H(q) − L(μ)`` from the
    distribution q itself (no Bethe entropy formula): the agreement report's oracle."""
    emissions = np.array(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    emissions[0] += boundary(start, num_tags)
    emissions[-1] += boundary(end, num_tags)
    transitions = np.broadcast_to(transitions, (max(n - 1, 0), num_tags, num_tags)).astype(np.float64)
    paths = all_paths(n, num_tags)

    def project(shift: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
        """The chain distribution over every path at ``θ − shift`` and its marginals."""
        q = softmax(_on_paths(emissions - shift[0], transitions - shift[1], paths))
        return (*_marginals(q, paths, num_tags), q)

    zero: _Pair = (np.zeros_like(emissions), np.zeros_like(transitions))
    unary, pairwise, q = project(zero)
    dual = shift = zero
    for t in range(1, iterations + 1):
        if solver == "rda":
            dual = cast(
                _Pair,
                tuple(
                    d + (g - d) / t
                    for d, g in zip(dual, energy_gradient(energy, unary, pairwise), strict=True)
                ),
            )
            shift = cast(_Pair, tuple(t / (t + beta) * d for d in dual))
        elif solver == "md":
            eta = 1 / (decay * t)
            dual = shift = cast(
                _Pair,
                tuple(
                    (d + eta * g) / (1 + eta)
                    for d, g in zip(dual, energy_gradient(energy, unary, pairwise), strict=True)
                ),
            )
        else:
            raise ValueError(f"solver={solver!r}: the loop covers rda and md")
        unary, pairwise, q = project(shift)
    value = dot_safe(unary, emissions) + dot_safe(pairwise, transitions) + entropy(q)
    value -= _energy_value(energy, unary, pairwise)
    return BetheSolution(unary, pairwise, value, emissions, transitions, shift)
