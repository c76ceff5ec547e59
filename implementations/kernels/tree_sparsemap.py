"""``tree-sparsemap``: SparseMAP (Niculae, Martins, Blondel & Cardie, 2018) over non-projective
single-root dependency trees, as the chain's solver with another oracle.

``max_{y ∈ Δ} θᵀy − ½‖μ‖²`` over distributions ``y`` on the single-root trees ``t`` of each
sentence (score ``θ_t``, arc indicators ``a_t``), with ``μ = Σ_t y_t a_t`` the arc marginals: the
Euclidean projection of the arc scores onto the convex hull of the trees' indicators (the whole of
``a_t`` is penalised, unlike the chain's transitions). A tree is one head per word, so its
indicators are a one-hot per word over the heads ``0..N``: exactly the chain's tag indicators with
the words as positions and the heads as tags. The chain's solvers (``kernels/sparsemap.py``: the
active set and the Frank–Wolfe variants, their support algebra and Prop. 1's backward pass) run
unchanged on ``emissions[b, m, h] = scores[b, h, m]`` (``-inf`` off the arcs, :func:`positions`),
each atom's "path" being its heads (-1 at index 0 and on padding), ``‖a_t‖² = n`` words, with
Chu-Liu-Edmonds under the single-root constraint (``implementations.arborescence``, on the host)
as the linear maximisation oracle and no transitions.

This module holds what both backends share: the problem, the oracle's host side, the ``solve``
output, the backward pass and the contract's functions written once (``loss`` with m-SparseMAP's
Hamming cost, ``decode``), dispatching to the backend of the scores (``torch_backend`` /
``jax_backend`` ``tree_sparsemap.py``), which runs the solve loop and attaches the gradients.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from .. import arborescence, ops
from ..solver import TreeSparseMAPOutput
from . import sparsemap as kernel
from . import sparsemap_algebra as algebra
from .dependency import arc_mask, gold_score

Array = Any  # a torch.Tensor or a jax.Array
#: ``best_trees(adjusted (B, N+1, N+1) by word then head, lengths (B,)) -> heads (B, N+1)``: the
#: backend's way to run :func:`best_trees_host` on a host copy.
BestTrees = Callable[[Array, Array], Array]


def positions(scores: Array, lengths: Array) -> Array:
    """(B, N+1, N+1) the scores by word then head, ``[b, m, h] = scores[b, h, m]``, ``-inf`` off
    the arcs (column 0, the diagonal, padding): the chain solver's emissions."""
    o = ops.of(scores)
    return o.where(arc_mask(scores, lengths), scores, -o.inf).swapaxes(1, 2)


def tree_score(
    emissions: Array, transitions: Any, lengths: Array, heads: Array, start: Any, end: Any
) -> Array:
    """(B,) ``Σ_m emissions[m, heads[m]]`` over the words of the trees ``heads`` (B, N+1): the
    solver's ``score`` (the transitions, start and end of its signature are the chain's)."""
    o = ops.of(emissions)
    picked = o.take_along_axis(emissions, o.maximum(heads, 0)[..., None], 2)[..., 0]
    return o.where(heads >= 0, picked, 0.0).sum(1)


def best_trees_host(adjusted: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(B, N+1) int64 heads of each sentence's best single-root tree under ``adjusted`` (B, N+1,
    N+1) by word then head; -1 at index 0 and on padding."""
    heads = np.full(adjusted.shape[:2], -1, dtype=np.int64)
    for b, length in enumerate(np.asarray(lengths).tolist()):
        heads[b, : length + 1] = arborescence.best_tree(np.asarray(adjusted[b]).T, length)
    return heads


def begin(
    scores: Array,
    lengths: Array,
    tolerance: float | None,
    max_support: int,
    *,
    best_trees: BestTrees,
    working: Any,
) -> tuple[kernel.Problem, kernel.State]:
    """The chain solver's problem on the trees of ``scores`` (held constant in ``working``) and its
    initial state: the oracle is ``best_trees`` on the adjusted scores ``emissions − u``."""

    def oracle(
        emissions: Array, transitions: Any, lengths: Array, start: Any, end: Any
    ) -> tuple[Array, Array]:
        heads = best_trees(emissions, lengths)
        return tree_score(emissions, None, lengths, heads, None, None), heads

    problem = kernel.problem(
        positions(scores, lengths),
        None,
        lengths,
        None,
        None,
        oracle=oracle,
        score=tree_score,
        working=working,
        tolerance=tolerance,
    )
    return problem, kernel.initial(problem, max_support)


def arcs(unary: Array) -> Array:
    """The arc marginals ``μ[b, h, m]`` (B, N+1, N+1) of the solver's ``u[b, m, h]``."""
    return unary.swapaxes(1, 2)


def output(solution: kernel.Solution) -> TreeSparseMAPOutput:
    """The contract's ``solve`` output: the support's trees and weights, -1 and 0 off it."""
    o = ops.of(solution.weights)
    s = solution
    weights = o.where(s.active, s.weights, 0.0)
    trees = o.where(s.active[..., None], s.paths, -1)
    return TreeSparseMAPOutput(arcs(s.unary), s.value, s.iterations, s.converged, s.errors, trees, weights)


def marginals_gradient(paths: Array, active: Array, inverse: Array, grad: Array) -> Array:
    """Prop. 1's backward pass of ``μ*`` for an upstream ``grad`` (B, N+1, N+1): ``Σ_k r_k a_k``
    with ``r = D h``, ``h_k = a_kᵀgrad`` on the support (:func:`kernel.support_direction`); linear
    in ``grad`` with the support held fixed, so it differentiates again (to 0 in the scores)."""
    by_word = grad.swapaxes(1, 2)
    direction = kernel.support_direction(paths, active, inverse, by_word)
    return arcs(algebra.unary(paths, direction, by_word.shape[-1]))


def hamming_augmented(scores: Array, heads: Array) -> Array:
    """m-SparseMAP's cost-augmented scores: ``+1`` on every arc into a word but its gold arc
    (``heads`` (B, N+1)): the Hamming distance of a tree to the gold is linear in its arcs."""
    o = ops.of(scores)
    index = o.arange(scores.shape[-1], scores)
    return scores + o.astype(index[None, :, None] != heads[:, None, :], scores.dtype)


def heaviest(output: TreeSparseMAPOutput) -> Array:
    """(B, N+1) the heads of each sentence's heaviest support tree (the first among equals)."""
    o = ops.of(output.weights)
    slot = o.max_argmax(output.weights, 1)[1]
    index = o.broadcast_to(slot[:, None, None], (slot.shape[0], 1, output.trees.shape[-1]))
    return o.take_along_axis(output.trees, index, 1)[:, 0]


# ------------------------------------------------------------------------------ the contract


def _backend(scores: Array) -> ModuleType:
    """The backend module that runs the solver on ``scores``' arrays."""
    return importlib.import_module(f"implementations.{ops.of(scores).name}_backend.tree_sparsemap")


def solve(scores: Array, lengths: Array, **options: Any) -> TreeSparseMAPOutput:
    """The SparseMAP solution (``implementations.solver.TreeSparseMAPOutput``): the arc marginals
    ``μ*``, the value, the support (trees and weights) and the Wolfe gap after each iteration
    (``iterations`` a Python int; in JAX a 0-d integer array under ``jax.jit``); not
    differentiable (use ``marginals``)."""
    return output(_backend(scores).solution(scores, lengths, **options))


def marginals(scores: Array, lengths: Array, **options: Any) -> Array:
    """Arc marginals ``μ*`` (B, N+1, N+1), ``μ*[b, h, m]`` the support's weight on ``h -> m``:
    the projection of the scores onto the trees' marginal polytope, differentiable by the paper's
    Prop. 1 (the active set's Jacobian on the support). Each word's column sums to 1; zero on
    column 0, the diagonal, forbidden arcs and padding."""
    return _backend(scores).marginals(scores, lengths, **options)


def log_partition(scores: Array, lengths: Array, **options: Any) -> Array:
    """The SparseMAP value ``max_y θᵀy − ½‖μ‖²`` (B,); its gradient is ``μ*`` (Danskin)."""
    return _backend(scores).value(scores, lengths, **options)


def loss(scores: Array, lengths: Array, heads: Array, *, cost: str, **options: Any) -> Array:
    """The SparseMAP Fenchel–Young loss (B,) ``value(η) + ½ n − θ_ȳ`` of the gold trees ``heads``,
    gradient ``μ* − a_ȳ``; ``≥ 0``, and 0 once the gold beats every tree by its Hamming distance.
    With ``cost="hamming"`` m-SparseMAP: the value at the cost-augmented scores (+1 on every arc
    but the gold ones), 0 once the gold beats every tree by twice its Hamming distance."""
    if cost == "hamming":
        scores = hamming_augmented(scores, heads)
    value = log_partition(scores, lengths, **options)
    sizes = ops.of(lengths).astype(lengths, value.dtype)
    return value + 0.5 * sizes - gold_score(scores, lengths, heads)


def decode(scores: Array, lengths: Array, **options: Any) -> Array:
    """The heaviest tree of the SparseMAP support: heads (B, N+1), ``-1`` at index 0 and on
    padding. Chu-Liu-Edmonds runs on the host (``implementations.arborescence``)."""
    return heaviest(solve(scores, lengths, **options))
