"""Per-token pieces shared by the factorised methods (mean field, unstructured), for both
backends: losses on per-position log-probabilities, argmax decoding and the product pairwise
marginals."""

from __future__ import annotations

from typing import Any

from .. import ops
from .scores import position_mask

Array = Any  # a torch.Tensor or a jax.Array


def token_nll(log_probs: Array, lengths: Array, tags: Array) -> Array:
    """Token cross-entropy summed over each sequence (B,): ``−Σ_{i<len} log p_i(tags_i)``."""
    o = ops.of(log_probs)
    mask = position_mask(lengths, log_probs.shape[1])
    gold = o.take_along_axis(log_probs, o.where(mask, tags, 0)[..., None], -1)[..., 0]
    return -o.where(mask, gold, 0.0).sum(-1)


def token_partial_nll(log_probs: Array, lengths: Array, allowed: Array) -> Array:
    """Partial-label token loss (B,): ``−Σ_{i<len} log Σ_{t allowed} p_i(t)``."""
    o = ops.of(log_probs)
    mask = position_mask(lengths, log_probs.shape[1])
    kept = o.logsumexp(o.where(allowed, log_probs, -o.inf), -1)
    return -o.where(mask, kept, 0.0).sum(-1)


def argmax_tags(probs: Array, lengths: Array) -> Array:
    """Most probable tag at each position (B, N), -1 on padding."""
    return ops.of(probs).where(position_mask(lengths, probs.shape[1]), probs.argmax(-1), -1)


def product_marginals(probs: Array, lengths: Array) -> tuple[Array, Array]:
    """Unary (B, N, T) and pairwise ``p_i ⊗ p_{i+1}`` (B, N-1, T, T), zero on padding."""
    mask = position_mask(lengths, probs.shape[1])
    unary = probs * mask[..., None]
    pairwise = unary[:, :-1, :, None] * unary[:, 1:, None, :]
    return unary, pairwise
