"""Unstructured baseline: every tag predicted independently by a softmax over its emissions.

``transitions``, ``start`` and ``end`` are accepted for a uniform signature and validated, but
the model ignores them; only ``decode(repair=True)`` reads their -inf pattern, to return the best
sequence that breaks no constraint given the per-token probabilities (the paper's "simple
heuristic" for constrained tasks, made exact by a Viterbi pass).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import crf
from ._scores import clean_padding, forbidden_pattern, position_mask
from ._semiring import logsumexp
from ._tokens import argmax_tags, product_marginals, token_nll, token_partial_nll


def _log_probs(emissions: Tensor, transitions: Tensor, lengths: Tensor) -> Tensor:
    emissions, _ = clean_padding(emissions, transitions, lengths)
    return torch.log_softmax(emissions, dim=-1)


def marginals(emissions, transitions, lengths, start, end):
    """Per-token softmax (B, N, T) and the product of neighbours (B, N-1, T, T)."""
    return product_marginals(torch.exp(_log_probs(emissions, transitions, lengths)), lengths)


def decode(emissions, transitions, lengths, start, end, *, repair):
    """Per-token argmax (B, N), -1 on padding; with ``repair=True`` the sequence maximising the
    sum of per-token log-probabilities among those the -inf constraints allow."""
    log_probs = _log_probs(emissions, transitions, lengths)
    if not repair:
        return argmax_tags(log_probs, lengths)
    patterns = map(forbidden_pattern, (transitions, start, end))
    return crf.decode(log_probs, next(patterns), lengths, *patterns)


def loss(emissions, transitions, lengths, tags, start, end):
    """Token cross-entropy summed over each sequence (B,)."""
    return token_nll(_log_probs(emissions, transitions, lengths), lengths, tags)


def partial_loss(emissions, transitions, lengths, allowed, start, end):
    """``−Σ_i log Σ_{t allowed} p_i(t)`` (B,): each token's probability of an allowed tag."""
    return token_partial_nll(_log_probs(emissions, transitions, lengths), lengths, allowed)


def log_partition(emissions, transitions, lengths, start, end):
    """Log-normaliser of the factorised model (B,): ``Σ_{i<len} logsumexp_t emissions[i, t]``."""
    emissions, _ = clean_padding(emissions, transitions, lengths)
    per_token = logsumexp(emissions, dim=-1)
    return torch.where(position_mask(lengths, emissions.shape[1]), per_token, 0.0).sum(-1)
