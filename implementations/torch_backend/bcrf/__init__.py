"""Bregman CRF (Corro, Lacroix & Le Roux, 2025) in torch: entropy of the transition marginals,
solved by iterative Bregman projections (IBP) whose depth does not grow with N.

``q = argmax_{q ∈ conv(Y)} <q, w/τ> + H(q)`` is approached by alternating KL projections onto
C_odd and C_even (the paper's 1-indexed inner clusters); each projection resets every node's
throughput to the normalised geometric mean of its in- and out-flow (docs/derivations.md §3.3). One
*iteration* is one projection onto C_odd then one onto C_even (``order="odd-even"``). A node with
no in- or out-mass is killed (``alive``) so -inf never becomes NaN, and clusters past a sequence's
length are skipped, so padding never changes a result. Lengths 1 and 2 have no inner cluster:
length 1 is a softmax over tags, length 2 a softmax over tag pairs (every arc group is normalised
before the first projection, which leaves the iterates of longer sequences unchanged because they
are invariant to per-group shifts).

This module holds the contract's functions; the package's modules hold the strategies, which
compute the same iterates (docs/derivations.md §3.12):

- :mod:`.log_form`: ``form="log"``, the iterate is ``log q`` itself;
- :mod:`.scaling`: ``form="scaling"`` (the default but for ``decode``), ``log q = log K + log v ⊕
  log u`` with a fixed kernel (:mod:`.transition_kernel`), each projection two matrix products,
  whose flows :mod:`.exactness` vouches for or recomputes in log space;
- :mod:`.linear`: the scaling form's linear state for large vouched per-position kernels, iterated
  by the C sweep on the CPU (:mod:`.sweep`) or by compiled projections (:mod:`.compilation`);
- :mod:`.forms` picks one for a call, :mod:`.gradients` differentiates the loss (Danskin or
  unrolled), and :mod:`.run_state` holds every switch a call or the process carries.

The options reach the strategies as one :class:`~implementations.kernels.bcrf_options.BcrfOptions`;
``solve`` reports which strategy ran (``SolverOutput.path``). To count a GPU step's host
synchronisations elsewhere, :func:`exactness_tests_deferred` defers the exactness tests on every
device, as a GPU does.
"""

from __future__ import annotations

from typing import Any

from ...kernels.bcrf import Request as _Request
from ...kernels.bcrf_options import BcrfOptions
from ...solver import SolverOutput
from .. import _sweep
from .._fixed_point import iterate_with_errors
from .._scores import arc_terms, gold_score, mask_emissions
from .._tokens import argmax_tags
from .exactness import _exact_flows, _flows, _tested_once
from .forms import _form, _run
from .gradients import _scaled_value
from .linear import _linear_projection, _linear_start
from .log_form import _project
from .numerics import _floor, _unary
from .run_state import exactness_tests_deferred
from .scaling import _scaled_initial, _scaling_projection
from .transition_kernel import _kernel, _vectors, _with_transposes

__all__ = [
    "decode",
    "exactness_tests_deferred",
    "log_partition",
    "loss",
    "marginals",
    "partial_loss",
    "solve",
]

#: Internal names that tests and benchmarks read off this module (not the contract)
_INTERNALS = (
    _sweep,
    _exact_flows,
    _flows,
    _Request,
    _linear_projection,
    _linear_start,
    _project,
    _floor,
    _scaled_initial,
    _scaling_projection,
    _kernel,
    _vectors,
    _with_transposes,
)


def _options(options: dict[str, Any]) -> tuple[BcrfOptions, str]:
    """The solver's options of a loss as a record, and its ``gradient``."""
    solver = {name: value for name, value in options.items() if name != "gradient"}
    return BcrfOptions(**solver), options["gradient"]


@_tested_once
def marginals(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp, state = _run(terms, lengths, BcrfOptions(temperature, iterations, order, tolerance, form))
    pairwise = ibp.marginals(state)
    return _unary(pairwise, terms.singles, lengths, temperature), pairwise


def decode(emissions, transitions, lengths, start, end, **options):
    """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1),
    -1 on padding. Like the paper's, the output can contain a forbidden bigram before convergence."""
    return argmax_tags(marginals(emissions, transitions, lengths, start, end, **options)[0], lengths)


@_tested_once
def log_partition(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable by autograd."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp, state = _run(terms, lengths, BcrfOptions(temperature, iterations, order, tolerance, form))
    return ibp.solution(state).value


@_tested_once
def solve(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form):
    """The IBP iterate with its value ``B_Y(w/τ)`` and its constraint violation after each
    iteration (``implementations.solver.SolverOutput``), and which strategy ran (its ``path``:
    ``"log"``, ``"scaling"``, ``"linear"`` or ``"linear-sweep"``)."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp = _form(terms, lengths, BcrfOptions(temperature, iterations, order, tolerance, form))
    state, run, errors = iterate_with_errors(
        ibp.step, ibp.initial, iterations, tolerance, ibp.error, ibp.batch_dim
    )
    pairwise = ibp.marginals(state)
    converged = errors[run - 1] <= (tolerance or 0.0)
    return SolverOutput(
        _unary(pairwise, terms.singles, lengths, temperature),
        pairwise,
        ibp.solution(state).value,
        run,
        converged,
        errors,
        path=ibp.path,
    )


@_tested_once
def loss(emissions, transitions, lengths, tags, start, end, **options):
    """Fenchel–Young loss (B,): ``τ B_Y(w/τ) − <w, y>``, gradient ``q − y`` with ``"danskin"``.

    ``gradient="unrolled"`` backpropagates through the iterations instead; both agree at
    convergence. At τ = 1 this is the paper's ``B_Y(w) − <w, y>``.

    Second-order derivatives (gradient penalties, Hessian-vector products) are exact in both
    modes: with ``"danskin"`` they differentiate the gradient it returns, ``q − y``, with ``q``
    differentiated through the iterations (before convergence its Jacobian is not symmetric).
    """
    terms = arc_terms(emissions, transitions, lengths, start, end)
    value = _scaled_value(terms, lengths, *_options(options))
    return value - gold_score(emissions, transitions, lengths, tags, start, end)


@_tested_once
def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label Fenchel–Young loss (B,): ``τ B_Y(w/τ) − τ B_Ỹ(w/τ)``, two IBP runs, the second
    with every tag that ``allowed`` (B, N, T) forbids set to -inf."""
    solver, gradient = _options(options)
    full = _scaled_value(arc_terms(emissions, transitions, lengths, start, end), lengths, solver, gradient)
    masked = arc_terms(mask_emissions(emissions, allowed), transitions, lengths, start, end)
    return full - _scaled_value(masked, lengths, solver, gradient)
