"""BCRF's loss value ``τ B_Y(w/τ)`` in JAX and its two gradients: Danskin's (the iterate ``q``
itself, :func:`_danskin_value`, a ``custom_vjp``) or backpropagation through the iterations
(``"unrolled"``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array

from ...kernels.bcrf import Solution
from ...kernels.bcrf_options import BcrfOptions
from .._scores import ArcTerms
from .forms import _run
from .scaling import _arc_gradient


@partial(jax.custom_vjp, nondiff_argnums=(5,))
def _danskin_value(
    transitions: Array, rows: Array, columns: Array, singles: Array, lengths: Array, options: BcrfOptions
) -> Array:
    """``τ B_Y(w/τ)`` of the arcs' terms whose gradient is the iterate ``q`` itself (Danskin), not
    a backward pass through the iterations: exact at convergence, the paper's "use the inference
    algorithm". The terms' gradients are q's sums, as in the torch backend.

    Differentiating that gradient (second order) differentiates the solution computed in
    :func:`_danskin_forward`, through the iterations: jax differentiates a ``custom_vjp``'s
    forward and backward rules like any other code."""
    return _danskin_forward(transitions, rows, columns, singles, lengths, options)[0]


def _danskin_forward(
    transitions: Array, rows: Array, columns: Array, singles: Array, lengths: Array, options: BcrfOptions
) -> tuple[Array, tuple[Solution, Array, Array]]:
    terms = ArcTerms(transitions, rows, columns, singles)
    ibp, state = _run(terms, lengths, options)
    solution = ibp.solution(state)
    temperature = options.temperature
    # where, not a product with the mask: a length > 1 row may have every single score -inf (NaN softmax)
    single_probs = jnp.where((lengths == 1)[:, None], jax.nn.softmax(singles / temperature, axis=-1), 0.0)
    # the transitions only tell the backward pass their shape (shared or per arc group)
    return temperature * solution.value, (solution, single_probs, transitions)


def _danskin_backward(*args: Any) -> tuple[Array, Array, Array, Array, None]:
    *_, (solution, single_probs, transitions), grad = args  # the static options come first
    return (
        _arc_gradient(solution.arcs, grad, transitions.ndim == 2),
        grad[:, None, None] * solution.out_flows,
        grad[:, None, None] * solution.in_flows,
        grad[:, None] * single_probs,
        None,
    )


_danskin_value.defvjp(_danskin_forward, _danskin_backward)


@partial(jax.jit, static_argnames=("options", "gradient"))
def _scaled_value(terms: ArcTerms, lengths: Array, options: BcrfOptions, gradient: str) -> Array:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    if gradient == "danskin":
        return _danskin_value(*terms, lengths, options)
    ibp, state = _run(terms, lengths, options)
    return options.temperature * ibp.solution(state).value
