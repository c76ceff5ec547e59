"""The Kiperwasser & Goldberg (2016) graph-based parser: BiLSTM features, an MLP arc scorer.

Each word is the concatenation of a word embedding and a UPOS embedding (gold UPOS, as in the
SparseMAP paper), read by a 2-layer BiLSTM; a learned root vector stands at index 0 in place of a
BiLSTM output. The score of the arc ``h -> m`` is ``v^T tanh(W_h x_h + W_m x_m + b)``: the MLP with
one hidden layer over the concatenation ``[x_h; x_m]``, split so that each word is projected once.
Scores come out as ``(B, N+1, N+1)``, ``scores[b, h, m]`` for ``h -> m``, the convention of the
dependency-tree methods (``implementations.kernels.dependency``), with ``-inf`` wherever no arc
can be (column 0, the diagonal, padding).

Sizes (:class:`ParserConfig`): the SparseMAP paper keeps K&G's configuration (without pretrained
embeddings) but does not restate it, and the seeds do not hold K&G's paper; its hyper-parameter
table, as we read it, gives word embeddings of 100, UPOS embeddings of 25, two BiLSTM layers of
125 units per direction and an MLP of 100 hidden units, the defaults here. Words are randomly
initialised; the vocabulary is every training word form as written (no lower-casing or number
normalisation).

Unknown words, as K&G: during training a word ``w`` seen ``#(w)`` times in the training data is
replaced by the unknown-word embedding with probability ``α / (α + #(w))``, ``α = 0.25``, so rare
words teach the unknown embedding what unseen words (which get it at test time) look like.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from implementations.kernels.dependency import arc_mask

from ..data.schemes import UPOS
from .treebank import Parse

PAD, UNKNOWN = 0, 1  # word ids of padding and of the unknown word; UPOS id 0 is padding too


@dataclass(frozen=True)
class ParserConfig:
    """The parser's sizes (K&G's graph-based configuration) and its word-dropout constant."""

    word_dim: int = 100
    upos_dim: int = 25
    lstm_dim: int = 125  # per direction
    lstm_layers: int = 2
    mlp_dim: int = 100
    word_dropout: float = 0.25  # α of the replacement probability α / (α + #(w))

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "word_dropout":
                if not isinstance(value, int | float) or value < 0:
                    raise ValueError(f"parser.word_dropout must be a number >= 0, got {value!r}")
            elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"parser.{field.name} must be a positive integer, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ParserConfig:
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown parser setting(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}"
            )
        return cls(**values)


@dataclass(frozen=True)
class Vocabulary:
    """The training word forms (id ``i + 2`` for ``forms[i]``) with their training counts."""

    forms: tuple[str, ...]
    counts: tuple[int, ...]

    @classmethod
    def build(cls, parses: Sequence[Parse]) -> Vocabulary:
        counted = Counter(word for parse in parses for word in parse.words)
        forms = tuple(sorted(counted))
        return cls(forms, tuple(counted[form] for form in forms))

    def __len__(self) -> int:
        """The number of word ids, padding and the unknown word included."""
        return len(self.forms) + 2

    def ids(self, words: Sequence[str]) -> list[int]:
        index = self._index()
        return [index.get(word, UNKNOWN) for word in words]

    def _index(self) -> dict[str, int]:
        cached: dict[str, int] | None = self.__dict__.get("_cache")
        if cached is None:
            cached = {form: i + 2 for i, form in enumerate(self.forms)}
            object.__setattr__(self, "_cache", cached)
        return cached

    def dropout_probabilities(self, alpha: float) -> Tensor:
        """(len(self),) the probability of replacing each word id by the unknown word in training."""
        counts = torch.tensor([1.0, 1.0, *self.counts], dtype=torch.float64)
        probabilities = alpha / (alpha + counts)
        probabilities[:2] = 0.0  # padding and the unknown word stay what they are
        return probabilities.float()


_UPOS_ID = {tag: i + 1 for i, tag in enumerate(UPOS)}


@dataclass(frozen=True)
class Batch:
    """Padded model inputs and gold trees of a list of sentences (on one device).

    ``words``, ``upos`` (B, N) ids; ``lengths`` (B,); ``heads`` (B, N+1) gold heads, ``-1`` at index
    0 and on padding; ``punct`` (B, N+1) bool, False at index 0 and on padding."""

    words: Tensor
    upos: Tensor
    lengths: Tensor
    heads: Tensor
    punct: Tensor


def encode(parses: Sequence[Parse], vocabulary: Vocabulary, device: torch.device) -> Batch:
    """The :class:`Batch` of ``parses``."""
    size, longest = len(parses), max(len(parse) for parse in parses)
    words = torch.zeros(size, longest, dtype=torch.long)
    upos = torch.zeros(size, longest, dtype=torch.long)
    heads = torch.full((size, longest + 1), -1, dtype=torch.long)
    punct = torch.zeros(size, longest + 1, dtype=torch.bool)
    for b, parse in enumerate(parses):
        n = len(parse)
        words[b, :n] = torch.tensor(vocabulary.ids(parse.words))
        upos[b, :n] = torch.tensor([_UPOS_ID[tag] for tag in parse.upos])
        heads[b, 1 : n + 1] = torch.tensor(parse.heads)
        punct[b, 1 : n + 1] = torch.tensor(parse.punct)
    lengths = torch.tensor([len(parse) for parse in parses])
    return Batch(words.to(device), upos.to(device), lengths.to(device), heads.to(device), punct.to(device))


class ArcScorer(nn.Module):
    """K&G's BiLSTM feature extractor and MLP arc scorer (module docstring)."""

    dropout: Tensor  # (len(vocabulary),) each word id's replacement probability (a buffer)

    def __init__(self, config: ParserConfig, vocabulary: Vocabulary) -> None:
        super().__init__()
        self.config, self.vocabulary = config, vocabulary
        features = 2 * config.lstm_dim
        self.word_embedding = nn.Embedding(len(vocabulary), config.word_dim, padding_idx=PAD)
        self.upos_embedding = nn.Embedding(len(UPOS) + 1, config.upos_dim, padding_idx=0)
        self.lstm = nn.LSTM(
            config.word_dim + config.upos_dim,
            config.lstm_dim,
            num_layers=config.lstm_layers,
            bidirectional=True,
            batch_first=True,
        )
        self.root = nn.Parameter(torch.empty(features).uniform_(-0.1, 0.1))
        self.head = nn.Linear(features, config.mlp_dim, bias=False)  # W_h
        self.modifier = nn.Linear(features, config.mlp_dim)  # W_m and b
        self.output = nn.Linear(config.mlp_dim, 1, bias=False)  # v
        self.register_buffer(
            "dropout", vocabulary.dropout_probabilities(config.word_dropout), persistent=False
        )

    def forward(self, words: Tensor, upos: Tensor, lengths: Tensor) -> Tensor:
        """Arc scores (B, N+1, N+1) of a batch (``words``, ``upos`` (B, N), ``lengths`` (B,)); in
        training mode words are dropped to the unknown word as K&G."""
        if self.training:
            dropped = torch.bernoulli(self.dropout[words]).bool()
            words = torch.where(dropped, torch.full_like(words, UNKNOWN), words)
        inputs = torch.cat([self.word_embedding(words), self.upos_embedding(upos)], -1)
        packed = pack_padded_sequence(inputs, lengths.cpu(), batch_first=True, enforce_sorted=False)
        states, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=words.shape[1])
        root = self.root.expand(states.shape[0], 1, -1)
        features = torch.cat([root, states], 1)  # (B, N+1, 2 * lstm_dim)
        hidden = self.head(features)[:, :, None, :] + self.modifier(features)[:, None, :, :]
        scores = self.output(torch.tanh(hidden)).squeeze(-1)  # (B, N+1 heads, N+1 modifiers)
        return scores.masked_fill(~arc_mask(scores, lengths), -torch.inf)

    def vocab_state(self) -> dict[str, Any]:
        """What rebuilds the vocabulary (saved with the weights)."""
        return {"forms": list(self.vocabulary.forms), "counts": list(self.vocabulary.counts)}

    @classmethod
    def from_state(cls, config: ParserConfig, vocab: dict[str, Any]) -> ArcScorer:
        return cls(config, Vocabulary(tuple(vocab["forms"]), tuple(vocab["counts"])))
