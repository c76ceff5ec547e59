"""What the backends' objectives share: the flat parameter layout, length buckets, the gold
feature counts of a ``FeatureCorpus`` (NumPy, computed once per corpus), and ``Objective``, the
bookkeeping around a backend's numerics (pass counts, the sweeps kept for Hv).

Parameters λ are one flat float64 vector ``[W.ravel(), A.ravel()]``: W (F, T) the emission weights
(a row per attribute), A (T, T) the transition weights ``A[previous, next]``. The objective is the
thesis's Eq. 3.1, ``‖λ‖² / (2σ²) + Σ_i (log Z(xⁱ) − f(yⁱ, xⁱ)ᵀλ)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Any

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
    result: list[Bucket] = []
    chosen: list[int] = []
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


class Objective(ABC):
    """Eq. 3.1 on a corpus over flat NumPy float64 vectors: value, gradient, DP and autodiff Hv.

    ``counts`` tallies the passes over the data by kind: ``function`` (forward only),
    ``gradient`` (forward–backward, which also yields the value) and ``hvp``. ``value_and_gradient``
    keeps its sweeps, on which ``hvp`` at the same λ runs (elsewhere it sweeps again first). A
    backend (``torch_objective``, ``jax_objective``) implements the four numerical methods below
    on its own arrays, NumPy in and out.
    """

    def __init__(self, corpus: FeatureCorpus, sigma: float):
        if not sigma > 0:
            raise ValueError(f"sigma must be > 0, got {sigma}")
        self.layout = Layout(corpus.num_attributes, corpus.num_tags)
        self.sigma = float(sigma)
        self.counts: Counter[str] = Counter()
        self._linearized: tuple[np.ndarray, Any] | None = None

    @property
    def size(self) -> int:
        return self.layout.size

    def value(self, x: np.ndarray) -> float:
        """L(λ), one forward pass."""
        self.counts["function"] += 1
        return self._value(x)

    def value_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """L(λ) and ∇L(λ) = λ/σ² + E[f] − f(y), one forward–backward; keeps the sweeps for ``hvp``."""
        self.counts["gradient"] += 1
        value, gradient, sweeps = self._value_gradient_sweeps(x)
        self._linearized = (np.array(x, dtype=np.float64, copy=True), sweeps)
        return value, gradient

    def hvp(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """∇²L(λ)·v by the dynamic program, on the sweeps of the last ``value_and_gradient`` at
        this λ (run again if it was elsewhere)."""
        if self._linearized is None or not np.array_equal(self._linearized[0], x):
            self.value_and_gradient(x)
        if self._linearized is None:  # set by value_and_gradient
            raise RuntimeError("value_and_gradient left no linearization")
        self.counts["hvp"] += 1
        return self._hvp_at(self._linearized[1], v)

    def hvp_autodiff(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """∇²L(λ)·v by forward-over-reverse autodiff of the forward pass (no tangent recursion of
        the dynamic program): the independent check."""
        self.counts["hvp"] += 1
        return self._hvp_autodiff(x, v)

    @abstractmethod
    def _value(self, x: np.ndarray) -> float: ...

    @abstractmethod
    def _value_gradient_sweeps(self, x: np.ndarray) -> tuple[float, np.ndarray, Any]: ...

    @abstractmethod
    def _hvp_at(self, sweeps: Any, v: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _hvp_autodiff(self, x: np.ndarray, v: np.ndarray) -> np.ndarray: ...
