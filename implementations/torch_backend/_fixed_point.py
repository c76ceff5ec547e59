"""The iteration loop of the iterative methods on torch (its contract:
``implementations.kernels.fixed_point``): Python loops over states that are tensors or nested
tuples of them."""

from __future__ import annotations

import torch
from torch import Tensor

from ..kernels.fixed_point import Error, State, Step, iterator, keep


def _leaves(state: State) -> list[Tensor]:
    return [leaf for part in state for leaf in _leaves(part)] if isinstance(state, tuple) else [state]


def _keep(done: Tensor, old: State, new: State, batch_dim: int = 0) -> State:
    """:func:`keep` on every tensor of a state."""
    if isinstance(new, tuple):
        return tuple(_keep(done, o, n, batch_dim) for o, n in zip(old, new, strict=True))
    return keep(done, old, new, batch_dim)


def _repeat(step: Step, state: State, iterations: int) -> State:
    for _ in range(iterations):
        state = step(state)
    return state


def iterate_with_errors(
    step: Step, state: State, iterations: int, tolerance: float | None, error: Error, batch_dim: int = 0
) -> tuple[State, int, Tensor]:
    """As ``iterate``, also returning the iterations run and the (iterations, B) history of
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
    if errors is None:
        raise ValueError(f"iterations={iterations}: iterate_with_errors runs at least one")
    return state, iterations, errors


iterate = iterator(_repeat, iterate_with_errors)
