"""Sparse binary observation features of a feature CRF for NER (the thesis's ``1[x_t = o]``,
extended with the word-shape, affix and context attributes of a classic CoNLL-2003 feature CRF).

Each token gets a set of *attributes* (strings); the model's emission feature ``1[y_t = s] ·
1[o ∈ attributes(x, t)]`` has one weight per (attribute, tag), so every attribute seen in training
contributes a row of the emission matrix (CRFsuite's ``feature.possible_states``). The thesis's
START state is the attribute ``BOS`` on the first token: a weight per (BOS, tag) is exactly a
transition score from START, which lets CRFsuite (which has no START transition) fit the same
model. There is no END transition (the thesis's ``β_T = 1``).

Attributes of token t, with w = the token:
- ``bias``; ``w=``lower-cased word; ``shape=``its shape with repeats collapsed (``Xx``, ``d``,
  ``X.X.``); ``p1..p3=`` and ``s1..s3=`` prefixes and suffixes of the word (cased);
  ``title``, ``upper``, ``digit``, ``hyphen`` when true;
- context: ``w-1=``, ``w+1=`` and ``shape-1=``, ``shape+1=`` of the neighbours; ``BOS`` on the
  first token and ``EOS`` on the last.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..data.types import Sentence, TagSet

BOS = "BOS"


def shape(word: str) -> str:
    """The word's characters mapped to X (upper), x (lower), d (digit) or kept, runs collapsed."""
    mapped = ("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in word)
    return "".join(key for key, _ in itertools.groupby(mapped))


def token_attributes(tokens: Sequence[str], t: int) -> list[str]:
    """The attributes of token ``t`` of a sentence (see the module docstring)."""
    word = tokens[t]
    attributes = ["bias", f"w={word.lower()}", f"shape={shape(word)}"]
    attributes += [f"p{k}={word[:k]}" for k in (1, 2, 3) if len(word) >= k]
    attributes += [f"s{k}={word[-k:]}" for k in (1, 2, 3) if len(word) >= k]
    flags = {"title": word.istitle(), "upper": word.isupper(), "digit": word.isdigit(), "hyphen": "-" in word}
    attributes += [name for name, present in flags.items() if present]
    for offset, side in ((-1, "-1"), (1, "+1")):
        if 0 <= t + offset < len(tokens):
            neighbour = tokens[t + offset]
            attributes += [f"w{side}={neighbour.lower()}", f"shape{side}={shape(neighbour)}"]
    if t == 0:
        attributes.append(BOS)
    if t == len(tokens) - 1:
        attributes.append("EOS")
    return attributes


def sentence_attributes(tokens: Sequence[str]) -> list[list[str]]:
    """Every token's attributes."""
    return [token_attributes(tokens, t) for t in range(len(tokens))]


@dataclass(frozen=True)
class Vocabulary:
    """The attributes that have a weight row, in row order (those seen at least ``min_count`` times
    in the training sentences)."""

    attributes: tuple[str, ...]

    @classmethod
    def fit(cls, sentences: Sequence[Sentence], min_count: int = 1) -> Vocabulary:
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        counts = Counter(a for s in sentences for token in sentence_attributes(s.tokens) for a in token)
        if BOS not in counts:
            raise ValueError("Vocabulary.fit: no sentences")
        kept = sorted(a for a, n in counts.items() if n >= min_count or a == BOS)
        return cls(tuple(kept))

    def __len__(self) -> int:
        return len(self.attributes)

    def index(self) -> dict[str, int]:
        return {a: i for i, a in enumerate(self.attributes)}


@dataclass(frozen=True)
class FeatureCorpus:
    """Sentences as sparse attribute rows, in the tokens' concatenated order (a CSR matrix).

    ``lengths`` (S,) per sentence; ``tags`` (Σ lengths,) gold tag ids; ``indptr`` (Σ lengths + 1,)
    and ``indices`` (nnz,) the active attribute ids of each token, as in ``scipy.sparse.csr_matrix``;
    ``num_attributes`` the vocabulary size, ``num_tags`` T.
    """

    lengths: np.ndarray
    tags: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    num_attributes: int
    num_tags: int

    def __post_init__(self) -> None:
        if int(self.lengths.sum()) != len(self.tags) or len(self.indptr) != len(self.tags) + 1:
            raise ValueError("FeatureCorpus: lengths, tags and indptr disagree on the number of tokens")
        if (self.lengths < 1).any():
            raise ValueError("FeatureCorpus: every sentence needs at least one token")

    @property
    def num_tokens(self) -> int:
        return len(self.tags)


def featurize(sentences: Sequence[Sentence], vocabulary: Vocabulary, tagset: TagSet) -> FeatureCorpus:
    """The sentences' attribute rows under ``vocabulary`` (unseen attributes dropped)."""
    index = vocabulary.index()
    lengths, tags, rows = [], [], []
    for sentence in sentences:
        lengths.append(len(sentence.tokens))
        tags += tagset.encode(sentence.tags)
        for attributes in sentence_attributes(sentence.tokens):
            rows.append(sorted({index[a] for a in attributes if a in index}))
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.fromiter(itertools.chain.from_iterable(rows), np.int64, count=int(indptr[-1]))
    return FeatureCorpus(
        np.asarray(lengths, np.int64),
        np.asarray(tags, np.int64),
        indptr,
        indices,
        len(vocabulary),
        len(tagset),
    )


def crfsuite_items(sentences: Sequence[Sentence], vocabulary: Vocabulary) -> list[list[dict[str, float]]]:
    """The same attribute rows as CRFsuite item sequences (attribute → 1.0, unseen ones dropped)."""
    kept = set(vocabulary.attributes)
    return [
        [{a: 1.0 for a in attributes if a in kept} for attributes in sentence_attributes(s.tokens)]
        for s in sentences
    ]
