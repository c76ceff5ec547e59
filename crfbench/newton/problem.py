"""What the backends' objectives share: the flat parameter layout, length buckets and the gold
feature counts of a ``FeatureCorpus`` (NumPy, computed once per corpus).

Parameters λ are one flat float64 vector ``[W.ravel(), A.ravel()]``: W (F, T) the emission weights
(a row per attribute), A (T, T) the transition weights ``A[previous, next]``. The objective is the
thesis's Eq. 3.1, ``‖λ‖² / (2σ²) + Σ_i (log Z(xⁱ) − f(yⁱ, xⁱ)ᵀλ)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .features import FeatureCorpus


@dataclass(frozen=True)
class Layout:
    """Where W and A sit in the flat vector."""

    num_attributes: int  # F
    num_tags: int  # T

    @property
    def size(self) -> int:
        return (self.num_attributes + self.num_tags) * self.num_tags

    def split(self, flat):
        """``(W (F, T), A (T, T))`` views of a flat vector (any array type with reshape)."""
        cut = self.num_attributes * self.num_tags
        return flat[:cut].reshape(self.num_attributes, self.num_tags), flat[cut:].reshape(
            self.num_tags, self.num_tags
        )


@dataclass(frozen=True)
class Bucket:
    """Sentences of similar length, padded to the longest (NumPy, int64): ``lengths`` (B,),
    ``width`` N, ``rows`` (nnz,) the flat position ``b·N + t`` of each active attribute and ``cols``
    (nnz,) its attribute id. (The gold tags enter the objective only through ``gold_counts``.)"""

    lengths: np.ndarray
    width: int
    rows: np.ndarray
    cols: np.ndarray

    def mask(self) -> np.ndarray:
        """(B, N) bool, True at the positions within each sentence."""
        return np.arange(self.width) < self.lengths[:, None]


def buckets(corpus: FeatureCorpus, max_tokens: int = 8192) -> list[Bucket]:
    """The corpus's sentences sorted by length and cut into buckets of at most ``max_tokens``
    padded positions (one sentence at least), so padding wastes little."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    starts = np.concatenate([[0], np.cumsum(corpus.lengths)])
    order = np.argsort(corpus.lengths, kind="stable")
    result, chosen = [], []
    for sentence in order:
        longest = corpus.lengths[sentence]  # sorted: the newest is the longest
        if chosen and (len(chosen) + 1) * longest > max_tokens:
            result.append(_bucket(corpus, starts, chosen))
            chosen = []
        chosen.append(sentence)
    result.append(_bucket(corpus, starts, chosen))
    return result


def _bucket(corpus: FeatureCorpus, starts: np.ndarray, sentences: list[int]) -> Bucket:
    lengths = corpus.lengths[sentences]
    width = int(lengths.max())
    rows, cols = [], []
    for b, s in enumerate(sentences):
        for t, token in enumerate(range(starts[s], starts[s + 1])):
            active = corpus.indices[corpus.indptr[token] : corpus.indptr[token + 1]]
            rows.append(np.full(len(active), b * width + t))
            cols.append(active)
    return Bucket(
        lengths, width, np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64)
    )


def gold_counts(corpus: FeatureCorpus) -> np.ndarray:
    """Σ_i f(yⁱ, xⁱ), the gold feature counts as a flat vector of ``Layout``."""
    layout = Layout(corpus.num_attributes, corpus.num_tags)
    flat = np.zeros(layout.size)
    emission, transition = layout.split(flat)
    token_of = np.repeat(np.arange(corpus.num_tokens), np.diff(corpus.indptr))
    np.add.at(emission, (corpus.indices, corpus.tags[token_of]), 1.0)
    ends = np.cumsum(corpus.lengths)
    follows = np.ones(corpus.num_tokens, bool)
    follows[ends[:-1]] = False  # a sentence's first token follows nothing
    follows[0] = False
    nexts = np.flatnonzero(follows)
    np.add.at(transition, (corpus.tags[nexts - 1], corpus.tags[nexts]), 1.0)
    return flat
