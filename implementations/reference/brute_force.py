"""Exact linear-chain CRF quantities by enumerating all ``T**n`` tag sequences of one instance.

This is the ground truth for the exact methods (``crf``, ``crf-scan``) and the yardstick for
the approximate ones (bounds on ``log Z``, MAP, restricted partition functions). It uses the
*definition* of a sequence score directly (sum of emissions at the tags, transitions between
consecutive tags, ``start`` of the first tag, ``end`` of the last tag) rather than the folded
arc weights, so it also checks the backends' folding. Feasible for ``T**n`` up to ~10^5.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .common import boundary, logsumexp, transition_block


@dataclass(frozen=True)
class Enumeration:
    """All tag sequences of one instance and their scores.

    ``paths`` is ``(T**n, n)`` int64 in lexicographic order, ``scores`` is ``(T**n,)`` float64
    (``-inf`` for forbidden sequences).
    """

    paths: np.ndarray
    scores: np.ndarray


def all_paths(n: int, num_tags: int) -> np.ndarray:
    """Every sequence in ``{0..T-1}^n`` as rows of an ``(T**n, n)`` int64 array."""
    return np.array(list(itertools.product(range(num_tags), repeat=n)), dtype=np.int64).reshape(-1, n)


def path_score(
    path: np.ndarray,
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
) -> float:
    """Score of one tag sequence, straight from the definition (``-inf`` if forbidden)."""
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    tags = [int(t) for t in path]
    terms = [emissions[i, tags[i]] for i in range(n)]
    terms += [transition_block(transitions, i)[tags[i], tags[i + 1]] for i in range(n - 1)]
    terms += [boundary(start, num_tags)[tags[0]], boundary(end, num_tags)[tags[-1]]]
    total = 0.0
    for term in terms:  # plain Python sum: -inf absorbs, no NaN possible (no +inf allowed)
        total += float(term)
    return total


def enumerate_scores(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
) -> Enumeration:
    """Scores of all ``T**n`` sequences (vectorised over sequences, looped over positions)."""
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    paths = all_paths(n, num_tags)
    scores = np.zeros(len(paths))
    for i in range(n):
        scores = scores + emissions[i, paths[:, i]]
    for i in range(n - 1):
        scores = scores + transition_block(transitions, i)[paths[:, i], paths[:, i + 1]]
    scores = scores + boundary(start, num_tags)[paths[:, 0]] + boundary(end, num_tags)[paths[:, -1]]
    return Enumeration(paths, scores)


def log_partition(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
    allowed: np.ndarray | None = None,
) -> float:
    """``log Z = log sum_y exp(score(y))``; with ``allowed (n, T)`` bool, only over sequences
    whose every tag is allowed (``-inf`` when none is)."""
    enum = enumerate_scores(emissions, transitions, start, end)
    scores = enum.scores
    if allowed is not None:
        scores = np.where(allowed_paths(enum.paths, allowed), scores, -np.inf)
    return float(logsumexp(scores))


def allowed_paths(paths: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """``(num_paths,)`` bool: every tag of the path is permitted by ``allowed (n, T)``."""
    allowed = np.asarray(allowed, dtype=bool)
    n = paths.shape[1]
    ok = np.ones(len(paths), dtype=bool)
    for i in range(n):
        ok &= allowed[i, paths[:, i]]
    return ok


def probabilities(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
) -> Enumeration:
    """Like :func:`enumerate_scores` but ``scores`` replaced by the Gibbs probabilities."""
    enum = enumerate_scores(emissions, transitions, start, end)
    return Enumeration(enum.paths, np.exp(enum.scores - logsumexp(enum.scores)))


def marginals(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact marginals: ``unary (n, T)`` with ``unary[i, t] = P(y_i = t)`` and
    ``pairwise (n-1, T, T)`` with ``pairwise[i, a, b] = P(y_i = a, y_{i+1} = b)``."""
    emissions = np.asarray(emissions, dtype=np.float64)
    n, num_tags = emissions.shape
    enum = probabilities(emissions, transitions, start, end)
    unary = np.zeros((n, num_tags))
    pairwise = np.zeros((max(n - 1, 0), num_tags, num_tags))
    for i in range(n):
        np.add.at(unary[i], enum.paths[:, i], enum.scores)
    for i in range(n - 1):
        np.add.at(pairwise[i], (enum.paths[:, i], enum.paths[:, i + 1]), enum.scores)
    return unary, pairwise


def best(
    emissions: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray | None = None,
    end: np.ndarray | None = None,
) -> tuple[float, np.ndarray, float]:
    """MAP by enumeration: ``(best score, best path (n,), gap to the runner-up score)``.

    The gap is ``+inf`` when there is only one finite sequence; a gap of ~0 means the argmax is
    not unique and a test should compare scores, not paths.
    """
    enum = enumerate_scores(emissions, transitions, start, end)
    order = np.argsort(-enum.scores, kind="stable")
    top = float(enum.scores[order[0]])
    second = float(enum.scores[order[1]]) if len(order) > 1 else -np.inf
    gap = top - second if np.isfinite(second) else np.inf
    return top, enum.paths[order[0]].copy(), gap
