"""BCRF's arithmetic that torch does its own way: the rows of two parities interleaved, and the
batched inner product the scaling form's value reads (batch first, or last with tags first). The
projection's shifts given the flows (docs/derivations.md §3.3) are written once, in
:mod:`implementations.kernels.bcrf_log_form`; the arithmetic both frameworks spell alike (-inf
handling, the masks of padding, node marginals) is in :mod:`implementations.kernels.bcrf_numerics`;
the convergence error and the records the forms pass on are in :mod:`implementations.kernels.bcrf`."""

from __future__ import annotations

from torch import Tensor

from ..ops import inner


def _interleaved(even: Tensor, odd: Tensor) -> Tensor:
    """(B, P0 + P1, …): the rows of ``even`` (B, P0, …) at even and of ``odd`` (B, P1, …) at odd
    positions."""
    whole = even.new_empty(even.shape[0], even.shape[1] + odd.shape[1], *even.shape[2:])
    whole[:, 0::2], whole[:, 1::2] = even, odd
    return whole


def _inner(x: Tensor, y: Tensor, batch_last: bool = False) -> Tensor:
    """``Σ x ⊙ y`` (B,) over all but the batch dim, of arrays (B, …) or ``batch_last`` (…, B);
    batch first as a batched dot, with no temporary as big as ``x``."""
    if batch_last:
        return (x * y).flatten(0, -2).sum(0)
    return inner(x, y)
