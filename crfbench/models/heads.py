"""MLP heads turning contextual word vectors into emission and per-position transition scores."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class EmissionHead(nn.Module):
    """MLP(h_i) -> T tag scores per position: (B, N, D) -> (B, N, T)."""

    def __init__(self, dim: int, hidden: int, num_tags: int, dropout: float) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, num_tags)
        )

    def forward(self, h: Tensor) -> Tensor:
        return self.mlp(h)


class TransitionHead(nn.Module):
    """MLP([h_i ; h_{i+1}]) -> T x T scores (prev, cur) per adjacent pair: (B, N, D) -> (B, N-1, T, T).

    The model is non-homogeneous: each pair gets its own transition matrix. The first layer on the
    concatenation is computed as W_prev h_i + W_cur h_{i+1} (the same function), which projects
    every position once instead of twice.
    """

    def __init__(self, dim: int, hidden: int, num_tags: int, dropout: float) -> None:
        super().__init__()
        self.num_tags = num_tags
        self.hidden = hidden
        self.first = nn.Linear(dim, 2 * hidden)  # [W_prev; W_cur], the bias counted once below
        self.rest = nn.Sequential(nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, num_tags * num_tags))

    def forward(self, h: Tensor) -> Tensor:
        batch, length, _ = h.shape
        pairs = max(length - 1, 0)
        weight_prev, weight_cur = self.first.weight.split(self.hidden, dim=0)
        bias = self.first.bias[: self.hidden] + self.first.bias[self.hidden :]
        prev = torch.nn.functional.linear(h[:, :pairs], weight_prev, bias)
        cur = torch.nn.functional.linear(h[:, 1:], weight_cur)
        out = self.rest(prev + cur)
        return out.view(batch, pairs, self.num_tags, self.num_tags)
