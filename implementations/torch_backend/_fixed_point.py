"""The iteration loop every iterative method shares (torch): run ``step`` a fixed number of times,
or until every sequence's error is within ``tolerance`` (see ``implementations.solver``)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

Step = Callable[[Tensor], Tensor]  # state (B, ...) -> next state
Error = Callable[[Tensor, Tensor], Tensor]  # (new state, previous state) -> (B,) error


def iterate(
    step: Step, state: Tensor, iterations: int, tolerance: float | None = None, error: Error | None = None
) -> Tensor:
    """The state after ``iterations`` steps, or earlier once every sequence is within ``tolerance``
    (a sequence within it is frozen). ``error`` is needed only with a tolerance."""
    if tolerance is None:
        for _ in range(iterations):
            state = step(state)
        return state
    assert error is not None
    return iterate_with_errors(step, state, iterations, tolerance, error)[0]


def iterate_with_errors(
    step: Step, state: Tensor, iterations: int, tolerance: float | None, error: Error
) -> tuple[Tensor, int, Tensor]:
    """As :func:`iterate`, also returning the iterations run and the (iterations, B) history of
    errors: a frozen sequence keeps the error it stopped at; NaN for iterations not run."""
    errors = state.new_full((iterations, state.shape[0]), torch.nan)
    done = torch.zeros(state.shape[0], dtype=torch.bool, device=state.device)
    frozen = (-1,) + (1,) * (state.ndim - 1)
    for k in range(iterations):
        new = step(state)
        last = error(new, state)
        if tolerance is not None and k:
            new = torch.where(done.view(frozen), state, new)
            last = torch.where(done, errors[k - 1], last)
        errors[k] = last
        state = new
        if tolerance is not None:
            done = done | (last <= tolerance)
            if bool(done.all()):
                return state, k + 1, errors
    return state, iterations, errors
