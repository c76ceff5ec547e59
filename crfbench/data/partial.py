"""Partial annotation of a BIO training set, one entity type per part (Huang et al., 2019).

The sentences are split into as many parts as there are entity types (a random permutation, cut into
parts whose sizes differ by at most one). In the part of type X only X is annotated: a token whose
gold tag is of type X allows just that tag; every other token allows O and the B-/I- tags of the
other types, never X. The gold tag is always allowed, and ``Sentence.tags`` keeps it (for
diagnostics: a partial-label loss must use ``Sentence.allowed`` only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .types import Sentence


def assign_parts(count: int, parts: int, seed: int) -> np.ndarray:
    """The part (0 .. parts-1) of each of ``count`` items: a seeded permutation cut into equal parts."""
    order = np.random.default_rng(seed).permutation(count)
    part_of = np.empty(count, dtype=np.int64)
    for part, members in enumerate(np.array_split(order, parts)):
        part_of[members] = part
    return part_of


def partially_annotate(
    sentences: Sequence[Sentence], types: Sequence[str], seed: int
) -> tuple[Sentence, ...]:
    """The sentences with ``allowed`` set: sentence in part k annotated with ``types[k]`` only."""
    tags = ("O", *(f"{prefix}-{label}" for label in types for prefix in "BI"))
    tables = []  # per part: tag -> allowed set
    for kept in types:
        others = frozenset(tag for tag in tags if tag == "O" or tag[2:] != kept)
        tables.append({tag: others if tag in others else frozenset({tag}) for tag in tags})
    part_of = assign_parts(len(sentences), len(types), seed)
    annotated = []
    for sentence, part in zip(sentences, part_of, strict=True):
        unknown = set(sentence.tags) - tables[part].keys()
        if unknown:
            raise ValueError(f"partial annotation: tags {sorted(unknown)} are not BIO tags of {list(types)}")
        annotated.append(replace(sentence, allowed=tuple(tables[part][tag] for tag in sentence.tags)))
    return tuple(annotated)
