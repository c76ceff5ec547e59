"""Sequential engine: forward filtering / backward smoothing and Viterbi, one step per position.

Works on the scores directly (no (B, N, T, T) factor array is built for shared transitions).
Each step is batched over sequences and tags; the positions are a ``lax.scan``. Sequences
shorter than N stop updating at their length (their state is carried through padding).

Forward filtering keeps, for every step, the normalised weights ``exp(x − max)`` of
``x[a, b] = alpha[a] + transitions[a, b] + emissions[b]`` and their column sums: together they
are ``P(y_{i-1} = a | y_i = b, prefix)``. Backward smoothing turns node marginals at position i
into pairwise marginals at (i-1, i) and node marginals at i-1 with products and sums only, so a
forward–backward pass costs one ``exp`` per score entry (autodiff through a log-sum-exp forward
costs two). ``log Z`` uses it as its backward (a ``jax.custom_vjp``). Everything that can be -inf
is guarded, so forbidden tags get exactly zero marginals and no NaN.

Second-order derivatives of ``log Z`` (Hessian-vector products, gradient penalties; the
derivative of the marginals is the covariance of the sufficient statistics) differentiate that
backward and the filtering it reads: both are written to be differentiated (the per-column shift
is held constant, ``log`` never sees a zero column sum), so every derivative is finite and exact
wherever scores are ``-inf``.

Per-step arrays are stacked step-major, (N-1, B, ...), as ``lax.scan`` produces them.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array, lax

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
    """One filtering step from position i-1 to i: the new ``alpha`` (B, T), the weights (B, T, T)
    and the inverse column sums (B, T) of ``P(y_{i-1} | y_i, prefix)`` (zero where not ``active``,
    (B, 1)); ``transition`` is (B, T, T) or (T, T), ``emission`` (B, T). The hot kernel of ``crf``.

    Differentiable to any order without NaN: the shift ``top`` is a ``stop_gradient`` (any
    per-column constant gives the same result, so no derivative of a max is needed), and a column
    sum is 0 (unreachable tag: ``top`` is -inf, every weight 0) or >= 1 (its largest weight is 1),
    so replacing a 0 by 1 changes no value (``alpha`` stays -inf) but keeps ``log`` and the
    division off zero, derivatives included (a ``where``: ``jnp.maximum`` would halve the
    derivative at the tie, sum = 1).
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
    weights (N-1, B, T, T) and inverse column sums (N-1, B, T) of ``P(y_{i-1} | y_i, prefix)``.

    ``emissions[i, b]`` is constant in the previous tag, so it cancels from those weights and is
    added to ``alpha`` after the reduction. A column sum is 0 (unreachable tag, whose weights are
    all 0) or >= 1, so its inverse is taken as 1 for the former; it is stored as 0 past a
    sequence's length, which stops smoothing there.
    """

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
    # a softmax, not exp(final - log_z): at large scores log_z rounds to a multiple of the
    # spacing of floats near it, and the exp turns that error into rows that do not sum to 1
    last_marginal = jax.nn.softmax(final, axis=-1)
    return log_z, last_marginal, weights, inverse_sums


def _smooth(
    last_marginal: Array, weights: Array, inverse_sums: Array, lengths: Array, summed: bool = False
) -> tuple[Array, Array]:
    """Backward smoothing: unary (B, N, T) and pairwise (N-1, B, T, T) marginals, zero on padding;
    with ``summed`` (static), the pairwise marginals' sum over the steps and the batch (T, T)
    instead (the gradient of shared transitions), accumulated in the loop: no (N-1, B, T, T)
    array is zero-filled, written step by step and summed (~0.3 ms of the loss's 2.2 at (64, 50,
    17), one thread).

    Linear in ``last_marginal``: scaling it scales every output (the backward of ``log Z`` passes
    its incoming cotangent this way). Pairwise marginals stay step-major; callers transpose.
    """
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


def _last_tag(unary: Array, lengths: Array) -> Array:
    """(B, T) marginal of each sequence's last tag."""
    return jnp.take_along_axis(unary, (lengths - 1)[:, None, None], axis=1)[:, 0]


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
    return unary, grad_transitions, None, unary[:, 0].sum(0), _last_tag(unary, lengths).sum(0)


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
    """Best score (B,) and best tags (B, N), -1 on padding.

    Back-pointers past a sequence's length point to the same tag, so one backtrace over the
    whole batch (a reverse ``lax.scan`` of gathers, no per-item loop) carries each last tag
    through padding.
    """
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
