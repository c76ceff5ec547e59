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
``decode``) keeps ``log q = log K + log v ⊕ log u`` and projects with two batched matrix–vector
products, recomputing the flows in log space (``lax.cond``) where the products cannot vouch for
them. Unlike torch it never absorbs the scalings into the kernel: a conditional rewrite of the arc
arrays inside the ``scan`` makes XLA copy them at every projection.

Lengths 1 and 2 have no inner cluster: length 1 is a softmax over tags, length 2 a softmax over
tag pairs (every arc group is normalised before the first projection, which leaves the iterates
of longer sequences unchanged because they are invariant to per-group shifts).

Options are Python values, static under ``jax.jit``.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from ..solver import SolverOutput
from ._fixed_point import iterate, iterate_with_errors
from ._scores import arc_weights, gold_score, mask_emissions, position_mask
from ._semiring import logsumexp
from ._tokens import argmax_tags


def _first_clusters(order: str) -> tuple[int, int]:
    """0-indexed position of the first inner cluster of each half-iteration, in order.

    Paper cluster k (1-indexed) is position k - 1: C_odd = {3, 5, ...} starts at position 2,
    C_even = {2, 4, ...} at position 1.
    """
    return (2, 1) if order == "odd-even" else (1, 2)


def _cluster_shifts(log_in: Array, log_out: Array, active: Array) -> tuple[Array, Array]:
    """The projection of §3.3 given each node's log in- and out-flow (B, P, T): the shift of the
    log of its in-arcs (``column``) and out-arcs (``row``), -inf for a dead node and 0 outside the
    ``active`` (B, P, 1) clusters."""
    log_node = (log_in + log_out) / 2  # log sqrt(in · out): the node's new throughput, unnormalised
    log_norm = logsumexp(log_node, axis=-1)[..., None]
    alive = jnp.isfinite(log_node)
    half_gap = jnp.where(alive, (log_out - log_in) / 2, 0.0)
    dead = active & ~alive
    column_shift = jnp.where(dead, -jnp.inf, jnp.where(active, half_gap - log_norm, 0.0))
    row_shift = jnp.where(dead, -jnp.inf, jnp.where(active, -half_gap - log_norm, 0.0))
    return column_shift, row_shift


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


def _step(lengths: Array, order: str, num_arcs: int, form: str):
    """One iteration: a projection onto each parity of inner clusters, in ``order``, on ``log q``
    (the log form) or on a scaling-form state."""
    if form == "log":
        projections = [partial(_project, lengths=lengths, first=first) for first in _first_clusters(order)]
    else:
        projections = [_scaling_projection(lengths, num_arcs, first) for first in _first_clusters(order)]

    def step(state: Any) -> Any:
        for project in projections:
            state = project(state)
        return state

    return step


def _error(lengths: Array):
    """The convergence error of an iterate: its constraint violation (B,)."""
    return lambda log_q, _: _violation(_arc_marginals(log_q, lengths), lengths)


class _Scaled(NamedTuple):
    """An IBP iterate in scaling form, as in the torch backend:
    ``log q[i, a, b] = log_kernel[i, a, b] + log_v[i, a] + log_u[i+1, b]``; ``kernels`` holds
    ``exp(log_kernel)`` of the even and the odd arc groups (subnormal entries flushed to 0),
    ``faint`` the columns and rows of each group with a finite entry under ``e^{F/2}``; -inf log
    scalings mark a dead node."""

    log_kernel: Array  # (B, N-1, T, T)
    kernels: tuple[Array, Array]  # (B, ⌈(N-1)/2⌉, T, T) groups 0, 2, ...; (B, ⌊(N-1)/2⌋, T, T) 1, 3, ...
    faint: tuple[Array, Array]  # (B, N-1, T) columns, (B, N-1, T) rows
    log_u: Array  # (B, N, T)
    log_v: Array  # (B, N, T)


def _floor(dtype: Any) -> float:
    """``F``: the log of the dtype's smallest normal number; kernel entries under ``e^F`` are flushed."""
    return math.log(float(jnp.finfo(dtype).tiny))


def _safe_log(x: Array) -> Array:
    """``log x`` with ``log 0 = -inf`` and a finite gradient everywhere (0 where ``x = 0``)."""
    positive = x > 0
    return jnp.where(positive, jnp.log(jnp.where(positive, x, 1.0)), -jnp.inf)


def _absorbed(log_kernel: Array, lengths: Array) -> _Scaled:
    """The scaling form of ``log q = log_kernel`` (unit scalings): the kernel, and -inf log
    scalings for every inner node whose in- and out-arcs are all -inf (as the log form leaves a
    node it killed; one with only one side -inf is killed by its next projection)."""
    floor = _floor(log_kernel.dtype)
    kernel = jnp.where(log_kernel > floor, jnp.exp(log_kernel), 0.0)
    batch, num_arcs, num_tags, _ = log_kernel.shape
    faint = (log_kernel > -jnp.inf) & (log_kernel <= floor / 2)  # an entry whose products may underflow
    faint = (faint.any(-2), faint.any(-1))
    # a side with a finite arc has a kept entry (a positive sum) or a faint one
    edge = jnp.ones((batch, 1, num_tags), bool)
    has_in = jnp.concatenate([edge, (kernel.sum(-2) > 0) | faint[0]], axis=1)  # (B, N, T)
    has_out = jnp.concatenate([(kernel.sum(-1) > 0) | faint[1], edge], axis=1)
    positions = jnp.arange(num_arcs + 1)
    inner = ((positions >= 1) & (positions < (lengths - 1)[:, None]))[..., None]
    log_scale = jnp.where(has_in | has_out | ~inner, 0.0, -jnp.inf).astype(log_kernel.dtype)
    kernels = (kernel[:, 0::2], kernel[:, 1::2])
    return _Scaled(log_kernel, kernels, faint, log_scale, log_scale)


def _scaled_log_q(state: _Scaled) -> Array:
    """``log q`` (B, N-1, T, T) of a scaling-form iterate."""
    log_kernel, _, _, log_u, log_v = state
    return log_kernel + log_v[:, :-1][..., :, None] + log_u[:, 1:][..., None, :]


def _shift(log_x: Array) -> Array:
    """``max log x`` over the last dim, kept (0 for an all -inf row: a dead position)."""
    shift = log_x.max(-1, keepdims=True)
    return jnp.where(shift > -jnp.inf, shift, 0.0)


def _scaled_flows(kernel: Array, log_x: Array, transpose: bool) -> tuple[Array, Array]:
    """``log (K_gᵀ e^{x_g})`` (``transpose``) or ``log (K_g e^{x_g})`` (B, P, T) by one product in
    linear space, stabilised by the largest ``x`` of each group, and the product itself (for
    :func:`_vouched`). ``log_x`` (B, ≥P, T): the first P are used."""
    log_x = log_x[:, : kernel.shape[1]]
    shift = _shift(log_x)
    scaled = jnp.exp(log_x - shift)
    product = jnp.einsum("bpij,bpi->bpj" if transpose else "bpij,bpj->bpi", kernel, scaled)
    return shift + _safe_log(product), product


def _vouched(product: Array, log_x: Array, faint: Array) -> Array:
    """(B, P, T): where a product of :func:`_scaled_flows` (of ``log_x``, (B, ≥P, T)) is exact to
    rounding, as in the torch backend: the product is above ``e^{F/2}``, or no factor of its sum is
    that faint (``faint`` (B, ≥P, T): the kernel's rows or columns with a finite entry under
    ``e^{F/2}``; a dead node's ``x`` is -inf and contributes nothing)."""
    groups = product.shape[1]
    half = _floor(product.dtype) / 2
    log_x = log_x[:, :groups]
    faint_x = (log_x - _shift(log_x) <= half) & (log_x > -jnp.inf)
    return (product > math.exp(half)) | (~faint[:, :groups] & ~faint_x.any(-1, keepdims=True))


def _scaling_projection(lengths: Array, num_arcs: int, first: int):
    """The projection of :func:`_project` on a scaling-form iterate (a function of the state), as
    in the torch backend: the flows by two batched matrix–vector products, then the shifts of §3.3
    on the log scalings. Where some flow is not exact, ``lax.cond`` recomputes the parity's flows
    in log space from the arcs (a read of them; its outputs are O(N T), so no arc array is copied
    through the conditional). The kernel is never realigned inside the loop: a conditional
    rewrite of the arc arrays would copy them at every step under XLA."""
    count = len(range(first, num_arcs, 2))
    nodes = slice(first, first + 2 * count, 2)
    into, out_of = (first - 1) % 2, first % 2  # parity of the groups p - 1 and p
    positions = np.arange(first, first + 2 * count, 2)  # static
    active = (positions < (lengths - 1)[:, None])[..., None]  # (B, P, 1)
    groups_in = slice((first - 1) // 2, (first - 1) // 2 + count)  # of the parity's groups
    groups_out = slice(first // 2, first // 2 + count)

    def project(state: _Scaled) -> _Scaled:
        if count == 0:
            return state
        log_kernel, kernels, faint, log_u, log_v = state
        # over every group of the parity (a slice of the arcs would be copied), then the clusters'
        log_in, in_product = _scaled_flows(kernels[into], log_v[:, into::2], True)
        log_out, out_product = _scaled_flows(kernels[out_of], log_u[:, out_of + 1 :: 2], False)
        log_in, log_out = log_in[:, groups_in], log_out[:, groups_out]
        log_u_p, log_v_p = log_u[:, nodes], log_v[:, nodes]
        live = active & (log_u_p > -jnp.inf) & (log_v_p > -jnp.inf)
        half = math.exp(_floor(log_u.dtype) / 2)
        faint_product = (in_product[:, groups_in] <= half) | (out_product[:, groups_out] <= half)

        def exact_flows() -> tuple[Array, Array]:
            # the products are exact where :func:`_vouched` says so; the others are recomputed
            in_exact = _vouched(in_product, log_v[:, into::2], faint[0][:, into::2])[:, groups_in]
            out_exact = _vouched(out_product, log_u[:, out_of + 1 :: 2], faint[1][:, out_of::2])[
                :, groups_out
            ]
            arcs_in = log_kernel[:, positions - 1] + log_v[:, positions - 1][..., :, None]
            arcs_out = log_kernel[:, positions] + log_u[:, positions + 1][..., None, :]
            return (
                jnp.where(in_exact, log_in, logsumexp(arcs_in, axis=-2)),
                jnp.where(out_exact, log_out, logsumexp(arcs_out, axis=-1)),
            )

        # a product above e^{F/2} is exact: only a faint one can need recomputing
        log_in, log_out = lax.cond((live & faint_product).any(), exact_flows, lambda: (log_in, log_out))
        column, row = _cluster_shifts(log_u_p + log_in, log_v_p + log_out, active)
        log_u = log_u.at[:, nodes].set(log_u_p + column)
        log_v = log_v.at[:, nodes].set(log_v_p + row)
        return _Scaled(log_kernel, kernels, faint, log_u, log_v)

    return project


def _solver(weights: Array, lengths: Array, temperature: float, order: str, form: str):
    """``(initial state, step, error, log q of a state)`` of IBP in ``form``."""
    initial = _initial(weights, temperature)
    step, error = _step(lengths, order, initial.shape[1], form), _error(lengths)
    if form == "log":
        return initial, step, error, lambda log_q: log_q
    return (
        _absorbed(initial, lengths),
        step,
        lambda state, _: error(_scaled_log_q(state), None),
        _scaled_log_q,
    )


@partial(jax.jit, static_argnames=("temperature", "iterations", "order", "tolerance", "form"))
def _iterate(
    weights: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
) -> Array:
    """Log arc marginals ``log q`` (B, N-1, T, T) after ``iterations`` pairs of projections."""
    initial, step, error, log_q = _solver(weights, lengths, temperature, order, form)
    return log_q(iterate(step, initial, iterations, tolerance, error))


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


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7))
def _danskin_value(
    weights: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
) -> Array:
    """``τ B_Y(w/τ)`` whose gradient is the iterate ``q`` itself (Danskin), not a backward
    pass through the iterations: exact at convergence, the paper's "use the inference algorithm".

    Differentiating that gradient (second order) differentiates the ``q`` computed in
    :func:`_danskin_forward`, through the iterations: jax differentiates a ``custom_vjp``'s
    forward and backward rules like any other code."""
    return _danskin_forward(weights, singles, lengths, temperature, iterations, order, tolerance, form)[0]


def _danskin_forward(
    weights: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
) -> tuple[Array, tuple[Array, Array]]:
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance, form)
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    # where, not a product with the mask: a length > 1 row may have every single score -inf (NaN softmax)
    single_probs = jnp.where((lengths == 1)[:, None], jax.nn.softmax(singles / temperature, axis=-1), 0.0)
    return temperature * value, (pairwise, single_probs)


def _danskin_backward(*args: Any) -> tuple[Array, Array, None]:
    *_, (pairwise, single_probs), grad = args  # the five static options come first
    return grad[:, None, None, None] * pairwise, grad[:, None] * single_probs, None


_danskin_value.defvjp(_danskin_forward, _danskin_backward)


@partial(jax.jit, static_argnames=("temperature", "iterations", "order", "tolerance", "form", "gradient"))
def _scaled_value(
    weights: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    form: str,
    gradient: str,
) -> Array:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    if gradient == "danskin":
        return _danskin_value(weights, singles, lengths, temperature, iterations, order, tolerance, form)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance, form)
    pairwise = _arc_marginals(log_q, lengths)
    return temperature * _value(log_q, pairwise, weights, singles, lengths, temperature)


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance", "form"))
def marginals(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance, form)
    pairwise = _arc_marginals(log_q, lengths)
    return _unary(pairwise, singles, lengths, temperature), pairwise


def decode(emissions, transitions, lengths, start, end, **options):
    """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1),
    -1 on padding. Like the paper's, the output can contain a forbidden bigram before convergence."""
    return argmax_tags(marginals(emissions, transitions, lengths, start, end, **options)[0], lengths)


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance", "form"))
def log_partition(
    emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form
):
    """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable by autodiff."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance, form)
    return _value(log_q, _arc_marginals(log_q, lengths), weights, singles, lengths, temperature)


def solve(emissions, transitions, lengths, start, end, **options):
    """The IBP iterate with its value ``B_Y(w/τ)`` and its constraint violation after each
    iteration (``implementations.solver.SolverOutput``)."""
    output = SolverOutput(*_solve(emissions, transitions, lengths, start, end, **options))
    return output if options["tolerance"] is not None else output._replace(iterations=options["iterations"])


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance", "form"))
def _solve(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance, form):
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    initial, step, error, read_log_q = _solver(weights, lengths, temperature, order, form)
    state, run, errors = iterate_with_errors(step, initial, iterations, tolerance, error)
    log_q = read_log_q(state)
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    converged = errors[run - 1] <= (tolerance or 0.0)
    return _unary(pairwise, singles, lengths, temperature), pairwise, value, run, converged, errors


def loss(emissions, transitions, lengths, tags, start, end, **options):
    """Fenchel–Young loss (B,): ``τ B_Y(w/τ) − <w, y>``, gradient ``q − y`` with ``"danskin"``.

    ``gradient="unrolled"`` backpropagates through the iterations instead (not with a tolerance:
    reverse mode cannot go through ``lax.while_loop``); both agree at convergence. At τ = 1 this
    is the paper's ``B_Y(w) − <w, y>``.

    Second-order derivatives (``jax.hessian``, ``jax.jvp`` of ``jax.grad``) are exact in both
    modes: with ``"danskin"`` they differentiate the gradient it returns, ``q − y``, with ``q``
    differentiated through the iterations (before convergence its Jacobian is not symmetric).
    """
    value = _scaled_value(*arc_weights(emissions, transitions, lengths, start, end), lengths, **options)
    return value - gold_score(emissions, transitions, lengths, tags, start, end)


def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """Partial-label Fenchel–Young loss (B,): ``τ B_Y(w/τ) − τ B_Ỹ(w/τ)``, two IBP runs, the second
    with every tag that ``allowed`` (B, N, T) forbids set to -inf."""
    full = _scaled_value(*arc_weights(emissions, transitions, lengths, start, end), lengths, **options)
    masked = arc_weights(mask_emissions(emissions, allowed), transitions, lengths, start, end)
    return full - _scaled_value(*masked, lengths, **options)
