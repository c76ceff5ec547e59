"""Naive mean field with parallel (Jacobi) updates, the paper's MF baseline (App. G; AIN): what
both backends share.

``r_i ← softmax_t( u_i(t) + Σ_{t'} r_{i-1}(t') s_{i-1}(t', t) + Σ_{t'} r_{i+1}(t') s_i(t, t') )``
for all positions at once, ``iterations`` times, where ``u`` are the tag scores (emissions, with
``start`` at the first and ``end`` at the last position) and ``s`` the transitions. The update
loop and the iterate's layout are each backend's (``<backend>_backend/meanfield.py``); the tag
scores, the lower bound and the contract's functions on the final marginals are here.

Mean field multiplies transition scores by probabilities, so a -inf transition would give
``0 · (−inf) = NaN``: every -inf *transition* is replaced by the finite ``penalty``. -inf *tag*
scores (emissions, start, end) never meet a product and stay exact.

The default ``penalty=0`` scores a forbidden transition as neutral: mean field does not see the
hard constraints, as the paper says it cannot (App. G), and may output invalid sequences. A large
penalty swamps the model's scores and locks the parallel updates into a 2-cycle (docs/methods.md, "Mean
field and hard constraints").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import ops
from .scores import boundary, clean_padding, position_mask
from .tokens import argmax_tags, product_marginals, token_nll, token_partial_nll

Array = Any  # a torch.Tensor or a jax.Array


def tag_scores(emissions: Array, lengths: Array, start: Array | None, end: Array | None) -> Array:
    """u (B, N, T): emissions plus start at position 0 and end at position len - 1."""
    o = ops.of(emissions)
    is_last = o.arange(emissions.shape[1], lengths) == (lengths - 1)[:, None]
    scores = o.concatenate([emissions[:, :1] + boundary(start, emissions), emissions[:, 1:]], 1)
    return o.where(is_last[..., None], scores + boundary(end, emissions), scores)


def penalised(transitions: Array, penalty: float) -> Array:
    """Transitions with every -inf replaced by the finite ``penalty``."""
    o = ops.of(transitions)
    return o.where(o.isneginf(transitions), penalty, transitions)


def lower_bound(emissions, transitions, lengths, start, end, log_r: Array, penalty: float) -> Array:
    """``E_r[score] + H(r)`` (B,) at the marginals ``r`` (see ``log_partition``)."""
    o = ops.of(emissions)
    clean_emissions, clean_transitions = clean_padding(emissions, transitions, lengths)
    scores = tag_scores(clean_emissions, lengths, start, end)
    mask = position_mask(lengths, emissions.shape[1])[..., None]
    r = o.exp(log_r) * mask
    live = mask & o.isfinite(log_r)
    tag_terms = (r * o.where(live, scores - log_r, 0.0)).sum((1, 2))
    _, pairwise = product_marginals(r, lengths)
    return tag_terms + (pairwise * penalised(clean_transitions, penalty)).sum((1, 2, 3))


def factorised_marginals(log_r: Array, lengths: Array) -> Array:
    """r (B, N, T), zero on padding."""
    return ops.of(log_r).exp(log_r) * position_mask(lengths, log_r.shape[1])[..., None]


def solution(emissions, transitions, lengths, start, end, log_r, run, errors, penalty, tolerance):
    """The fields of ``implementations.solver.SolverOutput`` from the final log marginals
    ``log_r`` (B, N, T), the iterations ``run`` and the errors' history."""
    unary, pairwise = product_marginals(factorised_marginals(log_r, lengths), lengths)
    value = lower_bound(emissions, transitions, lengths, start, end, log_r, penalty)
    converged = errors[run - 1] <= (tolerance or 0.0)
    return unary, pairwise, value, run, converged, errors


def meanfield_kernels(
    log_marginals: Callable[..., Array], bound: Callable[..., Array]
) -> tuple[Callable[..., Any], ...]:
    """``(marginals, decode, loss, partial_loss, log_partition)`` for the backend whose update
    loop gives ``log_marginals(emissions, transitions, lengths, start, end, **options)``, the log
    marginals ``log r`` (B, N, T) after the last update, and whose :func:`lower_bound` is ``bound``."""

    def marginals(emissions, transitions, lengths, start, end, **options):
        """Factorised marginals r (B, N, T) and their products ``r_i ⊗ r_{i+1}`` (B, N-1, T, T)."""
        log_r = log_marginals(emissions, transitions, lengths, start, end, **options)
        return product_marginals(factorised_marginals(log_r, lengths), lengths)

    def decode(emissions, transitions, lengths, start, end, **options):
        """Most probable tag of each factorised marginal (B, N), -1 on padding."""
        log_r = log_marginals(emissions, transitions, lengths, start, end, **options)
        return argmax_tags(factorised_marginals(log_r, lengths), lengths)

    def loss(emissions, transitions, lengths, tags, start, end, **options):
        """Token cross-entropy on the final marginals (B,), backpropagated through every update (AIN)."""
        return token_nll(log_marginals(emissions, transitions, lengths, start, end, **options), lengths, tags)

    def partial_loss(emissions, transitions, lengths, allowed, start, end, **options):
        """``−Σ_i log Σ_{t allowed} r_i(t)`` (B,) on the final marginals, through every update."""
        log_r = log_marginals(emissions, transitions, lengths, start, end, **options)
        return token_partial_nll(log_r, lengths, allowed)

    def log_partition(emissions, transitions, lengths, start, end, **options):
        """Mean-field lower bound ``E_r[score] + H(r)`` (B,) with -inf transitions at ``penalty``.

        For finite scores it never exceeds the exact ``log Z``.
        """
        log_r = log_marginals(emissions, transitions, lengths, start, end, **options)
        return bound(emissions, transitions, lengths, start, end, log_r, options["penalty"])

    return marginals, decode, loss, partial_loss, log_partition
