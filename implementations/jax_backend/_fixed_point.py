"""The iteration loop every iterative method shares (jax): run ``step`` a fixed number of times
(``lax.scan``), or until every sequence's error is within ``tolerance`` (``lax.while_loop``, which
reverse-mode differentiation cannot go through); see ``implementations.solver``."""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from jax import Array, lax

Step = Callable[[Array], Array]  # state (B, ...) -> next state
Error = Callable[[Array, Array], Array]  # (new state, previous state) -> (B,) error


def iterate(
    step: Step, state: Array, iterations: int, tolerance: float | None = None, error: Error | None = None
) -> Array:
    """The state after ``iterations`` steps, or earlier once every sequence is within ``tolerance``
    (a sequence within it is frozen). ``error`` is needed only with a tolerance."""
    if tolerance is None:
        return lax.scan(lambda state, _: (step(state), None), state, None, length=iterations)[0]
    assert error is not None
    return iterate_with_errors(step, state, iterations, tolerance, error)[0]


def iterate_with_errors(
    step: Step, state: Array, iterations: int, tolerance: float | None, error: Error
) -> tuple[Array, int | Array, Array]:
    """As :func:`iterate`, also returning the iterations run (the Python int ``iterations`` without
    a tolerance, else a 0-d array) and the (iterations, B) history of errors: a frozen sequence
    keeps the error it stopped at; NaN for iterations not run."""
    if tolerance is None:

        def record(state: Array, _: None) -> tuple[Array, Array]:
            new = step(state)
            return new, error(new, state)

        state, errors = lax.scan(record, state, None, length=iterations)
        return state, iterations, errors

    frozen = (-1,) + (1,) * (state.ndim - 1)
    errors = jnp.full((iterations, state.shape[0]), jnp.nan, state.dtype)
    done = jnp.zeros(state.shape[0], bool)

    def unfinished(carry: tuple[int, Array, Array, Array]) -> Array:
        k, _, _, done = carry
        return (k < iterations) & ~done.all()

    def body(carry: tuple[int, Array, Array, Array]) -> tuple[int, Array, Array, Array]:
        k, state, errors, done = carry
        new = step(state)
        last = jnp.where(done, errors[jnp.maximum(k - 1, 0)], error(new, state))
        new = jnp.where(done.reshape(frozen), state, new)
        return k + 1, new, errors.at[k].set(last), done | (last <= tolerance)

    run, state, errors, _ = lax.while_loop(unfinished, body, (0, state, errors, done))
    return state, run, errors
