"""Input checks of the dependency-tree methods (``tree-crf``), for both backends, in the style of
``contract``: each problem raises a one-line ``ValueError`` naming the argument.

``scores`` must be a float32 or float64 ``(B, N+1, N+1)`` array with ``N >= 1``, without NaN or
``+inf`` (``-inf`` forbids an arc); ``lengths`` a ``(B,)`` integer array with
``1 <= lengths[b] <= N``; every sentence must allow a single-root tree of finite score. Gold
``heads`` must be an integer ``(B, N+1)`` array whose words ``1..lengths[b]`` form a single-root
tree of finite score (index 0 and padding may hold anything). The value checks run on a host copy;
under a jax trace (``ops.traced``) only the shape and dtype checks run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import arborescence, contract, ops
from .contract import check_lengths, dtype_kind, raise_for_rows, to_numpy

Array = Any  # a torch.Tensor or a jax.Array


def check_scores(scores: Array, lengths: Array) -> int:
    """Validate ``scores`` and ``lengths``; return ``N``, the padded number of words."""
    if scores.ndim != 3 or scores.shape[1] != scores.shape[2] or scores.shape[1] < 2:
        raise ValueError(f"scores must have shape (B, N+1, N+1) with N >= 1, got {tuple(scores.shape)}")
    if dtype_kind(scores) != "f" or scores.dtype.itemsize < 4:
        raise ValueError(f"scores must be float32 or float64, got dtype {scores.dtype}")
    batch, words = int(scores.shape[0]), int(scores.shape[1]) - 1
    traced = ops.of(scores).traced(scores, lengths)
    check_lengths(lengths, batch, words, values=not traced)
    if traced:
        from .jax_backend.checked import check_traced  # only a jax array is ever traced

        check_traced({"scores": scores}, lengths, words)
        return words
    host = to_numpy(scores)
    if np.isnan(host).any():
        raise ValueError("scores contains NaN")
    if (host == math.inf).any():
        raise ValueError("scores contains +inf (only -inf, meaning 'forbidden', is allowed)")
    sizes = to_numpy(lengths)
    infeasible = [
        not arborescence.root_children(arborescence.arcs(host[b], int(n))) for b, n in enumerate(sizes)
    ]
    raise_for_rows(np.array(infeasible, dtype=bool), "allow no single-root dependency tree of finite score")
    return words


def check_gold(scores: Array, lengths: Array, heads: Array) -> None:
    """Validate the scores and the gold ``heads``: a single-root tree of finite score per sentence."""
    words = check_scores(scores, lengths)
    expected = (int(scores.shape[0]), words + 1)
    if tuple(int(s) for s in heads.shape) != expected:
        raise ValueError(
            f"heads must have shape (B, N+1) = {contract._fmt(expected)}, got {tuple(heads.shape)}"
        )
    if dtype_kind(heads) not in "iu":
        raise ValueError(f"heads must be an integer array, got dtype {heads.dtype}")
    if ops.of(scores).traced(scores, lengths, heads):
        return
    host, sizes, gold = to_numpy(scores), to_numpy(lengths), to_numpy(heads)
    for b, n in enumerate(sizes.tolist()):
        problem = arborescence.tree_problem(gold[b], n)
        if problem is not None:
            raise ValueError(f"heads[{b}] is not a single-root dependency tree: {problem}")
    finite = [
        np.isfinite(arborescence.tree_score(arborescence.arcs(host[b], n), gold[b, : n + 1]))
        for b, n in enumerate(sizes.tolist())
    ]
    raise_for_rows(~np.array(finite, dtype=bool), "have a gold tree (heads) with score -inf")
