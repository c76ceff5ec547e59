"""Sequential engine on jax (its mathematics: ``implementations.kernels.chain``): the positions
are a ``lax.scan``, and ``log Z``'s backward is forward filtering / backward smoothing in a
``jax.custom_vjp`` (:func:`_log_partition`). Per-step arrays are stacked step-major, (N-1, B, ...),
as ``lax.scan`` produces them."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array, lax

from ..kernels.chain import last_tag
from ._scores import boundary, position_mask


def _steps(emissions: Array, transitions: Array, lengths: Array) -> tuple[Array, Array, Array | None]:
    """Scan inputs for steps i = 1 .. N-1: emissions (N-1, B, T), ``i < lengths`` (N-1, B, 1) and
    per-position transitions (N-1, B, T, T), or None for a shared (T, T) matrix (closed over)."""
    active = position_mask(lengths, emissions.shape[1])[:, 1:, None]
    per_step = jnp.swapaxes(transitions, 0, 1) if transitions.ndim == 4 else None
    return jnp.swapaxes(emissions[:, 1:], 0, 1), jnp.swapaxes(active, 0, 1), per_step


def forward_step(
    alpha: Array, transition: Array, emission: Array, active: Array
) -> tuple[Array, Array, Array]:
    """One filtering step (``kernels.chain``): ``alpha`` (B, T), the weights (B, T, T) and the inverse
    column sums (B, T), zero where not ``active`` (B, 1); ``transition`` (B, T, T) or (T, T),
    ``emission`` (B, T). The hot kernel of ``crf``.

    The shift ``top`` is a ``stop_gradient``, and a zero column sum is replaced by 1 under a
    ``where`` (``jnp.maximum`` would halve the derivative at the tie, sum = 1).
    """
    weight = alpha[:, :, None] + transition
    top = lax.stop_gradient(weight.max(1))
    weight = jnp.exp(weight - jnp.maximum(top, jnp.finfo(weight.dtype).min)[:, None, :])  # no -inf - -inf
    total = weight.sum(1)
    total = jnp.where(total > 0, total, 1.0)
    alpha = jnp.where(active, top + jnp.log(total) + emission, alpha)
    return alpha, weight, active.astype(total.dtype) / total


def _filter(
    emissions: Array, transitions: Array, lengths: Array, start: Array, end: Array
) -> tuple[Array, Array, Array, Array]:
    """Forward filtering: ``log Z`` (B,), the last tag's marginal (B, T), and per step i >= 1 the
    weights (N-1, B, T, T) and inverse column sums (N-1, B, T) of ``P(y_{i-1} | y_i, prefix)``."""

    def step(alpha: Array, inputs: tuple[Array, Array, Array | None]) -> tuple[Array, tuple[Array, Array]]:
        emission, active, per_step = inputs
        alpha, weight, inverse_sum = forward_step(
            alpha, transitions if per_step is None else per_step, emission, active
        )
        return alpha, (weight, inverse_sum)

    alpha, (weights, inverse_sums) = lax.scan(
        step, emissions[:, 0] + start, _steps(emissions, transitions, lengths)
    )
    final = alpha + end
    log_z = jax.nn.logsumexp(final, axis=-1)
    last_marginal = jax.nn.softmax(final, axis=-1)
    return log_z, last_marginal, weights, inverse_sums


def _smooth(
    last_marginal: Array, weights: Array, inverse_sums: Array, lengths: Array, summed: bool = False
) -> tuple[Array, Array]:
    """Backward smoothing (``kernels.chain``) as a reverse ``lax.scan``: unary (B, N, T) and
    pairwise marginals (N-1, B, T, T), step-major (callers transpose), zero on padding; with
    ``summed`` (static), their sum over the steps and the batch (T, T) instead (the gradient of
    shared transitions), accumulated in the loop rather than written out and summed."""
    active = position_mask(lengths, weights.shape[0] + 1)[..., None]

    Carry = tuple[Array, Array]  # the marginal at the step, the running sum (``summed``)

    def step(carry: Carry, inputs: tuple[Array, Array, Array]) -> tuple[Carry, Any]:
        marginal, total = carry
        weight, inverse_sum, step_active = inputs  # position i, from the last to 1
        pair = weight * (marginal * inverse_sum)[:, None, :]  # zero past the length
        new = jnp.where(step_active, pair.sum(-1), marginal)
        if summed:
            return (new, total + pair.sum(0)), marginal
        return (new, total), (marginal, pair)

    num_tags = last_marginal.shape[-1]
    inputs = (weights, inverse_sums, jnp.swapaxes(active[:, 1:], 0, 1))
    total = jnp.zeros((num_tags, num_tags), last_marginal.dtype)
    (first, total), outputs = lax.scan(step, (last_marginal, total), inputs, reverse=True)
    unary, pairwise = (outputs, total) if summed else outputs
    unary_t = jnp.concatenate([first[:, None], jnp.swapaxes(unary, 0, 1)], axis=1) * active
    return unary_t, pairwise


@partial(jax.custom_vjp, nondiff_argnums=(5,))
def _log_partition(
    emissions: Array, transitions: Array, lengths: Array, start: Array, end: Array, shared: bool
) -> Array:
    """``log Z`` whose backward is forward filtering / backward smoothing (no per-step graph);
    ``shared`` (static) says whether ``transitions`` is one (T, T) matrix."""
    return _filter(emissions, transitions, lengths, start, end)[0]


def _log_partition_fwd(
    emissions: Array, transitions: Array, lengths: Array, start: Array, end: Array, shared: bool
) -> tuple[Array, tuple[Array, Array, Array, Array]]:
    log_z, last_marginal, weights, sums = _filter(emissions, transitions, lengths, start, end)
    return log_z, (lengths, last_marginal, weights, sums)


def _log_partition_bwd(
    shared: bool, saved: tuple[Array, Array, Array, Array], grad: Array
) -> tuple[Array, Array, None, Array, Array]:
    lengths, last_marginal, weights, sums = saved
    unary, pairwise = _smooth(grad[:, None] * last_marginal, weights, sums, lengths, summed=shared)
    grad_transitions = pairwise if shared else jnp.swapaxes(pairwise, 0, 1)
    return unary, grad_transitions, None, unary[:, 0].sum(0), last_tag(unary, lengths).sum(0)


_log_partition.defvjp(_log_partition_fwd, _log_partition_bwd)


@jax.jit
def log_partition(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> Array:
    """``log Z`` (B,); differentiable (twice and more), its gradient being the marginals."""
    start, end = boundary(start, emissions), boundary(end, emissions)
    return _log_partition(emissions, transitions, lengths, start, end, transitions.ndim == 2)


@jax.jit
def marginals(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> tuple[Array, Array]:
    """Exact unary (B, N, T) and pairwise (B, N-1, T, T) marginals by forward–backward."""
    _, last_marginal, weights, sums = _filter(
        emissions, transitions, lengths, boundary(start, emissions), boundary(end, emissions)
    )
    unary, pairwise = _smooth(last_marginal, weights, sums, lengths)
    return unary, jnp.swapaxes(pairwise, 0, 1)


@jax.jit
def viterbi(
    emissions: Array, transitions: Array, lengths: Array, start: Array | None, end: Array | None
) -> tuple[Array, Array]:
    """Best score (B,) and best tags (B, N), -1 on padding: a ``lax.scan`` forward, then one
    backtrace over the whole batch, a reverse ``lax.scan`` of gathers."""
    batch, length, num_tags = emissions.shape
    same_tag = jnp.broadcast_to(jnp.arange(num_tags), (batch, num_tags))

    def forward(score: Array, inputs: tuple[Array, Array, Array | None]) -> tuple[Array, Array]:
        emission, active, per_step = inputs
        step = transitions if per_step is None else per_step
        candidates = score[:, :, None] + step + emission[:, None, :]
        new_score, best_previous = candidates.max(1), candidates.argmax(1)
        score = jnp.where(active, new_score, score)
        return score, jnp.where(active, best_previous, same_tag)

    score, pointers = lax.scan(
        forward, emissions[:, 0] + boundary(start, emissions), _steps(emissions, transitions, lengths)
    )
    final = score + boundary(end, emissions)
    best, tag = final.max(-1), final.argmax(-1)

    def backward(tag: Array, best_previous: Array) -> tuple[Array, Array]:
        tag = jnp.take_along_axis(best_previous, tag[:, None], axis=1)[:, 0]
        return tag, tag

    _, previous = lax.scan(backward, tag, pointers, reverse=True)
    path = jnp.concatenate([jnp.swapaxes(previous, 0, 1), tag[:, None]], axis=1).astype(tag.dtype)
    return best, jnp.where(position_mask(lengths, length), path, -1)
