"""The from-scratch encoder: word (+ char-CNN) embeddings, sinusoidal positions, self-attention layers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ..data.types import Sentence
from .config import ScorerConfig
from .vocab import PAD, UNK, Vocabulary

MAX_WORD_CHARS = 40
"""Longer words keep their first and last MAX_WORD_CHARS // 2 characters (prefix and suffix carry the
POS cues), so one URL-like token cannot blow up a batch's (B, N, C) character tensor."""


def word_chars(word: str) -> str:
    """The characters the char-CNN reads for ``word`` (clipped to MAX_WORD_CHARS)."""
    if len(word) <= MAX_WORD_CHARS:
        return word
    half = MAX_WORD_CHARS // 2
    return word[:half] + word[-half:]


def pad_ids(rows: Sequence[Sequence[int]], width: int) -> Tensor:
    """Right-pad integer rows with PAD to ``width``: -> LongTensor (len(rows), width)."""
    out = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def sinusoidal_positions(length: int, dim: int) -> Tensor:
    """The fixed sine/cosine position table of Vaswani et al.: -> (length, dim)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    rate = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)[:, : dim // 2]
    return table


class CharCNN(nn.Module):
    """A word vector from its characters: embeddings, Conv1d, max-pool over characters, linear to dim.

    (B, N, C) char ids (PAD = 0 beyond each word) -> (B, N, dim). Padding characters are zeroed
    before the convolution and excluded from the max, so a word's vector does not depend on the
    batch's widest word; padded words (no characters) get a zero pooled vector.
    """

    def __init__(self, num_chars: int, char_dim: int, kernel: int, dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=PAD)
        self.conv = nn.Conv1d(char_dim, char_dim, kernel, padding=kernel // 2)
        self.proj = nn.Linear(char_dim, dim)

    def forward(self, chars: Tensor) -> Tensor:
        batch, length, width = chars.shape
        flat = chars.reshape(batch * length, width)
        mask = flat != PAD  # (BN, C)
        x = self.embedding(flat) * mask.unsqueeze(-1)  # (BN, C, char_dim)
        x = self.conv(x.transpose(1, 2))  # (BN, char_dim, C)
        x = x.masked_fill(~mask.unsqueeze(1), torch.finfo(x.dtype).min).amax(dim=2)
        x = torch.where(mask.any(dim=1, keepdim=True), x, torch.zeros_like(x))
        return self.proj(x).view(batch, length, -1)


class EmbeddingEncoder(nn.Module):
    """Word embeddings (+ char-CNN), then ``layers`` pre-norm self-attention layers with positions.

    ``featurize`` gives ``words`` (B, N) [and ``chars`` (B, N, C)] id tensors; ``forward`` maps
    them to (B, N, dim). With ``layers == 0`` the output is the (dropped-out) embedding alone, so
    no positions are added: the model is then context-free, as in the paper's L = 0 setting.
    """

    def __init__(self, config: ScorerConfig, words: Vocabulary, chars: Vocabulary | None) -> None:
        super().__init__()
        if config.char_cnn != (chars is not None):
            raise ValueError("EmbeddingEncoder: a char vocabulary is needed iff config.char_cnn")
        self.words = words
        self.chars = chars
        self.dim = config.dim
        self.output_dim = config.dim
        self.word_embedding = nn.Embedding(len(words), config.dim, padding_idx=PAD)
        self.char_cnn = (
            CharCNN(len(chars), config.char_dim, config.char_kernel, config.dim)
            if chars is not None
            else None
        )
        self.dropout = nn.Dropout(config.dropout)
        self.transformer: nn.TransformerEncoder | None = None
        if config.layers > 0:
            layer = nn.TransformerEncoderLayer(
                config.dim,
                config.heads,
                config.feedforward,
                config.dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            self.transformer = nn.TransformerEncoder(
                layer, config.layers, norm=nn.LayerNorm(config.dim), enable_nested_tensor=False
            )

    def featurize(self, sentences: Sequence[Sentence]) -> dict[str, Tensor]:
        """Padded ids: ``words`` (B, N), and ``chars`` (B, N, C) with char_cnn; the caller adds lengths."""
        width = max(len(s.tokens) for s in sentences)
        features = {"words": pad_ids([self.words.encode(s.tokens) for s in sentences], width)}
        if self.chars is not None:
            spelled = [[word_chars(w) for w in s.tokens] for s in sentences]
            char_width = max((len(w) for s in spelled for w in s), default=1) or 1
            chars = torch.full((len(sentences), width, char_width), PAD, dtype=torch.long)
            for i, sentence in enumerate(spelled):
                for j, word in enumerate(sentence):
                    ids = self.chars.encode(word) or [UNK]  # the empty string still gets one char
                    chars[i, j, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            features["chars"] = chars
        return features

    def forward(self, features: dict[str, Tensor]) -> Tensor:
        words, lengths = features["words"], features["lengths"]
        x = self.word_embedding(words)
        if self.char_cnn is not None:
            x = x + self.char_cnn(features["chars"])
        if self.transformer is None:
            return self.dropout(x)
        x = x + sinusoidal_positions(words.shape[1], self.dim).to(x)
        padding = torch.arange(words.shape[1], device=words.device) >= lengths.unsqueeze(1)  # (B, N)
        return self.transformer(self.dropout(x), src_key_padding_mask=padding)
