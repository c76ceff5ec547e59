"""Tagging schemes: the UPOS inventory, BIES and BIO tag sets with their constraints, and spans.

A span is ``(start, end_exclusive, label)`` in token positions. The span readers are total: they
accept any tag sequence of the scheme, also one a decoder produced that breaks the constraints, and
say in their docstrings how such a sequence is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .types import TagSet

# The 17 universal POS tags of the UD guidelines (https://universaldependencies.org/u/pos/), sorted.
UPOS: tuple[str, ...] = (
    "ADJ",
    "ADP",
    "ADV",
    "AUX",
    "CCONJ",
    "DET",
    "INTJ",
    "NOUN",
    "NUM",
    "PART",
    "PRON",
    "PROPN",
    "PUNCT",
    "SCONJ",
    "SYM",
    "VERB",
    "X",
)

Span = tuple[int, int, str]


def split_tag(tag: str, prefixes: str) -> tuple[str, str]:
    """``"B-NOUN"`` -> ``("B", "NOUN")``; ValueError unless the prefix is one of ``prefixes``."""
    prefix, dash, label = tag.partition("-")
    if not dash or len(prefix) != 1 or prefix not in prefixes or not label:
        raise ValueError(f"tag {tag!r} is not of the form P-LABEL with P one of {', '.join(prefixes)}")
    return prefix, label


def bies_tagset(labels: Sequence[str]) -> TagSet:
    """BIES × labels, label-major (``B-X, I-X, E-X, S-X`` for each label in the given order).

    A word is ``S-X`` (one token) or ``B-X I-X* E-X``: a sequence starts with B or S and ends with E
    or S; B-X and I-X are followed only by I-X or E-X (same label); E and S only by B or S.
    """
    tags = tuple(f"{prefix}-{label}" for label in labels for prefix in "BIES")
    prefixes = np.array([tag[0] for tag in tags])
    label_of = np.array([label for label in labels for _ in "BIES"])
    opens = np.isin(prefixes, ["B", "I"])  # the word goes on after this token
    continues = np.isin(prefixes, ["I", "E"])  # this token goes on with the word before
    same = label_of[:, None] == label_of[None, :]
    transitions = np.where(opens[:, None], continues[None, :] & same, ~continues[None, :])
    return TagSet(tags, transitions, ~continues, ~opens)


def bio_tagset(labels: Sequence[str]) -> TagSet:
    """``O`` then B-/I- × labels (``B-X, I-X`` for each label in the given order).

    I-X may only follow B-X or I-X and never starts a sequence; everything else is allowed.
    """
    tags = ("O", *(f"{prefix}-{label}" for label in labels for prefix in "BI"))
    size = len(tags)
    transitions = np.ones((size, size), bool)
    start = np.ones(size, bool)
    for k in range(len(labels)):
        inside = 2 + 2 * k
        transitions[:, inside] = False
        transitions[[inside - 1, inside], inside] = True
        start[inside] = False
    return TagSet(tags, transitions, start, np.ones(size, bool))


def bies_tags(words: Iterable[tuple[int, str]]) -> list[str]:
    """Token tags of words given as ``(length in tokens, label)``, e.g. ``(3, "X")`` -> B-X I-X E-X."""
    tags: list[str] = []
    for length, label in words:
        if length < 1:
            raise ValueError(f"a word has at least one token, got length {length}")
        if length == 1:
            tags.append(f"S-{label}")
        else:
            tags.extend([f"B-{label}", *[f"I-{label}"] * (length - 2), f"E-{label}"])
    return tags


def bies_spans(tags: Sequence[str]) -> list[Span]:
    """Words ``(start, end_exclusive, label)`` of a BIES×label tag sequence, in order.

    The words always partition the sequence. Invalid sequences are read with this heuristic: B-X
    and S-X always start a new word; I-X and E-X continue the open word only when its label is X
    (it was opened by B-X or continued by I-X), otherwise they start a new word of label X; E-X and
    S-X close their word; a word still open before a token that starts a new one, or at the end of
    the sequence, is closed there with the label it was opened with. So ``B-X I-X`` (no E) is one
    word, ``I-X E-X`` is one word, and ``B-X E-Y`` is two one-token words X and Y.
    """
    spans: list[Span] = []
    start, open_label = 0, None  # the open word, if any
    for i, tag in enumerate(tags):
        prefix, label = split_tag(tag, "BIES")
        if open_label is not None and not (prefix in "IE" and label == open_label):
            spans.append((start, i, open_label))
            open_label = None
        if open_label is None:
            start, open_label = i, label
        if prefix in "ES":
            spans.append((start, i + 1, label))
            open_label = None
    if open_label is not None:
        spans.append((start, len(tags), open_label))
    return spans


def bio_spans(tags: Sequence[str]) -> list[Span]:
    """Labelled mentions ``(start, end_exclusive, label)`` of a BIO (IOB2) tag sequence, in order.

    Invalid sequences are read as conlleval does: an I-X that does not continue a mention of label X
    starts a new mention.
    """
    spans: list[Span] = []
    start, open_label = 0, None
    for i, tag in enumerate(tags):
        prefix, label = ("O", None) if tag == "O" else split_tag(tag, "BI")
        if open_label is not None and not (prefix == "I" and label == open_label):
            spans.append((start, i, open_label))
            open_label = None
        if prefix != "O" and open_label is None:
            start, open_label = i, label
    if open_label is not None:
        spans.append((start, len(tags), open_label))
    return spans


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 -> IOB2: an I-X that does not follow a B-X or I-X (same X) begins a mention, so becomes B-X.

    IOB1 uses B-X only between two adjacent mentions of the same type; IOB2 begins every mention with
    B-X. Tags must be ``O``, ``B-X`` or ``I-X`` (ValueError otherwise).
    """
    converted = []
    previous = None  # label of the previous tag, None after O
    for tag in tags:
        prefix, label = ("O", None) if tag == "O" else split_tag(tag, "BI")
        converted.append(f"B-{label}" if prefix == "I" and label != previous else tag)
        previous = label
    return converted
