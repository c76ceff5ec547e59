"""BCRF's linear state in torch: a large per-position kernel that needs no exactness test
(``vouched``) iterates in linear space where autograd does not record, each scaling held as
``e^{log s − shift}`` beside its vector's shift. A projection then takes a square root and a
division per tag where the log scalings cost three transcendentals. Should a projection write a
live scaling under ``e^{F/2}`` of its vector's largest, the call runs again in log space
(:class:`run_state.Underflow`). On the CPU the C sweep iterates this state (:mod:`.sweep`);
elsewhere each projection runs compiled whole (:func:`_linear_projection`)."""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import Tensor

from ...kernels.bcrf_numerics import _floor
from ..ops import recorded
from . import compilation, run_state
from .compilation import _row_products
from .scaling import Scalings, _in_clusters
from .transition_kernel import _Kernel, _shift, _with_transposes


def _linear_floor(like: Tensor) -> float:
    """``e^{F/2}``: the least a live scaling of the linear state may be over its vector's largest
    (:data:`LinearScalings`). While every one is at least that, no intermediate of
    :func:`_linear_projected` leaves the dtype's normal range, so every value is exact to rounding."""
    return math.exp(_floor(like) / 2)


#: A scaling-form iterate in linear space, for the large vouched kernels whose projections run
#: compiled: ``((even, odd), (even_shift, odd_shift), smallest)``. Each parity's scalings (B, 2, P, T)
#: are held as ``e^{log s − shift}`` (largest entry 1 a vector, 0 for a dead tag) beside their log
#: shifts (B, 2, P, 1); ``smallest`` (B,) is the smallest live scaling any projection wrote, over
#: its vector's largest. A projection then takes a square root and a division per tag where the
#: log scalings cost a ``log``, an ``exp`` and the vectors' ``exp`` (docs/derivations.md §3.12).
LinearScalings = tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor], Tensor]


def _node_rows(scalings: Tensor, parity: int, lengths: Tensor) -> Tensor:
    """(B, 1, P, 1): the rows of one parity's ``scalings`` whose node lies inside its sequence."""
    nodes = torch.arange(parity, parity + 2 * scalings.shape[2], 2, device=lengths.device)
    return (nodes < lengths.unsqueeze(-1))[:, None, :, None]


def _linear_start(kernel: _Kernel, scalings: Scalings, lengths: Tensor) -> LinearScalings | None:
    """The linear state of the log ``scalings``, or ``None`` where it does not apply: a kernel
    that is not large, per position and vouched for (``fused`` in :func:`_scaling_projection`),
    autograd recording, a sequence with a node without a live tag (a live tag has both scalings
    finite), or a live scaling under the floor (:func:`_linear_floor`). One read-back."""
    applies = kernel.vouched and kernel.by_parity and run_state.linear_state_allowed()
    if not applies or recorded(kernel.linear, *scalings):
        return None
    linear, shifts, failed = [], [], []
    for parity, log_s in enumerate(scalings):
        shift = _shift(log_s)
        x = torch.exp(log_s - shift)
        real = _node_rows(log_s, parity, lengths)
        live = ((x[:, 0] > 0) & (x[:, 1] > 0)).any(-1, keepdim=True).unsqueeze(1)  # (B, 1, P, 1)
        below = (x > 0) & (x < _linear_floor(x))
        failed += [(real & ~live).any(), (real & below).any()]
        linear.append(x)
        shifts.append(shift)
    if bool(torch.stack(failed).any()):
        return None
    smallest = scalings[0].new_ones(len(lengths))
    return (linear[0], linear[1]), (shifts[0], shifts[1]), smallest


def _log_scalings(state: LinearScalings) -> Scalings:
    """The log scalings of a linear state (:data:`Scalings`); :class:`run_state.Underflow` if a projection
    wrote a live scaling under the floor (one read-back, where the state is read off)."""
    linear, shifts, smallest = state
    if not bool((smallest >= _linear_floor(smallest)).all()):
        raise run_state.Underflow
    return cast(Scalings, tuple(torch.log(x) + shift for x, shift in zip(linear, shifts, strict=True)))


def _linear_projection(kernel: _Kernel, lengths: Tensor, num_arcs: int, first: int):
    """The projection of :func:`_scaling_projection` on a linear state (:data:`LinearScalings`),
    compiled whole (:func:`_linear_projected`)."""
    parity, kernel = first % 2, _with_transposes(kernel)
    active = _in_clusters(lengths, num_arcs, parity)[:, None, :, None]  # (B, 1, P, 1)
    clusters = len(range(first, num_arcs, 2))
    into, out_of = kernel.parities[1 - parity][1], kernel.parities[parity][0]  # Kᵀ and K

    def project(state: LinearScalings) -> LinearScalings:
        if clusters == 0:
            return state
        linear, shifts, smallest = state
        new, shift, least = compilation._run_compiled(
            _linear_projected, linear, shifts, into, out_of, active, parity
        )
        if parity == 0:
            return (new, linear[1]), (shift, shifts[1]), torch.minimum(smallest, least)
        return (linear[0], new), (shifts[0], shift), torch.minimum(smallest, least)

    return project


def _linear_projected(
    linear: tuple[Tensor, Tensor],
    shifts: tuple[Tensor, Tensor],
    into: Tensor,
    out_of: Tensor,
    active: Tensor,
    parity: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """The linear scalings (B, 2, P, T) and shifts (B, 2, P, 1) of the nodes of ``parity`` after
    their projection (those outside the clusters, ``active`` false, unchanged), and the smallest
    live scaling written (B,), over its vector's largest (+inf where none is).

    With ``ũ, ṽ`` a node's scalings and ``a = K_{p-1}ᵀ ṽ_{p-1}``, ``b = K_p ũ_{p+1}`` its products
    (rows as in :func:`_projected`, each at least ``e^{F/2}``: the kernel is vouched for and every
    vector's largest entry is 1), the node's throughput is ``ν √(a b) / Σ ν √(a b)`` with
    ``ν = √ũ √ṽ`` over its largest (every shift cancels), and its new scalings are the throughput
    over each product: ``ũ ∝ ν √b / √a``, ``ṽ ∝ ν √a / √b``, normalised to a largest entry of 1,
    with log shifts ``log max − log Σ ν √(a b) −`` the shift of the vector the product read. With
    every live scaling at least ``e^{F/2}`` no intermediate leaves the normal range, and a term
    of the sum that does is under ``e^{F/2}`` of its largest (ν = 1 there)."""
    mine, theirs = linear[parity], linear[1 - parity]
    mine_shift, their_shift = shifts[parity], shifts[1 - parity]
    # the rows [lo, hi) of the nodes with both an in- and an out-group, those a cluster may hold
    first_in = 1 - parity  # the row of the node the other parity's first group flows into
    lo, hi = first_in, min(mine.shape[2], first_in + into.shape[1], out_of.shape[1])
    rows = slice(lo, hi)
    ins, outs = slice(0, hi - lo), slice(parity + lo, parity + hi)  # their rows the products read
    a = _row_products(into[:, ins], theirs[:, 1, ins])
    b = _row_products(out_of[:, rows], theirs[:, 0, outs])
    node = mine[:, 0, rows].sqrt() * mine[:, 1, rows].sqrt()
    node = node / node.amax(-1, keepdim=True)
    ratio = torch.sqrt(b / a)
    u, v = node * ratio, node / ratio
    log_norm = torch.log((u * a).sum(-1, keepdim=True))
    largest_u, largest_v = u.amax(-1, keepdim=True), v.amax(-1, keepdim=True)
    new = torch.stack([u / largest_u, v / largest_v], dim=1)
    shift = torch.stack(
        [
            largest_u.log() - log_norm - their_shift[:, 1, ins],
            largest_v.log() - log_norm - their_shift[:, 0, outs],
        ],
        dim=1,
    )
    active = active[:, :, rows]
    live = (node > 0).unsqueeze(1)
    least = torch.where(active & live, new, math.inf).amin((1, 2, 3))
    new = torch.where(active, new, mine[:, :, rows])
    shift = torch.where(active, shift, mine_shift[:, :, rows])
    return (
        torch.cat([mine[:, :, :lo], new, mine[:, :, hi:]], dim=2),
        torch.cat([mine_shift[:, :, :lo], shift, mine_shift[:, :, hi:]], dim=2),
        least,
    )
