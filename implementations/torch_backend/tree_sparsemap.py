"""``tree-sparsemap`` in torch: the chain's SparseMAP loop (``sparsemap.run``) on the trees'
problem (``implementations/kernels/tree_sparsemap.py``, where the method is described), the
Chu-Liu-Edmonds oracle on a host copy of the adjusted scores, and the gradients as
``torch.autograd.Function``\\ s: Prop. 1 for the marginals, Danskin for the value and the losses.
"""

import torch
from torch import Tensor

from ..kernels import sparsemap as chain_kernel
from ..kernels import tree_sparsemap as trees
from . import sparsemap

Options = tuple[tuple[str, object], ...]


def _host_trees(adjusted: Tensor, lengths: Tensor) -> Tensor:
    """The oracle's best trees, found on the host (a device synchronisation per call)."""
    heads = trees.best_trees_host(adjusted.cpu().numpy(), lengths.cpu().numpy())
    return torch.as_tensor(heads, device=adjusted.device)


def begin(
    scores: Tensor, lengths: Tensor, *, tolerance: float | None, max_support: int
) -> tuple[chain_kernel.Problem, chain_kernel.State]:
    """The solver's problem on detached scores in float64 (``sparsemap.WORKING``, for the reasons
    the chain's solver gives) with the host oracle, and its initial state: what ``solution`` runs,
    and what a caller that steps the solver itself (``crfbench.tree_solvers``) starts from."""
    with torch.no_grad():
        return trees.begin(
            scores, lengths, tolerance, max_support, best_trees=_host_trees, working=sparsemap.WORKING
        )


def solution(
    scores: Tensor,
    lengths: Tensor,
    *,
    solver: str,
    iterations: int,
    tolerance: float | None,
    max_support: int,
) -> chain_kernel.Solution:
    """Run ``solver`` from :func:`begin`; μ*, the value and the gaps come back in the scores'
    dtype."""
    begun = begin(scores, lengths, tolerance=tolerance, max_support=max_support)
    with torch.no_grad():
        return sparsemap.run(*begun, solver, iterations, scores.dtype)


class _Marginals(torch.autograd.Function):
    """μ* with the backward pass of Prop. 1 (:func:`trees.marginals_gradient`), itself
    differentiable (``create_graph=True``)."""

    @staticmethod
    def forward(ctx, scores, lengths, options):
        found = solution(scores, lengths, **dict(options))
        ctx.save_for_backward(found.paths, found.active, found.inverse)
        return trees.arcs(found.unary)

    @staticmethod
    def backward(ctx, grad):
        paths, active, inverse = ctx.saved_tensors
        return trees.marginals_gradient(paths, active, inverse, grad), None, None


class _Value(torch.autograd.Function):
    """The value ``θᵀy* − ½‖μ*‖²`` (B,) with Danskin's gradient μ*; a backward that must itself be
    differentiable takes μ* from :class:`_Marginals` (the second derivative is Prop. 1's)."""

    @staticmethod
    def forward(ctx, scores, lengths, options):
        found = solution(scores, lengths, **dict(options))
        ctx.save_for_backward(scores, lengths, trees.arcs(found.unary))
        ctx.options = options
        return found.value

    @staticmethod
    def backward(ctx, grad):
        scores, lengths, arcs = ctx.saved_tensors
        if torch.is_grad_enabled():
            arcs = _Marginals.apply(scores, lengths, ctx.options)
        return grad[:, None, None] * arcs, None, None


def marginals(scores: Tensor, lengths: Tensor, **options: object) -> Tensor:
    """μ* (B, N+1, N+1), differentiable by Prop. 1."""
    return _Marginals.apply(scores, lengths, tuple(sorted(options.items())))


def value(scores: Tensor, lengths: Tensor, **options: object) -> Tensor:
    """The SparseMAP value (B,), its gradient μ*."""
    return _Value.apply(scores, lengths, tuple(sorted(options.items())))
