"""BCRF's loss value ``τ B_Y(w/τ)`` in torch and its two gradients: Danskin's (the iterate ``q``
itself, :class:`_DanskinValue`) or backpropagation through the iterations (``"unrolled"``)."""

from __future__ import annotations

import torch
from torch import Tensor

from ...kernels.bcrf import Solution
from ...kernels.bcrf_options import BcrfOptions
from .._scores import ArcTerms
from . import scaling
from .forms import _run


def _danskin_pieces(
    terms: ArcTerms, lengths: Tensor, options: BcrfOptions
) -> tuple[Tensor, Solution, Tensor]:
    """``τ B_Y(w/τ)`` (B,) at the iterate, the :class:`Solution` its Danskin gradient is read from,
    and the tag probabilities of length-1 sequences (B, T), zero for longer ones."""
    ibp, state = _run(terms, lengths, options)
    solution = ibp.solution(state)
    temperature = options.temperature
    single_probs = torch.softmax(terms.singles / temperature, dim=-1) * (lengths == 1).unsqueeze(-1)
    return temperature * solution.value, solution, single_probs


class _DanskinValue(torch.autograd.Function):
    """``τ B_Y(w/τ)`` of the arcs' terms (transitions, rows, columns, singles) whose gradient is the
    iterate ``q`` itself (Danskin), not a backward pass through the iterations: exact at
    convergence, the paper's "use the inference algorithm". The terms' gradients are q's sums:
    ``Σ_b q`` (shared transitions) or q, the flows out of the rows and into the columns.

    A plain backward reads the solution kept by the forward pass. A backward that must itself be
    differentiable (``create_graph=True``: gradient penalties, Hessian-vector products) runs the
    iterations again from the saved terms with autograd recording, so the derivative of the
    gradient ``q − y`` is the exact ``dq/dw`` through the iterations (what finite differences of
    the Danskin gradient measure), never a detached constant.
    """

    @staticmethod
    def forward(ctx, transitions, rows, columns, singles, lengths, options):
        value, ctx.solution, ctx.single_probs = _danskin_pieces(
            ArcTerms(transitions, rows, columns, singles), lengths, options
        )
        ctx.save_for_backward(transitions, rows, columns, singles, lengths)
        ctx.options = options
        return value

    @staticmethod
    def backward(ctx, grad):
        transitions, rows, columns, singles, lengths = ctx.saved_tensors
        solution, single_probs = ctx.solution, ctx.single_probs
        if torch.is_grad_enabled():  # create_graph: record the iterations the gradient comes from
            terms = ArcTerms(transitions, rows, columns, singles)
            _, solution, single_probs = _danskin_pieces(terms, lengths, ctx.options)
        return (
            scaling._arc_gradient(solution.arcs, grad, transitions.ndim == 2),
            grad[:, None, None] * solution.out_flows,
            grad[:, None, None] * solution.in_flows,
            grad[:, None] * single_probs,
            None,
            None,
        )


def _scaled_value(terms: ArcTerms, lengths: Tensor, options: BcrfOptions, gradient: str) -> Tensor:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    if gradient == "danskin":
        return _DanskinValue.apply(*terms, lengths, options)
    ibp, state = _run(terms, lengths, options)
    return options.temperature * ibp.solution(state).value
