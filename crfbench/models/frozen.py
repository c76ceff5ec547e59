"""The frozen-feature encoder: cached pretrained word features (never fine-tuned) and a BiLSTM.

``featurize`` looks the sentences' features up (``crfbench.models.features``: extracted once per
split, cached on disk) and combines their layers (``concat`` or ``mean``) into ``features``
(B, N, D) float32, zero beyond each sentence; ``forward`` maps them linearly to
``feature_projection`` units where that is > 0, then runs a bidirectional LSTM of ``lstm_hidden``
units each way over them (padding packed away, so it never changes a result), or passes them on
with ``lstm_hidden = 0``, for the scorer's MLP heads. Only the projection and the LSTM are
trained, so a training run costs the head's time, not the transformer's. The projection is for
speed: an LSTM's input weights cost ``4 * lstm_hidden`` multiply-adds per input unit, each way,
so over four concatenated layers (1536 wide) they dominate a training step; one linear map to a
narrow width first costs a fraction of that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..data.types import Sentence
from .config import ScorerConfig
from .features import FeatureStore
from .pretrained import _quiet_transformers, resolve_pretrained


def pretrained_width(name: str) -> int:
    """The hidden size of a pretrained model, from its config alone (no weights read)."""
    with _quiet_transformers() as transformers:
        model_config: Any = transformers.AutoConfig.from_pretrained(
            resolve_pretrained(name), local_files_only=True
        )
    return int(model_config.hidden_size)


def combine_layers(features: Tensor, combine: str) -> Tensor:
    """(..., layers, H) -> (..., layers * H) for ``concat``, (..., H) for ``mean``."""
    if combine == "concat":
        return features.flatten(-2)
    return features.mean(dim=-2)


class FrozenFeatureEncoder(nn.Module):
    """Cached frozen pretrained features (see the module docstring) and a trained BiLSTM."""

    def __init__(self, config: ScorerConfig, store: FeatureStore | None = None) -> None:
        super().__init__()
        self.config = config
        self.store = store if store is not None else FeatureStore(config)
        width = pretrained_width(config.pretrained)
        self.input_dim = width * (len(config.feature_layers) if config.feature_combine == "concat" else 1)
        self.dropout = nn.Dropout(config.dropout)
        projected = config.feature_projection or self.input_dim
        self.projection = nn.Linear(self.input_dim, projected) if config.feature_projection else None
        self.lstm = (
            nn.LSTM(projected, config.lstm_hidden, batch_first=True, bidirectional=True)
            if config.lstm_hidden
            else None
        )
        self.output_dim = 2 * config.lstm_hidden if config.lstm_hidden else projected

    def prepare(self, *splits: Sequence[Sentence]) -> None:
        """Load (computing and caching first where absent) the features of each whole split."""
        for sentences in splits:
            self.store.prepare(sentences)

    def featurize(self, sentences: Sequence[Sentence]) -> dict[str, Tensor]:
        found = [combine_layers(f.float(), self.config.feature_combine) for f in self.store.lookup(sentences)]
        words = max(len(f) for f in found)
        out = torch.zeros((len(found), words, self.input_dim))
        for row, features in enumerate(found):
            out[row, : len(features)] = features
        return {"features": out}

    def forward(self, features: dict[str, Tensor]) -> Tensor:
        x = features["features"]  # (B, N, D)
        # Dropout on what the LSTM reads: the projected features where there is a projection
        x = self.dropout(x if self.projection is None else self.projection(x))
        if self.lstm is None:
            return x
        lengths = features["lengths"].cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        return h  # (B, N, 2 * lstm_hidden), zero on padding
