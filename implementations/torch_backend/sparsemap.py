"""SparseMAP on the chain in torch: the solvers' steps are ``implementations/kernels/sparsemap.py``
(shared with jax, where the method is described); this module runs them in a Python loop under
``torch.no_grad`` that stops once every sequence is done, and attaches the gradients as
``torch.autograd.Function``\\ s: Prop. 1 for ``marginals``, Danskin for the value and the losses.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..kernels import sparsemap as kernel
from . import _chain, _tree
from ._scores import boundary, forbidden_pattern, gold_score, mask_emissions

_ORACLES = {"viterbi": _chain.viterbi, "scan": _tree.viterbi}
#: The solvers' precision. The gap is a difference of path scores, tens to hundreds in size: in
#: float32 its rounding error is of the order of the gaps that decide which atom enters, and the
#: active set stops early or cycles. The oracle and the K×K algebra are cheap next to the network
#: that produces the scores, so they run in float64 for every input dtype.
WORKING = torch.float64


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
        problem = kernel.problem(
            emissions,
            transitions,
            lengths,
            start,
            end,
            oracle=_ORACLES[oracle],
            score=gold_score,
            working=WORKING,
            tolerance=tolerance,
        )
        state = kernel.initial(problem, max_support)
        errors = torch.full((iterations, lengths.shape[0]), torch.nan, dtype=WORKING, device=emissions.device)
        run = 0
        for k in range(iterations):
            state = kernel.iterate(problem, state, solver)
            errors[k] = state.gap.clamp(min=0)
            run = k + 1
            if bool(state.done.all()):
                break
        return kernel.finish(problem, state, solver, run, errors, emissions.dtype)


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


def _options(**options: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(options.items()))


def _value(emissions, transitions, lengths, start, end, **options) -> Tensor:
    start, end = boundary(start, emissions), boundary(end, emissions)
    return _Value.apply(emissions, transitions, start, end, lengths, _options(**options))


# ------------------------------------------------------------------------------ the contract


def solve(emissions, transitions, lengths, start, end, **options):
    """The SparseMAP solution with its support and Wolfe gap after each iteration
    (``implementations.solver.SparseMAPOutput``, ``iterations`` a Python int); not differentiable
    (use ``marginals``)."""
    return kernel.output(_solve(emissions, transitions, lengths, start, end, **options))


def marginals(emissions, transitions, lengths, start, end, **options):
    """``u*`` (B, N, T) and ``v*`` (B, N-1, T, T): the support's tag and transition marginals,
    differentiable by Prop. 1 (``v*`` is that of the support found, ``y*`` need not be unique)."""
    start, end = boundary(start, emissions), boundary(end, emissions)
    return _Marginals.apply(emissions, transitions, start, end, lengths, _options(**options))


def decode(emissions, transitions, lengths, start, end, **options):
    """The valid sequence with the largest sum of tag marginals ``u*`` (B, N), -1 on padding: the
    Hamming-loss MBR decoding under the constraints (Viterbi on ``u*`` with only the ``-inf``
    pattern of the transitions, start and end). It is the heaviest sequence of the support
    whenever that one carries more than half the mass (its tags are then the per-position argmax),
    and it depends on ``u*`` alone, which is unique, whereas the support's weights are not: atoms
    ``[m_s; n_s]`` can be linearly dependent (two changes at distant positions), so the heaviest
    atom would depend on the solver."""
    with torch.no_grad():
        unary = _solve(emissions, transitions, lengths, start, end, **options).unary
    return _chain.viterbi(
        unary, forbidden_pattern(transitions), lengths, forbidden_pattern(start), forbidden_pattern(end)
    )[1]


def log_partition(emissions, transitions, lengths, start, end, **options):
    """The SparseMAP value ``max_y θᵀy − ½‖My‖²`` (B,); its gradient is ``(u*, v*)``."""
    return _value(emissions, transitions, lengths, start, end, **options)


def loss(emissions, transitions, lengths, tags, start, end, *, cost, **options):
    """The SparseMAP Fenchel–Young loss (B,) ``value(η) + ½‖m_ȳ‖² − θ_ȳ``, gradient
    ``[u* − m_ȳ; v* − n_ȳ]``; with ``cost="hamming"`` m-SparseMAP, the value taken at the
    cost-augmented scores ``η_U + 1 − m_ȳ`` (the Hamming distance to the gold is linear in u)."""
    if cost == "hamming":
        emissions = kernel.hamming_augmented(emissions, tags)
    value = _value(emissions, transitions, lengths, start, end, **options)
    sizes = lengths.to(value.dtype)
    return value + 0.5 * sizes - gold_score(emissions, transitions, lengths, tags, start, end)


def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label loss (B,): ``value(η) − value(η restricted to allowed)``, the SparseMAP
    value over every sequence minus that over the sequences the annotation allows."""
    full = _value(emissions, transitions, lengths, start, end, **options)
    return full - _value(mask_emissions(emissions, allowed), transitions, lengths, start, end, **options)
