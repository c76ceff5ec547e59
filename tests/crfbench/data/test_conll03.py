"""CoNLL-2003 reader on made-up column files, and the partial annotation of its train split."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from crfbench import data
from crfbench.data import conll03, partial

from .corpora import CONLL03, DataDirFixture, kept_type

TYPES = conll03.TYPES

# Made-up words; NER column in IOB1 (I- opens a mention, B- only between two adjacent ones).
COLUMNS_FILE = """-DOCSTART- -X- -X- O

Zorbia NNP B-NP I-LOC
flims VBZ B-VP O
Quux NNP B-NP I-PER
Blatz NNP I-NP I-PER
Wozzle NNP I-NP B-PER
. . O O

Glorp NNP B-NP I-ORG
Inc NNP I-NP I-ORG
Fnordic JJ B-NP I-MISC

-DOCSTART- -X- -X- O

zib NN B-NP O
"""


def columns_fixture(tmp_path, train: str = COLUMNS_FILE) -> DataDirFixture:
    fixture = DataDirFixture(tmp_path)
    fixture.add(CONLL03["train"], train)
    fixture.add(CONLL03["dev"], COLUMNS_FILE)
    fixture.add(CONLL03["test"], COLUMNS_FILE)
    return fixture


def test_reader_splits_sentences_and_documents_and_converts_iob1(tmp_path):
    dataset = columns_fixture(tmp_path).load("conll03-ner")
    assert dataset.task == "ner" and dataset.protocol == "standard"
    assert [item.tokens for item in dataset.train] == [
        ("Zorbia", "flims", "Quux", "Blatz", "Wozzle", "."),
        ("Glorp", "Inc", "Fnordic"),
        ("zib",),
    ]
    assert [item.tags for item in dataset.train] == [
        ("B-LOC", "O", "B-PER", "I-PER", "B-PER", "O"),
        ("B-ORG", "I-ORG", "B-MISC"),
        ("O",),
    ]
    assert dataset.tagset.tags == (
        "O",
        "B-LOC",
        "I-LOC",
        "B-MISC",
        "I-MISC",
        "B-ORG",
        "I-ORG",
        "B-PER",
        "I-PER",
    )
    assert set(dataset.sources) == set(CONLL03.values())
    for item in dataset.train + dataset.dev + dataset.test:
        assert dataset.tagset.is_valid(dataset.tagset.encode(item.tags))
        assert item.allowed is None


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("Zorbia NNP I-LOC", "expected 4 space-separated columns (TOKEN POS CHUNK NER), found 3"),
        ("Zorbia NNP B-NP I-LOC extra", "found 5"),
        (
            "Zorbia NNP B-NP I-FOO",
            "expected an entity tag O, B-X or I-X with X one of LOC, MISC, ORG, PER, found 'I-FOO'",
        ),
        ("Zorbia NNP B-NP S-PER", "found 'S-PER'"),
        ("Zorbia NNP B-NP PER", "found 'PER'"),
    ],
)
def test_malformed_column_file_names_file_and_line(tmp_path, bad_line, message):
    lines = ["-DOCSTART- -X- -X- O", "", "zib NN B-NP O", bad_line, ""]
    fixture = columns_fixture(tmp_path, train="\n".join(lines))
    path = fixture.root / CONLL03["train"]
    with pytest.raises(ValueError, match=re.escape(f"{path}:4: ") + ".*" + re.escape(message)):
        fixture.load("conll03-ner")


def test_missing_file_explains_the_licence_and_where_to_put_it(tmp_path):
    fixture = DataDirFixture(tmp_path)
    fixture.add(CONLL03["train"], COLUMNS_FILE)
    with pytest.raises(
        FileNotFoundError, match=r"eng.testa is missing. CoNLL-2003 is licensed Reuters"
    ) as error:
        fixture.load("conll03-ner", download=True)
    assert str(fixture.root / "conll2003") in str(error.value)


def random_bio_sentences(count: int, rng: np.random.Generator) -> list[data.Sentence]:
    """Valid BIO sentences with random mentions of the four types."""
    sentences = []
    for _ in range(count):
        tags: list[str] = []
        while len(tags) < rng.integers(1, 12):
            if rng.random() < 0.5:
                tags.append("O")
            else:
                label = TYPES[rng.integers(4)]
                tags += [f"B-{label}"] + [f"I-{label}"] * int(rng.integers(0, 3))
        sentences.append(data.Sentence(tuple(f"w{i}" for i in range(len(tags))), tuple(tags)))
    return sentences


@pytest.mark.parametrize("count", [41, 400])
def test_partial_masks(count):
    sentences = random_bio_sentences(count, np.random.default_rng(count))
    annotated = partial.partially_annotate(sentences, TYPES, seed=3)
    sizes = Counter()
    for original, item in zip(sentences, annotated, strict=True):
        assert item.tokens == original.tokens and item.tags == original.tags
        kept = kept_type(item.tags, item.allowed)
        sizes[kept] += 1
        others = {"O"} | {f"{prefix}-{label}" for label in TYPES if label != kept for prefix in "BI"}
        for tag, allowed in zip(item.tags, item.allowed, strict=True):
            assert tag in allowed
            if tag != "O" and tag[2:] == kept:
                assert allowed == {tag}
            else:
                assert allowed == others  # never the kept type, everything else
    assert set(sizes) == set(TYPES)
    assert max(sizes.values()) - min(sizes.values()) <= 1


def test_partial_parts_depend_on_the_seed_only():
    assert np.array_equal(partial.assign_parts(100, 4, 0), partial.assign_parts(100, 4, 0))
    assert not np.array_equal(partial.assign_parts(100, 4, 0), partial.assign_parts(100, 4, 1))
    assert sorted(Counter(partial.assign_parts(10, 4, 0).tolist()).values()) == [2, 2, 3, 3]


def test_partial_dataset_annotates_train_only(tmp_path):
    dataset = columns_fixture(tmp_path, train=COLUMNS_FILE * 3).load("conll03-ner-partial", partial_seed=5)
    assert dataset.options == {"partial_seed": 5}
    assert all(item.allowed is not None for item in dataset.train)
    assert all(item.allowed is None for item in dataset.dev + dataset.test)
    assert len(dataset.train) == 9 and len(dataset.tagset) == 9


def test_partial_seed_must_be_an_integer(tmp_path):
    with pytest.raises(ValueError, match="partial_seed must be an integer"):
        columns_fixture(tmp_path).load("conll03-ner-partial", partial_seed="zero")


def test_types_are_sorted():
    assert conll03.TYPES == ("LOC", "MISC", "ORG", "PER")
