"""Unlabelled attachment scores (UAS): the share of words whose predicted head is the gold one.

``uas`` counts every syntactic word, punctuation included, as the CoNLL 2017 shared task's
official evaluation script (``conll17_ud_eval.py``) does: its UAS compares the HEAD of every
aligned word, with no exception for punctuation; with the gold tokenisation the SparseMAP paper
uses, every word is aligned, so UAS is correct heads / words. The paper's Table 1 reports UAS on
those test sets (and its UDPipe row is the shared task's), so ``uas`` is the number to compare
with it and the one dev-set selection uses. ``uas_no_punct`` leaves out the words whose UPOS is
``PUNCT``, the older convention of parsing papers (e.g. the CoNLL-X and Penn Treebank setups),
as a second metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The metrics of :func:`attachment`, by name (evaluation rows and dev curves use these names).
METRICS = ("uas", "uas_no_punct")


@dataclass(frozen=True)
class Attachment:
    """Word counts behind the two UAS: all words, and the words that are not punctuation."""

    words: int
    correct: int
    words_no_punct: int
    correct_no_punct: int

    @property
    def uas(self) -> float:
        return self.correct / self.words if self.words else float("nan")

    @property
    def uas_no_punct(self) -> float:
        return self.correct_no_punct / self.words_no_punct if self.words_no_punct else float("nan")

    def scores(self) -> dict[str, float]:
        return {"uas": self.uas, "uas_no_punct": self.uas_no_punct}

    def __add__(self, other: Attachment) -> Attachment:
        return Attachment(
            self.words + other.words,
            self.correct + other.correct,
            self.words_no_punct + other.words_no_punct,
            self.correct_no_punct + other.correct_no_punct,
        )


def sentence_attachment(gold: Sequence[int], predicted: Sequence[int], punct: Sequence[bool]) -> Attachment:
    """The counts of one sentence (heads of its words 1..n, 0 = root; a flag per word)."""
    if not len(gold) == len(predicted) == len(punct):
        raise ValueError(
            f"attachment: {len(gold)} gold heads, {len(predicted)} predicted heads, "
            f"{len(punct)} punctuation flags"
        )
    right = [g == p for g, p in zip(gold, predicted, strict=True)]
    kept = [not flag for flag in punct]
    return Attachment(
        len(gold), sum(right), sum(kept), sum(r and k for r, k in zip(right, kept, strict=True))
    )


def attachment(
    gold: Sequence[Sequence[int]], predicted: Sequence[Sequence[int]], punct: Sequence[Sequence[bool]]
) -> Attachment:
    """The counts of a set of sentences (micro-averaged: every word weighs the same)."""
    if not len(gold) == len(predicted) == len(punct):
        raise ValueError(f"attachment: {len(gold)} gold sentences but {len(predicted)} predicted")
    total = Attachment(0, 0, 0, 0)
    for sentence in zip(gold, predicted, punct, strict=True):
        total = total + sentence_attachment(*sentence)
    return total
