"""Agreement of the dependency-tree methods (``implementations.DEPENDENCY_METHODS``): the part of
``crfbench agree`` for arc scores, in the same table (``crfbench.agreement``).

Every method × backend runs on small random batches (``Grid.tree_lengths``: the longest sentence
has N ≤ 5 words, so the enumeration oracle ``implementations.reference.dependency`` can list every
tree; 3 sentences, one of full length and two shorter, garbage of ±large and ``-inf`` past each
length, on column 0 and on the diagonal; with and without about a third of the arcs ``-inf``,
a planted tree keeping each sentence feasible; float32 and float64). Each backend is compared with
the other, with the oracle and, where it is installed, with torch-struct's
``NonProjectiveDependencyCRF`` (single root), on ``log_partition`` and the arc ``marginals``, at
the chain methods' tolerances (``agreement.TOLERANCES``). The table's ``T`` column is 0: a tree
has no tag set.

Decoding is compared tree by tree: two decoded trees agree when their heads are equal or, at a
tie, when their scores are (float64 scores of the instance, within the dtype's tolerance); the
error of a sentence is the difference of the scores. Against the oracle that is the best score.

torch-struct exponentiates the scores unshifted and adds ``1e-5`` to every arc weight ``exp(s)``
(``implementations.peers.to_torch_struct_dependency``), so it only approximates the model, and
needs finite scores: it is run on the instances without ``-inf``, its non-arcs set to 0, and held
to :data:`TORCH_STRUCT_TOLERANCE`, the size of that perturbation, not to rounding.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

import implementations
from implementations import arborescence, registry
from implementations.interop import from_numpy, to_numpy
from implementations.reference import oracles
from implementations.reference.dependency import random_tree

from .agreement import BATCH, COLUMNS, SETTINGS, TOLERANCES, compare, release_compiled

if TYPE_CHECKING:
    from .agreement import Grid

#: Name of torch-struct's column in the table (``backend_b``).
TORCH_STRUCT = "torch-struct"
#: (atol, rtol, unused) against torch-struct: its ``+1e-5`` on each arc weight moves ``log Z`` and
#: the marginals by up to about 1e-5 / (smallest arc weight) ≈ 1e-3 at scores of N(0, 4).
TORCH_STRUCT_TOLERANCE = (1e-3, 0.0, 0.0)
#: Fraction of arcs forbidden (``-inf``) in a constrained instance, as the chains'.
FORBIDDEN = 1 / 3
#: Score standard deviation, as the chains' (``agreement.make_instance``).
SCALE = 2.0
#: Garbage past each length, on column 0 and on the diagonal: never an arc, so never read.
GARBAGE = (-np.inf, 1e4)

Results = dict[tuple[str, str], np.ndarray]


class TreeInstance(NamedTuple):
    """One batch in NumPy float64."""

    scores: np.ndarray  # (B, N+1, N+1), scores[b, h, m] the arc h -> m, node 0 the root
    lengths: np.ndarray  # (B,)


def arc_mask(words: int, lengths: np.ndarray) -> np.ndarray:
    """(B, N+1, N+1) bool: the arcs h -> m of each sentence (m a word, h != m, neither padding)."""
    index = np.arange(words + 1)
    inside = index[None, :] <= lengths[:, None]
    word = inside & (index[None, :] >= 1)
    return inside[:, :, None] & word[:, None, :] & (index[:, None] != index[None, :])[None]


def make_tree_instance(words: int, neg_inf: bool, seed: int) -> TreeInstance:
    """A random batch: scores N(0, SCALE²), a third ``-inf`` with ``neg_inf`` but for a planted
    tree's arcs, :data:`GARBAGE` on every non-arc."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([[words], rng.integers(1, words + 1, size=BATCH - 1)])
    scores = rng.normal(size=(BATCH, words + 1, words + 1)) * SCALE
    if neg_inf:
        scores[rng.random(scores.shape) < FORBIDDEN] = -np.inf
    for b, n in enumerate(lengths.tolist()):
        heads = random_tree(rng, n)
        scores[b, heads[1:], np.arange(1, n + 1)] = rng.normal(size=n) * SCALE
    mask = arc_mask(words, lengths)
    return TreeInstance(np.where(mask, scores, rng.choice(GARBAGE, size=scores.shape)), lengths)


def run_tree_backend(method: str, backend: str, instance: TreeInstance, dtype: str) -> Results:
    """``log_partition``, ``marginals`` and ``decode`` of ``method`` in ``backend``."""
    module = implementations.get(method, backend)
    options = dict(SETTINGS[method].options)
    scores = from_numpy(instance.scores, backend, dtype)
    lengths = from_numpy(instance.lengths, backend)
    return {
        ("log_partition", "value"): to_numpy(module.log_partition(scores, lengths, **options)),
        ("marginals", "arcs"): to_numpy(module.marginals(scores, lengths, **options)),
        ("decode", "heads"): to_numpy(module.decode(scores, lengths, **options)),
    }


def run_tree_reference(method: str, instance: TreeInstance) -> Results | None:
    """The method's oracle (``registry.DEPENDENCY_REGISTRY``) in the backends' layout, or None
    past the oracle's limit on words."""
    oracle = getattr(oracles, registry.DEPENDENCY_REGISTRY[method].oracle)
    batch, size, _ = instance.scores.shape
    results: Results = {
        ("log_partition", "value"): np.zeros(batch),
        ("marginals", "arcs"): np.zeros((batch, size, size)),
        ("decode", "heads"): np.full((batch, size), -1),
    }
    for b, n in enumerate(instance.lengths.tolist()):
        answer = oracle(instance.scores[b, : n + 1, : n + 1])
        if answer is None:
            return None
        # tree-sparsemap's "log_partition" is its value; its decoding (the heaviest tree of a
        # support, which need not be unique) is compared across backends only
        value = answer.log_partition if hasattr(answer, "log_partition") else answer.value
        results["log_partition", "value"][b] = value
        results["marginals", "arcs"][b, : n + 1, : n + 1] = answer.marginals
        if hasattr(answer, "best"):
            results["decode", "heads"][b, : n + 1] = answer.best
        else:
            results.pop(("decode", "heads"), None)
    return results


def run_torch_struct(instance: TreeInstance, dtype: str) -> Results | None:
    """torch-struct's ``log Z`` and marginals (its non-arcs set to 0), or None without it or
    with ``-inf`` scores."""
    try:
        import torch_struct
    except ImportError:
        return None
    if np.isneginf(instance.scores[arc_mask(instance.scores.shape[1] - 1, instance.lengths)]).any():
        return None
    from implementations import peers

    finite = np.where(arc_mask(instance.scores.shape[1] - 1, instance.lengths), instance.scores, 0.0)
    scores, lengths = from_numpy(finite, "torch", dtype), from_numpy(instance.lengths, "torch")
    crf = torch_struct.NonProjectiveDependencyCRF(peers.to_torch_struct_dependency(scores), lengths=lengths)
    return {
        ("log_partition", "value"): to_numpy(crf.partition),
        ("marginals", "arcs"): to_numpy(peers.from_torch_struct_dependency(crf.marginals)),
    }


def compare_trees(
    got: np.ndarray, expected: np.ndarray, instance: TreeInstance, tolerance: tuple[float, float, float]
) -> tuple[float, float, float]:
    """(max_abs_err, max_rel_err, tolerance) of decoded trees: 0 for equal heads, else the
    difference of the two trees' float64 scores (a tie scores 0)."""
    errors, best = [], []
    for b, n in enumerate(instance.lengths.tolist()):
        arcs = arborescence.arcs(instance.scores[b], n)
        mine, theirs = got[b, : n + 1], expected[b, : n + 1]
        reference = arborescence.tree_score(arcs, theirs)
        best.append(reference)
        same = bool((mine[1:] == theirs[1:]).all())
        errors.append(0.0 if same else abs(arborescence.tree_score(arcs, mine) - reference))
    errors_array = np.nan_to_num(np.array(errors), nan=np.inf)
    scale = float(np.abs(np.array(best)).max(initial=0.0))
    worst = float(errors_array.max(initial=0.0))
    atol, rtol, _ = tolerance
    return worst, worst / max(scale, np.finfo(np.float64).tiny), atol + rtol * scale


def tree_rows(grid: Grid, backends: tuple[str, ...]) -> Iterator[dict[str, object]]:
    """One row per comparison of every dependency-tree method, over ``grid.tree_lengths``."""
    points = itertools.product(grid.tree_lengths, grid.neg_inf)
    for seed, (words, neg_inf) in enumerate(points):
        if neg_inf == grid.neg_inf[0]:  # a new shape: the last one's programs are never reused
            release_compiled(backends)
        instance = make_tree_instance(words, neg_inf, seed)
        for method in implementations.DEPENDENCY_METHODS:
            reference = run_tree_reference(method, instance)
            for dtype in grid.dtypes:
                tolerance = TOLERANCES[dtype]
                ours = {backend: run_tree_backend(method, backend, instance, dtype) for backend in backends}
                pairs = [(a, b, ours[a], ours[b], tolerance) for a, b in itertools.combinations(backends, 2)]
                if reference is not None:
                    oracle_name = SETTINGS[method].oracle_name
                    pairs += [(a, oracle_name, ours[a], reference, tolerance) for a in backends]
                crf = registry.DEPENDENCY_REGISTRY[method].oracle == "dependency"  # a tree CRF's peer
                peer = run_torch_struct(instance, dtype) if crf and "torch" in backends else None
                if peer is not None:
                    pairs.append(("torch", TORCH_STRUCT, ours["torch"], peer, TORCH_STRUCT_TOLERANCE))
                for backend_a, backend_b, got, expected, allowed in pairs:
                    for (function, quantity), value in expected.items():
                        if quantity == "heads":
                            errors = compare_trees(got[function, quantity], value, instance, allowed)
                        else:
                            errors = compare(got[function, quantity], value, allowed)
                        row = (method, function, quantity, backend_a, backend_b, words, 0, dtype, neg_inf)
                        yield dict(zip(COLUMNS, (*row, *errors, errors[0] <= errors[2]), strict=True))
