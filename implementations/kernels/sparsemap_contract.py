"""SparseMAP's contract functions (``solve``, ``marginals``, ``decode``, ``log_partition``,
``loss``, ``partial_loss``) written once for both backends. A backend binds them to its own
pieces (:class:`Pieces`: its solve loop, its differentiable marginals and value, its Viterbi and
score helpers) with :func:`bind`, then wraps each in what genuinely differs between frameworks
(torch runs ``decode`` and ``solve`` under ``torch.no_grad``; JAX jits with the options static and
hands ``solve``'s ``iterations`` back as a Python int when called eagerly). The method and its
solvers are described in :mod:`implementations.kernels.sparsemap`."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

from .. import ops
from . import sparsemap as kernel


class Pieces(NamedTuple):
    """What the contract's functions call of one backend. ``marginals`` and ``value`` take the
    scores as ``(emissions, transitions, start, end, lengths, options)``, ``start`` and ``end``
    never None (``scores.boundary``) and ``options`` the sorted ``(name, value)`` pairs."""

    solve: Callable[..., Any]  # (emissions, transitions, lengths, start, end, **options) -> kernel.Solution
    marginals: Callable[..., Any]  # -> (u*, v*), differentiable by Prop. 1
    value: Callable[..., Any]  # -> the SparseMAP value (B,), gradient (u*, v*) (Danskin)
    chain: ModuleType  # the backend's _chain: viterbi
    scores: ModuleType  # the backend's _scores: boundary, forbidden_pattern, gold_score, mask_emissions


def begin(
    emissions: Any,
    transitions: Any,
    lengths: Any,
    start: Any,
    end: Any,
    oracle: str,
    tolerance: float | None,
    max_support: int,
    *,
    oracles: dict[str, Callable[..., Any]],
    score: Callable[..., Any],
    working: Any,
) -> tuple[kernel.Problem, kernel.State]:
    """The problem a backend's solve loop iterates on (:func:`kernel.problem`, the oracle named
    ``oracle`` among ``oracles``) and its initial state (:func:`kernel.initial`)."""
    problem = kernel.problem(
        emissions,
        transitions,
        lengths,
        start,
        end,
        oracle=oracles[oracle],
        score=score,
        working=working,
        tolerance=tolerance,
    )
    return problem, kernel.initial(problem, max_support)


def bind(pieces: Pieces, module: str) -> dict[str, Callable[..., Any]]:
    """The contract's functions on ``pieces``, named as functions of ``module``."""

    def bounded(function, emissions, transitions, lengths, start, end, options):
        start, end = pieces.scores.boundary(start, emissions), pieces.scores.boundary(end, emissions)
        return function(emissions, transitions, start, end, lengths, tuple(sorted(options.items())))

    def solve(emissions, transitions, lengths, start, end, **options):
        """The SparseMAP solution with its support and Wolfe gap after each iteration
        (``implementations.solver.SparseMAPOutput``, ``iterations`` a Python int; in JAX a 0-d
        integer array under ``jax.jit``); not differentiable (use ``marginals``)."""
        return kernel.output(pieces.solve(emissions, transitions, lengths, start, end, **options))

    def marginals(emissions, transitions, lengths, start, end, **options):
        """``u*`` (B, N, T) and ``v*`` (B, N-1, T, T): the support's tag and transition marginals,
        differentiable by Prop. 1 (``v*`` is that of the support found, ``y*`` need not be unique)."""
        return bounded(pieces.marginals, emissions, transitions, lengths, start, end, options)

    def decode(emissions, transitions, lengths, start, end, **options):
        """The valid sequence with the largest sum of tag marginals ``u*`` (B, N), -1 on padding: the
        Hamming-loss MBR decoding under the constraints (Viterbi on ``u*`` with only the ``-inf``
        pattern of the transitions, start and end). It is the heaviest sequence of the support
        whenever that one carries more than half the mass (its tags are then the per-position argmax),
        and it depends on ``u*`` alone, which is unique, whereas the support's weights are not: atoms
        ``[m_s; n_s]`` can be linearly dependent (two changes at distant positions), so the heaviest
        atom would depend on the solver."""
        unary = pieces.solve(emissions, transitions, lengths, start, end, **options).unary
        forbidden = pieces.scores.forbidden_pattern
        _, tags = pieces.chain.viterbi(
            unary, forbidden(transitions), lengths, forbidden(start), forbidden(end)
        )
        return tags

    def log_partition(emissions, transitions, lengths, start, end, **options):
        """The SparseMAP value ``max_y θᵀy − ½‖My‖²`` (B,); its gradient is ``(u*, v*)`` (Danskin)."""
        return bounded(pieces.value, emissions, transitions, lengths, start, end, options)

    def loss(emissions, transitions, lengths, tags, start, end, *, cost, **options):
        """The SparseMAP Fenchel–Young loss (B,) ``value(η) + ½‖m_ȳ‖² − θ_ȳ``, gradient
        ``[u* − m_ȳ; v* − n_ȳ]``; with ``cost="hamming"`` m-SparseMAP, the value taken at the
        cost-augmented scores ``η_U + 1 − m_ȳ`` (the Hamming distance to the gold is linear in u)."""
        if cost == "hamming":
            emissions = kernel.hamming_augmented(emissions, tags)
        value = bounded(pieces.value, emissions, transitions, lengths, start, end, options)
        sizes = ops.of(lengths).astype(lengths, value.dtype)
        return (
            value + 0.5 * sizes - pieces.scores.gold_score(emissions, transitions, lengths, tags, start, end)
        )

    def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
        """Partial-label loss (B,): ``value(η) − value(η restricted to allowed)``, the SparseMAP
        value over every sequence minus that over the sequences the annotation allows."""
        full = bounded(pieces.value, emissions, transitions, lengths, start, end, options)
        masked = pieces.scores.mask_emissions(emissions, allowed)
        return full - bounded(pieces.value, masked, transitions, lengths, start, end, options)

    functions = {f.__name__: f for f in (solve, marginals, decode, log_partition, loss, partial_loss)}
    for function in functions.values():
        function.__module__, function.__qualname__ = module, function.__name__
    return functions
