"""Bregman CRF (Corro, Lacroix & Le Roux, 2025): entropy of the transition marginals, solved by
iterative Bregman projections (IBP) whose depth does not grow with N.

``q = argmax_{q ∈ conv(Y)} <q, w/τ> + H(q)`` is approached by alternating KL projections onto
C_odd and C_even (the paper's 1-indexed inner clusters); each projection resets every node's
throughput to the normalised geometric mean of its in- and out-flow (docs/derivations.md §3.3). One
*iteration* is one projection onto C_odd then one onto C_even (``order="odd-even"``); the
iterations are a ``lax.scan`` of fixed length. All work is in log space; a node with no in- or
out-mass is killed (``alive``) so -inf never becomes NaN, and clusters past a sequence's length
are skipped, so padding never changes a result.

Lengths 1 and 2 have no inner cluster: length 1 is a softmax over tags, length 2 a softmax over
tag pairs (every arc group is normalised before the first projection, which leaves the iterates
of longer sequences unchanged because they are invariant to per-group shifts).

Options are Python values, static under ``jax.jit``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

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
    log_node = (log_in + log_out) / 2  # log sqrt(in · out): the node's new throughput, unnormalised
    log_norm = logsumexp(log_node, axis=-1)[..., None]
    alive = jnp.isfinite(log_node)
    half_gap = jnp.where(alive, (log_out - log_in) / 2, 0.0)
    active = (positions < (lengths - 1)[:, None])[..., None]  # (B, P, 1)
    dead = active & ~alive
    column_shift = jnp.where(dead, -jnp.inf, jnp.where(active, half_gap - log_norm, 0.0))
    row_shift = jnp.where(dead, -jnp.inf, jnp.where(active, -half_gap - log_norm, 0.0))
    columns = jnp.zeros((batch, num_arcs, num_tags), log_q.dtype).at[:, positions - 1].set(column_shift)
    rows = jnp.zeros((batch, num_arcs, num_tags), log_q.dtype).at[:, positions].set(row_shift)
    return log_q + (rows[..., :, None] + columns[..., None, :])


def _initial(weights: Array, temperature: float) -> Array:
    """``log q`` before the first projection: ``w/τ`` with every arc group normalised."""
    log_q = weights / temperature
    batch, num_arcs, num_tags, _ = log_q.shape
    return log_q - logsumexp(log_q.reshape(batch, num_arcs, num_tags * num_tags), axis=-1)[:, :, None, None]


def _step(lengths: Array, order: str):
    """One iteration: a projection onto each parity of inner clusters, in ``order``."""

    def step(log_q: Array) -> Array:
        for first in _first_clusters(order):
            log_q = _project(log_q, lengths, first)
        return log_q

    return step


def _error(lengths: Array):
    """The convergence error of an iterate: its constraint violation (B,)."""
    return lambda log_q, _: _violation(_arc_marginals(log_q, lengths), lengths)


@partial(jax.jit, static_argnames=("temperature", "iterations", "order", "tolerance"))
def _iterate(
    weights: Array, lengths: Array, temperature: float, iterations: int, order: str, tolerance: float | None
) -> Array:
    """Log arc marginals ``log q`` (B, N-1, T, T) after ``iterations`` pairs of projections."""
    initial = _initial(weights, temperature)
    return iterate(_step(lengths, order), initial, iterations, tolerance, _error(lengths))


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
    live = _arc_mask(lengths, log_q.shape[1]) & jnp.isfinite(log_q)
    gap = jnp.where(live, weights / temperature - log_q, 0.0)
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


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6))
def _danskin_value(
    weights: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
) -> Array:
    """``τ B_Y(w/τ)`` whose gradient is the iterate ``q`` itself (Danskin), not a backward
    pass through the iterations: exact at convergence, the paper's "use the inference algorithm".

    Differentiating that gradient (second order) differentiates the ``q`` computed in
    :func:`_danskin_forward`, through the iterations: jax differentiates a ``custom_vjp``'s
    forward and backward rules like any other code."""
    return _danskin_forward(weights, singles, lengths, temperature, iterations, order, tolerance)[0]


def _danskin_forward(
    weights: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
) -> tuple[Array, tuple[Array, Array]]:
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance)
    pairwise = _arc_marginals(log_q, lengths)
    value = _value(log_q, pairwise, weights, singles, lengths, temperature)
    # where, not a product with the mask: a length > 1 row may have every single score -inf (NaN softmax)
    single_probs = jnp.where((lengths == 1)[:, None], jax.nn.softmax(singles / temperature, axis=-1), 0.0)
    return temperature * value, (pairwise, single_probs)


def _danskin_backward(*args: Any) -> tuple[Array, Array, None]:
    *_, (pairwise, single_probs), grad = args  # the four static options come first
    return grad[:, None, None, None] * pairwise, grad[:, None] * single_probs, None


_danskin_value.defvjp(_danskin_forward, _danskin_backward)


@partial(jax.jit, static_argnames=("temperature", "iterations", "order", "tolerance", "gradient"))
def _scaled_value(
    weights: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    tolerance: float | None,
    gradient: str,
) -> Array:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    if gradient == "danskin":
        return _danskin_value(weights, singles, lengths, temperature, iterations, order, tolerance)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance)
    pairwise = _arc_marginals(log_q, lengths)
    return temperature * _value(log_q, pairwise, weights, singles, lengths, temperature)


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance"))
def marginals(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance):
    """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance)
    pairwise = _arc_marginals(log_q, lengths)
    return _unary(pairwise, singles, lengths, temperature), pairwise


def decode(emissions, transitions, lengths, start, end, **options):
    """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1),
    -1 on padding. Like the paper's, the output can contain a forbidden bigram before convergence."""
    return argmax_tags(marginals(emissions, transitions, lengths, start, end, **options)[0], lengths)


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance"))
def log_partition(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance):
    """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable by autodiff."""
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order, tolerance)
    return _value(log_q, _arc_marginals(log_q, lengths), weights, singles, lengths, temperature)


def solve(emissions, transitions, lengths, start, end, **options):
    """The IBP iterate with its value ``B_Y(w/τ)`` and its constraint violation after each
    iteration (``implementations.solver.SolverOutput``)."""
    output = SolverOutput(*_solve(emissions, transitions, lengths, start, end, **options))
    return output if options["tolerance"] is not None else output._replace(iterations=options["iterations"])


@partial(jax.jit, static_argnames=("iterations", "temperature", "order", "tolerance"))
def _solve(emissions, transitions, lengths, start, end, *, iterations, temperature, order, tolerance):
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    initial = _initial(weights, temperature)
    step, error = _step(lengths, order), _error(lengths)
    log_q, run, errors = iterate_with_errors(step, initial, iterations, tolerance, error)
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
