"""Checks on the real data mirror (skipped without it): sizes, constraints, partial annotation.

The mirror is ``$CRFBENCH_DATA``, else ``../shared/data`` beside the repository. These tests print
nothing of the corpora: only counts are compared.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from pathlib import Path

import pytest

from crfbench import data

from .corpora import kept_type

MIRROR = Path(
    os.environ.get("CRFBENCH_DATA") or Path(__file__).resolve().parents[3].parent / "shared" / "data"
)


def mirror_has(relative: str) -> None:
    if not (MIRROR / relative).exists():
        pytest.skip(f"data mirror without {relative} at {MIRROR}")


def invalid_count(tagset: data.TagSet, tag_sequences: list[tuple[str, ...]]) -> int:
    """How many tag sequences break the constraints (tags only: a failure shows no corpus text)."""
    return sum(not tagset.is_valid(tagset.encode(tags)) for tags in tag_sequences)


def tags_of(*splits: tuple[data.Sentence, ...]) -> list[tuple[str, ...]]:
    return [item.tags for split in splits for item in split]


def sizes(*splits: tuple[data.Sentence, ...]) -> tuple[int, ...]:
    return tuple(len(split) for split in splits)


@pytest.mark.parametrize(
    ("name", "folder", "characters", "sentences"),
    [("ud-seg-zh", "UD_Chinese-GSD", 20_000, 500), ("ud-seg-ja", "UD_Japanese-GSD", 20_132, 507)],
)
def test_seg_dev_gold_sequences_respect_the_constraints(name, folder, characters, sentences):
    mirror_has(f"ud-2.15/{folder}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = data.load(name, MIRROR, download=False)
    substitute = dataset.protocol.startswith("substitute")
    warned = any(issubclass(warning.category, data.SubstituteProtocolWarning) for warning in caught)
    assert substitute == warned
    dev = tags_of(dataset.train, dataset.dev) if substitute else tags_of(dataset.dev)
    dev_characters = sum(map(len, dev))
    assert (len(dev), dev_characters) == (sentences, characters)
    assert invalid_count(dataset.tagset, dev) == 0
    assert invalid_count(dataset.tagset, tags_of(dataset.test)) == 0


def test_conll03_sizes_and_constraints():
    mirror_has("conll2003/eng.testa")
    dataset = data.load("conll03-ner", MIRROR, download=False)
    counts = sizes(dataset.train, dataset.dev, dataset.test)
    assert counts == (14_041, 3_250, 3_453)
    dev_tokens = sum(len(tags) for tags in tags_of(dataset.dev))
    assert dev_tokens == 51_362
    assert invalid_count(dataset.tagset, tags_of(dataset.train, dataset.dev)) == 0
    mentions = Counter(label for tags in tags_of(dataset.dev) for _, _, label in data.bio_spans(tags))
    assert mentions == {"PER": 1842, "LOC": 1837, "ORG": 1341, "MISC": 922}


def test_conll03_partial_parts():
    mirror_has("conll2003/eng.train")
    dataset = data.load("conll03-ner-partial", MIRROR, download=False)
    kept = Counter(kept_type(item.tags, item.allowed) for item in dataset.train)
    part_sizes = sorted(kept.values())
    assert part_sizes == [3510, 3510, 3510, 3511]


def test_pos_en_standard_splits():
    mirror_has("ud-2.15/UD_English-EWT/en_ewt-ud-dev.conllu")
    dataset = data.load("ud-pos-en", MIRROR, download=False, tags="xpos")
    assert dataset.protocol == "standard"
    counts = sizes(dataset.train, dataset.dev, dataset.test)
    assert counts == (12_544, 2_001, 2_077)
    assert len(dataset.tagset) == 49
