"""The synthetic HMM task: reproducible, valid under its constraints, and learnable."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from crfbench import data


def splits(dataset: data.Dataset) -> tuple:
    return dataset.tagset.tags, dataset.train, dataset.dev, dataset.test


def test_same_seed_same_data_other_seed_other_data():
    assert splits(data.load("synthetic", seed=7)) == splits(data.load("synthetic", seed=7))
    assert data.load("synthetic", seed=7).train != data.load("synthetic", seed=8).train


def test_defaults():
    dataset = data.load("synthetic")
    assert (len(dataset.train), len(dataset.dev), len(dataset.test)) == (400, 100, 100)
    assert dataset.task == "seg" and dataset.protocol == "standard" and dataset.sources == {}
    assert len(dataset.tagset) == 16 and dataset.tagset.constrained
    assert dataset.options == {
        "seed": 0, "labels": 4, "scheme": "bies", "vocab": 50, "train": 400, "dev": 100, "test": 100,
        "min_length": 1, "max_length": 20,
    }  # fmt: skip
    tokens = {token for item in dataset.train for token in item.tokens}
    assert tokens <= {f"w{i}" for i in range(50)}


@pytest.mark.parametrize("scheme", ["bies", "none"])
def test_every_sequence_is_valid_and_within_the_length_bounds(scheme):
    dataset = data.load("synthetic", scheme=scheme, labels=3, min_length=2, max_length=6, train=300)
    lengths = Counter()
    for item in dataset.train + dataset.dev + dataset.test:
        assert dataset.tagset.is_valid(dataset.tagset.encode(item.tags))
        lengths[len(item.tokens)] += 1
    assert set(lengths) == set(range(2, 7))
    if scheme == "bies":
        assert {tag[0] for item in dataset.train for tag in item.tags} == set("BIES")
    else:
        assert dataset.tagset.tags == ("L0", "L1", "L2") and not dataset.tagset.constrained


def test_length_one_sequences_are_single_token_words():
    dataset = data.load("synthetic", min_length=1, max_length=1, train=50)
    assert all(item.tags[0].startswith("S-") for item in dataset.train)


def test_changing_one_split_size_leaves_the_others():
    small, large = data.load("synthetic", train=10), data.load("synthetic", train=50)
    assert small.dev == large.dev and small.test == large.test and small.train == large.train[:10]


@pytest.mark.parametrize("scheme", ["bies", "none"])
def test_words_predict_tags_far_better_than_chance(scheme):
    """Tagging each word with its most frequent train tag beats the best constant tag by a wide margin."""
    dataset = data.load("synthetic", scheme=scheme)
    by_word: dict[str, Counter] = defaultdict(Counter)
    for item in dataset.train:
        for token, tag in zip(item.tokens, item.tags, strict=True):
            by_word[token][tag] += 1
    majority = Counter(tag for item in dataset.train for tag in item.tags).most_common(1)[0][0]
    pairs = [pair for item in dataset.test for pair in zip(item.tokens, item.tags, strict=True)]
    guess = {word: counts.most_common(1)[0][0] for word, counts in by_word.items()}
    accuracy = sum(guess.get(token, majority) == tag for token, tag in pairs) / len(pairs)
    baseline = sum(majority == tag for _, tag in pairs) / len(pairs)
    assert accuracy > baseline + 0.3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"scheme": "bio"}, "scheme must be 'bies' or 'none'"),
        ({"labels": 0}, "labels must be an integer >= 1"),
        ({"train": -1}, "train must be an integer >= 0"),
        ({"vocab": 2.5}, "vocab must be an integer"),
        ({"seed": "x"}, "seed must be an integer"),
        ({"min_length": 5, "max_length": 4}, "min_length must not exceed max_length"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        data.load("synthetic", **options)
