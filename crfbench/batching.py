"""Mini-batches: which sentences go together, and their gold targets as padded tensors."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from .data.types import Sentence, TagSet


def shuffled_batches(count: int, batch_size: int, generator: torch.Generator) -> list[list[int]]:
    """A random partition of ``range(count)`` into batches (training order for one epoch)."""
    order = torch.randperm(count, generator=generator).tolist()
    return [order[i : i + batch_size] for i in range(0, count, batch_size)]


def length_pooled_batches(
    lengths: Sequence[int], batch_size: int, pool: int | None, generator: torch.Generator
) -> list[list[int]]:
    """Training batches of similar lengths, still random: the sentences shuffled, cut into pools of
    ``pool`` batches, each pool sorted by length (ties stay in random order) and cut into batches,
    and the batches shuffled. The sequential methods and a BiLSTM pay for a batch's longest
    sentence, so uniformly random batches of varied lengths cost a factor in padding (a bucketing
    iterator's trade-off: less padding, batches a little less mixed). ``pool`` None: uniformly
    random batches, as :func:`shuffled_batches` makes them from the same generator state."""
    batches = shuffled_batches(len(lengths), batch_size, generator)
    if pool is None:
        return batches
    order = [index for batch in batches for index in batch]
    span = batch_size * pool
    pooled = []
    for start in range(0, len(order), span):
        chunk = sorted(order[start : start + span], key=lengths.__getitem__)
        pooled += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [pooled[i] for i in torch.randperm(len(pooled), generator=generator).tolist()]


def length_sorted_batches(sentences: Sequence[Sentence], batch_size: int) -> list[list[int]]:
    """Batches of similar lengths (less padding) for evaluation; results are put back in order."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].tokens))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def gold_tags(sentences: Sequence[Sentence], tagset: TagSet) -> Tensor:
    """Gold tag ids (B, N) int64, -1 on padding."""
    width = max(len(s.tags) for s in sentences)
    tags = torch.full((len(sentences), width), -1, dtype=torch.long)
    for row, sentence in enumerate(sentences):
        tags[row, : len(sentence.tags)] = torch.tensor(tagset.encode(sentence.tags))
    return tags


def allowed_tags(sentences: Sequence[Sentence], tagset: TagSet) -> Tensor:
    """Partial-annotation mask (B, N, T) bool; a fully annotated sentence allows its gold tag only."""
    width = max(len(s.tags) for s in sentences)
    allowed = torch.zeros((len(sentences), width, len(tagset)), dtype=torch.bool)
    for row, sentence in enumerate(sentences):
        per_token = sentence.allowed or tuple(frozenset([tag]) for tag in sentence.tags)
        for position, tags in enumerate(per_token):
            allowed[row, position, tagset.encode(sorted(tags))] = True
    return allowed


def targets(partial: bool, sentences: Sequence[Sentence], tagset: TagSet) -> Tensor:
    """What a loss compares with: the ``allowed`` mask for a partial-label loss, else gold tags."""
    return (allowed_tags if partial else gold_tags)(sentences, tagset)


def select(sentences: Sequence[Sentence], indices: Sequence[int]) -> list[Sentence]:
    return [sentences[i] for i in indices]
