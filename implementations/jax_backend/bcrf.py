"""Bregman CRF (Corro, Lacroix & Le Roux, 2025): entropy of the transition marginals, solved by
iterative Bregman projections (IBP) whose depth does not grow with N.

``q = argmax_{q ∈ conv(Y)} <q, w/τ> + H(q)`` is approached by alternating KL projections onto
C_odd and C_even (the paper's 1-indexed inner clusters); each projection resets every node's
throughput to the normalised geometric mean of its in- and out-flow (docs/derivations.md §3.3). One
*iteration* is one projection onto C_odd then one onto C_even (``order="odd-even"``); the
iterations are a ``lax.scan`` of fixed length. A node with no in- or out-mass is killed (``alive``)
so -inf never becomes NaN, and clusters past a sequence's length are skipped, so padding never
changes a result.

Two forms compute the same iterates, as in the torch backend (docs/derivations.md §3.12):
``form="log"`` rewrites ``log q`` in every projection; ``form="scaling"`` (the default but for
``decode``) keeps ``log q = log K + log v ⊕ log u`` with the unaries in the scalings and the
transitions alone in ``K`` (one (T, T) matrix where they are shared), projects with two matrix
products, recomputing the flows in log space (``lax.cond``) where the products cannot vouch for
them, and reads the loss's value and gradient off the scalings and the flows. On the CPU, large
per-position kernels iterate without a tolerance in torch's C sweep, through XLA's FFI
(:mod:`._sweep`, :func:`_sweep_iterated`: both projections of several iterations in one pass
along each sequence), differentiated as XLA's iterations.

Lengths 1 and 2 have no inner cluster: length 1 is a softmax over tags, length 2 a softmax over
tag pairs (every arc group is normalised before the first projection, which leaves the iterates
of longer sequences unchanged because they are invariant to per-group shifts).

Options are Python values, static under ``jax.jit``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from ..solver import SolverOutput
from . import _sweep
from ._fixed_point import iterate, iterate_with_errors
from ._scores import ArcTerms, arc_terms, gold_score, mask_emissions, position_mask
from ._semiring import logsumexp
from ._tokens import argmax_tags


def _first_clusters(order: str) -> tuple[int, int]:
    """0-indexed position of the first inner cluster of each half-iteration, in order.

    Paper cluster k (1-indexed) is position k - 1: C_odd = {3, 5, ...} starts at position 2,
    C_even = {2, 4, ...} at position 1.
    """
    return (2, 1) if order == "odd-even" else (1, 2)


def _cluster_shifts(log_in: Array, log_out: Array, active: Array, axis: int = -1) -> tuple[Array, Array]:
    """The projection of §3.3 given each node's log in- and out-flow (B, P, T), or with the tags
    along another ``axis``: the shifts of the log of its in-arcs and of its out-arcs, -inf for a
    dead tag, 0 outside the clusters (``active``, broadcast, marks them), as in the torch backend:
    each flow moves to the node's new throughput, ``log sqrt(in · out) − log Σ_tags sqrt(in · out)``
    (a dead tag's -inf flow taken as 0, a dead node's normaliser too)."""
    log_node = (log_in + log_out) / 2  # log sqrt(in · out), unnormalised
    throughput = log_node - _finite_or_zero(jnp.expand_dims(logsumexp(log_node, axis=axis), axis))
    return (
        jnp.where(active, throughput - _finite_or_zero(log_in), 0.0),
        jnp.where(active, throughput - _finite_or_zero(log_out), 0.0),
    )


def _project(log_q: Array, lengths: Array, first: int) -> Array:
    """KL projection onto the clusters at positions ``first, first + 2, ...`` (one parity).

    Cluster p reads arc group p - 1 (into it) and p (out of it); clusters of one parity touch
    disjoint groups, so they are projected all at once. The projection rescales the columns of
    group p - 1 and the rows of group p, so it is one broadcast add of a column shift and a row
    shift per group (-inf for a dead node). Clusters with ``p > len - 2`` are skipped.
    """
    batch, num_arcs, num_tags, _ = log_q.shape
    count = len(range(first, num_arcs, 2))
    if count == 0:
        return log_q
    positions = np.arange(first, first + 2 * count, 2)  # static
    into = slice(first - 1, first - 1 + 2 * count, 2)  # groups p - 1
    out_of = slice(first, first + 2 * count, 2)  # groups p
    log_in = logsumexp(log_q[:, into], axis=-2)  # (B, P, T) in-flow of each node
    log_out = logsumexp(log_q[:, out_of], axis=-1)  # (B, P, T) out-flow of each node
    active = (positions < (lengths - 1)[:, None])[..., None]  # (B, P, 1)
    column_shift, row_shift = _cluster_shifts(log_in, log_out, active)
    columns = jnp.zeros((batch, num_arcs, num_tags), log_q.dtype).at[:, positions - 1].set(column_shift)
    rows = jnp.zeros((batch, num_arcs, num_tags), log_q.dtype).at[:, positions].set(row_shift)
    return log_q + (rows[..., :, None] + columns[..., None, :])


def _initial(weights: Array, temperature: float) -> Array:
    """``log q`` before the first projection: ``w/τ`` with every arc group normalised."""
    log_q = weights / temperature
    batch, num_arcs, num_tags, _ = log_q.shape
    return log_q - logsumexp(log_q.reshape(batch, num_arcs, num_tags * num_tags), axis=-1)[:, :, None, None]


def _step(lengths: Array, order: str, num_arcs: int, kernel: _Kernel | None = None):
    """One iteration: a projection onto each parity of inner clusters, in ``order``, on ``log q``
    (the log form, no ``kernel``) or on the scalings of the scaling form with ``kernel``."""
    if kernel is None:
        projections = [partial(_project, lengths=lengths, first=first) for first in _first_clusters(order)]
    else:
        projections = [
            _scaling_projection(kernel, lengths, num_arcs, first) for first in _first_clusters(order)
        ]

    def step(state: Any) -> Any:
        for project in projections:
            state = project(state)
        return state

    return step


def _error(lengths: Array):
    """The convergence error of an iterate: its constraint violation (B,)."""
    return lambda log_q, _: _violation(_arc_marginals(log_q, lengths), lengths)


class _Kernel(NamedTuple):
    """``K = exp(transitions/τ − shift)``: the arcs' weights without their unaries, shared (T, T) or
    per arc group (B, N-1, T, T), with largest entry 1 (``shift``, per group where they are per
    group), entries under the dtype's smallest normal number flushed to 0, as in the torch backend;
    ``parities`` holds K's even and odd groups (shared: K for both)."""

    log: Array  # (T, T) or (B, N-1, T, T)
    shift: Array  # () or (B, N-1)
    linear: Array  # exp(log), flushed
    parities: tuple[Array, Array]  # groups 0, 2, ... and 1, 3, ...


def _floor(dtype: Any) -> float:
    """``F``: the log of the dtype's smallest normal number; kernel entries under ``e^F`` are flushed."""
    return math.log(float(jnp.finfo(dtype).tiny))


def _safe_log(x: Array) -> Array:
    """``log x`` with ``log 0 = -inf`` and a finite gradient everywhere (0 where ``x = 0``)."""
    positive = x > 0
    return jnp.where(positive, jnp.log(jnp.where(positive, x, 1.0)), -jnp.inf)


def _finite_or_zero(x: Array) -> Array:
    """``x`` with -inf replaced by 0; NaN and +inf are kept."""
    return jnp.nan_to_num(x, nan=jnp.nan, posinf=jnp.inf, neginf=0.0)


def _kernel(transitions: Array, temperature: float) -> _Kernel:
    """The kernel of ``transitions`` (T, T) or (B, N-1, T, T) at ``temperature``; its shift is not
    differentiated (the iterates do not depend on it)."""
    scaled = transitions / temperature
    shared = scaled.ndim == 2
    shift = _finite_or_zero(lax.stop_gradient(scaled.max() if shared else scaled.max((-2, -1))))
    log = scaled - (shift if shared else shift[..., None, None])
    linear = jnp.where(log > _floor(log.dtype), jnp.exp(log), 0.0)
    parities = (linear, linear) if shared else (linear[:, 0::2], linear[:, 1::2])
    return _Kernel(log, shift, linear, parities)


def _shift(log_x: Array, axis: int = -1) -> Array:
    """``max log x`` over the tags (``axis``), kept (0 for an all -inf vector: a dead position)."""
    return _finite_or_zero(log_x.max(axis, keepdims=True))


class _Vectors(NamedTuple):
    """Vectors ``x`` (…, T) that a product will multiply, as in the torch backend: ``log x``, its
    largest entry per vector (kept dim, 0 for an all -inf one) and ``e^{log x − shift}``."""

    log: Array
    shift: Array
    linear: Array

    def rows(self, rows: slice, side: int | None = None) -> _Vectors:
        """The vectors of ``rows`` (dim 1), of one ``side`` (dim 2) if stacked."""
        pick = (slice(None), rows) if side is None else (slice(None), rows, side)
        return _Vectors(self.log[pick], self.shift[pick], self.linear[pick])


def _vectors(log_x: Array, axis: int = -1) -> _Vectors:
    """The :class:`_Vectors` of ``log_x``, vectors along ``axis`` ((…, T) by default)."""
    shift = _shift(log_x, axis)
    return _Vectors(log_x, shift, jnp.exp(log_x - shift))


def _unused(log_x: Array) -> Array:
    """0 where ``log_x`` is finite, +inf where it is -inf (see :func:`_flows`)."""
    return _finite_or_zero(log_x) - log_x


class _Request(NamedTuple):
    """Flows through every arc group of one ``parity``, as in the torch backend: into each tag
    (``into``) or out of it, given the vectors ``x`` (B, P, T), or (T, P, B) if ``tags_first``
    (a shared kernel's only: :func:`_tags_first`), and ``unused``: 0 for a flow that is read, +inf
    for one nobody reads."""

    parity: int
    x: _Vectors
    into: bool
    unused: Array
    tags_first: bool = False


def _product(matrices: Array, x: Array, into: bool, tags_first: bool) -> Array:
    """``K_gᵀ x_g`` (``into``) or ``K_g x_g`` for every group g, of a shared (T, T) kernel (one
    matrix product for the whole batch) or of ``matrices`` (B, P, T, T), in the layout of ``x``
    (:class:`_Request`)."""
    if tags_first:  # one (T, T) × (T, P·B) product
        return jnp.tensordot(matrices, x, axes=(0 if into else 1, 0))
    if matrices.ndim == 2:
        return x @ (matrices if into else matrices.T)
    return jnp.einsum("bpij,bpi->bpj" if into else "bpij,bpj->bpi", matrices, x)


def _flows(kernel: _Kernel, *requests: _Request) -> tuple[Array, ...]:
    """The log flows (B, P, T) of each request, as in the torch backend: one product in linear
    space each, exact to rounding where it is above ``e^{F/2}``; if some product that is read is
    not, one ``lax.cond`` recomputes every request's flows in log space from the arcs (its outputs
    are O(N T): no arc array is copied through the conditional)."""
    products = [_product(kernel.parities[r.parity], r.x.linear, r.into, r.tags_first) for r in requests]
    half = math.exp(_floor(products[0].dtype) / 2)
    # one reduction per product (``initial``: a batch or parity may hold none)
    read = [jnp.min(p + r.unused, initial=jnp.inf) for p, r in zip(products, requests, strict=True)]
    faint = jnp.stack(read).min() <= half
    return lax.cond(
        faint,
        lambda: tuple(_exact_flows(kernel, r.parity, r.x.log, r.into, r.tags_first) for r in requests),
        lambda: tuple(r.x.shift + _safe_log(p) for p, r in zip(products, requests, strict=True)),
    )


def _exact_flows(kernel: _Kernel, parity: int, log_x: Array, into: bool, tags_first: bool) -> Array:
    """The flows of :func:`_flows` as log-sum-exps over the T arcs of each group, in the layout
    of ``log_x`` (:class:`_Request`)."""
    log = kernel.log if kernel.log.ndim == 2 else kernel.log[:, parity::2]
    if tags_first:  # arcs (T_from, T_to, P, B)
        log = log[..., None, None]
        return logsumexp(log + log_x[:, None], axis=0) if into else logsumexp(log + log_x[None], axis=1)
    if into:
        return logsumexp(log + log_x[..., :, None], axis=-2)
    return logsumexp(log + log_x[..., None, :], axis=-1)


def _group_flows(kernel: _Kernel, x: _Vectors, into: bool, unused: Array) -> Array:
    """The flows of :func:`_flows` through every arc group (B, N-1, T), given the vectors ``x``
    (B, N-1, T) for each: both parities' products, interleaved."""
    if kernel.log.ndim == 2:
        return _flows(kernel, _Request(0, x, into, unused))[0]
    requests = [_Request(p, x.rows(slice(p, None, 2)), into, unused[:, p::2]) for p in (0, 1)]
    return _interleaved(*_flows(kernel, *requests))


def _interleaved(even: Array, odd: Array) -> Array:
    """(B, P0 + P1, …): the rows of ``even`` (B, P0, …) at even and of ``odd`` (B, P1, …) at odd
    positions."""
    whole = jnp.empty((even.shape[0], even.shape[1] + odd.shape[1], *even.shape[2:]), even.dtype)
    return whole.at[:, 0::2].set(even).at[:, 1::2].set(odd)


def _group_mask(lengths: Array, num_arcs: int) -> Array:
    """(B, N-1, 1): the arc groups inside each sequence."""
    return position_mask(lengths - 1, num_arcs)[..., None]


def _padding(lengths: Array, num_arcs: int, dtype: Any) -> Array:
    """(B, N-1, 1): 0 for the arc groups inside each sequence, +inf past its length."""
    return jnp.where(_group_mask(lengths, num_arcs), 0.0, jnp.inf).astype(dtype)


#: A scaling-form iterate, ``log q[i, a, b] = log K[i, a, b] + log_v[i, a] + log_u[i+1, b]``: the log
#: in-scalings ``log_u`` and out-scalings ``log_v`` of every node, -inf for a dead node or tag, each
#: held by parity: (B, 2, ⌈N/2⌉, T), node ``p`` of sequence ``b`` at ``[b, p % 2, p // 2]``
#: (:func:`_by_parity`), or with a shared kernel tags first and sequences last, (T, 2, ⌈N/2⌉, B),
#: node ``p`` at ``[:, p % 2, p // 2, b]`` (:func:`_tags_first`). By parity, a projection reads and
#: writes blocks (slices and in-place updates, no gather or scatter; the loss 20–25 % faster than
#: with strided slices of (B, N, T) arrays). Tags first, the shared kernel's products are one
#: (T, T) × (T, P·B) matrix product, and XLA's elementwise loops run along the batch: along
#: T = 17 tags they vectorise badly on the CPU (an ``exp`` 1.7 ns an element against 0.35 along
#: 64 sequences, one thread; the BCRF-10 loss about 40 % faster, derivations §3.12). Per-arc-group
#: kernels keep the tags last, where their batched products read the matrices fastest. The kernel
#: is fixed, so the iterations carry the scalings alone.
Scalings = tuple[Array, Array]


def _tags_first(kernel: _Kernel) -> bool:
    """Whether a scaling-form iterate on ``kernel`` holds its tags first (:data:`Scalings`): a
    shared kernel's does."""
    return kernel.log.ndim == 2


def _by_parity(x: Array, tags_first: bool) -> Array:
    """(B, N, T) node values held by parity, (B, 2, ⌈N/2⌉, T) or ``tags_first`` (T, 2, ⌈N/2⌉, B);
    an odd N's last slot is -inf."""
    batch, length, num_tags = x.shape
    x = jnp.pad(x, ((0, 0), (0, length % 2), (0, 0)), constant_values=-jnp.inf)
    x = x.reshape(batch, (length + 1) // 2, 2, num_tags)
    return x.transpose(3, 2, 1, 0) if tags_first else x.transpose(0, 2, 1, 3)


def _by_position(x: Array, length: int, tags_first: bool) -> Array:
    """The (B, N, T) node values of :func:`_by_parity`'s layout."""
    x = x.transpose(3, 2, 1, 0) if tags_first else x.transpose(0, 2, 1, 3)
    batch, half, _, num_tags = x.shape
    return x.reshape(batch, 2 * half, num_tags)[:, :length]


def _scaled_initial(terms: ArcTerms, lengths: Array, temperature: float) -> tuple[_Kernel, Scalings]:
    """``log q = w/τ`` with every arc group normalised, in scaling form: the unaries in the
    scalings (the rows' less the group's log-sum-exp), the transitions alone in the kernel."""
    kernel = _kernel(terms.transitions, temperature)
    edge = jnp.zeros((terms.rows.shape[0], 1, terms.rows.shape[-1]), terms.rows.dtype)
    rows, columns = terms.rows / temperature, terms.columns / temperature
    unused = _unused(rows) + _padding(lengths, rows.shape[1], rows.dtype)
    log_norm = logsumexp(rows + _group_flows(kernel, _vectors(columns), False, unused), axis=-1)
    log_u = jnp.concatenate([edge, columns], axis=1)
    log_v = jnp.concatenate([rows - log_norm[..., None], edge], axis=1)
    tags_first = _tags_first(kernel)
    return kernel, (_by_parity(log_u, tags_first), _by_parity(log_v, tags_first))


def _by_node(kernel: _Kernel, scalings: Scalings, num_arcs: int) -> Scalings:
    """The log scalings of every node (B, N, T) of a scaling-form iterate on ``kernel``."""
    return tuple(_by_position(x, num_arcs + 1, _tags_first(kernel)) for x in scalings)


def _scaled_log_q(kernel: _Kernel, num_arcs: int, scalings: Scalings) -> Array:
    """``log q`` (B, N-1, T, T) of a scaling-form iterate."""
    log_u, log_v = _by_node(kernel, scalings, num_arcs)
    return kernel.log + log_v[:, :-1][..., :, None] + log_u[:, 1:][..., None, :]


def _scaling_projection(kernel: _Kernel, lengths: Array, num_arcs: int, first: int):
    """The projection of :func:`_project` on a scaling-form iterate (a function of its scalings), as
    in the torch backend: the flows by two matrix products over every group of a parity
    (:func:`_flows`), then the shifts of §3.3 on the log scalings of the parity's clusters.

    The clusters are nodes ``first, first + 2, ...`` (parity ``first % 2``, rows ``first // 2, ...``
    of it); group ``g`` (of parity ``g % 2``) leaves node ``g`` and enters node ``g + 1``, so the
    groups into the clusters leave the other parity's rows ``0, 1, ...`` and the groups out of them
    enter its rows ``first % 2, ...``."""
    count = len(range(first, num_arcs, 2))
    parity, other = first % 2, 1 - first % 2
    nodes = slice(first // 2, first // 2 + count)  # rows of the clusters in their parity
    into, out_of = other, parity  # parity of the groups p - 1 and p
    positions = np.arange(first, first + 2 * count, 2)  # static
    tags_first = _tags_first(kernel)
    axis = 0 if tags_first else -1  # of the tags
    active = positions < (lengths - 1)[:, None]  # (B, P)
    active = active.T[None] if tags_first else active[..., None]  # (1, P, B) or (B, P, 1)
    outside = jnp.where(active, 0.0, jnp.inf)
    groups_in = slice((first - 1) // 2, (first - 1) // 2 + count)  # of the parity's groups
    groups_out = slice(first // 2, first // 2 + count)
    in_groups, out_groups = len(range(into, num_arcs, 2)), len(range(out_of, num_arcs, 2))

    def project(scalings: Scalings) -> Scalings:
        if count == 0:
            return scalings
        log_u, log_v = scalings
        log_u_p, log_v_p = log_u[:, parity, nodes], log_v[:, parity, nodes]
        unused = _unused(log_u_p + log_v_p) + outside
        pad_in = in_groups - count - groups_in.start
        pad_out = out_groups - count - groups_out.start
        unused_in = jnp.pad(unused, ((0, 0), (groups_in.start, pad_in), (0, 0)), constant_values=jnp.inf)
        unused_out = jnp.pad(unused, ((0, 0), (groups_out.start, pad_out), (0, 0)), constant_values=jnp.inf)
        log_in, log_out = _flows(
            kernel,
            _Request(into, _vectors(log_v[:, other, :in_groups], axis), True, unused_in, tags_first),
            _Request(
                out_of,
                _vectors(log_u[:, other, parity : parity + out_groups], axis),
                False,
                unused_out,
                tags_first,
            ),
        )
        column_shift, row_shift = _cluster_shifts(
            log_u_p + log_in[:, groups_in], log_v_p + log_out[:, groups_out], active, axis
        )
        log_u = log_u.at[:, parity, nodes].set(log_u_p + column_shift)
        log_v = log_v.at[:, parity, nodes].set(log_v_p + row_shift)
        return log_u, log_v

    return project


#: The sweep runs kernels whose even arc groups hold this many entries or more, as torch's (its
#: FUSED_FROM): below, XLA's projections' products read cached arcs, and the state's conversions
#: weigh more.
SWEEP_FROM = 2**20


def _linear_floor(dtype: Any) -> float:
    """``e^{F/2}``: the least a live scaling of the linear state may be over its vector's largest,
    as in the torch backend: while every one is at least that, the sweep's products and
    projections stay in the dtype's normal range, exact to rounding."""
    return math.exp(_floor(dtype) / 2)


def _linear_start(kernel: _Kernel, scalings: Scalings, lengths: Array) -> tuple[Array, _sweep.LinearState]:
    """The linear state of the log ``scalings`` (tags last) and whether the sweep may run it, as
    in the torch backend: every kernel entry at least ``e^{F/2}``, every node inside its sequence
    with a live tag (both scalings finite) and no live scaling under the floor."""
    log_u, log_v = scalings
    floor, linear, shifts, failed = _linear_floor(log_u.dtype), [], [], []
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
    """``count`` iterations of :func:`_step` on a scaling-form state, as XLA runs them."""
    num_arcs = kernel.log.shape[1]
    return iterate(_step(lengths, order, num_arcs, kernel), state, count)


def _swept(state: Scalings, kernel: _Kernel, lengths: Array, order: str, count: int) -> Scalings:
    """:func:`_iterated` by the C sweep on the CPU: on the linear state of ``state``, where it may
    start (:func:`_linear_start`) and no live scaling falls under the floor on the way; otherwise
    (``lax.cond``) as XLA runs them."""
    ok, linear = _linear_start(kernel, state, lengths)
    first = _first_clusters(order)[0] % 2
    linear = lax.cond(
        ok,
        lambda x: _sweep.iterations(kernel.linear, lengths, x, first, count),
        lambda x: (*x[:2], jnp.zeros_like(x[2])),  # a least of 0: not run
        linear,
    )
    fine = jnp.min(linear[2], initial=jnp.inf) >= _linear_floor(linear[2].dtype)
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


class _Solution(NamedTuple):
    """What the losses read off an iterate, as in the torch backend: ``B_Y(w/τ)`` (B,), the flows
    out of each tag's rows and into each tag's columns of every arc group (B, N-1, T), zero past a
    sequence's length, and the arcs for :func:`_arc_gradient`: q (B, N-1, T, T) or, in scaling
    form, the kernel with the :class:`_Vectors` of the rows' and columns' log scalings (B, N-1, T)
    (-inf past the length)."""

    value: Array
    out_flows: Array
    in_flows: Array
    arcs: Array | tuple[_Kernel, _Vectors, _Vectors]


def _scaled_solution(
    scalings: Scalings, kernel: _Kernel, terms: ArcTerms, lengths: Array, temperature: float
) -> _Solution:
    """The :class:`_Solution` of a scaling-form iterate, with no (B, N-1, T, T) array (torch
    backend: ``Σ_g shift_g Σ q_g + <out flows, rows/τ − log v> + <in flows, columns/τ − log u>``)."""
    log_u, log_v = _by_node(kernel, scalings, terms.rows.shape[1])
    padding = _padding(lengths, terms.rows.shape[1], log_u.dtype)
    log_rows = log_v[:, :-1] - padding  # -inf past the length
    log_columns = log_u[:, 1:] - padding
    rows, columns = _vectors(log_rows), _vectors(log_columns)
    out_flows = jnp.exp(log_rows + _group_flows(kernel, columns, False, _unused(log_rows)))
    in_flows = jnp.exp(log_columns + _group_flows(kernel, rows, True, _unused(log_columns)))
    row_gaps = _gaps(terms.rows / temperature, log_rows)
    column_gaps = _gaps(terms.columns / temperature, log_columns)
    value = (
        (kernel.shift * out_flows.sum(-1)).sum(-1)
        + (out_flows * row_gaps).sum((1, 2))
        + (in_flows * column_gaps).sum((1, 2))
    )
    value = jnp.where(lengths == 1, logsumexp(terms.singles / temperature, axis=-1), value)
    return _Solution(value, out_flows, in_flows, (kernel, rows, columns))


def _gaps(scores: Array, log_scalings: Array) -> Array:
    """``scores − log_scalings``, 0 where the scaling is -inf (a dead tag has no mass)."""
    return jnp.nan_to_num(scores - log_scalings, nan=0.0, posinf=0.0, neginf=0.0)


def _log_solution(
    log_q: Array, weights: Array, singles: Array, lengths: Array, temperature: float
) -> _Solution:
    """The :class:`_Solution` of a log-form iterate (``weights``: the arcs w)."""
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    return _Solution(value, pairwise.sum(-1), pairwise.sum(-2), pairwise)


def _arc_gradient(arcs: Array | tuple[_Kernel, _Vectors, _Vectors], weights: Array, shared: bool) -> Array:
    """``Σ_b weights_b q_b`` over the batch (and over the arc groups if ``shared``): (T, T) or
    (B, N-1, T, T), as in the torch backend: in scaling form by products in linear space while
    the scalings' largest sum is at most ``−F/2``, else (``lax.cond``) in log space."""
    if not isinstance(arcs, tuple):
        weighted = weights[:, None, None, None] * arcs
        return weighted.sum((0, 1)) if shared else weighted
    kernel, rows, columns = arcs
    log_scale = rows.shift + columns.shift  # (B, N-1, 1)

    def linear() -> Array:
        weighted = rows.linear * (weights[:, None, None] * jnp.exp(log_scale))
        if shared:
            num_tags = weighted.shape[-1]
            return (weighted.reshape(-1, num_tags).T @ columns.linear.reshape(-1, num_tags)) * kernel.linear
        return kernel.linear * weighted[..., :, None] * columns.linear[..., None, :]

    def in_log_space() -> Array:
        log_q = kernel.log + rows.log[..., :, None] + columns.log[..., None, :]
        return _arc_gradient(jnp.exp(log_q), weights, shared)

    large = (log_scale > -_floor(log_scale.dtype) / 2).any()
    return lax.cond(large, in_log_space, linear)


def _arc_mask(lengths: Array, num_arcs: int) -> Array:
    return position_mask(lengths - 1, num_arcs)[:, :, None, None]


def _arc_marginals(log_q: Array, lengths: Array) -> Array:
    """q (B, N-1, T, T), zero on padding."""
    return jnp.where(_arc_mask(lengths, log_q.shape[1]), jnp.exp(log_q), 0.0)


def _unary(pairwise: Array, singles: Array, lengths: Array, temperature: float) -> Array:
    """Node marginals (B, N, T) read off the arc marginals; a softmax for length-1 sequences."""
    batch, num_arcs = pairwise.shape[:2]
    single = lengths == 1
    # tag i < len - 1 from the arcs leaving it; the last tag from the arcs entering it
    no_arc = jnp.zeros((batch, 1, singles.shape[-1]), pairwise.dtype)
    leaving = jnp.concatenate([pairwise.sum(-1), no_arc], axis=1)
    entering = leaving[:, 0]  # any (B, T) placeholder: only read where a sequence has arcs
    if num_arcs:
        last_arc = jnp.maximum(lengths - 2, 0)[:, None, None]
        entering = jnp.take_along_axis(pairwise.sum(-2), last_arc, axis=1)[:, 0]
    single_probs = jnp.exp(jax.nn.log_softmax(singles / temperature, axis=-1))
    last_tag = jnp.where(single[:, None], single_probs, entering)
    is_last = jnp.arange(num_arcs + 1) == (lengths - 1)[:, None]
    return jnp.where(is_last[..., None], last_tag[:, None], leaving)


def _value(
    log_q: Array, pairwise: Array, weights: Array, singles: Array, lengths: Array, temperature: float
) -> Array:
    """``B_Y(w/τ) = Σ q (w/τ − log q)`` (B,) at the iterate; arcs with q = 0 contribute 0 (guarded
    before the product); a length-1 sequence's is the log-sum-exp of its tag scores."""
    gap = jnp.where(pairwise > 0, weights / temperature - log_q, 0.0)  # q > 0: a live arc
    value = (pairwise * gap).sum((1, 2, 3))
    return jnp.where(lengths == 1, logsumexp(singles / temperature, axis=-1), value)


def _violation(pairwise: Array, lengths: Array) -> Array:
    """(B,) distance to the paper's polytope description (Prop. 2): the largest error in (7) unit
    in-flow into each inner cluster and (8) flow conservation at each inner node. Lengths 1 and 2
    have no inner cluster, hence 0."""
    inflow = pairwise[:, :-1].sum(-2)  # (B, N-2, T) into inner position p = 1 .. N-2
    outflow = pairwise[:, 1:].sum(-1)  # (B, N-2, T) out of the same positions
    errors = jnp.maximum(jnp.abs(inflow.sum(-1) - 1), jnp.abs(inflow - outflow).max(-1))
    errors = jnp.where(position_mask(lengths - 2, errors.shape[1]), errors, 0.0)
    return jnp.concatenate([errors, jnp.zeros((errors.shape[0], 1), errors.dtype)], axis=1).max(-1)


class _Form(NamedTuple):
    """IBP in one form, as in the torch backend: the initial state, one iteration, the convergence
    error of a state, and what is read off a state: ``log q`` (B, N-1, T, T) and its
    :class:`_Solution`."""

    initial: Any
    step: Callable[[Any], Any]
    error: Callable[[Any, Any], Array]
    log_q: Callable[[Any], Array]
    solution: Callable[[Any], _Solution]
    batch_dim: int = 0  # of the state's arrays
    #: a number of iterations at once (state, count) -> state, where that is faster than steps
    steps: Callable[[Any, int], Any] | None = None


def _form(terms: ArcTerms, lengths: Array, temperature: float, order: str, form: str) -> _Form:
    """IBP on the arcs ``terms`` in ``form``."""
    num_arcs, error = terms.rows.shape[1], _error(lengths)
    if form == "log":
        weights = terms.weights()
        return _Form(
            _initial(weights, temperature),
            _step(lengths, order, num_arcs),
            error,
            lambda log_q: log_q,
            partial(
                _log_solution,
                weights=weights,
                singles=terms.singles,
                lengths=lengths,
                temperature=temperature,
            ),
        )
    kernel, scalings = _scaled_initial(terms, lengths, temperature)
    return _Form(
        scalings,
        _step(lengths, order, num_arcs, kernel),
        lambda state, _: error(_scaled_log_q(kernel, num_arcs, state), None),
        partial(_scaled_log_q, kernel, num_arcs),
        partial(_scaled_solution, kernel=kernel, terms=terms, lengths=lengths, temperature=temperature),
        -1 if _tags_first(kernel) else 0,
        _sweep_steps(kernel, lengths, order),
    )


def _run(
    terms: ArcTerms,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
) -> tuple[_Form, Any]:
    """The form and its state after ``iterations`` pairs of projections (or to ``tolerance``):
    all at once where the form can (``steps``) and no tolerance is checked between them."""
    ibp = _form(terms, lengths, temperature, order, form)
    if tolerance is None and ibp.steps is not None:
        return ibp, ibp.steps(ibp.initial, iterations)
    return ibp, iterate(ibp.step, ibp.initial, iterations, tolerance, ibp.error, ibp.batch_dim)


@partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7, 8, 9))
def _danskin_value(
    transitions: Array,
    rows: Array,
    columns: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
) -> Array:
    """``τ B_Y(w/τ)`` of the arcs' terms whose gradient is the iterate ``q`` itself (Danskin), not
    a backward pass through the iterations: exact at convergence, the paper's "use the inference
    algorithm". The terms' gradients are q's sums, as in the torch backend.

    Differentiating that gradient (second order) differentiates the solution computed in
    :func:`_danskin_forward`, through the iterations: jax differentiates a ``custom_vjp``'s
    forward and backward rules like any other code."""
    options = (temperature, iterations, order, tolerance, form)
    return _danskin_forward(transitions, rows, columns, singles, lengths, *options)[0]


def _danskin_forward(
    transitions: Array,
    rows: Array,
    columns: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
) -> tuple[Array, tuple[_Solution, Array, Array]]:
    terms = ArcTerms(transitions, rows, columns, singles)
    ibp, state = _run(terms, lengths, temperature, iterations, order, tolerance, form)
    solution = ibp.solution(state)
    # where, not a product with the mask: a length > 1 row may have every single score -inf (NaN softmax)
    single_probs = jnp.where((lengths == 1)[:, None], jax.nn.softmax(singles / temperature, axis=-1), 0.0)
    # the transitions only tell the backward pass their shape (shared or per arc group)
    return temperature * solution.value, (solution, single_probs, transitions)


def _danskin_backward(*args: Any) -> tuple[Array, Array, Array, Array, None]:
    *_, (solution, single_probs, transitions), grad = args  # the five static options come first
    return (
        _arc_gradient(solution.arcs, grad, transitions.ndim == 2),
        grad[:, None, None] * solution.out_flows,
        grad[:, None, None] * solution.in_flows,
        grad[:, None] * single_probs,
        None,
    )


_danskin_value.defvjp(_danskin_forward, _danskin_backward)


@partial(jax.jit, static_argnames=("temperature", "iterations", "order", "tolerance", "form", "gradient"))
def _scaled_value(
    terms: ArcTerms,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
    gradient: str,
) -> Array:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    solver = (temperature, iterations, order, tolerance, form)
    if gradient == "danskin":
        return _danskin_value(*terms, lengths, *solver)
    ibp, state = _run(terms, lengths, *solver)
    return temperature * ibp.solution(state).value


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance", "form"))
def marginals(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp, state = _run(terms, lengths, temperature, iterations, order, tolerance, form)
    pairwise = _arc_marginals(ibp.log_q(state), lengths)
    return _unary(pairwise, terms.singles, lengths, temperature), pairwise


def decode(emissions, transitions, lengths, start, end, **options):
    """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1),
    -1 on padding. Like the paper's, the output can contain a forbidden bigram before convergence."""
    return argmax_tags(marginals(emissions, transitions, lengths, start, end, **options)[0], lengths)


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance", "form"))
def log_partition(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable by autodiff."""
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp, state = _run(terms, lengths, temperature, iterations, order, tolerance, form)
    return ibp.solution(state).value


def solve(emissions, transitions, lengths, start, end, **options):
    """The IBP iterate with its value ``B_Y(w/τ)`` and its constraint violation after each
    iteration (``implementations.solver.SolverOutput``)."""
    output = SolverOutput(*_solve(emissions, transitions, lengths, start, end, **options))
    return output if options["tolerance"] is not None else output._replace(iterations=options["iterations"])


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance", "form"))
def _solve(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form):
    terms = arc_terms(emissions, transitions, lengths, start, end)
    ibp = _form(terms, lengths, temperature, order, form)
    state, run, errors = iterate_with_errors(
        ibp.step, ibp.initial, iterations, tolerance, ibp.error, ibp.batch_dim
    )
    pairwise = _arc_marginals(ibp.log_q(state), lengths)
    converged = errors[run - 1] <= (tolerance or 0.0)
    unary = _unary(pairwise, terms.singles, lengths, temperature)
    return unary, pairwise, ibp.solution(state).value, run, converged, errors


def loss(emissions, transitions, lengths, tags, start, end, **options):
    """Fenchel–Young loss (B,): ``τ B_Y(w/τ) − <w, y>``, gradient ``q − y`` with ``"danskin"``.

    ``gradient="unrolled"`` backpropagates through the iterations instead (not with a tolerance:
    reverse mode cannot go through ``lax.while_loop``); both agree at convergence. At τ = 1 this
    is the paper's ``B_Y(w) − <w, y>``.

    Second-order derivatives (``jax.hessian``, ``jax.jvp`` of ``jax.grad``) are exact in both
    modes: with ``"danskin"`` they differentiate the gradient it returns, ``q − y``, with ``q``
    differentiated through the iterations (before convergence its Jacobian is not symmetric).
    """
    value = _scaled_value(arc_terms(emissions, transitions, lengths, start, end), lengths, **options)
    return value - gold_score(emissions, transitions, lengths, tags, start, end)


def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label Fenchel–Young loss (B,): ``τ B_Y(w/τ) − τ B_Ỹ(w/τ)``, two IBP runs, the second
    with every tag that ``allowed`` (B, N, T) forbids set to -inf."""
    full = _scaled_value(arc_terms(emissions, transitions, lengths, start, end), lengths, **options)
    masked = arc_terms(mask_emissions(emissions, allowed), transitions, lengths, start, end)
    return full - _scaled_value(masked, lengths, **options)
