"""Taskar's handwritten-word OCR data (Taskar, Guestrin & Koller 2004): ``ocr-taskar/letter.data``.

One tab-separated line per letter, no header: ``id``, ``letter`` (a–z), ``next_id`` (-1 at a word's
end), ``word_id``, ``position`` (1-based), ``fold`` (0–9), then 128 binary pixels of a 16 × 8 image
(row-major), then a trailing tab (135 items after splitting on tabs). A word's letters are
contiguous lines. The reader checks every line and every word, so that a damaged or foreign file
fails loudly (``ValueError`` naming the file and the line) instead of training on garbage.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .location import DataDir, resolve_data_dir

RELATIVE_PATH = "ocr-taskar/letter.data"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
PIXELS = 16 * 8
FIELDS = 6 + PIXELS  # the items before the trailing tab


@dataclass(frozen=True)
class Word:
    """One handwritten word: ``pixels`` float32 (n, 128) (0.0/1.0, each row a 16 × 8 image
    flattened row-major), ``tags`` int64 (n,) in 0..25 for a..z, its cross-validation ``fold``."""

    pixels: np.ndarray
    tags: np.ndarray
    fold: int
    word_id: int

    @property
    def text(self) -> str:
        """The word's letters as a string."""
        return "".join(LETTERS[t] for t in self.tags)


@dataclass(frozen=True)
class _Letter:
    id: int
    tag: int
    next_id: int
    word_id: int
    position: int
    fold: int
    pixels: list[str]


def _parse(fields: list[str], where: str) -> _Letter:
    """One line's fields (split on tabs) as a letter; ``ValueError`` prefixed by ``where``."""
    if len(fields) != FIELDS + 1 or fields[-1] != "":
        raise ValueError(f"{where}: expected {FIELDS} tab-separated fields and a trailing tab")
    letter, pixels = fields[1], fields[6:FIELDS]
    if len(letter) != 1 or letter not in LETTERS:
        raise ValueError(f"{where}: the letter {letter!r} is not one of a..z")
    if not set(pixels) <= {"0", "1"}:
        raise ValueError(f"{where}: a pixel is not 0 or 1")
    try:
        numbers = [int(fields[i]) for i in (0, 2, 3, 4, 5)]
    except ValueError:
        raise ValueError(f"{where}: id, next_id, word_id, position and fold must be integers") from None
    letter_id, next_id, word_id, position, fold = numbers
    if not 0 <= fold <= 9:
        raise ValueError(f"{where}: fold {fold} is not in 0..9")
    return _Letter(letter_id, LETTERS.index(letter), next_id, word_id, position, fold, pixels)


def _word(letters: list[_Letter]) -> Word:
    return Word(
        pixels=np.array([letter.pixels for letter in letters]).astype(np.float32),
        tags=np.array([letter.tag for letter in letters], dtype=np.int64),
        fold=letters[0].fold,
        word_id=letters[0].word_id,
    )


def parse_ocr(lines: list[str], source: str) -> list[Word]:
    """The words of ``letter.data``'s ``lines`` (``source`` names the file in errors). A line must
    continue its word (same word id and fold, next position, linked by the previous ``next_id``)
    or start a new one at position 1 after a word that ended (``next_id`` -1)."""
    words: list[Word] = []
    current: list[_Letter] = []
    for number, line in enumerate(lines, start=1):
        where = f"{source}, line {number}"
        letter = _parse(line.rstrip("\n").split("\t"), where)
        previous = current[-1] if current else None
        if previous is None or previous.next_id == -1:
            if letter.position != 1:
                raise ValueError(f"{where}: a word starts at position {letter.position}, not 1")
            if current:
                words.append(_word(current))
            current = [letter]
            continue
        expected = (previous.next_id, previous.word_id, previous.position + 1, previous.fold)
        if (letter.id, letter.word_id, letter.position, letter.fold) != expected:
            raise ValueError(
                f"{where}: does not continue word {previous.word_id} "
                "(id = previous next_id, same word_id and fold, next position)"
            )
        current.append(letter)
    if current and current[-1].next_id != -1:
        raise ValueError(f"{source}: the file ends inside word {current[-1].word_id}")
    if current:
        words.append(_word(current))
    return words


def read_ocr(path: str | os.PathLike[str]) -> list[Word]:
    """The words of the ``letter.data`` file at ``path``, in file order."""
    with open(path, encoding="ascii") as handle:
        return parse_ocr(handle.readlines(), str(path))


def load_ocr(data_dir: str | os.PathLike[str] | None = None) -> list[Word]:
    """The words of ``ocr-taskar/letter.data`` under the data dir (``data_dir``, else
    ``$CRFBENCH_DATA``), checked against the checksum manifest first."""
    source = DataDir(resolve_data_dir(data_dir)).read(RELATIVE_PATH)
    if source is None:
        raise FileNotFoundError(f"{resolve_data_dir(data_dir) / RELATIVE_PATH}: the OCR data file is missing")
    return parse_ocr(source.text.splitlines(keepends=True), str(source.path))
