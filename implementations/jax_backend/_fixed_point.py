"""The iteration loop of the iterative methods on jax (its contract:
``implementations.kernels.fixed_point``): a ``lax.scan`` for a fixed number of steps, a
``lax.while_loop`` to a tolerance (which reverse-mode differentiation cannot go through), over
states that are pytrees of arrays."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import Array, lax

from ..kernels.fixed_point import Error, State, Step, iterator, keep


def _keep(done: Array, old: State, new: State, batch_dim: int = 0) -> State:
    """:func:`keep` on every array of a state."""
    return jax.tree.map(functools.partial(keep, done, batch_dim=batch_dim), old, new)


def _repeat(step: Step, state: State, iterations: int) -> State:
    return lax.scan(lambda state, _: (step(state), None), state, None, length=iterations)[0]


def iterate_with_errors(
    step: Step, state: State, iterations: int, tolerance: float | None, error: Error, batch_dim: int = 0
) -> tuple[State, int | Array, Array]:
    """As ``iterate``, also returning the iterations run (the Python int ``iterations`` without
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


iterate = iterator(_repeat, iterate_with_errors)
