"""SparseMAP on the chain in jax: the solvers' steps are ``implementations/kernels/sparsemap.py``
(shared with torch, where the method is described); this module runs them in a
``lax.while_loop`` (at least one iteration runs) that stops once every sequence is done, under
``jax.jit`` with the options static, and attaches the gradients as ``jax.custom_vjp`` rules:
Prop. 1 for ``marginals``, Danskin for the value and the losses.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array, lax

from ..kernels import sparsemap as kernel
from . import _chain, _tree
from ._scores import boundary, forbidden_pattern, gold_score, mask_emissions

_ORACLES: dict[str, Callable[..., Any]] = {"viterbi": _chain.viterbi, "scan": _tree.viterbi}
#: The solvers' precision: float64 (the gap, a difference of path scores tens to hundreds in size,
#: decides which atom enters, and float32's rounding is of its order) where jax has it: under
#: ``jax_enable_x64``, which this library never changes; else in float32, see :func:`_working`.
WORKING = jnp.float64
_OPTIONS = ("solver", "iterations", "tolerance", "max_support", "oracle")  # static under jax.jit


def _working() -> Any:
    """:data:`WORKING` as jax has it: float64 under ``jax_enable_x64``, else float32."""
    return jax.dtypes.canonicalize_dtype(WORKING)


@partial(jax.jit, static_argnames=_OPTIONS)
def _solve(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    start: Array | None,
    end: Array | None,
    *,
    solver: str,
    iterations: int,
    tolerance: float | None,
    max_support: int,
    oracle: str,
) -> kernel.Solution:
    """Run ``solver`` to convergence (or its limits) on scores held constant, in the working dtype
    (:func:`_working`); the marginals, value and gaps come back in the scores' dtype."""
    working = _working()
    with jax.default_matmul_precision("highest"):  # torch's: no TF32 on a GPU, even in float32
        problem = kernel.problem(
            emissions,
            transitions,
            lengths,
            start,
            end,
            oracle=_ORACLES[oracle],
            score=gold_score,
            working=working,
            tolerance=tolerance,
        )
        state = kernel.initial(problem, max_support)
        errors = jnp.full((iterations, lengths.shape[0]), jnp.nan, working)

        def unfinished(carry: tuple[Array, kernel.State, Array]) -> Array:
            k, state, _ = carry  # the first iteration always runs, as the torch loop's
            return (k < iterations) & ((k == 0) | ~state.done.all())

        def body(carry: tuple[Array, kernel.State, Array]) -> tuple[Array, kernel.State, Array]:
            k, state, errors = carry
            state = kernel.iterate(problem, state, solver)
            return k + 1, state, errors.at[k].set(jnp.maximum(state.gap, 0))

        run, state, errors = lax.while_loop(unfinished, body, (jnp.asarray(0, dtype=int), state, errors))
        return kernel.finish(problem, state, solver, run, errors, emissions.dtype)


Options = tuple[tuple[str, Any], ...]


@partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _marginals(emissions, transitions, start, end, lengths, options: Options, shared: bool):
    """``(u*, v*)`` with the backward pass of Prop. 1 (:func:`kernel.marginals_gradients`), which
    jax differentiates again; ``options`` and ``shared`` (``transitions`` is (T, T)) are static."""
    solution = _solve(emissions, transitions, lengths, start, end, **dict(options))
    return solution.unary, solution.pairwise


def _marginals_forward(emissions, transitions, start, end, lengths, options: Options, shared: bool):
    solution = _solve(emissions, transitions, lengths, start, end, **dict(options))
    return (solution.unary, solution.pairwise), (solution.paths, solution.active, solution.inverse, lengths)


def _marginals_backward(options: Options, shared: bool, saved: tuple[Array, ...], grads: tuple[Array, Array]):
    paths, active, inverse, lengths = saved
    with jax.default_matmul_precision("highest"):
        return *kernel.marginals_gradients(paths, active, inverse, lengths, *grads, shared), None


_marginals.defvjp(_marginals_forward, _marginals_backward)


@partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _danskin_value(emissions, transitions, start, end, lengths, options: Options, shared: bool) -> Array:
    """The SparseMAP value ``θᵀy* − ½‖u*‖²`` (B,) with Danskin's gradient ``(u*, v*)``; the
    forward rule takes ``(u*, v*)`` from :func:`_marginals` (and the value from this function),
    so a derivative of the gradient (reverse over reverse) is Prop. 1's Jacobian: jax
    differentiates a ``custom_vjp``'s forward and backward rules like any other code."""
    return _solve(emissions, transitions, lengths, start, end, **dict(options)).value


def _danskin_forward(emissions, transitions, start, end, lengths, options: Options, shared: bool):
    # two calls, one solve: XLA merges the identical solves (common-subexpression elimination)
    value = _danskin_value(emissions, transitions, start, end, lengths, options, shared)
    unary, pairwise = _marginals(emissions, transitions, start, end, lengths, options, shared)
    return value, (lengths, unary, pairwise)


def _danskin_backward(options: Options, shared: bool, saved: tuple[Array, Array, Array], grad: Array):
    lengths, unary, pairwise = saved
    return *kernel.danskin_gradients(grad, unary, pairwise, lengths, shared), None


_danskin_value.defvjp(_danskin_forward, _danskin_backward)


def _value(emissions, transitions, lengths, start, end, **options) -> Array:
    start, end = boundary(start, emissions), boundary(end, emissions)
    shared = transitions.ndim == 2
    return _danskin_value(emissions, transitions, start, end, lengths, tuple(sorted(options.items())), shared)


# ------------------------------------------------------------------------------ the contract


def solve(emissions, transitions, lengths, start, end, **options):
    """``kernel.output`` of the solve (``implementations.solver.SparseMAPOutput``); not
    differentiable (use ``marginals``). ``iterations`` is a Python int when called eagerly, a 0-d
    integer array under ``jax.jit``."""
    output = _solve_output(emissions, transitions, lengths, start, end, **options)
    if isinstance(output.iterations, jax.core.Tracer):
        return output
    return output._replace(iterations=int(output.iterations))


@partial(jax.jit, static_argnames=_OPTIONS)
def _solve_output(emissions, transitions, lengths, start, end, **options):
    return kernel.output(_solve(emissions, transitions, lengths, start, end, **options))


@partial(jax.jit, static_argnames=_OPTIONS)
def marginals(emissions, transitions, lengths, start, end, **options):
    """``u*`` and ``v*``, differentiable by Prop. 1 (as the torch twin's)."""
    start, end = boundary(start, emissions), boundary(end, emissions)
    shared = transitions.ndim == 2
    return _marginals(emissions, transitions, start, end, lengths, tuple(sorted(options.items())), shared)


@partial(jax.jit, static_argnames=_OPTIONS)
def decode(emissions, transitions, lengths, start, end, **options):
    """The Hamming-loss MBR decoding under the constraints, Viterbi on ``u*`` (as the torch
    twin's, which says why not the heaviest atom)."""
    unary = _solve(emissions, transitions, lengths, start, end, **options).unary
    return _chain.viterbi(
        unary, forbidden_pattern(transitions), lengths, forbidden_pattern(start), forbidden_pattern(end)
    )[1]


@partial(jax.jit, static_argnames=_OPTIONS)
def log_partition(emissions, transitions, lengths, start, end, **options):
    """The SparseMAP value ``max_y θᵀy − ½‖My‖²`` (B,), gradient ``(u*, v*)`` (Danskin)."""
    return _value(emissions, transitions, lengths, start, end, **options)


@partial(jax.jit, static_argnames=("cost", *_OPTIONS))
def loss(emissions, transitions, lengths, tags, start, end, *, cost, **options):
    """The SparseMAP Fenchel–Young loss (B,), m-SparseMAP with ``cost="hamming"`` (as the torch
    twin's)."""
    if cost == "hamming":
        emissions = kernel.hamming_augmented(emissions, tags)
    value = _value(emissions, transitions, lengths, start, end, **options)
    sizes = lengths.astype(value.dtype)
    return value + 0.5 * sizes - gold_score(emissions, transitions, lengths, tags, start, end)


@partial(jax.jit, static_argnames=_OPTIONS)
def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label loss (B,): the SparseMAP value over every sequence minus that over the
    sequences ``allowed`` (as the torch twin's)."""
    full = _value(emissions, transitions, lengths, start, end, **options)
    return full - _value(mask_emissions(emissions, allowed), transitions, lengths, start, end, **options)
