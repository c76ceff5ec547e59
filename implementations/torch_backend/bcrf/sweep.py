"""BCRF's CPU sweep in torch: the linear state (:mod:`.linear`) iterated by the C sweep
(:mod:`implementations.torch_backend._sweep`), both projections of several iterations in one pass
along each sequence that reads each arc block from memory once (docs/derivations.md §3.12, *The
sweep*). Where the sweep is not available (not the CPU, or no compiler), the linear state's
projections run compiled instead."""

from __future__ import annotations

from typing import Protocol

from torch import Tensor

from ...kernels.bcrf_options import first_clusters
from .. import _sweep
from .linear import LinearScalings
from .transition_kernel import _Kernel


class _Steps(Protocol):
    """``count`` iterations of the linear state at once (bound as ``partial(steps, count=1)``)."""

    def __call__(self, state: LinearScalings, count: int) -> LinearScalings: ...


def _sweep_steps(kernel: _Kernel, lengths: Tensor, order: str) -> _Steps | None:
    """Where the C sweep runs the linear state of ``kernel`` (:func:`_sweep.available`: the CPU),
    a function of a state and a number of iterations that runs them in sweeps along each
    sequence: the arithmetic of :func:`.linear._linear_projected`, each arc block read from memory
    once for several iterations."""
    if not _sweep.available(kernel.linear.device, kernel.linear.dtype, kernel.linear.shape[-1]):
        return None
    blocks = (kernel.parities[0][0], kernel.parities[1][0])
    first = first_clusters(order)[0] % 2

    def steps(state: LinearScalings, count: int) -> LinearScalings:
        linear, shifts, smallest = state
        return _sweep.iterations(blocks, lengths, linear, shifts, smallest, first, count)

    return steps
