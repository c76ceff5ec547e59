"""Bregman CRF (Corro, Lacroix & Le Roux, 2025): entropy of the transition marginals, solved by
iterative Bregman projections (IBP) whose depth does not grow with N.

``q = argmax_{q ∈ conv(Y)} <q, w/τ> + H(q)`` is approached by alternating KL projections onto
C_odd and C_even (the paper's 1-indexed inner clusters); each projection resets every node's
throughput to the normalised geometric mean of its in- and out-flow (seeds digest §1.4). One
*iteration* is one projection onto C_odd then one onto C_even (``order="odd-even"``); the
iterations are a ``lax.scan`` of fixed length. All work is in log space; a node with no in- or
out-mass is killed (``alive``) so -inf never becomes NaN, and clusters past a sequence's length
are skipped, so padding never changes a result.

Lengths 1 and 2 have no inner cluster: length 1 is a softmax over tags, length 2 a softmax over
tag pairs (every arc group is normalised before the first projection, which leaves the iterates
of longer sequences unchanged because they are invariant to per-group shifts).

Options (``iterations``, ``temperature``, ``order``, ``gradient``, ``validate``) are Python values,
static under ``jax.jit``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

from .. import contract
from . import _validate
from ._scores import arc_weights, gold_score, mask_emissions, position_mask
from ._semiring import logsumexp

ORDERS = ("odd-even", "even-odd")
GRADIENTS = ("danskin", "unrolled")
DEFAULT_ITERATIONS = 10
DECODE_TEMPERATURE = 0.1  # the paper decodes with τ⁻¹ = 10


class IBPResult(NamedTuple):
    """What :func:`solve` returns: the iterate and how far it is from the polytope."""

    unary: Array  # (B, N, T) node marginals read off the arc marginals, zero on padding
    pairwise: Array  # (B, N-1, T, T) arc marginals q, zero on padding
    log_partition: Array  # (B,) B_Y(w/τ) = <q, w/τ> + H(q) at the iterate
    iterations: int  # iterations run (pairs of projections); a 0-d array when returned from jit
    violation: Array  # (B,) largest error in the polytope's constraints (unit in-flow, flow conservation)


def _check_options(iterations: int, temperature: float, order: str) -> None:
    contract.check_positive("iterations", iterations, integer=True)
    contract.check_positive("temperature", temperature)
    contract.check_choice("order", order, ORDERS)


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


@partial(jax.jit, static_argnames=("temperature", "iterations", "order"))
def _iterate(weights: Array, lengths: Array, temperature: float, iterations: int, order: str) -> Array:
    """Log arc marginals ``log q`` (B, N-1, T, T) after ``iterations`` pairs of projections."""
    log_q = weights / temperature
    batch, num_arcs, num_tags, _ = log_q.shape
    log_q = log_q - logsumexp(log_q.reshape(batch, num_arcs, num_tags * num_tags), axis=-1)[:, :, None, None]

    def iteration(log_q: Array, _: None) -> tuple[Array, None]:
        for first in _first_clusters(order):
            log_q = _project(log_q, lengths, first)
        return log_q, None

    return lax.scan(iteration, log_q, None, length=iterations)[0]


def _arc_mask(lengths: Array, num_arcs: int) -> Array:
    return position_mask(lengths - 1, num_arcs)[:, :, None, None]


@partial(jax.jit, static_argnames=("temperature",))
def _read_off(
    log_q: Array, weights: Array, singles: Array, lengths: Array, temperature: float
) -> tuple[Array, Array, Array]:
    """Unary (B, N, T), pairwise (B, N-1, T, T) and ``B_Y(w/τ)`` (B,) at the iterate ``log q``."""
    batch, num_arcs = log_q.shape[:2]
    arcs = _arc_mask(lengths, num_arcs)
    pairwise = jnp.where(arcs, jnp.exp(log_q), 0.0)
    single = lengths == 1
    single_log_probs = jax.nn.log_softmax(singles / temperature, axis=-1)
    # tag i < len - 1 from the arcs leaving it; the last tag from the arcs entering it
    no_arc = jnp.zeros((batch, 1, singles.shape[-1]), pairwise.dtype)
    leaving = jnp.concatenate([pairwise.sum(-1), no_arc], axis=1)
    entering = leaving[:, 0]  # any (B, T) placeholder: only read where a sequence has arcs
    if num_arcs:
        last_arc = jnp.maximum(lengths - 2, 0)[:, None, None]
        entering = jnp.take_along_axis(pairwise.sum(-2), last_arc, axis=1)[:, 0]
    last_tag = jnp.where(single[:, None], jnp.exp(single_log_probs), entering)
    is_last = jnp.arange(num_arcs + 1) == (lengths - 1)[:, None]
    unary = jnp.where(is_last[..., None], last_tag[:, None], leaving)
    # B_Y(w/τ) = Σ q (w/τ − log q); arcs with q = 0 contribute 0 (guarded before the product)
    live = arcs & jnp.isfinite(log_q)
    gap = jnp.where(live, weights / temperature - log_q, 0.0)
    value = (pairwise * gap).sum((1, 2, 3))
    value = jnp.where(single, logsumexp(singles / temperature, axis=-1), value)
    return unary, pairwise, value


@jax.jit
def _violation(pairwise: Array, lengths: Array) -> Array:
    """(B,) distance to the paper's polytope description (Prop. 2): the largest error in (7) unit
    in-flow into each inner cluster and (8) flow conservation at each inner node. Lengths 1 and 2
    have no inner cluster, hence 0."""
    inflow = pairwise[:, :-1].sum(-2)  # (B, N-2, T) into inner position p = 1 .. N-2
    outflow = pairwise[:, 1:].sum(-1)  # (B, N-2, T) out of the same positions
    errors = jnp.maximum(jnp.abs(inflow.sum(-1) - 1), jnp.abs(inflow - outflow).max(-1))
    errors = jnp.where(position_mask(lengths - 2, errors.shape[1]), errors, 0.0)
    return jnp.concatenate([errors, jnp.zeros((errors.shape[0], 1), errors.dtype)], axis=1).max(-1)


@partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _danskin_value(
    weights: Array, singles: Array, lengths: Array, temperature: float, iterations: int, order: str
) -> Array:
    """``τ B_Y(w/τ)`` whose gradient is the iterate ``q`` itself (Danskin), not a backward
    pass through the iterations: exact at convergence, the paper's "use the inference algorithm".

    Differentiating that gradient (second order) differentiates the ``q`` computed in
    :func:`_danskin_forward`, through the iterations: jax differentiates a ``custom_vjp``'s
    forward and backward rules like any other code."""
    return _danskin_forward(weights, singles, lengths, temperature, iterations, order)[0]


def _danskin_forward(
    weights: Array, singles: Array, lengths: Array, temperature: float, iterations: int, order: str
) -> tuple[Array, tuple[Array, Array]]:
    log_q = _iterate(weights, lengths, temperature, iterations, order)
    _, pairwise, value = _read_off(log_q, weights, singles, lengths, temperature)
    # where, not a product with the mask: a length > 1 row may have every single score -inf (NaN softmax)
    single_probs = jnp.where((lengths == 1)[:, None], jax.nn.softmax(singles / temperature, axis=-1), 0.0)
    return temperature * value, (pairwise, single_probs)


def _danskin_backward(
    temperature: float, iterations: int, order: str, saved: tuple[Array, Array], grad: Array
) -> tuple[Array, Array, None]:
    pairwise, single_probs = saved
    return grad[:, None, None, None] * pairwise, grad[:, None] * single_probs, None


_danskin_value.defvjp(_danskin_forward, _danskin_backward)


@partial(jax.jit, static_argnames=("temperature", "iterations", "order", "gradient"))
def _scaled_value(
    weights: Array,
    singles: Array,
    lengths: Array,
    temperature: float,
    iterations: int,
    order: str,
    gradient: str,
) -> Array:
    """``τ B_Y(w/τ)`` (B,) differentiated by Danskin or by backpropagation through the iterations."""
    if gradient == "danskin":
        return _danskin_value(weights, singles, lengths, temperature, iterations, order)
    log_q = _iterate(weights, lengths, temperature, iterations, order)
    return temperature * _read_off(log_q, weights, singles, lengths, temperature)[2]


def solve(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    *,
    start: Array | None = None,
    end: Array | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    temperature: float = 1.0,
    order: str = "odd-even",
) -> IBPResult:
    """Run IBP and return the iterate with its value and constraint violation."""
    _check_options(iterations, temperature, order)
    if validate:
        _validate.check_scores(emissions, transitions, lengths, start, end)
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    log_q = _iterate(weights, lengths, temperature, iterations, order)
    unary, pairwise, value = _read_off(log_q, weights, singles, lengths, temperature)
    return IBPResult(unary, pairwise, value, iterations, _violation(pairwise, lengths))


def marginals(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    *,
    start: Array | None = None,
    end: Array | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    temperature: float = 1.0,
    order: str = "odd-even",
) -> tuple[Array, Array]:
    """IBP iterate ≈ ∇B_Y(w/τ): node marginals (B, N, T) and arc marginals (B, N-1, T, T)."""
    result = solve(
        emissions,
        transitions,
        lengths,
        start=start,
        end=end,
        validate=validate,
        iterations=iterations,
        temperature=temperature,
        order=order,
    )
    return result.unary, result.pairwise


def log_partition(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    *,
    start: Array | None = None,
    end: Array | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    temperature: float = 1.0,
    order: str = "odd-even",
) -> Array:
    """``B_Y(w/τ) = <q, w/τ> + H(q)`` (B,) at the IBP iterate; differentiable by autodiff."""
    return solve(
        emissions,
        transitions,
        lengths,
        start=start,
        end=end,
        validate=validate,
        iterations=iterations,
        temperature=temperature,
        order=order,
    ).log_partition


def decode(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    *,
    start: Array | None = None,
    end: Array | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    temperature: float = DECODE_TEMPERATURE,
    order: str = "odd-even",
) -> Array:
    """MBR decoding (B, N): the most probable tag of every node marginal at τ (default 0.1).

    Like the paper's, the output can contain a forbidden bigram before convergence.
    """
    unary, _ = marginals(
        emissions,
        transitions,
        lengths,
        start=start,
        end=end,
        validate=validate,
        iterations=iterations,
        temperature=temperature,
        order=order,
    )
    return jnp.where(position_mask(lengths, emissions.shape[1]), unary.argmax(-1), -1)


def loss(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    tags: Array,
    *,
    start: Array | None = None,
    end: Array | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    temperature: float = 1.0,
    gradient: str = "danskin",
    order: str = "odd-even",
) -> Array:
    """Fenchel–Young loss (B,): ``τ B_Y(w/τ) − <w, y>``, gradient ``q − y`` with ``"danskin"``.

    ``gradient="unrolled"`` backpropagates through the iterations instead; both agree at
    convergence. At τ = 1 this is the paper's ``B_Y(w) − <w, y>``.

    Second-order derivatives (gradient penalties, Hessian-vector products) are exact in both
    modes: with ``"danskin"`` they differentiate the gradient it returns, ``q − y``, with ``q``
    differentiated through the iterations (before convergence its Jacobian is not symmetric).
    """
    _check_options(iterations, temperature, order)
    contract.check_choice("gradient", gradient, GRADIENTS)
    if validate:
        _validate.check_gold(emissions, transitions, lengths, tags, start, end)
    weights, singles = arc_weights(emissions, transitions, lengths, start, end)
    value = _scaled_value(weights, singles, lengths, temperature, iterations, order, gradient)
    return value - gold_score(emissions, transitions, lengths, tags, start, end)


def partial_loss(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    allowed: Array,
    *,
    start: Array | None = None,
    end: Array | None = None,
    validate: bool = True,
    iterations: int = DEFAULT_ITERATIONS,
    temperature: float = 1.0,
    gradient: str = "danskin",
    order: str = "odd-even",
) -> Array:
    """Partial-label Fenchel–Young loss (B,): ``τ B_Y(w/τ) − τ B_Ỹ(w/τ)``, two IBP runs, the second
    with every tag that ``allowed`` (B, N, T) forbids set to -inf."""
    _check_options(iterations, temperature, order)
    contract.check_choice("gradient", gradient, GRADIENTS)
    if validate:
        _validate.check_partial(emissions, transitions, lengths, allowed, start, end)
    options = (temperature, iterations, order, gradient)
    full = _scaled_value(*arc_weights(emissions, transitions, lengths, start, end), lengths, *options)
    masked = arc_weights(mask_emissions(emissions, allowed), transitions, lengths, start, end)
    return full - _scaled_value(*masked, lengths, *options)
