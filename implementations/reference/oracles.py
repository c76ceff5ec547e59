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
from . import brute_force, ibp
from . import meanfield as meanfield_loop
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
    run = ibp.bcrf(**sequence, iterations=iterations)
    masked = {**sequence, "emissions": np.where(allowed, sequence["emissions"], -np.inf)}
    value = run.log_partition
    partial = value - ibp.bcrf(**masked, iterations=iterations).log_partition
    decoded = ibp.bcrf(**sequence, iterations=iterations, temperature=DECODE_TEMPERATURE).unary.argmax(-1)
    gold = brute_force.path_score(tags, **sequence)
    return Answer(run.unary, run.pairwise, value, value - gold, partial, decoded)


def meanfield(
    sequence: Sequence, tags: np.ndarray, allowed: np.ndarray, *, iterations: int, **_: Any
) -> Answer:
    """The loop mean field (Jacobi updates, default init and penalty)."""
    run = meanfield_loop.meanfield(**sequence, iterations=iterations)
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
