"""SparseMAP over the single-root dependency trees of one sentence by enumerating them: the
oracle of ``tree-sparsemap`` (float64). The Euclidean projection of the arc scores onto the convex
hull of the trees' arc indicators, solved as the chain's reference does (``reference.sparsemap``:
the dual QP by SLSQP, then the KKT system on the tight trees by NNLS, the certificate checked),
on the trees listed by ``reference.dependency`` (``n**(n-1)`` of them; ``n <= 5`` words is quick).
Written from the definition, without Chu-Liu-Edmonds or the active set.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .dependency import all_trees, tree_scores
from .sparsemap import project

#: Enumerate the trees only up to this many words.
MAX_WORDS = 5


class TreeSparseMAPSolution(NamedTuple):
    """SparseMAP of one sentence of ``n`` words."""

    marginals: np.ndarray  # (n+1, n+1) μ*[h, m]; zero on column 0 and the diagonal
    value: float  # θᵀy* − ½‖μ*‖²
    trees: np.ndarray  # (k, n+1) the support's heads, -1 at index 0
    weights: np.ndarray  # (k,) their weights, positive, summing to 1


def indicators(trees: np.ndarray) -> np.ndarray:
    """(K, (n+1)²) the flattened ``[h, m]`` arc indicators of the trees ``(K, n+1)``."""
    size = trees.shape[1]
    rows = np.zeros((len(trees), size, size))
    words = np.arange(1, size)
    rows[np.arange(len(trees))[:, None], trees[:, 1:], words[None, :]] = 1.0
    return rows.reshape(len(trees), -1)


def sparsemap(scores: np.ndarray) -> TreeSparseMAPSolution:
    """SparseMAP of one sentence's arc scores ``(n+1, n+1)``, ``-inf`` forbidding an arc."""
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.shape[0] - 1
    if n > MAX_WORDS:
        raise ValueError(f"enumeration is limited to n <= {MAX_WORDS} words, got {n}")
    trees = all_trees(n)
    theta = tree_scores(scores, trees)
    finite = np.isfinite(theta)
    trees, theta = trees[finite], theta[finite]
    rows = indicators(trees)
    tight, weights, _ = project(theta, rows)
    keep = weights > 0
    marginals = weights @ rows[tight]
    value = float(weights @ theta[tight] - 0.5 * marginals @ marginals)
    return TreeSparseMAPSolution(marginals.reshape(n + 1, n + 1), value, trees[tight[keep]], weights[keep])
