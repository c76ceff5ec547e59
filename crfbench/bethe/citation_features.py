"""The citation experiment's input (:mod:`crfbench.bethe.citation`): each token as hashed sparse
features (its word, shape, affixes, flags, position and neighbours), a split as tensors of bucket
ids, and minibatches of citations of similar length."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..data.citation import Citation, LabelScheme

_SHAPE_RUNS = re.compile(r"(.)\1{2,}")
_YEAR = re.compile(r"\(?(19|20)\d\d\)?[.,]?")
_INITIAL = re.compile(r"[A-Z]\.")


def shape(word: str) -> str:
    """Word shape: letters → X/x, digits → 9, other characters kept, runs longer than 2 cut to 2
    (``Phys.`` → ``Xxx.``, ``1979`` → ``99``)."""
    mapped = "".join("X" if c.isupper() else "x" if c.isalpha() else "9" if c.isdigit() else c for c in word)
    return _SHAPE_RUNS.sub(r"\1\1", mapped)


def _word_features(word: str) -> list[str]:
    """The features of the word itself (:func:`token_features`)."""
    lower = word.lower()
    return [
        f"w={lower}",
        f"shape={shape(word)}",
        *(f"p{k}={lower[:k]}" for k in (1, 2, 3)),
        *(f"s{k}={lower[-k:]}" for k in (1, 2, 3)),
        f"digits={word.isdigit()}:{any(c.isdigit() for c in word)}:{bool(_YEAR.fullmatch(word))}",
        f"punct={all(not c.isalnum() for c in word)}",
        f"initial={bool(_INITIAL.fullmatch(word))}",
        f"case={word[:1].isupper()}:{word.isupper()}",
        f"length={min(len(word), 8)}",
    ]


def token_features(tokens: Sequence[str]) -> list[list[str]]:
    """The same number of feature strings for every token: bias, lowercased word, shape, prefixes and
    suffixes of 1–3 characters, digit flags (all digits, has a digit, looks like a year), all
    punctuation, initial (``J.``), case, length, the position in the citation in tenths, and the
    neighbours' words and shapes at ±1 (``<s>``/``</s>`` past the ends)."""
    count = len(tokens)
    own = [_word_features(word) for word in tokens]
    rows = []
    for i in range(count):
        before = tokens[i - 1] if i > 0 else "<s>"
        after = tokens[i + 1] if i + 1 < count else "</s>"
        rows.append(
            [
                "bias",
                *own[i],
                f"position={10 * i // count}",
                f"w-1={before.lower()}",
                f"w+1={after.lower()}",
                f"shape-1={shape(before)}",
                f"shape+1={shape(after)}",
            ]
        )
    return rows


def hashed(feature: str, buckets: int) -> int:
    """A feature's bucket in 1..buckets-1 (CRC-32, stable across runs; 0 is padding)."""
    return 1 + zlib.crc32(feature.encode("utf-8")) % (buckets - 1)


@dataclass(frozen=True)
class Encoded:
    """A split as tensors: ``features`` (C, N, F) bucket ids (0 on padding), ``lengths`` (C,),
    ``tags`` (C, N) tag ids (-1 on padding), ``gold`` the label strings."""

    features: torch.Tensor
    lengths: torch.Tensor
    tags: torch.Tensor
    gold: tuple[tuple[str, ...], ...]


def encode(citations: Sequence[Citation], scheme: LabelScheme, buckets: int) -> Encoded:
    """The citations' hashed features and tag ids under ``scheme``."""
    index = {tag: i for i, tag in enumerate(scheme.tags)}
    gold = tuple(scheme.labels(citation) for citation in citations)
    rows = [[[hashed(f, buckets) for f in token] for token in token_features(c.tokens)] for c in citations]
    length, width = max(len(row) for row in rows), len(rows[0][0])
    features = torch.zeros(len(rows), length, width, dtype=torch.int64)
    tags = torch.full((len(rows), length), -1, dtype=torch.int64)
    for c, (row, labels) in enumerate(zip(rows, gold, strict=True)):
        features[c, : len(row)] = torch.tensor(row)
        tags[c, : len(row)] = torch.tensor([index[label] for label in labels])
    lengths = torch.tensor([len(row) for row in rows], dtype=torch.int64)
    return Encoded(features, lengths, tags, gold)


#: A minibatch: the citations' rows in the split (B,), features (B, N, F), lengths (B,), tags (B, N).
Batch = tuple[np.ndarray, torch.Tensor, torch.Tensor, torch.Tensor]


def batches(data: Encoded, size: int, order: np.random.Generator | None = None) -> Iterator[Batch]:
    """Minibatches of citations of similar length, cut to their longest: sorted by length, cut
    into ``size``-citation batches, and the batches shuffled by ``order`` (None: in length order)."""
    ranked = np.argsort(data.lengths.numpy(), kind="stable")
    groups = [ranked[i : i + size] for i in range(0, len(ranked), size)]
    if order is not None:
        groups = [groups[i] for i in order.permutation(len(groups))]
    for group in groups:
        rows = np.sort(group)
        chosen = torch.from_numpy(rows)
        length = int(data.lengths[chosen].max())
        yield rows, data.features[chosen, :length], data.lengths[chosen], data.tags[chosen, :length]
