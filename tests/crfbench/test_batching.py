"""Training batches: length pooling partitions the sentences like random batching, cuts padding,
stays random from epoch to epoch and seed to seed, and is random batching when turned off."""

from __future__ import annotations

import random

import pytest
import torch

from crfbench.batching import length_pooled_batches, shuffled_batches
from crfbench.config import RunConfig
from crfbench.parsing.run import ParseConfig


def _lengths(count: int, seed: int = 0) -> list[int]:
    draw = random.Random(seed)
    return [draw.randint(1, 60) for _ in range(count)]


def _padded(lengths: list[int], batches: list[list[int]]) -> int:
    return sum(max(lengths[i] for i in batch) * len(batch) for batch in batches)


@pytest.mark.parametrize(("count", "batch_size", "pool"), [(1, 4, 3), (7, 3, 1), (100, 8, 2), (257, 16, 50)])
def test_pooled_batches_partition_the_sentences(count: int, batch_size: int, pool: int) -> None:
    lengths = _lengths(count)
    batches = length_pooled_batches(lengths, batch_size, pool, torch.Generator().manual_seed(0))
    assert sorted(i for batch in batches for i in batch) == list(range(count))
    assert all(1 <= len(batch) <= batch_size for batch in batches)
    assert len(batches) == -(-count // batch_size)  # full pools cut evenly: as many batches as random


def test_within_a_pool_the_batches_are_sorted_by_length_and_padding_falls() -> None:
    lengths = _lengths(640)
    pooled = length_pooled_batches(lengths, 16, 40, torch.Generator().manual_seed(3))  # one pool
    for batch in pooled:  # each batch a contiguous slice of the sorted pool: no length between
        low, high = min(lengths[i] for i in batch), max(lengths[i] for i in batch)
        outside = [i for other in pooled if other is not batch for i in other]
        assert not any(low < lengths[i] < high for i in outside)
    random_batches = shuffled_batches(640, 16, torch.Generator().manual_seed(3))
    assert _padded(lengths, pooled) < 0.7 * _padded(lengths, random_batches)


def test_pooling_is_random_across_epochs_and_seeds_and_repeatable_from_a_generator_state() -> None:
    lengths = _lengths(300)
    generator = torch.Generator().manual_seed(0)
    first, second = (length_pooled_batches(lengths, 8, 5, generator) for _ in range(2))
    other_seed = length_pooled_batches(lengths, 8, 5, torch.Generator().manual_seed(1))
    assert first != second and first != other_seed
    assert first == length_pooled_batches(lengths, 8, 5, torch.Generator().manual_seed(0))


def test_no_pool_is_uniformly_random_batching() -> None:
    lengths = _lengths(50)
    assert length_pooled_batches(lengths, 8, None, torch.Generator().manual_seed(5)) == shuffled_batches(
        50, 8, torch.Generator().manual_seed(5)
    )


@pytest.mark.parametrize("pool", [0, -3, 2.5, True])
def test_a_bad_length_pool_names_the_setting(pool: object) -> None:
    with pytest.raises((TypeError, ValueError), match="length_pool"):
        RunConfig(dataset="conll03-ner", length_pool=pool)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="length-pool"):  # the parsers' settings, as their CLI spells them
        ParseConfig("vi", "crf", length_pool=pool)  # type: ignore[arg-type]
