"""Single-root dependency trees by enumeration: the oracle of ``tree-crf`` (one sentence, float64).

A sentence of ``n`` words has arc scores ``scores (n+1, n+1)``, ``scores[h, m]`` for the arc
``h -> m``, node 0 the root; ``-inf`` forbids an arc. Every assignment of a head in ``0..n``
(not itself) to each word is listed (``n**n`` of them) and kept when exactly one word hangs from
the root and every word reaches the root by following heads (no cycle). Feasible for ``n <= 6``
or so. Written from the definition, without the matrix-tree theorem or Chu-Liu-Edmonds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .common import logsumexp

#: Enumerate head assignments only up to this many words (``n**n`` assignments).
MAX_WORDS = 6


def is_single_root_tree(heads: tuple[int, ...]) -> bool:
    """``heads[m - 1]`` is the head of word ``m``: one root child, and every word reaches node 0."""
    if sum(h == 0 for h in heads) != 1:
        return False
    for word in range(1, len(heads) + 1):
        node, steps = word, 0
        while node != 0:
            node, steps = heads[node - 1], steps + 1
            if steps > len(heads):
                return False
    return True


def random_tree(rng: np.random.Generator, n: int) -> np.ndarray:
    """Heads (n+1,) of a random single-root tree over ``n`` words, ``-1`` at index 0: the words in
    a random order, the first on the root, each later one on a word before it (so no cycle and one
    root child)."""
    order = rng.permutation(np.arange(1, n + 1))
    heads = np.full(n + 1, -1)
    heads[order[0]] = 0
    for i, word in enumerate(order[1:], start=1):
        heads[word] = order[rng.integers(0, i)]
    return heads


def all_trees(n: int) -> np.ndarray:
    """Every single-root tree over ``n`` words as rows ``(K, n+1)`` of heads, ``-1`` at index 0."""
    if n > MAX_WORDS:
        raise ValueError(f"enumeration is limited to n <= {MAX_WORDS} words, got {n}")
    choices = [[h for h in range(n + 1) if h != m] for m in range(1, n + 1)]
    trees = [(-1, *heads) for heads in itertools.product(*choices) if is_single_root_tree(heads)]
    return np.array(trees, dtype=np.int64).reshape(-1, n + 1)


def tree_scores(scores: np.ndarray, trees: np.ndarray) -> np.ndarray:
    """(K,) the score of each tree: the sum of its arcs' scores (``-inf`` if one is forbidden)."""
    scores = np.asarray(scores, dtype=np.float64)
    n = trees.shape[1] - 1
    words = np.arange(1, n + 1)
    return scores[trees[:, 1:], words[None, :]].sum(1)


@dataclass(frozen=True)
class Answer:
    """What ``tree-crf`` computes on one sentence."""

    log_partition: float
    marginals: np.ndarray  # (n+1, n+1): P(arc h -> m); zero on column 0 and the diagonal
    best_score: float  # the highest score of any single-root tree
    best: np.ndarray  # (n+1,) heads of one highest-scoring tree, -1 at index 0
    gap: float  # best score minus the runner-up's (+inf for a single finite tree)


def oracle(scores: np.ndarray) -> Answer:
    """``log Z``, arc marginals and the best tree of one sentence's ``scores (n+1, n+1)``."""
    n = scores.shape[0] - 1
    trees = all_trees(n)
    values = tree_scores(scores, trees)
    log_z = float(logsumexp(values))
    finite = np.isfinite(values)
    probabilities = np.zeros(len(trees))
    probabilities[finite] = np.exp(values[finite] - log_z)
    marginals = np.zeros((n + 1, n + 1))
    for m in range(1, n + 1):
        np.add.at(marginals[:, m], trees[:, m], probabilities)
    order = np.argsort(-values, kind="stable")
    second = float(values[order[1]]) if len(order) > 1 else -np.inf
    top = float(values[order[0]])
    gap = top - second if np.isfinite(second) else np.inf
    return Answer(log_z, marginals, top, trees[order[0]].copy(), gap)
