"""SparseMAP on the chain in jax: the solvers' steps are ``implementations/kernels/sparsemap.py``
(shared with torch, where the method is described); this module runs them in a
``lax.while_loop`` (at least one iteration runs) that stops once every sequence is done, under
``jax.jit`` with the options static, and attaches the gradients as ``jax.custom_vjp`` rules:
Prop. 1 for ``marginals``, Danskin for the value and the losses. The contract's functions are
written once, in ``implementations/kernels/sparsemap_contract.py`` (with their documentation), and
bound here to these pieces; ``solve`` hands ``iterations`` back as a Python int when called eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial, update_wrapper
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array, lax

from ..kernels import sparsemap as kernel
from ..kernels import sparsemap_contract as contract
from . import _chain, _scores, _tree

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
    with jax.default_matmul_precision("highest"):  # torch's: no TF32 on a GPU, even in float32
        oracles = {"oracles": _ORACLES, "score": _scores.gold_score, "working": _working()}
        problem, state = contract.begin(
            emissions, transitions, lengths, start, end, oracle, tolerance, max_support, **oracles
        )
        return run(problem, state, solver, iterations, emissions.dtype)


def run(
    problem: kernel.Problem, state: kernel.State, solver: str, iterations: int, dtype: Any
) -> kernel.Solution:
    """The ``lax.while_loop`` of any structure's problem (the chain's, ``tree-sparsemap``'s), traced
    inside the caller's ``jax.jit`` under its matmul precision: ``solver``'s iterations until every
    row is done or ``iterations`` ran (at least one), then the solution in ``dtype``."""
    errors = jnp.full((iterations, problem.lengths.shape[0]), jnp.nan, _working())

    def unfinished(carry: tuple[Array, kernel.State, Array]) -> Array:
        k, state, _ = carry  # the first iteration always runs, as the torch loop's
        return (k < iterations) & ((k == 0) | ~state.done.all())

    def body(carry: tuple[Array, kernel.State, Array]) -> tuple[Array, kernel.State, Array]:
        k, state, errors = carry
        state = kernel.iterate(problem, state, solver)
        return k + 1, state, errors.at[k].set(jnp.maximum(state.gap, 0))

    run, state, errors = lax.while_loop(unfinished, body, (jnp.asarray(0, dtype=int), state, errors))
    return kernel.finish(problem, state, solver, run, errors, dtype)


Options = tuple[tuple[str, Any], ...]


@partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _marginals(emissions, transitions, start, end, lengths, options: Options, shared: bool):
    """The contract's ``(u*, v*)`` as a ``jax.custom_vjp``, its backward pass Prop. 1's
    (:func:`kernel.marginals_gradients`), which jax differentiates again; ``options`` and
    ``shared`` (``transitions`` is (T, T)) are static."""
    return _marginals_forward(emissions, transitions, start, end, lengths, options, shared)[0]


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


def _shared(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with its static ``shared`` (``transitions`` is (T, T)) read off the scores."""
    return lambda emissions, transitions, start, end, lengths, options: function(
        emissions, transitions, start, end, lengths, options, transitions.ndim == 2
    )


# ------------------------------------------------------------------------------ the contract


_PIECES = contract.Pieces(_solve, _shared(_marginals), _shared(_danskin_value), _chain, _scores)
_FUNCTIONS = contract.bind(_PIECES, __name__)
_jit = partial(jax.jit, static_argnames=_OPTIONS)
_solve_output = _jit(_FUNCTIONS["solve"])


def _solve_eagerly(emissions, transitions, lengths, start, end, **options):
    output = _solve_output(emissions, transitions, lengths, start, end, **options)
    if isinstance(output.iterations, jax.core.Tracer):
        return output
    return output._replace(iterations=int(output.iterations))  # a Python int, as in torch


solve = update_wrapper(_solve_eagerly, _FUNCTIONS["solve"])
marginals = _jit(_FUNCTIONS["marginals"])
decode = _jit(_FUNCTIONS["decode"])
log_partition = _jit(_FUNCTIONS["log_partition"])
loss = jax.jit(_FUNCTIONS["loss"], static_argnames=("cost", *_OPTIONS))
partial_loss = _jit(_FUNCTIONS["partial_loss"])
