"""SparseMAP on the chain in torch: the solvers' steps are ``implementations/kernels/sparsemap.py``
(shared with jax, where the method is described); this module runs them in a Python loop under
``torch.no_grad`` that stops once every sequence is done, and attaches the gradients as
``torch.autograd.Function``\\ s: Prop. 1 for ``marginals``, Danskin for the value and the losses.
The contract's functions are written once, in ``implementations/kernels/sparsemap_contract.py``
(with their documentation), and bound here to these pieces; ``solve`` and ``decode`` run under
``torch.no_grad``.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from ..kernels import sparsemap as kernel
from ..kernels import sparsemap_contract as contract
from . import _chain, _scores, _tree

_ORACLES = {"viterbi": _chain.viterbi, "scan": _tree.viterbi}
#: The solvers' precision. The gap is a difference of path scores, tens to hundreds in size: in
#: float32 its rounding error is of the order of the gaps that decide which atom enters, and the
#: active set stops early or cycles. The oracle and the K×K algebra are cheap next to the network
#: that produces the scores, so they run in float64 for every input dtype.
WORKING = torch.float64

_begin = partial(contract.begin, oracles=_ORACLES, score=_scores.gold_score, working=WORKING)


def _solve(
    emissions: Tensor,
    transitions: Tensor,
    lengths: Tensor,
    start: Tensor | None,
    end: Tensor | None,
    *,
    solver: str,
    iterations: int,
    tolerance: float | None,
    max_support: int,
    oracle: str,
) -> kernel.Solution:
    """Run ``solver`` to convergence (or its limits) on detached scores, in float64 whatever the
    scores' dtype (:data:`WORKING`); the marginals, value and gaps come back in the scores' dtype."""
    with torch.no_grad():
        problem, state = _begin(emissions, transitions, lengths, start, end, oracle, tolerance, max_support)
        return run(problem, state, solver, iterations, emissions.dtype)


def run(
    problem: kernel.Problem, state: kernel.State, solver: str, iterations: int, dtype: torch.dtype
) -> kernel.Solution:
    """The solve loop on any structure's problem (the chain's, ``tree-sparsemap``'s): ``solver``'s
    iterations until every row is done or ``iterations`` ran, then the solution in ``dtype``."""
    errors = torch.full(
        (iterations, problem.lengths.shape[0]), torch.nan, dtype=WORKING, device=problem.emissions.device
    )
    ran = 0
    for k in range(iterations):
        state = kernel.iterate(problem, state, solver)
        errors[k] = state.gap.clamp(min=0)
        ran = k + 1
        if bool(state.done.all()):
            break
    return kernel.finish(problem, state, solver, ran, errors, dtype)


class _Marginals(torch.autograd.Function):
    """``(u*, v*)`` with the backward pass of Prop. 1 (:func:`kernel.marginals_gradients`), which
    is differentiable again (``create_graph=True``)."""

    @staticmethod
    def forward(ctx, emissions, transitions, start, end, lengths, options):
        solution = _solve(emissions, transitions, lengths, start, end, **dict(options))
        ctx.save_for_backward(solution.paths, solution.active, solution.inverse, lengths)
        ctx.shared = transitions.ndim == 2
        return solution.unary, solution.pairwise

    @staticmethod
    def backward(ctx, grad_unary, grad_pairwise):
        paths, active, inverse, lengths = ctx.saved_tensors
        grads = kernel.marginals_gradients(
            paths, active, inverse, lengths, grad_unary, grad_pairwise, ctx.shared
        )
        return *grads, None, None


class _Value(torch.autograd.Function):
    """The SparseMAP value ``θᵀy* − ½‖u*‖²`` (B,) with Danskin's gradient ``(u*, v*)``; a backward
    that must itself be differentiable (``create_graph=True``) takes ``(u*, v*)`` from
    :class:`_Marginals`, so the second derivative is Prop. 1's Jacobian."""

    @staticmethod
    def forward(ctx, emissions, transitions, start, end, lengths, options):
        solution = _solve(emissions, transitions, lengths, start, end, **dict(options))
        ctx.save_for_backward(emissions, transitions, start, end, lengths, solution.unary, solution.pairwise)
        ctx.options = options
        return solution.value

    @staticmethod
    def backward(ctx, grad):
        emissions, transitions, start, end, lengths, unary, pairwise = ctx.saved_tensors
        if torch.is_grad_enabled():
            unary, pairwise = _Marginals.apply(emissions, transitions, start, end, lengths, ctx.options)
        return *kernel.danskin_gradients(grad, unary, pairwise, lengths, transitions.ndim == 2), None, None


# ------------------------------------------------------------------------------ the contract


_FUNCTIONS = contract.bind(contract.Pieces(_solve, _Marginals.apply, _Value.apply, _chain, _scores), __name__)
# the solver runs on detached scores already; decode's Viterbi on u* needs no graph either
solve = torch.no_grad()(_FUNCTIONS["solve"])
marginals = _FUNCTIONS["marginals"]
decode = torch.no_grad()(_FUNCTIONS["decode"])
log_partition = _FUNCTIONS["log_partition"]
loss = _FUNCTIONS["loss"]
partial_loss = _FUNCTIONS["partial_loss"]
