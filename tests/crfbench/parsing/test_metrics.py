"""Attachment scores on hand-made trees, with and without punctuation."""

from __future__ import annotations

import math

import pytest

from crfbench.parsing.metrics import Attachment, attachment, sentence_attachment


def test_one_sentence():
    gold, predicted = (2, 0, 2, 2), (2, 0, 1, 3)
    counts = sentence_attachment(gold, predicted, (False, False, False, True))
    assert counts == Attachment(words=4, correct=2, words_no_punct=3, correct_no_punct=2)
    assert counts.uas == 0.5 and counts.uas_no_punct == pytest.approx(2 / 3)


def test_words_weigh_the_same_across_sentences():
    counts = attachment(
        [(2, 0, 2, 2), (0, 1)],
        [(2, 0, 2, 1), (2, 0)],
        [(False, False, False, True), (False, True)],
    )
    assert counts == Attachment(words=6, correct=3, words_no_punct=4, correct_no_punct=3)
    assert counts.scores() == {"uas": 0.5, "uas_no_punct": 0.75}


def test_only_punctuation_has_no_score_without_it():
    counts = sentence_attachment((0,), (0,), (True,))
    assert counts.uas == 1.0 and math.isnan(counts.uas_no_punct)


def test_mismatched_lengths():
    with pytest.raises(ValueError, match="2 gold heads, 1 predicted heads"):
        sentence_attachment((0, 1), (0,), (False, False))
    with pytest.raises(ValueError, match="1 gold sentences but 2 predicted"):
        attachment([(0,)], [(0,), (0,)], [(False,)])
