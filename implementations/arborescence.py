"""Maximum spanning arborescences with exactly one root child, in NumPy, on the host.

``tree-crf``'s decoder for both backends (``kernels/dependency.py``): decoding is a discrete,
data-dependent algorithm (find a cycle, contract it, recurse), so it is written once here and the
backends hand it a host copy of their scores, which synchronises with the device.

One sentence of ``n`` words is a graph on nodes ``0..n``, node 0 the root; ``scores[h, m]``
scores the arc ``h -> m`` and ``-inf`` forbids it (column 0 and the diagonal are never arcs). A
dependency tree gives every word one head and reaches every word from the root; the UD convention
adds that exactly one word hangs from the root.

The algorithm is Chu-Liu-Edmonds in its recursive-contraction form (O(n^3) per call): every word
takes its best head; if that makes a cycle, the cycle is contracted into one node whose incoming
arcs are rescored by what they displace, the smaller graph is solved, and the cycle is reopened
where the chosen arc enters it. The single-root constraint (Zmigrod, Vieira and Cotterell 2020,
"Please mind the root"): the unconstrained optimum is returned when it already has one root child
(any tree with one root child is among the trees it beats); otherwise one more run, on scores whose
root arcs are all lowered by a constant larger than the spread of any two trees' scores, finds the
best tree among those with the fewest root children, which is one (a tree with one root child
exists whenever ``root_children`` is not empty): two runs at most, not one per root child.
"""

from __future__ import annotations

import numpy as np


def arcs(scores: np.ndarray, length: int) -> np.ndarray:
    """The (n+1, n+1) float64 arc scores of one sentence's words ``1..n``, ``n = length``: the
    corner of a padded score matrix, with column 0 and the diagonal set to ``-inf``."""
    w = np.array(scores[: length + 1, : length + 1], dtype=np.float64)
    w[:, 0] = -np.inf
    np.fill_diagonal(w, -np.inf)
    return w


def reachability(allowed: np.ndarray) -> np.ndarray:
    """(V, V) bool: ``[u, v]`` whether ``v`` is reachable from ``u`` along ``allowed[h, m]`` arcs
    (every node from itself): the transitive closure, by squaring until it stops growing."""
    reach = allowed | np.eye(len(allowed), dtype=bool)
    while True:
        wider = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
        if (wider == reach).all():
            return reach
        reach = wider


def root_children(w: np.ndarray) -> list[int]:
    """The words that can be the root's only child of a tree of finite score, given ``arcs``:
    the root arc is finite and every word is reachable from that word along finite word arcs."""
    words = reachability(np.isfinite(w[1:, 1:]))
    return [int(c) for c in np.flatnonzero(np.isfinite(w[0])) if c > 0 and words[c - 1].all()]


def find_cycle(heads: np.ndarray) -> np.ndarray | None:
    """The nodes of a cycle of ``heads`` (V,) (``heads[0]`` ignored, node 0 the root), or None."""
    state = np.zeros(len(heads), dtype=np.int8)  # 0 unseen, 1 on the current walk, 2 leads to the root
    state[0] = 2
    for start in range(1, len(heads)):
        walk, node = [], start
        while state[node] == 0:
            state[node] = 1
            walk.append(node)
            node = int(heads[node])
        if state[node] == 1:
            return np.array(walk[walk.index(node) :])
        state[walk] = 2
    return None


def chu_liu_edmonds(w: np.ndarray) -> np.ndarray:
    """Heads (V,) of the highest-scoring arborescence rooted at node 0 (any number of root
    children), ``heads[0] = -1``. ``w`` as :func:`arcs` gives it; every node must be reachable
    from the root along finite arcs (so every column's best head is finite)."""
    heads = w.argmax(0)
    heads[0] = -1
    cycle = find_cycle(heads)
    if cycle is None:
        return heads
    outside = np.setdiff1d(np.arange(len(w)), cycle)  # sorted: the root stays node 0
    c = len(outside)  # the contracted cycle's index in the smaller graph
    contracted = np.full((c + 1, c + 1), -np.inf)
    contracted[:c, :c] = w[np.ix_(outside, outside)]
    # entering the cycle at v displaces v's cycle arc; its score is finite (the column's best)
    enter = w[np.ix_(outside, cycle)] - w[heads[cycle], cycle][None, :]
    enter_at = enter.argmax(1)
    contracted[:c, c] = enter[np.arange(c), enter_at]
    leave = w[np.ix_(cycle, outside)]
    leave_from = leave.argmax(0)
    contracted[c, :c] = leave[leave_from, np.arange(c)]
    contracted[c, 0] = -np.inf
    inner = chu_liu_edmonds(contracted)
    result = heads.copy()  # the cycle keeps its arcs but one
    for j in range(1, c):
        h = int(inner[j])
        result[outside[j]] = cycle[leave_from[j]] if h == c else outside[h]
    entering = int(inner[c])
    result[cycle[enter_at[entering]]] = outside[entering]
    return result


def tree_score(w: np.ndarray, heads: np.ndarray) -> float:
    """The sum of ``w[heads[m], m]`` over the words ``m = 1..n``."""
    return float(w[heads[1:], np.arange(1, len(w))].sum())


def best_tree(scores: np.ndarray, length: int) -> np.ndarray:
    """Heads (length+1,) of the highest-scoring single-root tree over words ``1..length`` of
    ``scores`` (padded (N+1, N+1) or exact), ``-1`` at index 0. A sentence that allows no tree of
    finite score (the input checks refuse it) gets ``-1`` everywhere."""
    w = arcs(scores, length)
    children = root_children(w)
    if not children:
        return np.full(length + 1, -1, dtype=np.int64)
    heads = chu_liu_edmonds(w)
    if np.count_nonzero(heads[1:] == 0) == 1:
        return heads.astype(np.int64)
    # A tree of k root children loses k times the penalty, more than any other difference of two
    # trees' scores (each sums ``length`` finite arcs): the best has one root child (``children``
    # holds one possible) and is the best such tree.
    finite = w[np.isfinite(w)]
    penalty = 1.0 + length * float(finite.max() - finite.min())
    lowered = w.copy()
    lowered[0] -= penalty
    return chu_liu_edmonds(lowered).astype(np.int64)


def tree_problem(heads: np.ndarray, length: int) -> str | None:
    """Why ``heads`` (at least length+1 entries; index 0 and padding ignored) is not a
    single-root tree over words ``1..length``, or None when it is one."""
    words = np.asarray(heads[1 : length + 1], dtype=np.int64)
    for m, h in enumerate(words, start=1):
        if not 0 <= h <= length:
            return f"word {m} has head {int(h)}, outside 0..{length}"
        if h == m:
            return f"word {m} is its own head"
    if np.count_nonzero(words == 0) != 1:
        return f"{np.count_nonzero(words == 0)} words attach to the root, expected exactly 1"
    cycle = find_cycle(np.concatenate([[-1], words]))
    if cycle is not None:
        return f"words {', '.join(str(int(v)) for v in sorted(cycle))} form a cycle"
    return None
