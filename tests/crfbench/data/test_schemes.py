"""Tag sets and their constraints, span readers, IOB1 -> IOB2."""

from __future__ import annotations

import itertools

import pytest

from crfbench import data
from crfbench.data import schemes


def allowed(tagset: data.TagSet, first: str, second: str) -> bool:
    return bool(tagset.transitions[tagset.index(first), tagset.index(second)])


def test_upos_is_the_sorted_17_universal_tags():
    assert len(schemes.UPOS) == 17
    assert list(schemes.UPOS) == sorted(schemes.UPOS)
    assert {"NOUN", "VERB", "PROPN", "X", "SYM", "INTJ"} <= set(schemes.UPOS)


def test_bies_tagset_over_upos_has_68_tags_label_major():
    tagset = schemes.bies_tagset(schemes.UPOS)
    assert len(tagset) == 68
    assert tagset.tags[:5] == ("B-ADJ", "I-ADJ", "E-ADJ", "S-ADJ", "B-ADP")
    assert tagset.constrained


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("B-NOUN", "I-NOUN", True),
        ("B-NOUN", "E-NOUN", True),
        ("I-NOUN", "I-NOUN", True),
        ("I-NOUN", "E-NOUN", True),
        ("E-NOUN", "B-VERB", True),
        ("E-NOUN", "S-NOUN", True),
        ("S-NOUN", "S-VERB", True),
        ("S-VERB", "B-NOUN", True),
        ("B-NOUN", "S-VERB", False),
        ("B-NOUN", "B-NOUN", False),
        ("B-NOUN", "E-VERB", False),
        ("I-NOUN", "I-VERB", False),
        ("I-NOUN", "S-NOUN", False),
        ("S-VERB", "I-VERB", False),
        ("S-VERB", "E-VERB", False),
        ("E-NOUN", "I-NOUN", False),
    ],
)
def test_bies_transitions(first, second, expected):
    assert allowed(schemes.bies_tagset(schemes.UPOS), first, second) is expected


def test_bies_start_and_end():
    tagset = schemes.bies_tagset(["X", "Y"])
    starts = {tag for tag, ok in zip(tagset.tags, tagset.start, strict=True) if ok}
    ends = {tag for tag, ok in zip(tagset.tags, tagset.end, strict=True) if ok}
    assert starts == {"B-X", "S-X", "B-Y", "S-Y"}
    assert ends == {"E-X", "S-X", "E-Y", "S-Y"}


def test_bies_valid_sequences_are_exactly_word_sequences():
    """By brute force over all sequences of length <= 4: valid iff the spans reproduce the tags."""
    tagset = schemes.bies_tagset(["X", "Y"])
    for length in range(1, 5):
        for tags in itertools.product(tagset.tags, repeat=length):
            words = [(end - start, label) for start, end, label in schemes.bies_spans(tags)]
            well_formed = schemes.bies_tags(words) == list(tags)
            assert tagset.is_valid(tagset.encode(tags)) == well_formed, tags


def test_bio_tagset():
    tagset = schemes.bio_tagset(["LOC", "MISC", "ORG", "PER"])
    assert tagset.tags == ("O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER")
    assert not allowed(tagset, "O", "I-PER")
    assert not allowed(tagset, "B-LOC", "I-PER")
    assert not allowed(tagset, "I-ORG", "I-PER")
    assert allowed(tagset, "B-PER", "I-PER") and allowed(tagset, "I-PER", "I-PER")
    assert (
        allowed(tagset, "I-PER", "B-PER") and allowed(tagset, "O", "B-PER") and allowed(tagset, "I-PER", "O")
    )
    assert not tagset.start[tagset.index("I-PER")] and tagset.start[tagset.index("B-PER")]
    assert tagset.end.all()


@pytest.mark.parametrize(
    "words",
    [
        [(1, "NOUN")],
        [(3, "VERB")],
        [(2, "NOUN"), (1, "PUNCT"), (4, "NOUN"), (1, "NOUN"), (2, "ADP")],
        [(1, "X"), (1, "X"), (1, "X")],
    ],
)
def test_bies_spans_round_trip(words):
    tags = schemes.bies_tags(words)
    assert len(tags) == sum(length for length, _ in words)
    spans = data.bies_spans(tags)
    assert [(end - start, label) for start, end, label in spans] == words
    assert spans[0][0] == 0 and spans[-1][1] == len(tags)


def test_bies_tags_builds_bies():
    assert schemes.bies_tags([(1, "A"), (2, "B"), (3, "C")]) == ["S-A", "B-B", "E-B", "B-C", "I-C", "E-C"]
    with pytest.raises(ValueError, match="at least one token"):
        schemes.bies_tags([(0, "A")])


@pytest.mark.parametrize(
    ("tags", "spans"),
    [
        ([], []),
        (["B-X", "I-X"], [(0, 2, "X")]),  # unterminated word: closed at the end
        (["I-X", "E-X"], [(0, 2, "X")]),  # no B: I opens the word
        (["E-X"], [(0, 1, "X")]),
        (["B-X", "E-Y"], [(0, 1, "X"), (1, 2, "Y")]),  # label change: two words
        (["B-X", "I-Y", "E-Y"], [(0, 1, "X"), (1, 3, "Y")]),
        (["S-X", "I-X", "E-X"], [(0, 1, "X"), (1, 3, "X")]),  # I after a closed word opens a new one
        (["B-X", "B-X", "E-X"], [(0, 1, "X"), (1, 3, "X")]),  # B always opens a word
        (["B-X", "S-Y", "I-Y"], [(0, 1, "X"), (1, 2, "Y"), (2, 3, "Y")]),
    ],
)
def test_bies_spans_heuristic_on_invalid_sequences(tags, spans):
    assert data.bies_spans(tags) == spans


def test_bies_spans_partition_any_sequence():
    tagset = schemes.bies_tagset(["X", "Y"])
    for tags in itertools.product(tagset.tags, repeat=3):
        spans = data.bies_spans(tags)
        assert [i for start, end, _ in spans for i in range(start, end)] == [0, 1, 2]


def test_span_readers_reject_foreign_tags():
    with pytest.raises(ValueError, match="'O'"):
        data.bies_spans(["B-X", "O"])
    with pytest.raises(ValueError, match="'S-X'"):
        data.bio_spans(["S-X"])


@pytest.mark.parametrize(
    ("tags", "spans"),
    [
        (["O", "B-PER", "I-PER", "O", "B-LOC"], [(1, 3, "PER"), (4, 5, "LOC")]),
        (["B-PER", "B-PER", "I-PER"], [(0, 1, "PER"), (1, 3, "PER")]),
        (["I-PER", "I-PER"], [(0, 2, "PER")]),  # invalid start: I opens a mention (conlleval)
        (["B-ORG", "I-LOC"], [(0, 1, "ORG"), (1, 2, "LOC")]),
        (["O", "O"], []),
    ],
)
def test_bio_spans(tags, spans):
    assert data.bio_spans(tags) == spans


@pytest.mark.parametrize(
    ("iob1", "iob2"),
    [
        (["I-PER", "I-PER", "O", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
        (["I-ORG", "B-ORG", "I-ORG"], ["B-ORG", "B-ORG", "I-ORG"]),  # two adjacent mentions
        (["I-PER", "I-LOC", "I-LOC"], ["B-PER", "B-LOC", "I-LOC"]),  # type change starts a mention
        (["O", "I-MISC", "I-MISC", "O"], ["O", "B-MISC", "I-MISC", "O"]),
        (["B-MISC"], ["B-MISC"]),
        (["O"], ["O"]),
    ],
)
def test_iob1_to_iob2(iob1, iob2):
    converted = schemes.iob1_to_iob2(iob1)
    assert converted == iob2
    assert data.bio_spans(converted) == data.bio_spans(iob2)
    tagset = schemes.bio_tagset(["LOC", "MISC", "ORG", "PER"])
    assert tagset.is_valid(tagset.encode(converted))
