"""The iteration loop every iterative method shares, as both backends run it: ``step`` a fixed
number of times, or until every sequence's error is within ``tolerance`` (a sequence within it is
frozen: it keeps the state and the error it stopped at); see ``implementations.solver``. The loops
themselves are each backend's ``_fixed_point`` (Python loops in torch; ``lax.scan`` and
``lax.while_loop`` in jax).

A state is an array (B, ...) or a nested tuple (in jax, any pytree) of them, the sequences along
one ``batch_dim`` of every array. ``error`` gives the (B,) error of each sequence, or (B, K)
records whose first column is that error (the others, e.g. an objective, are recorded beside it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import ops

Array = Any  # a torch.Tensor or a jax.Array
State = Any  # an array (B, ...) or a nested tuple of them
Step = Callable[[State], State]  # state -> next state
Error = Callable[[State, State], Array]  # (new state, previous state) -> (B,) error or (B, K) records


def keep(done: Array, old: Array, new: Array, batch_dim: int = 0) -> Array:
    """``new``, except the sequences that are ``done`` (B,) keep ``old``, both holding the
    sequences along ``batch_dim``."""
    shape = [1] * new.ndim
    shape[batch_dim] = -1
    return ops.of(new).where(done.reshape(shape), old, new)


def iterator(
    repeat: Callable[[Step, State, int], State], iterate_with_errors: Callable[..., tuple[State, Any, Array]]
) -> Callable[..., State]:
    """``iterate`` for the backend that runs ``step`` a fixed number of times by
    ``repeat(step, state, iterations)`` and to a tolerance by ``iterate_with_errors``."""

    def iterate(
        step: Step,
        state: State,
        iterations: int,
        tolerance: float | None = None,
        error: Error | None = None,
        batch_dim: int = 0,
    ) -> State:
        """The state after ``iterations`` steps, or earlier once every sequence is within
        ``tolerance`` (a sequence within it is frozen). ``error`` is needed only with a tolerance;
        the state's arrays hold the sequences along ``batch_dim``."""
        if tolerance is None:
            return repeat(step, state, iterations)
        assert error is not None
        return iterate_with_errors(step, state, iterations, tolerance, error, batch_dim)[0]

    return iterate
