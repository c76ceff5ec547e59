"""The shapes every dataset takes: sentences, tag sets with their constraints, and splits.

These are plain immutable records so that readers, encoders, training and metrics agree on one
vocabulary without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Task = Literal["pos", "seg", "ner"]


@dataclass(frozen=True)
class Sentence:
    """One labelled sequence.

    ``tokens`` are the units the model tags (words for POS and NER, characters for segmentation);
    ``tags`` has one gold tag per token. ``allowed`` is a partial annotation: for each token the
    tags it permits (the gold tag among them); ``None`` means fully annotated.
    """

    tokens: tuple[str, ...]
    tags: tuple[str, ...]
    allowed: tuple[frozenset[str], ...] | None = None

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.tags):
            raise ValueError(f"Sentence: {len(self.tokens)} tokens but {len(self.tags)} tags")
        if self.allowed is not None and len(self.allowed) != len(self.tokens):
            raise ValueError(f"Sentence: {len(self.tokens)} tokens but {len(self.allowed)} allowed sets")


@dataclass(frozen=True, eq=False)  # identity equality: numpy fields have no truth value
class TagSet:
    """An ordered tag inventory and the structural constraints between tags.

    ``transitions[a, b]`` says whether tag ``b`` may follow tag ``a``; ``start``/``end`` whether a
    tag may open/close a sequence. An unconstrained tag set allows everything.
    """

    tags: tuple[str, ...]
    transitions: np.ndarray  # (T, T) bool
    start: np.ndarray  # (T,) bool
    end: np.ndarray  # (T,) bool
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        size = len(self.tags)
        if len(set(self.tags)) != size:
            raise ValueError("TagSet: tags must be distinct")
        if self.transitions.shape != (size, size) or self.start.shape != (size,) or self.end.shape != (size,):
            raise ValueError(f"TagSet: constraint shapes do not match {size} tags")
        object.__setattr__(self, "_index", {tag: i for i, tag in enumerate(self.tags)})

    @classmethod
    def unconstrained(cls, tags: Sequence[str]) -> TagSet:
        size = len(tags)
        return cls(tuple(tags), np.ones((size, size), bool), np.ones(size, bool), np.ones(size, bool))

    def __len__(self) -> int:
        return len(self.tags)

    @property
    def constrained(self) -> bool:
        return not (self.transitions.all() and self.start.all() and self.end.all())

    def index(self, tag: str) -> int:
        try:
            return self._index[tag]
        except KeyError:
            raise ValueError(f"unknown tag {tag!r}; the tag set has {len(self)} tags") from None

    def encode(self, tags: Sequence[str]) -> list[int]:
        return [self.index(tag) for tag in tags]

    def decode(self, ids: Sequence[int]) -> list[str]:
        return [self.tags[i] for i in ids]

    def is_valid(self, ids: Sequence[int]) -> bool:
        """Whether a tag-id sequence respects start, transition and end constraints."""
        if len(ids) == 0:
            return True
        array = np.asarray(ids)
        return bool(
            self.start[array[0]] and self.end[array[-1]] and self.transitions[array[:-1], array[1:]].all()
        )

    def score_masks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Constraints as additive scores: 0 where allowed, -inf where forbidden (float64)."""
        as_scores = lambda allowed: np.where(allowed, 0.0, -np.inf)  # noqa: E731
        return as_scores(self.transitions), as_scores(self.start), as_scores(self.end)


@dataclass(frozen=True, eq=False)
class Dataset:
    """A task's three splits, its tag set and how the splits were made.

    ``protocol`` is ``"standard"`` for the official splits, otherwise a short description of the
    substitute (e.g. ``"substitute: train = dev[:90%], dev = dev[90%:], test = test"``); every
    result row carries it. ``sources`` maps each file read to its SHA-256.
    """

    name: str
    task: Task
    tagset: TagSet
    train: tuple[Sentence, ...]
    dev: tuple[Sentence, ...]
    test: tuple[Sentence, ...]
    protocol: str
    sources: dict[str, str]
    options: dict[str, object] = field(default_factory=dict)
