"""The iteration loop every iterative method shares (jax): run ``step`` a fixed number of times
(``lax.scan``), or until every sequence's error is within ``tolerance`` (``lax.while_loop``, which
reverse-mode differentiation cannot go through); see ``implementations.solver``.

A state is an array (B, ...) or a pytree of them, each with the batch first. ``error`` gives the
(B,) error of each sequence, or (B, K) records whose first column is that error (the others, e.g.
an objective, are recorded beside it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array, lax

State = Any  # an Array (B, ...) or a pytree of them
Step = Callable[[State], State]  # state -> next state
Error = Callable[[State, State], Array]  # (new state, previous state) -> (B,) error or (B, K) records


def _keep(done: Array, old: State, new: State, batch_dim: int = 0) -> State:
    """``new``, except the sequences that are ``done`` (B,) keep ``old``; the sequences run along
    ``batch_dim`` of every array of a state."""

    def keep(o: Array, n: Array) -> Array:
        shape = [1] * n.ndim
        shape[batch_dim] = -1
        return jnp.where(done.reshape(shape), o, n)

    return jax.tree.map(keep, old, new)


def iterate(
    step: Step,
    state: State,
    iterations: int,
    tolerance: float | None = None,
    error: Error | None = None,
    batch_dim: int = 0,
) -> State:
    """The state after ``iterations`` steps, or earlier once every sequence is within ``tolerance``
    (a sequence within it is frozen). ``error`` is needed only with a tolerance; the state's
    arrays hold the sequences along ``batch_dim``."""
    if tolerance is None:
        return lax.scan(lambda state, _: (step(state), None), state, None, length=iterations)[0]
    assert error is not None
    return iterate_with_errors(step, state, iterations, tolerance, error, batch_dim)[0]


def iterate_with_errors(
    step: Step, state: State, iterations: int, tolerance: float | None, error: Error, batch_dim: int = 0
) -> tuple[State, int | Array, Array]:
    """As :func:`iterate`, also returning the iterations run (the Python int ``iterations`` without
    a tolerance, else a 0-d array) and the (iterations, B) history of errors, or (iterations, B, K)
    of records: a frozen sequence keeps what it stopped at; NaN for iterations not run."""
    if tolerance is None:

        def record(state: State, _: None) -> tuple[State, Array]:
            new = step(state)
            return new, error(new, state)

        state, errors = lax.scan(record, state, None, length=iterations)
        return state, iterations, errors

    shape = jax.eval_shape(lambda state: error(step(state), state), state)
    errors = jnp.full((iterations, *shape.shape), jnp.nan, shape.dtype)
    done = jnp.zeros(shape.shape[0], bool)

    def unfinished(carry: tuple[int, State, Array, Array]) -> Array:
        k, _, _, done = carry
        return (k < iterations) & ~done.all()

    def body(carry: tuple[int, State, Array, Array]) -> tuple[int, State, Array, Array]:
        k, state, errors, done = carry
        new = step(state)
        last = _keep(done, errors[jnp.maximum(k - 1, 0)], error(new, state))
        new = _keep(done, state, new, batch_dim)
        within = (last if last.ndim == 1 else last[:, 0]) <= tolerance
        return k + 1, new, errors.at[k].set(last), done | within

    run, state, errors, _ = lax.while_loop(unfinished, body, (0, state, errors, done))
    return state, run, errors
