"""Naive mean field on jax (the method: ``implementations.kernels.meanfield``): the parallel
update as a ``lax.scan`` of fixed length, or a ``lax.while_loop`` with a tolerance, over iterates
laid out (T, N, B) with shared transitions (:func:`_setup`). Options are Python values, static
under ``jax.jit``."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import Array

from ..kernels import meanfield as _shared
from ..solver import SolverOutput
from ._fixed_point import iterate, iterate_with_errors
from ._scores import position_mask


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
    scores = _shared.tag_scores(jnp.where(mask, emissions, 0.0), lengths, start, end)
    transitions = _shared.penalised(transitions, penalty)
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


_lower_bound = partial(jax.jit, static_argnames=("penalty",))(_shared.lower_bound)
marginals, decode, loss, partial_loss, log_partition = _shared.meanfield_kernels(_iterate, _lower_bound)


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
    return _shared.solution(
        emissions, transitions, lengths, start, end, log_r, run, errors, penalty, tolerance
    )
