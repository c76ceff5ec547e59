"""BCRF's CPU sweep in JAX: on the CPU, large per-position kernels iterate without a tolerance in
the C sweep through XLA's FFI (:mod:`implementations.jax_backend._sweep`), both projections of
several iterations in one pass along each sequence, on the linear state of the scalings;
differentiated as XLA's iterations (docs/derivations.md §3.12, *The sweep*)."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
from jax import Array, lax

from ...kernels.bcrf_numerics import _floor
from ...kernels.bcrf_options import first_clusters
from .. import _sweep
from .._fixed_point import iterate
from .scaling import Scalings, _scaling_step
from .transition_kernel import _Kernel, _shift

#: The sweep runs kernels whose even arc groups hold this many entries or more, as torch's (its
#: FUSED_FROM): below, XLA's projections' products read cached arcs, and the state's conversions
#: weigh more.
SWEEP_FROM = 2**20


def _linear_floor(like: Array) -> float:
    """``e^{F/2}``: the least a live scaling of the linear state may be over its vector's largest,
    as in the torch backend: while every one is at least that, the sweep's products and
    projections stay in the dtype's normal range, exact to rounding."""
    return math.exp(_floor(like) / 2)


def _linear_start(kernel: _Kernel, scalings: Scalings, lengths: Array) -> tuple[Array, _sweep.LinearState]:
    """The linear state of the log ``scalings`` (tags last) and whether the sweep may run it, as
    in the torch backend: every kernel entry at least ``e^{F/2}``, every node inside its sequence
    with a live tag (both scalings finite) and no live scaling under the floor."""
    log_u, log_v = scalings
    floor, linear, shifts, failed = _linear_floor(log_u), [], [], []
    for parity in (0, 1):
        log_s = jnp.stack([log_u[:, parity], log_v[:, parity]], axis=1)  # (B, 2, P, T): u, v
        shift = _shift(log_s)
        x = jnp.exp(log_s - shift)
        nodes = parity + 2 * jnp.arange(x.shape[2])
        real = (nodes < lengths[:, None])[:, None, :, None]  # (B, 1, P, 1)
        live = ((x[:, 0] > 0) & (x[:, 1] > 0)).any(-1, keepdims=True)[:, None]
        failed += [(real & ~live).any(), (real & (x > 0) & (x < floor)).any()]
        linear.append(x)
        shifts.append(shift[..., 0])
    vouched = jnp.min(kernel.linear, initial=jnp.inf) > floor
    ok = vouched & ~jnp.stack(failed).any()
    return ok, ((linear[0], linear[1]), (shifts[0], shifts[1]), jnp.ones(len(lengths), log_u.dtype))


def _log_scalings(state: _sweep.LinearState) -> Scalings:
    """The log scalings (:data:`Scalings`, tags last) of a linear state."""
    linear, shifts, _ = state
    logs = [jnp.log(x) + shift[..., None] for x, shift in zip(linear, shifts, strict=True)]
    return jnp.stack([logs[0][:, 0], logs[1][:, 0]], axis=1), jnp.stack(
        [logs[0][:, 1], logs[1][:, 1]], axis=1
    )


def _iterated(state: Scalings, kernel: _Kernel, lengths: Array, order: str, count: int) -> Scalings:
    """``count`` iterations on a scaling-form state, as XLA runs them."""
    return iterate(_scaling_step(kernel, lengths, order, kernel.log.shape[1]), state, count)


def _swept(state: Scalings, kernel: _Kernel, lengths: Array, order: str, count: int) -> Scalings:
    """:func:`_iterated` by the C sweep on the CPU: on the linear state of ``state``, where it may
    start (:func:`_linear_start`) and no live scaling falls under the floor on the way; otherwise
    (``lax.cond``) as XLA runs them."""
    ok, linear = _linear_start(kernel, state, lengths)
    first = first_clusters(order)[0] % 2
    linear = lax.cond(
        ok,
        lambda x: _sweep.iterations(kernel.linear, lengths, x, first, count),
        lambda x: (*x[:2], jnp.zeros_like(x[2])),  # a least of 0: not run
        linear,
    )
    fine = jnp.min(linear[2], initial=jnp.inf) >= _linear_floor(linear[2])
    return lax.cond(
        fine, lambda: _log_scalings(linear), lambda: _iterated(state, kernel, lengths, order, count)
    )


@partial(jax.custom_jvp, nondiff_argnums=(3, 4))
def _sweep_iterated(state: Scalings, kernel: _Kernel, lengths: Array, order: str, count: int) -> Scalings:
    """:func:`_iterated`, by the C sweep where the computation runs on the CPU
    (``lax.platform_dependent``); differentiated as :func:`_iterated` (the sweep is not)."""
    return lax.platform_dependent(
        state,
        kernel,
        lengths,
        cpu=partial(_swept, order=order, count=count),
        default=partial(_iterated, order=order, count=count),
    )


@_sweep_iterated.defjvp
def _sweep_iterated_jvp(order: str, count: int, primals: tuple, tangents: tuple) -> tuple[Scalings, Scalings]:
    return jax.jvp(partial(_iterated, order=order, count=count), primals, tangents)


def _sweep_steps(kernel: _Kernel, lengths: Array, order: str) -> Callable[[Scalings, int], Scalings] | None:
    """Where the C sweep may run the iterations on ``kernel`` (per position, large, and
    :func:`_sweep.available`), a function of a state and a number of iterations that runs them
    in sweeps along each sequence (docs/derivations.md §3.12, *The sweep*)."""
    if kernel.log.ndim == 2 or kernel.parities[0].size < SWEEP_FROM:
        return None
    if not _sweep.available(kernel.linear.dtype, kernel.linear.shape[-1]):
        return None
    return lambda state, count: _sweep_iterated(state, kernel, lengths, order, count)
