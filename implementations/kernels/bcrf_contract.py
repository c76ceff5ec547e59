"""BCRF's contract functions (``marginals``, ``log_partition``, ``solve``, ``loss``,
``partial_loss``, ``decode``) written once for both backends. A backend binds them to its own
pieces (:class:`Pieces`: its scores, forms, gradients and token helpers) with :func:`bind`, then
wraps each in what genuinely differs between frameworks (torch reads its exactness tests back once
a call; JAX jits with the options static) and binds ``decode`` to its wrapped ``marginals``
(:func:`bind_decode`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .bcrf_options import BcrfOptions


class Pieces(NamedTuple):
    """What the contract's functions call of one backend."""

    arc_terms: Callable[..., Any]  # (emissions, transitions, lengths, start, end) -> ArcTerms
    gold_score: Callable[..., Any]  # (emissions, transitions, lengths, tags, start, end) -> (B,)
    mask_emissions: Callable[..., Any]  # (emissions, allowed) -> emissions, forbidden tags -inf
    unary: Callable[..., Any]  # (pairwise, singles, lengths, temperature) -> node marginals
    form: Callable[..., Any]  # (terms, lengths, options) -> kernels.bcrf.Form
    run: Callable[..., Any]  # (terms, lengths, options) -> (Form, state)
    iterate_with_errors: Callable[..., Any]  # the backend's _fixed_point.iterate_with_errors
    scaled_value: Callable[..., Any]  # (terms, lengths, options, gradient) -> τ B_Y(w/τ)


def _loss_options(options: dict[str, Any]) -> tuple[BcrfOptions, str]:
    """The solver's options of a loss as a record, and its ``gradient``."""
    solver = {name: value for name, value in options.items() if name != "gradient"}
    return BcrfOptions(**solver), options["gradient"]


def bind(pieces: Pieces, module: str) -> dict[str, Callable[..., Any]]:
    """The contract's functions but ``decode`` on ``pieces``, named as functions of ``module``;
    ``solve`` returns its :class:`SolverOutput`'s fields and the form's ``path``."""

    def marginals(
        emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
    ):
        """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
        terms = pieces.arc_terms(emissions, transitions, lengths, start, end)
        options = BcrfOptions(temperature, iterations, order, tolerance, form)
        ibp, state = pieces.run(terms, lengths, options)
        pairwise = ibp.marginals(state)
        return pieces.unary(pairwise, terms.singles, lengths, temperature), pairwise

    def log_partition(
        emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
    ):
        """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable."""
        terms = pieces.arc_terms(emissions, transitions, lengths, start, end)
        options = BcrfOptions(temperature, iterations, order, tolerance, form)
        ibp, state = pieces.run(terms, lengths, options)
        return ibp.solution(state).value

    def solve(
        emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
    ):
        """The IBP iterate with its value ``B_Y(w/τ)`` and its constraint violation after each
        iteration (``implementations.solver.SolverOutput``), and which strategy ran (its ``path``:
        ``"log"``, ``"scaling"``, or in torch ``"linear"`` or ``"linear-sweep"``)."""
        terms = pieces.arc_terms(emissions, transitions, lengths, start, end)
        ibp = pieces.form(terms, lengths, BcrfOptions(temperature, iterations, order, tolerance, form))
        state, run, errors = pieces.iterate_with_errors(
            ibp.step, ibp.initial, iterations, tolerance, ibp.error, ibp.batch_dim
        )
        pairwise = ibp.marginals(state)
        converged = errors[run - 1] <= (tolerance or 0.0)
        unary = pieces.unary(pairwise, terms.singles, lengths, temperature)
        return (unary, pairwise, ibp.solution(state).value, run, converged, errors), ibp.path

    def loss(emissions, transitions, lengths, tags, start, end, **options):
        """Fenchel–Young loss (B,): ``τ B_Y(w/τ) − <w, y>``, gradient ``q − y`` with ``"danskin"``.

        ``gradient="unrolled"`` backpropagates through the iterations instead (in JAX not with a
        tolerance: reverse mode cannot go through ``lax.while_loop``); both agree at convergence.
        At τ = 1 this is the paper's ``B_Y(w) − <w, y>``.

        Second-order derivatives (gradient penalties, Hessian-vector products) are exact in both
        modes: with ``"danskin"`` they differentiate the gradient it returns, ``q − y``, with ``q``
        differentiated through the iterations (before convergence its Jacobian is not symmetric).
        """
        terms = pieces.arc_terms(emissions, transitions, lengths, start, end)
        value = pieces.scaled_value(terms, lengths, *_loss_options(options))
        return value - pieces.gold_score(emissions, transitions, lengths, tags, start, end)

    def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
        """Partial-label Fenchel–Young loss (B,): ``τ B_Y(w/τ) − τ B_Ỹ(w/τ)``, two IBP runs, the
        second with every tag that ``allowed`` (B, N, T) forbids set to -inf."""
        solver, gradient = _loss_options(options)
        full_terms = pieces.arc_terms(emissions, transitions, lengths, start, end)
        full = pieces.scaled_value(full_terms, lengths, solver, gradient)
        masked = pieces.arc_terms(pieces.mask_emissions(emissions, allowed), transitions, lengths, start, end)
        return full - pieces.scaled_value(masked, lengths, solver, gradient)

    functions = {f.__name__: f for f in (marginals, log_partition, solve, loss, partial_loss)}
    for function in functions.values():
        function.__module__, function.__qualname__ = module, function.__name__
    return functions


def bind_decode(
    marginals: Callable[..., Any], argmax_tags: Callable[..., Any], module: str
) -> Callable[..., Any]:
    """``decode`` on a backend's (wrapped) ``marginals`` and its ``argmax_tags``."""

    def decode(emissions, transitions, lengths, start, end, **options):
        """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1),
        -1 on padding. Like the paper's, the output can contain a forbidden bigram before
        convergence."""
        return argmax_tags(marginals(emissions, transitions, lengths, start, end, **options)[0], lengths)

    decode.__module__, decode.__qualname__ = module, "decode"
    return decode
