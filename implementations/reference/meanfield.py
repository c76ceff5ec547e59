"""Naive mean field for a linear chain with parallel (Jacobi) updates, written as loops.

Mean field as in docs/derivations.md §4, with the contract's conventions: the model is the chain
CRF itself (node scores = emissions, plus ``start`` at position 0 and ``end`` at the last
position; transitions between neighbours). ``r_i`` is a distribution over tags at every
position; one iteration recomputes all of them *from the previous iterate*:

``r_i(t) ∝ exp(u_i(t) + Σ_{t'} r_{i-1}(t') trans[i-1, t', t] + Σ_{t'} r_{i+1}(t') trans[i, t, t'])``

with the left (right) message absent at the first (last) position. ``-inf`` transitions are
replaced by a finite ``penalty`` (``0 · (-inf)`` would be NaN); ``-inf`` node scores stay exact
(they only ever appear inside the softmax, giving exact zeros).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import dot_safe, entropy, logsumexp, softmax, transition_block, unary_scores

INITS: tuple[str, ...] = ("unary", "uniform")


@dataclass(frozen=True)
class MeanFieldResult:
    """``unary (n, T)`` = ``r`` after the last update, ``pairwise (n-1, T, T)`` = outer products
    of neighbours, ``change = max |r^K - r^{K-1}|``, ``lower_bound = E_r[score] + H(r)`` (scores
    with the penalised transitions), and ``history``: every iterate ``r^0..r^K``.

    ``log_unary`` is ``log r`` computed as a log-softmax of the last field, so it stays finite
    (and exact) where ``r`` itself underflows to 0 (a ``-1e4`` penalty does that easily); it is
    ``-inf`` only where a node score is ``-inf``."""

    unary: np.ndarray
    log_unary: np.ndarray
    pairwise: np.ndarray
    change: float
    lower_bound: float
    history: list[np.ndarray]


def penalised_transitions(transitions: np.ndarray, n: int, penalty: float) -> list[np.ndarray]:
    """The ``n - 1`` transition blocks with ``-inf`` replaced by ``penalty``."""
    blocks = []
    for i in range(n - 1):
        block = transition_block(transitions, i)
        blocks.append(np.where(np.isneginf(block), penalty, block))
    return blocks


def meanfield(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
    *,
    iterations: int = 10,
    init: str = "unary",
    penalty: float = 0.0,
) -> MeanFieldResult:
    """Run ``iterations`` Jacobi mean-field updates on one sequence."""
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    u = unary_scores(emissions, start, end)
    trans = penalised_transitions(transitions, n, penalty)
    if init == "unary":
        r = np.stack([softmax(u[i]) for i in range(n)])
        log_r = np.stack([u[i] - logsumexp(u[i]) for i in range(n)])
    else:
        r = np.full((n, num_tags), 1.0 / num_tags)
        log_r = np.log(r)
    history = [r.copy()]
    for _ in range(iterations):
        new = np.zeros_like(r)
        log_new = np.zeros_like(r)
        for i in range(n):
            field = u[i].copy()
            for t in range(num_tags):
                if i > 0:
                    field[t] += sum(r[i - 1, s] * trans[i - 1][s, t] for s in range(num_tags))
                if i < n - 1:
                    field[t] += sum(r[i + 1, s] * trans[i][t, s] for s in range(num_tags))
            new[i] = softmax(field)
            log_new[i] = field - logsumexp(field)
        r, log_r = new, log_new
        history.append(r.copy())
    change = float(np.max(np.abs(history[-1] - history[-2]))) if iterations > 0 else 0.0
    pairwise = np.zeros((n - 1, num_tags, num_tags))
    for i in range(n - 1):
        pairwise[i] = np.outer(r[i], r[i + 1])
    return MeanFieldResult(r, log_r, pairwise, change, lower_bound(r, u, trans), history)


def lower_bound(r: np.ndarray, u: np.ndarray, trans: list[np.ndarray]) -> float:
    """``E_r[score] + H(r)`` for the fully factorised ``r``; ``<= log Z`` (Gibbs' inequality)."""
    value = dot_safe(r, u) + entropy(r)
    for i, block in enumerate(trans):
        value += float(r[i] @ block @ r[i + 1])
    return value
