"""Slow, independent NumPy/SciPy reference oracles for the test suite.

Everything here works on **one sequence at a time**, in float64, with plain loops where a loop
makes the mathematics easier to read. None of it is meant to be fast; it is meant to be obviously
right, and written without looking at the backends it checks.

Modules:

- :mod:`.brute_force` -- enumerate all ``T**n`` tag sequences: scores, ``log Z``, exact
  marginals, best path, ``log Z`` restricted to an allowed mask (exact CRF oracle).
- :mod:`.ibp` -- the BCRF iterative Bregman projections (docs/derivations.md §3.4), cluster by cluster.
- :mod:`.bregman_convex` -- an independent convex solve of ``max_{q in conv(Y)} <q, θ> + H(q)``
  via its smooth dual (the BCRF limit point).
- :mod:`.meanfield` -- naive mean field with parallel (Jacobi) updates, loop by loop.
- :mod:`.unstructured` -- per-token softmax baseline and its "repair" decoder.
- :mod:`.sparsemap` -- SparseMAP over every enumerated sequence, through its small dual, with
  the optimality certificate checked (docs/derivations.md §8).
- :mod:`.dependency` -- every single-root dependency tree of one sentence: ``log Z``, arc
  marginals, the best tree (the ``tree-crf`` oracle; arc scores ``(n+1, n+1)``, node 0 the root).
- :mod:`.oracles` -- one oracle per method (the registry's ``oracle``): every contract
  function's answer for one sequence, for the agreement report.
- :mod:`.instances` -- random padded batches with a planted gold path, for tests and checks.
- :mod:`.common` -- warning-free ``logsumexp``/``softmax``, the contract's arc-weight folding.

Conventions (shared with the backends' contract, ``docs/contract.md``): a single instance is given by
``emissions (n, T)``, ``transitions`` either ``(T, T)`` (shared) or ``(n - 1, T, T)`` (per
position, axis order ``[prev, cur]``), and optional ``start``/``end`` of shape ``(T,)``.
``-inf`` forbids a tag or a transition.
"""

from __future__ import annotations

from . import (
    bregman_convex,
    brute_force,
    dependency,
    ibp,
    instances,
    meanfield,
    oracles,
    sparsemap,
    unstructured,
)

__all__ = [
    "bregman_convex",
    "brute_force",
    "dependency",
    "ibp",
    "instances",
    "meanfield",
    "oracles",
    "sparsemap",
    "unstructured",
]
