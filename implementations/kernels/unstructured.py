"""Unstructured baseline, for both backends: every tag predicted independently by a softmax over
its emissions.

``transitions``, ``start`` and ``end`` are accepted for a uniform signature and validated, but
the model ignores them; only ``decode(repair=True)`` reads their -inf pattern, to return the best
sequence that breaks no constraint given the per-token probabilities (the paper's "simple
heuristic" for constrained tasks, made exact by a Viterbi pass: the backend's ``crf.decode``,
which :func:`decoder` takes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import ops
from .scores import clean_padding, forbidden_pattern, position_mask
from .tokens import argmax_tags, product_marginals, token_nll, token_partial_nll

Array = Any  # a torch.Tensor or a jax.Array


def log_probs(emissions: Array, transitions: Array, lengths: Array) -> Array:
    """Per-token log-softmax (B, N, T) of the emissions, 0 scores on padding."""
    emissions, _ = clean_padding(emissions, transitions, lengths)
    return ops.of(emissions).log_softmax(emissions, -1)


def marginals(emissions, transitions, lengths, start, end):
    """Per-token softmax (B, N, T) and the product of neighbours (B, N-1, T, T)."""
    return product_marginals(ops.of(emissions).exp(log_probs(emissions, transitions, lengths)), lengths)


def decoder(crf_decode: Callable[..., Array]) -> Callable[..., Array]:
    """``decode`` for the backend whose exact CRF decodes with ``crf_decode`` (Viterbi)."""

    def decode(emissions, transitions, lengths, start, end, *, repair):
        """Per-token argmax (B, N), -1 on padding; with ``repair=True`` the sequence maximising the
        sum of per-token log-probabilities among those the -inf constraints allow."""
        scores = log_probs(emissions, transitions, lengths)
        if not repair:
            return argmax_tags(scores, lengths)
        patterns = map(forbidden_pattern, (transitions, start, end))
        return crf_decode(scores, next(patterns), lengths, *patterns)

    return decode


def loss(emissions, transitions, lengths, tags, start, end):
    """Token cross-entropy summed over each sequence (B,)."""
    return token_nll(log_probs(emissions, transitions, lengths), lengths, tags)


def partial_loss(emissions, transitions, lengths, allowed, start, end):
    """``−Σ_i log Σ_{t allowed} p_i(t)`` (B,): each token's probability of an allowed tag."""
    return token_partial_nll(log_probs(emissions, transitions, lengths), lengths, allowed)


def log_partition(emissions, transitions, lengths, start, end):
    """Log-normaliser of the factorised model (B,): ``Σ_{i<len} logsumexp_t emissions[i, t]``."""
    o = ops.of(emissions)
    emissions, _ = clean_padding(emissions, transitions, lengths)
    per_token = o.logsumexp(emissions, -1)
    return o.where(position_mask(lengths, emissions.shape[1]), per_token, 0.0).sum(-1)
