"""The scorer f_theta: an encoder and two MLP heads giving emission and per-position transition scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import torch
from torch import Tensor, nn

from ..data.types import Sentence
from .config import ScorerConfig
from .encoders import EmbeddingEncoder, word_chars
from .frozen import FrozenFeatureEncoder
from .heads import EmissionHead, TransitionHead
from .pretrained import PretrainedEncoder, load_pretrained
from .vocab import Vocabulary


@dataclass
class Scores:
    """Raw (unconstrained) scores of a batch; values at padded positions are arbitrary but finite.

    ``emissions`` (B, N, T); ``transitions`` (B, N-1, T, T) indexed (pair i -> i+1, prev tag, cur tag),
    or None for the unstructured model; ``lengths`` (B,) long.
    """

    emissions: Tensor
    transitions: Tensor | None
    lengths: Tensor


class Scorer(nn.Module):
    """Sentences -> padded id tensors (``featurize``, CPU) -> scores (``forward``, on the module's device).

    Build one with ``build_scorer`` (vocabularies from the training split) or, from a checkpoint,
    ``Scorer.from_state`` followed by ``load_state_dict``.
    """

    def __init__(
        self,
        config: ScorerConfig,
        encoder: EmbeddingEncoder | PretrainedEncoder | FrozenFeatureEncoder,
        num_tags: int,
    ) -> None:
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"Scorer: num_tags must be >= 1, got {num_tags}")
        self.config = config
        self.num_tags = num_tags
        self.encoder = encoder
        dim = encoder.output_dim
        self.dropout = nn.Dropout(config.dropout) if config.encoder != "embeddings" else nn.Identity()
        self.emission_head = EmissionHead(dim, config.mlp_hidden, num_tags, config.dropout)
        self.transition_head = (
            TransitionHead(dim, config.mlp_hidden, num_tags, config.dropout) if config.transitions else None
        )

    def prepare(self, *splits: Sequence[Sentence]) -> None:
        """Ready what featurizing whole splits needs ahead of time: the frozen encoder's cached
        features (computed and written once when absent); nothing for the other encoders."""
        if isinstance(self.encoder, FrozenFeatureEncoder):
            self.encoder.prepare(*splits)

    def featurize(self, sentences: Sequence[Sentence]) -> dict[str, Tensor]:
        """Padded CPU id tensors for a batch, ``lengths`` (B,) included; deterministic.

        Raises ValueError on an empty batch or sentence, and (pretrained) on a sentence longer than
        ``max_subwords`` subwords, naming its index in ``sentences``.
        """
        if len(sentences) == 0:
            raise ValueError("featurize: empty batch")
        for i, sentence in enumerate(sentences):
            if len(sentence.tokens) == 0:
                raise ValueError(f"featurize: sentence {i} has no tokens")
        features = self.encoder.featurize(sentences)
        features["lengths"] = torch.tensor([len(s.tokens) for s in sentences], dtype=torch.long)
        return features

    def forward(self, features: Mapping[str, Tensor]) -> Scores:
        """Scores of a featurized batch (tensors already on this module's device)."""
        h = self.dropout(self.encoder(features))  # (B, N, D)
        emissions = self.emission_head(h)
        transitions = self.transition_head(h) if self.transition_head is not None else None
        return Scores(emissions, transitions, features["lengths"])

    def vocab_state(self) -> dict[str, Any]:
        """JSON-able vocabularies: with the config and num_tags, enough to rebuild this architecture."""
        if isinstance(self.encoder, EmbeddingEncoder):
            chars = self.encoder.chars.state() if self.encoder.chars is not None else None
            return {"words": self.encoder.words.state(), "chars": chars}
        return {"words": None, "chars": None}  # the tokenizer comes from the pretrained directory

    @classmethod
    def from_state(cls, config: ScorerConfig, vocab_state: Mapping[str, Any], num_tags: int) -> Scorer:
        """The same architecture as the scorer that gave ``vocab_state``, freshly initialised.

        Load the checkpoint's ``state_dict`` next; a pretrained encoder is built from its config
        alone, without reading the pretrained weights, since the checkpoint holds the fine-tuned ones.
        """
        if config.encoder == "pretrained":
            tokenizer, model = load_pretrained(config.pretrained, weights=False)
            return cls(config, PretrainedEncoder(config, tokenizer, model), num_tags)
        if config.encoder == "frozen":
            return cls(config, FrozenFeatureEncoder(config), num_tags)
        if vocab_state.get("words") is None:
            raise ValueError("from_state: the vocab state has no word vocabulary")
        if config.char_cnn != (vocab_state.get("chars") is not None):
            raise ValueError("from_state: a char vocabulary is needed iff config.char_cnn")
        words = Vocabulary.from_state(vocab_state["words"])
        chars = Vocabulary.from_state(vocab_state["chars"]) if config.char_cnn else None
        return cls(config, EmbeddingEncoder(config, words, chars), num_tags)


def build_scorer(config: ScorerConfig, train_sentences: Sequence[Sentence], num_tags: int) -> Scorer:
    """A freshly initialised scorer whose vocabularies come from the training sentences.

    Words seen fewer than ``config.min_word_count`` times map to ``<unk>``; every training
    character gets an id. The pretrained encoder uses its own tokenizer and pretrained weights.
    """
    if config.encoder == "pretrained":
        tokenizer, model = load_pretrained(config.pretrained, weights=True)
        return Scorer(config, PretrainedEncoder(config, tokenizer, model), num_tags)
    if config.encoder == "frozen":
        return Scorer(config, FrozenFeatureEncoder(config), num_tags)
    words = Vocabulary.build(chain.from_iterable(s.tokens for s in train_sentences), config.min_word_count)
    chars = None
    if config.char_cnn:
        chars = Vocabulary.build(c for s in train_sentences for w in s.tokens for c in word_chars(w))
    return Scorer(config, EmbeddingEncoder(config, words, chars), num_tags)
