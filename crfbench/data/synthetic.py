"""A synthetic tagging task sampled from a random hidden Markov model: quick, license-free, and solvable.

With ``scheme="bies"`` the tags are BIES × labels (``B-L0``, ..., ``S-L3``) under the BIES constraints,
like segmentation (task ``"seg"``); with ``scheme="none"`` they are the bare labels, unconstrained
(task ``"pos"``). The HMM's transitions are zero where the tag set forbids them, and each sequence is
drawn from the HMM conditioned on its length and on ending in an allowed end tag, so every sequence
is valid. Each tag puts most of its emission mass on a few preferred word types (``w0`` ... ``w{vocab-1}``),
so a model that reads the words clearly beats chance.
"""

from __future__ import annotations

from typing import Literal, cast

import numpy as np

from . import schemes
from .types import Dataset, Sentence, TagSet

DEFAULTS: dict[str, object] = {
    "seed": 0,
    "labels": 4,
    "scheme": "bies",
    "vocab": 50,
    "train": 400,
    "dev": 100,
    "test": 100,
    "min_length": 1,
    "max_length": 20,
}
PREFERRED_WORDS = 3  # word types each tag prefers
PREFERRED_MASS = 0.8  # emission mass on them; the rest is spread uniformly over the vocabulary


def generate(
    seed: int = 0,
    labels: int = 4,
    scheme: str = "bies",
    vocab: int = 50,
    train: int = 400,
    dev: int = 100,
    test: int = 100,
    min_length: int = 1,
    max_length: int = 20,
    name: str = "synthetic",
) -> Dataset:
    """Sample the three splits (sentence counts ``train``/``dev``/``test``) of the HMM given by ``seed``.

    The model and each split have their own random stream, so changing one split's size leaves the
    model and the other splits unchanged. Lengths are uniform in ``[min_length, max_length]``.
    """
    options: dict[str, object] = {
        "seed": seed,
        "labels": labels,
        "scheme": scheme,
        "vocab": vocab,
        "train": train,
        "dev": dev,
        "test": test,
        "min_length": min_length,
        "max_length": max_length,
    }
    _check(options)
    names = [f"L{k}" for k in range(labels)]
    tagset = schemes.bies_tagset(names) if scheme == "bies" else TagSet.unconstrained(names)
    model_stream, *split_streams = np.random.SeedSequence(seed).spawn(4)
    hmm = _Hmm(tagset, vocab, np.random.default_rng(model_stream))
    splits = [
        tuple(hmm.sample(rng, int(rng.integers(min_length, max_length + 1))) for _ in range(count))
        for count, rng in zip((train, dev, test), map(np.random.default_rng, split_streams), strict=True)
    ]
    task: Literal["seg", "pos"] = "seg" if scheme == "bies" else "pos"
    train_split, dev_split, test_split = splits
    return Dataset(
        name,
        task,
        tagset,
        train_split,
        dev_split,
        test_split,
        protocol="standard",
        sources={},
        options=options,
    )


def _check(options: dict[str, object]) -> None:
    if options["scheme"] not in ("bies", "none"):
        raise ValueError(f"synthetic: option scheme must be 'bies' or 'none', got {options['scheme']!r}")
    minimum = {"labels": 1, "vocab": 1, "train": 0, "dev": 0, "test": 0, "min_length": 1, "max_length": 1}
    for key, least in minimum.items():
        value = options[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"synthetic: option {key} must be an integer >= {least}, got {value!r}")
    if not isinstance(options["seed"], int) or isinstance(options["seed"], bool):
        raise ValueError(f"synthetic: option seed must be an integer, got {options['seed']!r}")
    if cast(int, options["min_length"]) > cast(int, options["max_length"]):
        raise ValueError("synthetic: option min_length must not exceed max_length")


class _Hmm:
    """Start, transition and emission distributions drawn at random, zero where the tag set forbids."""

    def __init__(self, tagset: TagSet, vocab: int, rng: np.random.Generator) -> None:
        size = len(tagset)
        self.tagset = tagset
        self.start = _normalise(rng.dirichlet(np.ones(size)) * tagset.start)
        self.transitions = _normalise(rng.dirichlet(np.ones(size), size) * tagset.transitions)
        emissions = np.full((size, vocab), (1 - PREFERRED_MASS) / vocab)
        for tag in range(size):
            preferred = rng.choice(vocab, min(PREFERRED_WORDS, vocab), replace=False)
            emissions[tag, preferred] += PREFERRED_MASS * rng.dirichlet(np.ones(len(preferred)))
        self.emissions = emissions
        self._to_end = [tagset.end.astype(float)]  # [r][i]: P(valid end r steps after tag i), rescaled

    def sample(self, rng: np.random.Generator, length: int) -> Sentence:
        """A sequence of ``length`` tokens from the HMM conditioned on ending in an allowed end tag."""
        while len(self._to_end) < length:
            ahead = self.transitions @ self._to_end[-1]
            self._to_end.append(ahead / ahead.max())
        tags = [_draw(self.start * self._to_end[length - 1], rng)]
        for remaining in range(length - 2, -1, -1):
            tags.append(_draw(self.transitions[tags[-1]] * self._to_end[remaining], rng))
        words = [_draw(self.emissions[tag], rng) for tag in tags]
        return Sentence(tuple(f"w{word}" for word in words), tuple(self.tagset.decode(tags)))


def _normalise(weights: np.ndarray) -> np.ndarray:
    return weights / weights.sum(axis=-1, keepdims=True)


def _draw(weights: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn with probability proportional to ``weights`` (never one of weight zero)."""
    cdf = np.cumsum(weights)
    index = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return index if index < len(cdf) else int(np.flatnonzero(weights)[-1])  # u * total rounded up to total
