"""The iteration loop every iterative method shares (torch): run ``step`` a fixed number of times,
or until every sequence's error is within ``tolerance`` (see ``implementations.solver``).

A state is a tensor (B, ...) or a nested tuple of them, each with the batch first. ``error`` gives
the (B,) error of each sequence, or (B, K) records whose first column is that error (the others,
e.g. an objective, are recorded beside it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

State = Any  # a Tensor (B, ...) or a nested tuple of them
Step = Callable[[State], State]  # state -> next state
Error = Callable[[State, State], Tensor]  # (new state, previous state) -> (B,) error or (B, K) records


def _leaves(state: State) -> list[Tensor]:
    return [leaf for part in state for leaf in _leaves(part)] if isinstance(state, tuple) else [state]


def _keep(done: Tensor, old: State, new: State, batch_dim: int = 0) -> State:
    """``new``, except the sequences that are ``done`` (B,) keep ``old``; the sequences run along
    ``batch_dim`` of every array of a state."""
    if isinstance(new, tuple):
        return tuple(_keep(done, o, n, batch_dim) for o, n in zip(old, new, strict=True))
    shape = [1] * new.ndim
    shape[batch_dim] = -1
    return torch.where(done.view(shape), old, new)


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
        for _ in range(iterations):
            state = step(state)
        return state
    assert error is not None
    return iterate_with_errors(step, state, iterations, tolerance, error, batch_dim)[0]


def iterate_with_errors(
    step: Step, state: State, iterations: int, tolerance: float | None, error: Error, batch_dim: int = 0
) -> tuple[State, int, Tensor]:
    """As :func:`iterate`, also returning the iterations run and the (iterations, B) history of
    errors, or (iterations, B, K) of records: a frozen sequence keeps what it stopped at; NaN for
    iterations not run. ``iterations`` is at least 1."""
    first = _leaves(state)[0]
    done = torch.zeros(first.shape[batch_dim], dtype=torch.bool, device=first.device)
    errors = None
    for k in range(iterations):
        new = step(state)
        last = error(new, state)
        if errors is None:
            errors = last.new_full((iterations, *last.shape), torch.nan)
        if tolerance is not None and k:
            new = _keep(done, state, new, batch_dim)
            last = _keep(done, errors[k - 1], last)
        errors[k] = last
        state = new
        if tolerance is not None:
            done = done | ((last if last.ndim == 1 else last[:, 0]) <= tolerance)
            if bool(done.all()):
                return state, k + 1, errors
    return state, iterations, errors
