"""One oracle per method (``Method.oracle`` in ``implementations.registry``): every contract
function's answer for **one sequence**, in float64, from the slow references of this package.

An oracle takes the sequence's scores (``emissions (n, T)``, ``transitions (n-1, T, T)``, ``start``,
``end``), its gold ``tags (n,)`` and partial annotation ``allowed (n, T)``, and the method's options
(only those the reference needs), and returns an :class:`Answer`, or ``None`` where it cannot
answer (brute force over too many sequences).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import registry
from . import bethe as bethe_loop
from . import brute_force, ibp
from . import dependency as dependency_trees
from . import meanfield as meanfield_loop
from . import sparsemap as sparsemap_qp
from . import tree_sparsemap as tree_projection
from . import unstructured as unstructured_closed
from .common import logsumexp

#: Enumerate ``T**n`` tag sequences only up to this many.
BRUTE_FORCE_LIMIT = 20_000
#: BCRF decodes at τ = 0.1, as the paper does: the contract's default for ``decode``.
DECODE_TEMPERATURE = registry.BCRF.default("temperature", "decode")


class Answer(NamedTuple):
    """What a method computes on one sequence."""

    unary: np.ndarray  # (n, T)
    pairwise: np.ndarray  # (n-1, T, T)
    log_partition: float
    loss: float
    partial_loss: float
    #: decoded tags (n,); None where decoding is checked by score instead (``best_score``)
    tags: np.ndarray | None
    best_score: float | None = None  # the highest score of any tag sequence (exact decoding)


Sequence = dict[str, np.ndarray]


def exact(sequence: Sequence, tags: np.ndarray, allowed: np.ndarray, **_: Any) -> Answer | None:
    """Brute-force enumeration: the exact CRF (``crf`` and ``crf-scan``)."""
    n, num_tags = sequence["emissions"].shape
    if num_tags**n > BRUTE_FORCE_LIMIT:
        return None
    unary, pairwise = brute_force.marginals(**sequence)
    log_z = brute_force.log_partition(**sequence)
    restricted = brute_force.log_partition(**sequence, allowed=allowed)
    gold = brute_force.path_score(tags, **sequence)
    return Answer(
        unary, pairwise, log_z, log_z - gold, log_z - restricted, None, brute_force.best(**sequence)[0]
    )


def bcrf(sequence: Sequence, tags: np.ndarray, allowed: np.ndarray, *, iterations: int, **_: Any) -> Answer:
    """The cluster-by-cluster loop IBP, at τ = 1 (and τ = 0.1 to decode)."""
    scores: dict[str, Any] = sequence  # arrays only: Any lets ``**`` pass the keyword-only options' check
    run = ibp.bcrf(**scores, iterations=iterations)
    masked: dict[str, Any] = {**sequence, "emissions": np.where(allowed, sequence["emissions"], -np.inf)}
    value = run.log_partition
    partial = value - ibp.bcrf(**masked, iterations=iterations).log_partition
    decoded = ibp.bcrf(**scores, iterations=iterations, temperature=DECODE_TEMPERATURE).unary.argmax(-1)
    gold = brute_force.path_score(tags, **sequence)
    return Answer(run.unary, run.pairwise, value, value - gold, partial, decoded)


def meanfield(
    sequence: Sequence, tags: np.ndarray, allowed: np.ndarray, *, iterations: int, **_: Any
) -> Answer:
    """The loop mean field (Jacobi updates, default init and penalty)."""
    scores: dict[str, Any] = sequence  # arrays only: Any lets ``**`` pass the keyword-only options' check
    run = meanfield_loop.meanfield(**scores, iterations=iterations)
    nll = -run.log_unary[np.arange(len(tags)), tags].sum()
    partial = -logsumexp(np.where(allowed, run.log_unary, -np.inf), axis=-1).sum()
    return Answer(run.unary, run.pairwise, run.lower_bound, nll, partial, run.unary.argmax(-1))


def unstructured(sequence: Sequence, tags: np.ndarray, allowed: np.ndarray, **_: Any) -> Answer:
    """The closed forms of the per-token softmax."""
    emissions = sequence["emissions"]
    unary, pairwise = unstructured_closed.marginals(emissions)
    return Answer(
        unary,
        pairwise,
        unstructured_closed.log_partition(emissions),
        unstructured_closed.loss(emissions, tags),
        unstructured_closed.partial_loss(emissions, allowed),
        unary.argmax(-1),
    )


def sparsemap(sequence: Sequence, tags: np.ndarray, allowed: np.ndarray, **_: Any) -> Answer | None:
    """SparseMAP by the QP over every enumerated sequence (``reference.sparsemap``): the value, the
    Fenchel–Young loss ``value + n/2 − θ_gold``, the partial loss ``value − value(allowed)`` and the
    decoded sequence, the valid sequence with the largest sum of ``u*`` (found by enumeration)."""
    n, num_tags = sequence["emissions"].shape
    if num_tags**n > sparsemap_qp.LIMIT:
        return None
    solution = sparsemap_qp.sparsemap(**sequence)
    masked = {**sequence, "emissions": np.where(allowed, sequence["emissions"], -np.inf)}
    partial = solution.value - sparsemap_qp.sparsemap(**masked).value
    gold = brute_force.path_score(tags, **sequence)
    pattern: dict[str, Any] = {key: _pattern(sequence[key]) for key in ("transitions", "start", "end")}
    decoded = brute_force.best(solution.unary, **pattern)[1]
    return Answer(
        solution.unary, solution.pairwise, solution.value, solution.value + n / 2 - gold, partial, decoded
    )


def bethe(
    sequence: Sequence, tags: np.ndarray, allowed: np.ndarray, *, energy: Any, **options: Any
) -> Answer | None:
    """The loop RDA / MD with every projection a softmax over all sequences
    (``reference.bethe.mirror_descent``, same options); the losses and decoding by enumeration on
    ``θ̃ = θ − ∇L(μ*)``, or with ``tilt="dual"`` on ``θ − s``, s the last projection's shift."""
    n, num_tags = sequence["emissions"].shape
    if num_tags**n > BRUTE_FORCE_LIMIT:
        return None
    arguments: dict[str, Any] = {**sequence, **options}
    run = bethe_loop.mirror_descent(**arguments, energy=energy)
    if options.get("tilt", "gradient") == "dual":
        if run.shift is None:
            raise ValueError("mirror_descent records the shift of its last projection")
        to_unary, to_pairwise = run.shift
    else:
        to_unary, to_pairwise = bethe_loop.energy_gradient(energy, run.unary, run.pairwise)
    tilted = {"emissions": run.emissions - to_unary, "transitions": run.transitions - to_pairwise}
    log_z = brute_force.log_partition(**tilted)
    partial = log_z - brute_force.log_partition(**tilted, allowed=allowed)
    loss = log_z - brute_force.path_score(tags, **tilted)
    return Answer(run.unary, run.pairwise, run.value, loss, partial, brute_force.best(**tilted)[1])


def _pattern(scores: np.ndarray | None) -> np.ndarray | None:
    """0 where a score is allowed, -inf where it is forbidden."""
    return None if scores is None else np.where(np.isneginf(scores), -np.inf, 0.0)


def dependency(scores: np.ndarray, **_: Any) -> dependency_trees.Answer | None:
    """``tree-crf`` by enumerating every single-root tree of one sentence's arc scores
    ``(n+1, n+1)`` (``reference.dependency``); ``None`` past its limit on words."""
    if scores.shape[0] - 1 > dependency_trees.MAX_WORDS:
        return None
    return dependency_trees.oracle(scores)


def tree_sparsemap(scores: np.ndarray, **_: Any) -> tree_projection.TreeSparseMAPSolution | None:
    """``tree-sparsemap`` by enumerating every single-root tree of one sentence's arc scores
    ``(n+1, n+1)`` (``reference.tree_sparsemap``); ``None`` past its limit on words."""
    if scores.shape[0] - 1 > tree_projection.MAX_WORDS:
        return None
    return tree_projection.sparsemap(scores)
