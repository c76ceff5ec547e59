"""Per-token pieces shared by the factorised methods (mean field, unstructured): losses on
per-position log-probabilities, argmax decoding and the product pairwise marginals."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array

from ._scores import position_mask
from ._semiring import logsumexp


@jax.jit
def token_nll(log_probs: Array, lengths: Array, tags: Array) -> Array:
    """Token cross-entropy summed over each sequence (B,): ``−Σ_{i<len} log p_i(tags_i)``."""
    mask = position_mask(lengths, log_probs.shape[1])
    gold = jnp.take_along_axis(log_probs, jnp.where(mask, tags, 0)[..., None], axis=-1)[..., 0]
    return -jnp.where(mask, gold, 0.0).sum(-1)


@jax.jit
def token_partial_nll(log_probs: Array, lengths: Array, allowed: Array) -> Array:
    """Partial-label token loss (B,): ``−Σ_{i<len} log Σ_{t allowed} p_i(t)``."""
    mask = position_mask(lengths, log_probs.shape[1])
    kept = logsumexp(jnp.where(allowed, log_probs, -jnp.inf), axis=-1)
    return -jnp.where(mask, kept, 0.0).sum(-1)


@jax.jit
def argmax_tags(probs: Array, lengths: Array) -> Array:
    """Most probable tag at each position (B, N), -1 on padding."""
    return jnp.where(position_mask(lengths, probs.shape[1]), probs.argmax(-1), -1)


@jax.jit
def product_marginals(probs: Array, lengths: Array) -> tuple[Array, Array]:
    """Unary (B, N, T) and pairwise ``p_i ⊗ p_{i+1}`` (B, N-1, T, T), zero on padding."""
    mask = position_mask(lengths, probs.shape[1])
    unary = probs * mask[..., None]
    pairwise = unary[:, :-1, :, None] * unary[:, 1:, None, :]
    return unary, pairwise
