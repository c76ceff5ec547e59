"""The NER attributes, the vocabulary and the sparse corpus they make."""

from __future__ import annotations

import pytest

from crfbench.data.types import Sentence, TagSet
from crfbench.newton.features import (
    BOS,
    Vocabulary,
    crfsuite_items,
    featurize,
    sentence_attributes,
    shape,
)

TAGS = TagSet.unconstrained(("O", "B-PER", "I-PER"))
SENTENCES = [
    Sentence(("Wolff", ",", "a", "journalist"), ("B-PER", "O", "O", "O")),
    Sentence(("Del", "Bosque"), ("B-PER", "I-PER")),
    Sentence(("Madrid",), ("O",)),
]


@pytest.mark.parametrize(
    "word,expected", [("Wolff", "Xx"), ("U.S.", "X.X."), ("1996-08-22", "d-d-d"), ("iPhone", "xXx"), ("", "")]
)
def test_shape_collapses_runs(word, expected):
    assert shape(word) == expected


def test_attributes_mark_the_start_state_context_and_flags():
    first, middle, last = (sentence_attributes(SENTENCES[0].tokens)[t] for t in (0, 1, 3))
    assert (
        BOS in first
        and "EOS" not in first
        and "w+1=," in first
        and not any(a.startswith("w-1") for a in first)
    )
    assert "title" in first and "s3=lff" in first and "p1=W" in first
    assert BOS not in middle and "w-1=wolff" in middle and "w+1=a" in middle
    assert "EOS" in last and not any(a.startswith("w+1") for a in last)
    assert {BOS, "EOS"} <= set(sentence_attributes(SENTENCES[2].tokens)[0])


def test_vocabulary_keeps_attributes_by_count_and_always_bos():
    everything = Vocabulary.fit(SENTENCES)
    frequent = Vocabulary.fit(SENTENCES, min_count=2)
    assert set(frequent.attributes) < set(everything.attributes)
    assert (
        BOS in frequent.attributes and "bias" in frequent.attributes and "w=wolff" not in frequent.attributes
    )
    with pytest.raises(ValueError, match="min_count"):
        Vocabulary.fit(SENTENCES, min_count=0)
    with pytest.raises(ValueError, match="no sentences"):
        Vocabulary.fit([])


def test_featurize_is_a_csr_matrix_of_the_known_attributes():
    vocabulary = Vocabulary.fit(SENTENCES[:2])
    corpus = featurize(SENTENCES, vocabulary, TAGS)
    assert corpus.lengths.tolist() == [4, 2, 1] and corpus.num_tokens == 7
    assert corpus.tags.tolist() == [1, 0, 0, 0, 1, 2, 0]
    index = vocabulary.index()
    for token, attributes in enumerate(a for s in SENTENCES for a in sentence_attributes(s.tokens)):
        row = corpus.indices[corpus.indptr[token] : corpus.indptr[token + 1]].tolist()
        assert row == sorted(index[a] for a in set(attributes) if a in index)
    items = crfsuite_items(SENTENCES, vocabulary)
    assert [len(s) for s in items] == [4, 2, 1]
    assert all(
        set(item) <= set(vocabulary.attributes) and set(item.values()) == {1.0} for s in items for item in s
    )
    assert set(items[2][0]) == {vocabulary.attributes[i] for i in corpus.indices[corpus.indptr[6] :]}


def test_unknown_tags_are_errors_naming_the_tag():
    with pytest.raises(ValueError, match="'B-LOC'"):
        featurize([Sentence(("Paris",), ("B-LOC",))], Vocabulary.fit(SENTENCES), TAGS)
