"""SparseMAP on one chain (Niculae et al., 2018) by enumerating every tag sequence: the reference
the SparseMAP solvers are checked against.

SparseMAP picks a distribution ``y`` over tag sequences ``s`` (score ``θ_s``, tag indicators
``m_s ∈ {0,1}^{n×T}``, transition indicators ``n_s``) that solves

    max_{y ∈ Δ}  θᵀy − ½‖u‖²,   u = Σ_s y_s m_s  (the node marginals),

so only the node marginals are penalised; the transition marginals ``v = Σ_s y_s n_s`` enter
through ``θ`` alone (the paper's choice for sequences, ``docs/derivations.md``). ``u*`` is unique,
``y*`` and hence ``v*`` need not be.

Rather than solving over the ``T**n`` weights, this solves the dual, whose variable lives in the
``n·T`` space of ``u``: writing ``u = My`` with a multiplier ``λ`` gives

    min_λ  ½‖λ‖² + max_s (θ_s − m_sᵀλ),   with  u* = λ*  and  τ* = max_s (θ_s − m_sᵀu*),

a quadratic program in ``n·T + 1`` variables (``t`` standing for the max) with one linear
constraint per sequence, solved by SciPy's SLSQP to about 1e-8. The sequences whose constraint is
then tight, ``θ_s − m_sᵀu ≥ τ − 1e-7``, are the candidate support; the KKT system on them (the
paper's Eq. 9) is solved exactly by SciPy's NNLS, which gives the weights and ``τ*`` to rounding
error, and ``u* = Σ y_s m_s`` is checked against the optimality certificate (every
``θ_s − m_sᵀu* ≤ τ*``) before it is returned (docs/derivations.md §8). Sequences of score
``-inf`` never enter.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize, nnls

from .brute_force import enumerate_scores

#: Tight-constraint and certificate tolerance (SLSQP's dual solution is good to about 1e-8).
TIGHT = 1e-7
#: Enumerate at most this many sequences.
LIMIT = 5_000


class SparseMAPSolution(NamedTuple):
    """SparseMAP of one sequence."""

    unary: np.ndarray  # (n, T) u*
    pairwise: np.ndarray  # (n-1, T, T) v* of the returned decomposition
    value: float  # θᵀy* − ½‖u*‖²
    tau: float  # τ*: the largest θ_s − m_sᵀu*, reached on the support
    paths: np.ndarray  # (k, n) the support's tag sequences
    weights: np.ndarray  # (k,) their weights, positive, summing to 1


def sparsemap(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
) -> SparseMAPSolution:
    """SparseMAP of one sequence (``emissions (n, T)``, transitions ``(T, T)`` or ``(n-1, T, T)``)."""
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    if num_tags**n > LIMIT:
        raise ValueError(f"T**n = {num_tags**n} sequences: over the enumeration limit {LIMIT}")
    enumeration = enumerate_scores(emissions, transitions, start, end)
    finite = np.isfinite(enumeration.scores)
    paths, theta = enumeration.paths[finite], enumeration.scores[finite]
    indicators = np.zeros((len(paths), n * num_tags))  # rows m_s, flattened (n, T)
    indicators[np.arange(len(paths))[:, None], np.arange(n) * num_tags + paths] = 1.0
    tight, weights, tau = project(theta, indicators)
    unary = weights @ indicators[tight]
    keep = weights > 0
    support, weights = paths[tight[keep]], weights[keep]
    pairwise = np.zeros((max(n - 1, 0), num_tags, num_tags))
    for path, weight in zip(support, weights, strict=True):
        pairwise[np.arange(n - 1), path[:-1], path[1:]] += weight
    value = float(weights @ theta[tight[keep]] - 0.5 * unary @ unary)
    return SparseMAPSolution(unary.reshape(n, num_tags), pairwise, value, tau, support, weights)


def project(theta: np.ndarray, indicators: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """SparseMAP over the finite-scored atoms ``θ`` (S,) with indicator rows ``indicators`` (S, D),
    any structure's: the indices of the tight atoms, their weights (summing to 1, some maybe 0)
    and ``τ*``, after checking the optimality certificate at ``u* = Σ y_s m_s``."""
    tight = _tight(theta, indicators, _dual(theta, indicators))
    weights, tau = _on_support(theta[tight], indicators[tight])
    unary = weights @ indicators[tight]
    slack = theta - indicators @ unary
    if slack.max() > tau + TIGHT:
        raise RuntimeError(f"certificate fails by {slack.max() - tau:.2e}")
    return tight, weights, tau


def _tight(theta: np.ndarray, indicators: np.ndarray, unary: np.ndarray) -> np.ndarray:
    """Indices of the sequences whose constraint is tight at the dual solution ``unary``."""
    slack = theta - indicators @ unary
    return np.flatnonzero(slack >= slack.max() - TIGHT)


def _on_support(theta: np.ndarray, indicators: np.ndarray) -> tuple[np.ndarray, float]:
    """Exact weights ``y ≥ 0`` and ``τ`` of the KKT system on a support (Eq. 9 of the paper):
    ``G y + τ 1 = θ``, ``1ᵀy = 1`` with ``G`` the Gram matrix of the ``m_s``; NNLS with ``τ``
    split into two non-negative parts, so dependent atoms and spurious tight ones are fine."""
    gram = indicators @ indicators.T
    ones = np.ones((len(theta), 1))
    system = np.block([[gram, -ones, ones], [np.ones((1, len(theta))), np.zeros((1, 2))]])
    solution, residual = nnls(system, np.append(theta, 1.0), maxiter=100 * len(theta))
    if residual > 1e-9:
        raise RuntimeError(f"no distribution on the tight sequences solves the KKT system ({residual:.1e})")
    weights = solution[:-2]
    return weights, float(solution[-1] - solution[-2])  # τ = τ₋ − τ₊


def _dual(theta: np.ndarray, indicators: np.ndarray) -> np.ndarray:
    """``argmin_λ ½‖λ‖² + max_s (θ_s − m_sᵀλ)`` by SLSQP on ``(λ, t)``: ``u*`` to about 1e-8."""
    size = indicators.shape[1]
    best = int(np.argmax(theta))
    start = np.append(indicators[best], theta[best] - indicators[best] @ indicators[best])

    def objective(x: np.ndarray) -> float:
        return 0.5 * x[:size] @ x[:size] + x[size]

    def gradient(x: np.ndarray) -> np.ndarray:
        return np.append(x[:size], 1.0)

    constraint = {  # t − θ_s + m_sᵀλ ≥ 0 for every sequence
        "type": "ineq",
        "fun": lambda x: x[size] - theta + indicators @ x[:size],
        "jac": lambda x: np.hstack([indicators, np.ones((len(theta), 1))]),
    }
    result = minimize(
        objective,
        start,
        jac=gradient,
        constraints=[constraint],
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    if not result.success and result.status != 8:  # 8: no descent left, at the optimum to rounding
        raise RuntimeError(f"SLSQP: {result.message}")
    return result.x[:size]
