"""Per-token pieces shared by the factorised methods (mean field, unstructured): losses on
per-position log-probabilities, argmax decoding and the product pairwise marginals."""

from __future__ import annotations

import torch
from torch import Tensor

from ._scores import position_mask
from ._semiring import logsumexp


def token_nll(log_probs: Tensor, lengths: Tensor, tags: Tensor) -> Tensor:
    """Token cross-entropy summed over each sequence (B,): ``−Σ_{i<len} log p_i(tags_i)``."""
    mask = position_mask(lengths, log_probs.shape[1])
    gold = log_probs.gather(-1, torch.where(mask, tags, 0).unsqueeze(-1)).squeeze(-1)
    return -torch.where(mask, gold, 0.0).sum(-1)


def token_partial_nll(log_probs: Tensor, lengths: Tensor, allowed: Tensor) -> Tensor:
    """Partial-label token loss (B,): ``−Σ_{i<len} log Σ_{t allowed} p_i(t)``."""
    mask = position_mask(lengths, log_probs.shape[1])
    kept = logsumexp(torch.where(allowed, log_probs, -torch.inf), dim=-1)
    return -torch.where(mask, kept, 0.0).sum(-1)


def argmax_tags(probs: Tensor, lengths: Tensor) -> Tensor:
    """Most probable tag at each position (B, N), -1 on padding."""
    return torch.where(position_mask(lengths, probs.shape[1]), probs.argmax(-1), -1)


def product_marginals(probs: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """Unary (B, N, T) and pairwise ``p_i ⊗ p_{i+1}`` (B, N-1, T, T), zero on padding."""
    mask = position_mask(lengths, probs.shape[1])
    unary = probs * mask.unsqueeze(-1)
    pairwise = unary[:, :-1, :, None] * unary[:, 1:, None, :]
    return unary, pairwise
