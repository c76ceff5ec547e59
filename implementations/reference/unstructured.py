"""The unstructured baseline (docs/derivations.md §5): every token on its own, softmax of its emissions.

Transitions, ``start`` and ``end`` play no part in the scores. They matter only to the
``repair`` decoder, which returns the best *valid* sequence -- valid meaning that no used
transition, start or end score is ``-inf`` -- where a sequence is scored by the sum of its
per-token log-marginals. The repair is computed here by enumeration.
"""

from __future__ import annotations

import numpy as np

from . import brute_force
from .common import logsumexp, softmax, transition_block


def marginals(emissions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``unary (n, T)`` per-token softmax, ``pairwise (n-1, T, T)`` outer products of neighbours."""
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    unary = np.stack([softmax(emissions[i]) for i in range(n)])
    pairwise = np.zeros((n - 1, num_tags, num_tags))
    for i in range(n - 1):
        pairwise[i] = np.outer(unary[i], unary[i + 1])
    return unary, pairwise


def log_partition(emissions: np.ndarray) -> float:
    """``Σ_i logsumexp(emissions[i])`` (the partition function of independent tokens)."""
    emissions = np.asarray(emissions, dtype=np.float64)
    return float(sum(logsumexp(row) for row in emissions))


def loss(emissions: np.ndarray, tags: np.ndarray) -> float:
    """Token cross-entropy summed over the sequence: ``-Σ_i log p_i(y_i)``."""
    unary, _ = marginals(emissions)
    return float(-sum(np.log(unary[i, int(t)]) for i, t in enumerate(tags)))


def partial_loss(emissions: np.ndarray, allowed: np.ndarray) -> float:
    """``-Σ_i log Σ_{t allowed at i} p_i(t)``."""
    unary, _ = marginals(emissions)
    return float(-sum(np.log(unary[i][allowed[i]].sum()) for i in range(len(unary))))


def repair(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
) -> tuple[float, np.ndarray, float]:
    """Best valid sequence under the per-token log-marginals: ``(score, path, gap)``.

    Validity uses only the ``-inf`` pattern of ``transitions``/``start``/``end`` (their finite
    values are ignored); a tag with ``-inf`` emission has log-marginal ``-inf`` and so is never
    chosen either.
    """
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    unary, _ = marginals(emissions)
    with np.errstate(divide="ignore"):
        log_p = np.log(unary)
    mask = (
        np.stack(
            [np.where(np.isneginf(transition_block(transitions, i)), -np.inf, 0.0) for i in range(n - 1)]
        )
        if n > 1
        else np.zeros((0, num_tags, num_tags))
    )
    zero_or_inf = (
        None if start is None else np.where(np.isneginf(np.asarray(start)), -np.inf, 0.0),
        None if end is None else np.where(np.isneginf(np.asarray(end)), -np.inf, 0.0),
    )
    return brute_force.best(log_p, mask, *zero_or_inf)
