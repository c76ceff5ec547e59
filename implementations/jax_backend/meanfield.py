"""Naive mean field with parallel (Jacobi) updates, the paper's MF baseline (App. G; AIN).

``r_i ← softmax_t( u_i(t) + Σ_{t'} r_{i-1}(t') s_{i-1}(t', t) + Σ_{t'} r_{i+1}(t') s_i(t, t') )``
for all positions at once, ``iterations`` times (a ``lax.scan`` of fixed length, or a
``lax.while_loop`` with a tolerance), where ``u`` are
the tag scores (emissions, with ``start`` at the first and ``end`` at the last position) and ``s``
the transitions.

Mean field multiplies transition scores by probabilities, so a -inf transition would give
``0 · (−inf) = NaN``: every -inf *transition* is replaced by the finite ``penalty``. -inf *tag*
scores (emissions, start, end) never meet a product and stay exact.

The default ``penalty=0`` scores a forbidden transition as neutral: mean field does not see the
hard constraints, as the paper says it cannot (App. G), and may output invalid sequences. A large
penalty swamps the model's scores and locks the parallel updates into a 2-cycle (docs/methods.md, "Mean
field and hard constraints").

Options are Python values, static under ``jax.jit``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import Array

from ..solver import SolverOutput
from ._fixed_point import iterate, iterate_with_errors
from ._scores import boundary, clean_padding, position_mask
from ._tokens import argmax_tags, product_marginals, token_nll, token_partial_nll


def _tag_scores(emissions: Array, lengths: Array, start: Array | None, end: Array | None) -> Array:
    """u (B, N, T): emissions plus start at position 0 and end at position len - 1."""
    is_last = jnp.arange(emissions.shape[1]) == (lengths - 1)[:, None]
    scores = jnp.concatenate([emissions[:, :1] + boundary(start, emissions), emissions[:, 1:]], axis=1)
    return jnp.where(is_last[..., None], scores + boundary(end, emissions), scores)


def _penalised(transitions: Array, penalty: float) -> Array:
    """Transitions with every -inf replaced by the finite ``penalty``."""
    return jnp.where(jnp.isneginf(transitions), penalty, transitions)


def _messages(r: Array, transitions: Array, arcs: Array) -> Array:
    """Expected transition scores each position receives from its neighbours, (B, N, T), or with
    shared transitions (T, N, B) (tags first, :func:`_setup`).

    ``arcs`` (B, N-1, 1), or (1, N-1, B), is 1 for the arcs inside a sequence, so nothing crosses
    into padding. Shared transitions use one (T, T) × (T, (N-1)·B) matrix product for the batch.
    """
    if transitions.ndim == 2:
        from_left = jnp.tensordot(transitions, r[:, :-1], axes=(0, 0))  # into positions 1..N-1
        from_right = jnp.tensordot(transitions, r[:, 1:], axes=(1, 0))  # into positions 0..N-2
    else:
        from_left = jnp.einsum("bia,biac->bic", r[:, :-1], transitions)
        from_right = jnp.einsum("bic,biac->bia", r[:, 1:], transitions)
    return jnp.pad(from_left * arcs, ((0, 0), (1, 0), (0, 0))) + jnp.pad(
        from_right * arcs, ((0, 0), (0, 1), (0, 0))
    )


def _setup(
    emissions: Array,
    transitions: Array,
    lengths: Array,
    start: Array | None,
    end: Array | None,
    init: str,
    penalty: float,
):
    """The first iterate, the update step, its error (the largest change of a marginal, (B,)) and
    the iterate's batch dim; nothing crosses into padding.

    An iterate is the logits ``z`` (B, N, T) whose softmax is ``r``: one exponential pass per update,
    where carrying ``log r`` takes two (its ``exp`` and a log-softmax's); the marginals' logs are
    read off the last logits by a log-softmax, exact where ``r`` underflows (:func:`_batch_first`).
    With shared transitions it holds the tags first and the sequences last, (T, N, B), as BCRF's
    scaling form does (its ``Scalings``): XLA's element-wise loops then run along the batch, where
    along T = 17 tags they vectorise badly on the CPU (:func:`_batch_first` reads it back).
    """
    mask = position_mask(lengths, emissions.shape[1])[..., None]  # (B, N, 1)
    scores = _tag_scores(jnp.where(mask, emissions, 0.0), lengths, start, end)
    transitions = _penalised(transitions, penalty)
    tags_first = transitions.ndim == 2
    if tags_first:
        scores, mask = scores.transpose(2, 1, 0), mask.transpose(2, 1, 0)
    tags, batch_dim = (0, -1) if tags_first else (-1, 0)
    arcs = mask[:, 1:].astype(scores.dtype)
    initial = scores if init == "unary" else jnp.zeros_like(scores)

    def step(logits: Array) -> Array:
        return scores + _messages(jax.nn.softmax(logits, axis=tags), transitions, arcs)

    def error(logits: Array, previous: Array) -> Array:
        change = (jax.nn.softmax(logits, axis=tags) - jax.nn.softmax(previous, axis=tags)) * mask
        return jnp.abs(change).max((0, 1) if tags_first else (1, 2))

    return initial, step, error, batch_dim


def _batch_first(logits: Array, batch_dim: int) -> Array:
    """An iterate's log-softmax, (B, N, T) whatever its layout (:func:`_setup`)."""
    if batch_dim == 0:
        return jax.nn.log_softmax(logits, axis=-1)
    return jax.nn.log_softmax(logits, axis=0).transpose(2, 1, 0)


@partial(jax.jit, static_argnames=("iterations", "init", "penalty", "tolerance"))
def _iterate(emissions, transitions, lengths, start, end, *, iterations, init, penalty, tolerance) -> Array:
    """Log marginals ``log r`` (B, N, T) after the last update."""
    initial, step, error, batch_dim = _setup(emissions, transitions, lengths, start, end, init, penalty)
    return _batch_first(iterate(step, initial, iterations, tolerance, error, batch_dim), batch_dim)


@partial(jax.jit, static_argnames=("penalty",))
def _lower_bound(emissions, transitions, lengths, start, end, log_r: Array, penalty: float) -> Array:
    """``E_r[score] + H(r)`` (B,) at the marginals ``r`` (see :func:`log_partition`)."""
    clean_emissions, clean_transitions = clean_padding(emissions, transitions, lengths)
    scores = _tag_scores(clean_emissions, lengths, start, end)
    mask = position_mask(lengths, emissions.shape[1])[..., None]
    r = jnp.exp(log_r) * mask
    live = mask & jnp.isfinite(log_r)
    tag_terms = (r * jnp.where(live, scores - log_r, 0.0)).sum((1, 2))
    _, pairwise = product_marginals(r, lengths)
    return tag_terms + (pairwise * _penalised(clean_transitions, penalty)).sum((1, 2, 3))


def _marginals(log_r: Array, lengths: Array) -> Array:
    """r (B, N, T), zero on padding."""
    return jnp.exp(log_r) * position_mask(lengths, log_r.shape[1])[..., None]


def marginals(emissions, transitions, lengths, start, end, **options):
    """Factorised marginals r (B, N, T) and their products ``r_i ⊗ r_{i+1}`` (B, N-1, T, T)."""
    log_r = _iterate(emissions, transitions, lengths, start, end, **options)
    return product_marginals(_marginals(log_r, lengths), lengths)


def decode(emissions, transitions, lengths, start, end, **options):
    """Most probable tag of each factorised marginal (B, N), -1 on padding."""
    log_r = _iterate(emissions, transitions, lengths, start, end, **options)
    return argmax_tags(_marginals(log_r, lengths), lengths)


def loss(emissions, transitions, lengths, tags, start, end, **options):
    """Token cross-entropy on the final marginals (B,), backpropagated through every update (AIN)."""
    return token_nll(_iterate(emissions, transitions, lengths, start, end, **options), lengths, tags)


def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
    """``−Σ_i log Σ_{t allowed} r_i(t)`` (B,) on the final marginals, through every update."""
    log_r = _iterate(emissions, transitions, lengths, start, end, **options)
    return token_partial_nll(log_r, lengths, allowed)


def log_partition(emissions, transitions, lengths, start, end, **options):
    """Mean-field lower bound ``E_r[score] + H(r)`` (B,) with -inf transitions at ``penalty``.

    For finite scores it never exceeds the exact ``log Z``.
    """
    log_r = _iterate(emissions, transitions, lengths, start, end, **options)
    return _lower_bound(emissions, transitions, lengths, start, end, log_r, options["penalty"])


def solve(emissions, transitions, lengths, start, end, **options):
    """The marginals with their lower bound and the size of each update
    (``implementations.solver.SolverOutput``)."""
    output = SolverOutput(*_solve(emissions, transitions, lengths, start, end, **options))
    return output if options["tolerance"] is not None else output._replace(iterations=options["iterations"])


@partial(jax.jit, static_argnames=("iterations", "init", "penalty", "tolerance"))
def _solve(emissions, transitions, lengths, start, end, *, iterations, init, penalty, tolerance):
    initial, step, error, batch_dim = _setup(emissions, transitions, lengths, start, end, init, penalty)
    logits, run, errors = iterate_with_errors(step, initial, iterations, tolerance, error, batch_dim)
    log_r = _batch_first(logits, batch_dim)
    unary, pairwise = product_marginals(_marginals(log_r, lengths), lengths)
    value = _lower_bound(emissions, transitions, lengths, start, end, log_r, penalty)
    converged = errors[run - 1] <= (tolerance or 0.0)
    return unary, pairwise, value, run, converged, errors
